//! The answers of requests no handler takes: no route, or no such method.

use axum::extract::Request;
use axum::http::StatusCode;

use crate::http::error::ApiError;

/// What no route matches.
pub async fn fallback(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
}

/// A method the route lacks (axum sets `Allow`).
pub async fn method_not_allowed(request: Request) -> ApiError {
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
