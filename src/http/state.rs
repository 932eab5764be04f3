//! The server's state: what every handler and middleware is handed.

use std::sync::Arc;

use crate::auth::Auth;
use crate::config::Config;
use crate::service::records::Records;
use crate::service::{Limits, Service};
use crate::store::Store;

/// Watchers at once (`/api/v1/watch`), each holding a connection open.
pub const MAX_WATCHERS: usize = 256;

/// The server's state, handed to every handler and middleware.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

/// What every request handler shares. Behind one `Arc` so that handing the
/// state to a handler or middleware is one reference-count increment.
#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    /// Every operation on the hierarchy, with the caches.
    pub service: Arc<Service>,
    pub config: Arc<Config>,
    pub auth: Arc<Auth>,
    /// Callers' fair-use buckets.
    pub fair: Arc<crate::auth::fair::Buckets>,
    /// The records of API keys, share links and browser sessions, on the store.
    pub keys: Arc<Records>,
    pub shares: Arc<Records>,
    pub sessions: Arc<Records>,
    /// The policy document on the store (`/api/v1/policy`).
    pub policy: Arc<Records>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Permits for requests in flight (`--max-concurrency`).
    pub in_flight: Arc<crate::http::middleware::limits::InFlight>,
    /// Permits for watchers (`/api/v1/watch`).
    pub watchers: Arc<tokio::sync::Semaphore>,
    /// Set when the server begins to shut down: watches end then, as
    /// they would otherwise hold the shutdown for its whole deadline.
    closing: tokio::sync::watch::Sender<bool>,
    /// Thumbnails of arrays, for the viewer's tree.
    pub(crate) previews: crate::http::output::thumbnail::Previews,
    /// Cache-Control of stored values, per mount.
    pub(crate) cache_control: crate::http::output::cache_control::CachePolicies,
}

impl AppState {
    pub fn new(store: Store, config: Config) -> Self {
        let limits = Limits {
            in_memory: config.json_limit,
            streamed: config.response_limit,
        };
        let service = Service::new(
            store.clone(),
            config.cache_size,
            config.recheck_cached,
            limits,
        )
        .with_v3_consolidation(config.consolidated_v3)
        .with_v2_consolidation(config.consolidated_v2)
        .with_document_checks(config.check_documents)
        .with_budget(crate::service::Budget::new(
            config.memory_budget,
            std::time::Duration::from_secs(1),
        ));
        if config.memory_budget < crate::service::budget::MIN_BUDGET {
            tracing::warn!(
                asked = config.memory_budget,
                used = crate::service::budget::MIN_BUDGET,
                "the memory budget is raised to its smallest size"
            );
        }
        let in_flight = crate::http::middleware::limits::InFlight::new(config.max_concurrency);
        let previews = crate::http::output::thumbnail::Previews::new(config.recheck_cached);
        // Tokens were validated when the configuration was resolved; should
        // they not be, nothing anonymous is allowed.
        let auth = Auth::with_identities(
            &config.tokens,
            None,
            config.allow_anonymous_reads,
            config.allow_anonymous_writes,
            &config.identities,
        )
        .unwrap_or_default();
        let cache_control = crate::http::output::cache_control::CachePolicies::new(&config);
        let records = |kind| Arc::new(Records::new(store.clone(), kind));
        let (keys, shares, sessions) = (records("keys"), records("shares"), records("sessions"));
        let policy = records("policy");
        let auth = Arc::new(auth);
        follow_policy(&auth, &policy);
        AppState(Arc::new(Shared {
            store,
            service: Arc::new(service),
            watchers: Arc::new(tokio::sync::Semaphore::new(MAX_WATCHERS)),
            closing: tokio::sync::watch::Sender::new(false),
            cache_control,
            config: Arc::new(config),
            auth,
            fair: Arc::default(),
            keys,
            shares,
            sessions,
            policy,
            metrics: Arc::default(),
            in_flight,
            previews,
        }))
    }
}

/// Takes the store's policy document, and each change to it, in the
/// background (every `KEPT_FOR`), for as long as the server lives. A
/// document that is not valid (written by another version) is logged and
/// left out.
fn follow_policy(auth: &Arc<Auth>, policy: &Arc<Records>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (auth, policy) = (Arc::downgrade(auth), policy.clone());
    runtime.spawn(async move {
        let mut applied: Option<bytes::Bytes> = None;
        loop {
            let Some(auth) = auth.upgrade() else {
                return;
            };
            if let Ok(read) = policy.get(crate::service::records::POLICY).await {
                if read != applied {
                    let rules = read
                        .as_ref()
                        .and_then(|b| {
                            serde_json::from_slice::<crate::auth::policy::Document>(b).ok()
                        })
                        .map(|s| s.rules)
                        .unwrap_or_default();
                    match auth.set_stored_rules(&rules) {
                        Ok(()) => applied = read,
                        Err(e) => tracing::warn!(error = %e, "the policy document on the store is not valid; its rules are left out"),
                    }
                }
            }
            drop(auth);
            tokio::time::sleep(crate::service::records::KEPT_FOR).await;
        }
    });
}

impl AppState {
    /// The records of credentials of `kind` (`keys`, `shares`, `sessions`).
    pub fn records(&self, kind: &str) -> &Records {
        match kind {
            "shares" => &self.shares,
            "sessions" => &self.sessions,
            _ => &self.keys,
        }
    }

    /// The server is shutting down: long-lived responses end.
    pub fn begin_shutdown(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once the server begins to shut down.
    pub fn shutting_down(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut closing = self.closing.subscribe();
        async move {
            let _ = closing.wait_for(|c| *c).await;
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}
