//! `TestApp`: a server over a store, as a client sees it, for scenario
//! tests: requests answered in one call with status, headers and body, the
//! JSON error code at hand, tokens, and arrays made in one line.

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use zarrd::auth::{Scope, TokenConfig};
use zarrd::config::Config;
use zarrd::http::{router, App, AppState};
use zarrd::store::{node_path, Store};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

/// A server, its store, and the directory that holds it (when on disk).
pub struct TestApp {
    pub app: App,
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
}

/// One answer: status, headers and the whole body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The code of a JSON error body (`""` when there is none).
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// A token with `scopes`, named by its own text.
pub fn token(secret: &str, scopes: &[Scope]) -> TokenConfig {
    TokenConfig {
        name: Some(secret.into()),
        token: Some(secret.into()),
        token_sha256: None,
        scopes: scopes.to_vec(),
        prefixes: vec![],
        access_key_id: None,
    }
}

/// A read token limited to `prefix`, its secret `{name}-token-0123456789`
/// (what [`TestApp::get_as`] sends for `name`).
pub fn reader_within(name: &str, prefix: &str) -> TokenConfig {
    TokenConfig {
        name: Some(name.into()),
        token: Some(format!("{name}-token-0123456789")),
        token_sha256: None,
        scopes: vec![Scope::Read],
        prefixes: vec![prefix.into()],
        access_key_id: None,
    }
}

/// The demo's configuration for read-only tests: caches trusted (the
/// demo is in memory and written once).
pub fn demo_config() -> Config {
    Config {
        recheck_cached: zarrd::config::Recheck::Never,
        ..Config::default()
    }
}

impl TestApp {
    /// The `--demo` hierarchy (with its `climate` dataset), served with `config`.
    pub async fn demo(config: Config) -> Self {
        Self::with(zarrd::demo::store().await.unwrap(), config)
    }

    /// A GET with the token of [`reader_within`]`(who, ..)`.
    pub async fn get_as(&self, who: &str, uri: &str) -> Answer {
        let auth = format!("Bearer {who}-token-0123456789");
        self.request(
            Method::GET,
            uri,
            &[("authorization", auth.as_str())],
            Body::empty(),
        )
        .await
    }

    /// An in-memory store that anyone may read and write.
    pub fn memory() -> Self {
        Self::with(Store::memory(), writable())
    }

    /// A store in a new directory that anyone may read and write.
    pub fn directory() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::local(dir.path()).unwrap();
        TestApp {
            _dir: Some(dir),
            ..Self::with(store, writable())
        }
    }

    pub fn with(store: Store, config: Config) -> Self {
        TestApp {
            app: router(AppState::new(store.clone(), config)),
            store,
            _dir: None,
        }
    }

    /// The directory of a store made by [`TestApp::directory`].
    pub fn dir(&self) -> &std::path::Path {
        self._dir.as_ref().expect("a directory store").path()
    }

    pub async fn request(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Answer {
        let (status, headers, body) = super::call(&self.app, method, uri, headers, body).await;
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, uri: &str) -> Answer {
        self.request(Method::GET, uri, &[], Body::empty()).await
    }

    pub async fn put(&self, uri: &str, body: impl Into<Body>) -> Answer {
        self.request(Method::PUT, uri, &[], body).await
    }

    pub async fn delete(&self, uri: &str) -> Answer {
        self.request(Method::DELETE, uri, &[], Body::empty()).await
    }

    /// A Zarr v3 array at `path` of `dtype`, `shape` and `chunks`, holding
    /// `values` (little-endian bytes of every element, in C order) when given.
    pub async fn array(
        &self,
        path: &str,
        dtype: DataType,
        shape: &[u64],
        chunks: &[u64],
        values: Option<Vec<u8>>,
    ) {
        let mut spec = ArraySpec::new(3, shape.to_vec(), dtype);
        spec.chunks = Some(chunks.to_vec());
        let array = Hierarchy::new(self.store.clone())
            .create_array(&node_path(path).unwrap(), &spec, false)
            .await
            .unwrap();
        if let Some(values) = values {
            let all = Selection::all().resolve(shape).unwrap();
            array.write(&all, ArrayBytes::Fixed(values)).await.unwrap();
        }
    }
}

/// What anyone may do without a token: read and write.
pub fn writable() -> Config {
    Config {
        allow_anonymous_writes: true,
        ..Config::default()
    }
}
