//! Extractors whose rejections are JSON errors like every other error.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use futures::StreamExt;

use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::service::{budget, Reservation};

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

/// The request body as bytes, with the size limit's rejection as a JSON 413,
/// and the memory it holds reserved from the server's budget while the
/// request is handled (see [`read_body`]).
pub struct ApiBody(pub axum::body::Bytes, pub Reservation);

/// A body reserves at least this much more at a time.
const BODY_STEP: u64 = 1 << 20;

fn body_error(
    e: &(dyn std::error::Error + 'static),
    status: axum::http::StatusCode,
    text: String,
) -> ApiError {
    if timed_out(e) {
        return ApiError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "the request body stalled for longer than the server's --body-timeout",
        );
    }
    ApiError::new(
        status,
        if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "bad_body"
        },
        format!("request body: {text} (the limit is set with --max-body-size)"),
    )
}

/// A body a handler reads and drops (it is no more than `limit`, below
/// the budget's free size): 413 past `limit`, 408 when it stalls past
/// `--body-timeout`, 400 when the connection breaks.
pub async fn read_small_body(
    body: axum::body::Body,
    limit: usize,
    what: &str,
) -> Result<(), ApiError> {
    let mut frames = body.into_data_stream();
    let mut read = 0usize;
    while let Some(frame) = frames.next().await {
        let frame = frame
            .map_err(|e| body_error(&e, axum::http::StatusCode::BAD_REQUEST, e.to_string()))?;
        read += frame.len();
        if read > limit {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("{what} may be at most {limit} bytes"),
            ));
        }
    }
    Ok(())
}

impl axum::extract::FromRequest<AppState> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(
        request: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        read_body(request, state, state.config.max_body_size).await
    }
}

/// A request body of at most `limit` bytes, its memory reserved from the
/// budget as it arrives (a length declared and not sent reserves nothing),
/// in steps that grow with it.
pub async fn read_body(
    request: axum::extract::Request,
    state: &AppState,
    limit: u64,
) -> Result<ApiBody, ApiError> {
    let budget = state.service.budget();
    let too_large = |what: String| {
        body_error(
            &std::io::Error::other("too large"),
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            what,
        )
    };
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = declared.filter(|&l| l > limit) {
        return Err(too_large(format!(
            "{length} bytes, over the limit of {limit}"
        )));
    }
    let mut held = Reservation::default();
    let mut buf = bytes::BytesMut::new();
    let mut frames = request.into_body().into_data_stream();
    while let Some(frame) = frames.next().await {
        let frame = frame
            .map_err(|e| body_error(&e, axum::http::StatusCode::BAD_REQUEST, e.to_string()))?;
        let size = (buf.len() + frame.len()) as u64;
        if size > limit {
            return Err(too_large(format!("longer than the limit of {limit} bytes")));
        }
        if size > budget.total() {
            return Err(too_large(format!(
                "longer than the server's whole memory budget of {} bytes (--memory-budget)",
                budget.total()
            )));
        }
        if size > held.bytes().max(budget::SMALL) {
            // Half again what is held, so a body reserves at most half as
            // much again as it holds, in a few steps.
            let step = (size - held.bytes())
                .max(held.bytes() / 2)
                .max(BODY_STEP)
                .min(budget.total().saturating_sub(held.bytes()));
            let more = budget.reserve(step, "this request body").await?;
            held = held.merge(more);
        }
        buf.extend_from_slice(&frame);
    }
    Ok(ApiBody(buf.freeze(), held))
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
