//! `GET /api/v1/watch/{path}` (and `/api/v1/watch` for everything):
//! Server-Sent Events, one per change at or below the path. Writes through
//! this server arrive as they are made; changes made elsewhere (other
//! replicas) when the metadata below the path is revalidated, every
//! `--recheck-cached` interval (every 2 s when it is `always`; never when
//! it is `never`). A watcher that falls more than 1,024 changes behind gets
//! a final `dropped` event and the stream ends.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures::StreamExt;
use serde_json::json;

use crate::auth::Scope;
use crate::config::Recheck;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::ApiPath;
use crate::http::output::LongLived;
use crate::http::output::NoCompression;
use crate::http::state::{AppState, MAX_WATCHERS};
use crate::service::Notice;
use crate::store::{node_path, StoreKey};

/// How often an idle stream says it is alive (proxies close silent ones).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Revalidation of metadata when `--recheck-cached` is `always`.
const ALWAYS_EVERY: Duration = Duration::from_secs(2);

pub async fn watch_root(
    state: State<AppState>,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Response> {
    watching(state.0, StoreKey::root(), caller.map(|c| c.0)).await
}

pub async fn watch(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Response> {
    let key = node_path(&path)?;
    watching(state, key, caller.map(|c| c.0)).await
}

/// Resolves when the caller's credential stops being valid: it expires,
/// or, for an API key, a share link or a session, its record is gone
/// (revoked, signed out), looked for as often as replicas refresh what
/// they keep of it.
async fn credential_ends(state: AppState, caller: Option<Caller>) {
    let Some(caller) = caller else {
        return std::future::pending().await;
    };
    let stored = caller.stored.clone();
    let expiry = async {
        match caller.expires {
            Some(at) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                tokio::time::sleep(Duration::from_secs(at.saturating_sub(now))).await
            }
            None => std::future::pending().await,
        }
    };
    let revoked = async {
        let Some(stored) = stored else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(crate::service::records::KEPT_FOR).await;
            if matches!(state.records(stored.kind).get(&stored.id).await, Ok(None)) {
                return;
            }
        }
    };
    tokio::select! {
        _ = expiry => {}
        _ = revoked => {}
    }
}

async fn watching(state: AppState, path: StoreKey, caller: Option<Caller>) -> ApiResult<Response> {
    let ends = credential_ends(state.clone(), caller.clone());
    // Changes to what the caller may not read are not theirs to hear of.
    let sight = caller
        .filter(|c| Caller::filters(Some(c), path.as_str()))
        .map(|c| c.rights);
    // A path that names nothing is a mistake, not a quiet stream.
    state.service.node(&path).await?;
    let Ok(permit) = state.watchers.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_watchers",
            format!("{MAX_WATCHERS} watchers are connected; retry later"),
        ));
    };
    let interval = match state.config.recheck_cached {
        Recheck::After(d) => Some(d.max(Duration::from_millis(200))),
        Recheck::Always => Some(ALWAYS_EVERY),
        Recheck::Never => None,
    };
    // The stream ends with the notices (after `dropped`), not with the pings.
    let notices = state
        .service
        .watch(&path, interval)
        .filter(move |n| {
            std::future::ready(match (n, &sight) {
                (Notice::Change(c), Some(rights)) => rights.may(Scope::Read, &c.path),
                _ => true,
            })
        })
        .map(|n| Some(event(&n)))
        .chain(futures::stream::once(async { None }));
    let pings = futures::stream::unfold((), |_| async {
        tokio::time::sleep(KEEP_ALIVE).await;
        Some((Some(Bytes::from_static(b": alive\n\n")), ()))
    });
    let opening = futures::stream::once(async { Some(Bytes::from_static(b"retry: 2000\n\n")) });
    // A server shutting down ends its watches (clients reconnect after
    // `retry`, to another replica), instead of holding the shutdown open.
    let closing = futures::stream::once(async move {
        tokio::select! {
            _ = state.shutting_down() => {}
            _ = ends => {}
        }
    })
    .map(|_| None);
    let body = opening
        .chain(futures::stream::select(
            futures::stream::select(notices, pings),
            closing,
        ))
        .take_while(|b| std::future::ready(b.is_some()))
        .map(move |b| {
            // The watcher's place is held as long as its stream.
            let _held = &permit;
            Ok::<_, std::io::Error>(b.unwrap_or_default())
        });
    let mut response = Body::from_stream(body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response.extensions_mut().insert(NoCompression);
    response.extensions_mut().insert(LongLived);
    Ok(response)
}

/// One notice as an event: `id` (this server's order), `event` (its kind)
/// and `data` (the change as JSON).
fn event(notice: &Notice) -> Bytes {
    let text = match notice {
        Notice::Change(c) => {
            let data = serde_json::to_string(&**c).unwrap_or_default();
            let kind = serde_json::to_value(c.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            if c.seq > 0 {
                format!("id: {}\nevent: {kind}\ndata: {data}\n\n", c.seq)
            } else {
                format!("event: {kind}\ndata: {data}\n\n")
            }
        }
        Notice::Dropped { missed } => format!(
            "event: dropped\ndata: {}\n\n",
            json!({"missed": missed, "message": "this watcher fell too far behind and was dropped; reconnect and re-read what it watches"})
        ),
    };
    Bytes::from(text)
}
