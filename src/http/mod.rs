//! The HTTP service. `router` builds it from the route table
//! (`routes.rs`: path, methods, scopes and handlers, which `openapi.yaml`
//! is checked against) and the middleware; `serve` accepts connections.
//!
//! - `handlers/`: one file per endpoint;
//! - `input/`: extractors, bodies, ranges, credentials;
//! - `output/`: output formats, drawing, compression, response marks;
//! - `middleware/`: the gate (limits, metrics, authorization), CORS;
//! - `server/`: the accept loop, sockets, TLS, idle connections;
//! - `state.rs`: what every handler is handed; `error.rs`: the one error.

pub mod error;
pub mod handlers;
pub mod input;
pub mod middleware;
pub mod output;
pub mod routes;
pub mod server;
pub mod state;

pub use routes::ROUTES;
pub use server::app::App;
pub use state::AppState;

use axum::Router;
use tower::Layer;
use tower_http::compression::CompressionLayer;

use handlers::fallback::{fallback, method_not_allowed};
use middleware::{cors::cors, gate};
use output::compression::{compressible, Compressible};

/// Serve until SIGTERM or Ctrl-C, then let in-flight requests finish.
pub async fn serve(state: AppState) -> std::io::Result<()> {
    let app = router(state.clone());
    server::serve::serve(state, app).await
}

/// The full service.
pub fn router(state: AppState) -> App {
    let mut router = Router::new();
    for route in ROUTES {
        router = router.route(&route.axum_path(), route.handler());
    }
    let body_limit = usize::try_from(state.config.max_body_size).unwrap_or(usize::MAX);
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
    let router = router
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed);
    let routes = router.layer(layers).with_state(state.clone());
    let compressed = CompressionLayer::new()
        .compress_when(compressible as Compressible)
        .layer(routes);
    App::new(compressed, cors(&state.config.cors))
}
