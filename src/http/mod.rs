//! The HTTP service: shared state, the router (one table of routes, which
//! `openapi.yaml` is checked against), middleware, and serving.

pub mod api;
mod app;
pub mod auth;
pub mod body;
mod cache_control;
mod dav;
pub mod error;
pub mod extract;
mod gate;
mod idle;
mod json_body;
pub mod limits;
pub mod listing;
pub mod output;
mod preview;
pub mod range;
pub mod raw;
pub mod routes;
mod s3;
mod serve;
mod socket;
mod tls;
mod versions;
mod viewer;
mod watch;
pub mod write;

pub use app::App;
pub use serve::serve;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderName, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Router;
use tower::Layer;
use tower_http::compression::CompressionLayer;
use tower_http::cors::CorsLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tower_http::LatencyUnit;
use tracing::Level;

use crate::auth::Auth;
use crate::config::Config;
use crate::service::{Limits, Service};
use crate::store::Store;
use error::ApiError;
pub use routes::ROUTES;

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
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Permits for requests in flight (`--max-concurrency`).
    pub in_flight: Arc<tokio::sync::Semaphore>,
    /// Permits for watchers (`/api/v1/watch`).
    pub watchers: Arc<tokio::sync::Semaphore>,
    /// Set when the server begins to shut down: watches end then, as
    /// they would otherwise hold the shutdown for its whole deadline.
    closing: tokio::sync::watch::Sender<bool>,
    /// Thumbnails of arrays, for the viewer's tree.
    previews: preview::Previews,
    /// Cache-Control of stored values, per mount.
    cache_control: cache_control::CachePolicies,
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
        let in_flight = Arc::new(tokio::sync::Semaphore::new(config.max_concurrency));
        let previews = preview::Previews::new(config.recheck_cached);
        // Tokens were validated when the configuration was resolved; should
        // they not be, nothing anonymous is allowed.
        let auth = Auth::new(
            &config.tokens,
            None,
            config.allow_anonymous_reads,
            config.allow_anonymous_writes,
        )
        .unwrap_or_default();
        let cache_control = cache_control::CachePolicies::new(&config);
        AppState(Arc::new(Shared {
            store,
            service: Arc::new(service),
            watchers: Arc::new(tokio::sync::Semaphore::new(watch::MAX_WATCHERS)),
            closing: tokio::sync::watch::Sender::new(false),
            cache_control,
            config: Arc::new(config),
            auth: Arc::new(auth),
            metrics: Arc::default(),
            in_flight,
            previews,
        }))
    }
}

impl AppState {
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

/// The header that carries a request's id, both ways.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Marks a response that must not be compressed (array data, stored values).
#[derive(Debug, Clone, Copy)]
pub struct NoCompression;

/// Marks a response that streams for as long as its client stays (a
/// watch): it does not hold a place among requests in flight.
#[derive(Debug, Clone, Copy)]
pub struct LongLived;

fn handler(path: &str) -> MethodRouter<AppState> {
    match path {
        "/zarr" => get(raw::to_root)
            .head(raw::to_root)
            .fallback(dav::propfind_root),
        "/zarr/" => get(raw::list_root)
            .head(raw::list_root)
            .fallback(dav::propfind_root),
        "/zarr/{key}" => get(raw::get_key)
            .head(raw::head_key)
            .put(write::put_key)
            .delete(write::delete_key)
            .fallback(dav::propfind_key),
        "/api/v1/tree" => get(api::tree_root),
        "/api/v1/tree/{path}" => get(api::tree),
        "/api/v1/meta" => get(api::meta_root),
        "/api/v1/meta/{path}" => get(api::meta)
            .put(write::put_meta)
            .patch(write::patch_meta)
            .delete(write::delete_meta),
        "/api/v1/data/{path}" => get(api::data_get).post(api::data_post).put(write::put_data),
        "/api/v1/append/{path}" => axum::routing::post(write::append),
        "/api/v1/stats" => get(api::stats),
        "/healthz" => get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
        "/readyz" => get(readyz),
        "/openapi.yaml" => get(openapi),
        "/metrics" => get(metrics),
        "/api/v1/preview/{path}" => get(preview::preview),
        "/api/v1/versions/{path}" => get(versions::versions),
        "/api/v1/watch" => get(watch::watch_root),
        "/api/v1/watch/{path}" => get(watch::watch),
        "/s3" | "/s3/" => get(s3::list_buckets),
        "/s3/{bucket}" | "/s3/{bucket}/" => {
            s3::with_writes_refused(get(s3::get_bucket).head(s3::head_bucket))
        }
        "/s3/{bucket}/{key}" => s3::with_writes_refused(get(s3::get_object).head(s3::head_object)),
        "/" => get(viewer::page),
        "/view/{path}" => get(viewer::view),
        "/viewer/settings.json" => get(viewer::settings),
        "/viewer/{file}" => get(viewer::file),
        other => unreachable_route(other),
    }
}

fn unreachable_route(path: &str) -> MethodRouter<AppState> {
    // ROUTES and handler() are kept together; a path in one and not the other is a bug
    // that the route table test catches before release.
    let message = format!("route {path} has no handler");
    get(
        move || async move { ApiError::new(StatusCode::NOT_IMPLEMENTED, "not_implemented", message) },
    )
}

/// Ready when the store answers: a HEAD of one key, present or not, works
/// on every backend (listing does not on plain HTTP stores).
async fn readyz(State(state): State<AppState>) -> Response {
    let key =
        crate::store::StoreKey::new("zarr.json").unwrap_or_else(|_| crate::store::StoreKey::root());
    match state.store.head(&key).await {
        Ok(_) => {
            axum::Json(serde_json::json!({"status": "ready", "store": state.store.description()}))
                .into_response()
        }
        Err(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the store is not reachable: {e}"),
        )
        .into_response(),
    }
}

const OPENAPI: &str = include_str!("../../openapi.yaml");

async fn metrics(State(state): State<AppState>) -> Response {
    use crate::metrics::{read, CHUNKS_DECODED, CHUNKS_ENCODED, LOAD_SHED, STORE_ERRORS};
    let c = state.service.cache().stats();
    let u = state.store.update_totals();
    let extra = [
        (
            "zarrd_cache_hits_total",
            "Chunk cache hits.",
            "counter",
            c.hits as f64,
        ),
        (
            "zarrd_cache_misses_total",
            "Chunk cache misses.",
            "counter",
            c.misses as f64,
        ),
        (
            "zarrd_cache_revalidations_total",
            "Cache entries revalidated against the store.",
            "counter",
            c.revalidations as f64,
        ),
        (
            "zarrd_cache_evictions_total",
            "Chunk cache evictions.",
            "counter",
            c.evictions as f64,
        ),
        (
            "zarrd_cache_bytes",
            "Bytes held by the chunk cache.",
            "gauge",
            c.weighted_bytes as f64,
        ),
        (
            "zarrd_cache_entries",
            "Entries in the chunk cache.",
            "gauge",
            c.entries as f64,
        ),
        (
            "zarrd_cache_capacity_bytes",
            "Capacity of the chunk cache.",
            "gauge",
            c.capacity_bytes as f64,
        ),
        (
            "zarrd_chunks_decoded_total",
            "Chunks decoded.",
            "counter",
            read(&CHUNKS_DECODED),
        ),
        (
            "zarrd_chunks_encoded_total",
            "Chunks encoded.",
            "counter",
            read(&CHUNKS_ENCODED),
        ),
        (
            "zarrd_lock_waits_total",
            "Chunk lock acquisitions that had to wait.",
            "counter",
            u.lock_waits as f64,
        ),
        (
            "zarrd_lock_wait_seconds_total",
            "Time spent waiting for chunk locks.",
            "counter",
            u.lock_wait_micros as f64 / 1e6,
        ),
        (
            "zarrd_cas_retries_total",
            "Compare-and-swap retries after a conflict.",
            "counter",
            u.cas_retries as f64,
        ),
        (
            "zarrd_cas_conflicts_total",
            "Writes that gave up after repeated conflicts.",
            "counter",
            u.cas_conflicts as f64,
        ),
        (
            "zarrd_store_errors_total",
            "Store errors answered with 502.",
            "counter",
            read(&STORE_ERRORS),
        ),
        (
            "zarrd_memory_budget_bytes",
            "Memory answers may reserve at once (--memory-budget).",
            "gauge",
            state.service.budget().total() as f64,
        ),
        (
            "zarrd_memory_reserved_bytes",
            "Memory reserved by answers in progress.",
            "gauge",
            state.service.budget().reserved() as f64,
        ),
        (
            "zarrd_memory_refused_total",
            "Requests refused with 503 because the memory budget was spent.",
            "counter",
            crate::service::BUDGET_REFUSED.load(std::sync::atomic::Ordering::Relaxed) as f64,
        ),
        (
            "zarrd_load_shed_total",
            "Requests refused with 503 because the server was at its concurrency limit.",
            "counter",
            read(&LOAD_SHED),
        ),
    ];
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&extra),
    )
        .into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI).into_response()
}

async fn fallback(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
}

pub(crate) async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not allowed on {} (the Allow header lists what is)",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Whether a response is compressed (as a type, so the stack can be named).
type Compressible =
    fn(StatusCode, axum::http::Version, &axum::http::HeaderMap, &axum::http::Extensions) -> bool;

/// Only text (JSON, HTML, scripts, YAML, SVG) is compressed; array data and stored values never
/// are (compressing binary data costs more than it saves, and ranges must stay exact).
fn compressible(
    _: StatusCode,
    _: axum::http::Version,
    headers: &axum::http::HeaderMap,
    extensions: &axum::http::Extensions,
) -> bool {
    if extensions.get::<NoCompression>().is_some() || headers.contains_key(header::CONTENT_RANGE) {
        return false;
    }
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with("application/json")
                || t.starts_with("text/")
                || t.starts_with("application/yaml")
                || t.starts_with("image/svg+xml")
        })
}

fn cors(config: &crate::config::Cors) -> CorsLayer {
    use tower_http::cors::AllowOrigin;
    let mut exposed = vec![
        header::CONTENT_RANGE,
        header::CONTENT_LENGTH,
        header::ETAG,
        header::ACCEPT_RANGES,
        header::LAST_MODIFIED,
        HeaderName::from_static("x-zarr-shape"),
        HeaderName::from_static("x-zarr-dtype"),
        HeaderName::from_static("x-zarr-vmin"),
        HeaderName::from_static("x-zarr-vmax"),
        HeaderName::from_static(write::SNAPSHOT),
        X_REQUEST_ID.clone(),
    ];
    exposed.extend(
        config
            .expose
            .iter()
            .filter_map(|h| HeaderName::try_from(h.as_str()).ok()),
    );
    let mut allowed = vec![
        header::RANGE,
        header::IF_NONE_MATCH,
        header::IF_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_RANGE,
        header::IF_UNMODIFIED_SINCE,
        header::AUTHORIZATION,
        // What S3 clients in a browser sign with.
        HeaderName::from_static("x-amz-date"),
        HeaderName::from_static("x-amz-content-sha256"),
        HeaderName::from_static("x-amz-security-token"),
        HeaderName::from_static("x-amz-user-agent"),
        HeaderName::from_static("x-amz-checksum-mode"),
        HeaderName::from_static("amz-sdk-invocation-id"),
        HeaderName::from_static("amz-sdk-request"),
        header::CONTENT_TYPE,
        header::ACCEPT,
        HeaderName::from_static(extract::COMMIT_MESSAGE),
    ];
    allowed.extend(
        config
            .headers
            .iter()
            .filter_map(|h| HeaderName::try_from(h.as_str()).ok()),
    );
    let origins = if config.origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            config
                .origins
                .iter()
                .filter_map(|o| axum::http::HeaderValue::from_str(o).ok()),
        )
    };
    let methods: Vec<Method> = config
        .methods
        .iter()
        .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(origins)
        .allow_methods(methods)
        .allow_headers(allowed)
        .expose_headers(exposed)
        .max_age(Duration::from_secs(3600))
}

/// The full service.
pub fn router(state: AppState) -> App {
    let mut router = Router::new();
    for route in ROUTES {
        router = router.route(&route.axum_path(), handler(route.path));
    }
    // Applied per route, so the span can name the matched route.
    let trace = TraceLayer::new_for_http()
        .make_span_with(|request: &Request| {
            let route = request.extensions().get::<MatchedPath>().map_or("(none)", |m| m.as_str());
            let id = request.headers().get(&X_REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            tracing::info_span!("request", method = %request.method(), route, path = %request.uri().path(), request_id = %id)
        })
        .on_response(DefaultOnResponse::new().level(Level::INFO).latency_unit(LatencyUnit::Micros));
    let body_limit = usize::try_from(state.config.max_body_size).unwrap_or(usize::MAX);
    // Spans and access logs cost every request even when the log level
    // drops them (a fifth of a cached metadata GET's throughput): the layer
    // is there only when something would be logged.
    let logged = tracing::enabled!(Level::INFO)
        || tracing::enabled!(target: "tower_http::trace::on_response", Level::INFO);
    // What needs the matched route, outermost first, put on the routes with
    // one `layer` call: each `Router::layer` boxes the routes once more, a
    // boxed future and a service clone per request and layer
    // (`bench/profile.md`). What does not is in `App`, around the router.
    let layers = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gate::gate,
        ))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.config.body_timeout,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit));
    let mut router = router
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed);
    if logged {
        router = router.layer(trace);
    }
    let routes = router.layer(layers).with_state(state.clone());
    let compressed = CompressionLayer::new()
        .compress_when(compressible as Compressible)
        .layer(routes);
    App::new(compressed, cors(&state.config.cors))
}
