//! The HTTP error type and the one place engine and store errors become
//! statuses. Every error body is `{"error": {"status", "code", "message"}}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;
use crate::zarr::ZarrError;

#[derive(Debug)]
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

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let (status, code) = match &e {
            StoreError::InvalidKey { .. } => (StatusCode::BAD_REQUEST, "invalid_key"),
            StoreError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            StoreError::Precondition { .. } => {
                (StatusCode::PRECONDITION_FAILED, "precondition_failed")
            }
            StoreError::AlreadyExists { .. } => (StatusCode::PRECONDITION_FAILED, "already_exists"),
            StoreError::NotModified { .. } => (StatusCode::NOT_MODIFIED, "not_modified"),
            StoreError::RangeNotSatisfiable { .. } => {
                (StatusCode::RANGE_NOT_SATISFIABLE, "range_not_satisfiable")
            }
            StoreError::NotSupported { .. } => (StatusCode::NOT_IMPLEMENTED, "not_supported"),
            StoreError::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            StoreError::ReadOnly { .. } => (StatusCode::FORBIDDEN, "read_only"),
            StoreError::Forbidden { .. } => (StatusCode::FORBIDDEN, "forbidden_key"),
            StoreError::BadUrl { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "bad_store"),
            StoreError::Backend { .. } => {
                crate::metrics::count(&crate::metrics::STORE_ERRORS);
                (StatusCode::BAD_GATEWAY, "store_error")
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<ZarrError> for ApiError {
    fn from(e: ZarrError) -> Self {
        let (status, code) = match &e {
            ZarrError::Store(_) => {
                let ZarrError::Store(inner) = e else {
                    unreachable!()
                };
                return inner.into();
            }
            ZarrError::NodeNotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            ZarrError::NodeExists { .. } => (StatusCode::CONFLICT, "exists"),
            ZarrError::WrongNodeType { .. } => (StatusCode::BAD_REQUEST, "wrong_node_type"),
            ZarrError::Selection(_) => (StatusCode::BAD_REQUEST, "bad_selection"),
            ZarrError::Data(_) => (StatusCode::UNPROCESSABLE_ENTITY, "bad_data"),
            ZarrError::DataType(_) | ZarrError::FillValue(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "bad_metadata")
            }
            ZarrError::Metadata { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "invalid_metadata"),
            ZarrError::CorruptChunk { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_chunk"),
            ZarrError::Codec { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "codec_error"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(
                status = self.status.as_u16(),
                code = self.code,
                "{}",
                self.message
            );
        }
        let body = json!({"error": {"status": self.status.as_u16(), "code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::NOT_MODIFIED {
            *response.body_mut() = axum::body::Body::empty();
        }
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
