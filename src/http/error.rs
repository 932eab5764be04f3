//! The HTTP error type and the one place engine and store errors become
//! statuses. Every error body is `{"error": {"status", "code", "message"}}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::service::{ErrorKind, ServiceError};
use crate::store::StoreError;
use crate::zarr::ZarrError;

/// The header that carries a request's id, both ways.
pub static X_REQUEST_ID: axum::http::HeaderName =
    axum::http::HeaderName::from_static("x-request-id");

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

/// The one place where a failure's kind becomes an HTTP status.
impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let status = match e.kind {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::NotModified => StatusCode::NOT_MODIFIED,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            ErrorKind::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::StoreUnavailable => StatusCode::BAD_GATEWAY,
            ErrorKind::Busy => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::CorruptData | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.code, e.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ServiceError::from(e).into()
    }
}

impl From<ZarrError> for ApiError {
    fn from(e: ZarrError) -> Self {
        ServiceError::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"status": self.status.as_u16(), "code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::NOT_MODIFIED {
            *response.body_mut() = axum::body::Body::empty();
        }
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // Every 503 says when to come back: it is a refusal for now, not a failure.
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Server errors carry the request's id in their body too, so the client
/// can quote what an operator finds in the logs: the error's line and the
/// access log's both name the id.
pub async fn request_id_in_errors<Fut>(
    request: axum::extract::Request,
    next: impl FnOnce(axum::extract::Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let id = request.headers().get(&X_REQUEST_ID).cloned();
    let response = next(request).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !response.status().is_server_error() {
        return match id {
            // A stream (of unknown length) that fails after its status was
            // sent: the log says which request's answer was cut short.
            Some(id)
                if http_body::Body::size_hint(response.body())
                    .exact()
                    .is_none() =>
            {
                response.map(|body| axum::body::Body::new(Streamed { body, id }))
            }
            _ => response,
        };
    }
    let request_id = id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("");
    let (Some(id), true) = (id.clone(), json) else {
        tracing::error!(
            request_id,
            status = response.status().as_u16(),
            "the request failed"
        );
        return response;
    };
    let (mut parts, body) = response.into_parts();
    // Error bodies are a few hundred bytes; anything larger is not ours to edit.
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 10).await else {
        // Not an error body of ours; what was read of it is gone, the headers stay.
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let mut doc: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(doc) => doc,
        Err(_) => return Response::from_parts(parts, axum::body::Body::from(bytes)),
    };
    if let Some(error) = doc.get_mut("error").and_then(|e| e.as_object_mut()) {
        // Logged here, where the request's id is known (no span carries it).
        // A request shed under load is not a failure to look into: the
        // access log counts those.
        let shed = error.get("code").and_then(|c| c.as_str()) == Some("overloaded");
        if !shed {
            tracing::error!(
                request_id = id.to_str().unwrap_or_default(),
                status = parts.status.as_u16(),
                code = error.get("code").and_then(|c| c.as_str()).unwrap_or(""),
                "{}",
                error.get("message").and_then(|m| m.as_str()).unwrap_or("")
            );
        }
        error.insert("request_id".into(), json!(id.to_str().unwrap_or_default()));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(doc.to_string()))
}

/// A streamed answer's body, which logs a failure with its request's id.
struct Streamed {
    body: axum::body::Body,
    id: HeaderValue,
}

impl http_body::Body for Streamed {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        if let std::task::Poll::Ready(Some(Err(e))) = &polled {
            tracing::warn!(
                request_id = %String::from_utf8_lossy(this.id.as_bytes()),
                error = %e,
                "a streamed response ended early"
            );
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
