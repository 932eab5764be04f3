//! Extractors whose rejections are JSON errors like every other error.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Query<T>` that rejects with a JSON 400 naming the problem.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request("bad_query", format!("query parameters: {}", e.body_text()))
            })
    }
}

/// `Path<T>` that rejects with a JSON 400 naming the problem.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e: PathRejection| {
                ApiError::bad_request("bad_path", format!("path: {}", e.body_text()))
            })
    }
}

/// The request body as bytes, with the size limit's rejection as a JSON 413.
pub struct ApiBody(pub axum::body::Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(
        request: axum::extract::Request,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::body::Bytes::from_request(request, state)
            .await
            .map(ApiBody)
            .map_err(|e| {
                if timed_out(&e) {
                    return ApiError::new(
                        axum::http::StatusCode::REQUEST_TIMEOUT,
                        "body_timeout",
                        "the request body stalled for longer than the server's --body-timeout",
                    );
                }
                ApiError::new(
                    e.status(),
                    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                        "body_too_large"
                    } else {
                        "bad_body"
                    },
                    format!(
                        "request body: {} (the limit is set with --max-body-size)",
                        e.body_text()
                    ),
                )
            })
    }
}

/// Whether a body failed because it stalled past `--body-timeout`.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The header naming the commit a write makes on a versioned store.
pub const COMMIT_MESSAGE: &str = "x-zarr-commit-message";

/// The message of the commit a write makes on a branch of a versioned store
/// (an Icechunk repository): the `X-Zarr-Commit-Message` header, or one
/// naming the request.
pub struct CommitMessage(pub String);

impl<S: Send + Sync> FromRequestParts<S> for CommitMessage {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(value) = parts.headers.get(COMMIT_MESSAGE) {
            let message = std::str::from_utf8(value.as_bytes()).map_err(|_| {
                ApiError::bad_request("bad_header", "X-Zarr-Commit-Message is not UTF-8 text")
            })?;
            // An empty message says nothing: the default says what was done.
            if !message.trim().is_empty() {
                return Ok(CommitMessage(message.trim().to_string()));
            }
        }
        let target = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or_else(|| parts.uri.path());
        let target = percent_encoding::percent_decode_str(target).decode_utf8_lossy();
        Ok(CommitMessage(format!("zarrd: {} {target}", parts.method)))
    }
}
