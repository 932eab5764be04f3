//! Load shedding, timeouts and per-route request metrics.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// At most `--max-concurrency` requests at once (one semaphore shared by
/// every route): more get 503 with `Retry-After` at once rather than queueing
/// without bound. A request that does not start its response within
/// `--request-timeout` gets 504.
pub async fn shed(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Ok(_permit) = state.in_flight.clone().try_acquire_owned() else {
        crate::metrics::count(&crate::metrics::LOAD_SHED);
        let mut r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the server is at its concurrency limit; retry shortly",
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    match tokio::time::timeout(state.config.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took longer than the server's --request-timeout",
        )
        .into_response(),
    }
}

/// Count requests, latency and bytes per matched route.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // A clone of the matched route shares its string: no allocation per request.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = method_name(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let bytes = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    state.metrics.observe(
        route.as_ref().map_or("(none)", |m| m.as_str()),
        method,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
        bytes,
    );
    response
}

/// Methods as static names for metric labels; anything unusual is "other".
fn method_name(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
