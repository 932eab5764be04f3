//! The service layer's one error type. Every failure has a kind, which the
//! HTTP layer maps to a status in one place (`http/error.rs`), a stable
//! code clients can match on, and a message naming the key or parameter.

use crate::store::StoreError;
use crate::zarr::ZarrError;

/// What kind of failure, independent of any protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request names something impossible or malformed.
    InvalidInput,
    /// Data or a description that does not fit what it is written to.
    Unprocessable,
    NotFound,
    /// The value is unchanged since the version the client has.
    NotModified,
    /// Something exists, or keeps changing, where the operation needs otherwise.
    Conflict,
    PreconditionFailed,
    RangeNotSatisfiable,
    /// The answer or the work would be larger than the configured limits.
    TooLarge,
    /// Not supported by this store or this data type.
    Unsupported,
    /// The data cannot be given in the form asked for.
    NotAcceptable,
    /// Refused: read-only, reserved, outside the root, or beyond a scope.
    Forbidden,
    /// The store failed or could not be reached.
    StoreUnavailable,
    /// Refused for now: the server's memory budget is spent; retry shortly.
    Busy,
    /// Stored data or metadata cannot be decoded.
    CorruptData,
    /// A bug or an invariant broken inside the server.
    Internal,
}

/// A failure of a service operation.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub code: &'static str,
    pub message: String,
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

impl ServiceError {
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        ServiceError {
            kind,
            code,
            message: message.into(),
        }
    }
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, code, message)
    }
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unprocessable, code, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::TooLarge, "too_large", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, "not_found", message)
    }
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, code, message)
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        use ErrorKind::*;
        let (kind, code) = match &e {
            StoreError::InvalidKey { .. } => (InvalidInput, "invalid_key"),
            StoreError::NotFound { .. } => (NotFound, "not_found"),
            StoreError::Precondition { .. } => (PreconditionFailed, "precondition_failed"),
            StoreError::AlreadyExists { .. } => (PreconditionFailed, "already_exists"),
            StoreError::NotModified { .. } => (NotModified, "not_modified"),
            StoreError::RangeNotSatisfiable { .. } => {
                (RangeNotSatisfiable, "range_not_satisfiable")
            }
            StoreError::NotSupported { .. } => (Unsupported, "not_supported"),
            StoreError::Conflict { .. } => (Conflict, "conflict"),
            StoreError::ReadOnly { .. } => (Forbidden, "read_only"),
            StoreError::Forbidden { .. } => (Forbidden, "forbidden_key"),
            StoreError::BadUrl { .. } => (Internal, "bad_store"),
            // The data the reference names is not there: the store failed.
            StoreError::BadReference(_) => (StoreUnavailable, "bad_reference"),
            StoreError::UnknownVersion(_) => (NotFound, "unknown_version"),
            StoreError::Diverged(_) => (Conflict, "commit_conflict"),
            StoreError::Backend { .. } => {
                crate::metrics::count(&crate::metrics::STORE_ERRORS);
                (StoreUnavailable, "store_error")
            }
        };
        ServiceError::new(kind, code, e.to_string())
    }
}

impl From<ZarrError> for ServiceError {
    fn from(e: ZarrError) -> Self {
        use ErrorKind::*;
        let (kind, code) = match &e {
            ZarrError::Store(_) => {
                let ZarrError::Store(inner) = e else {
                    unreachable!()
                };
                return inner.into();
            }
            ZarrError::NodeNotFound { .. } => (NotFound, "not_found"),
            ZarrError::NodeExists { .. } => (Conflict, "exists"),
            ZarrError::InsideArray { .. } => (Conflict, "inside_array"),
            ZarrError::WrongNodeType {
                expected: "array", ..
            } => (InvalidInput, "not_an_array"),
            ZarrError::WrongNodeType { .. } => (InvalidInput, "wrong_node_type"),
            ZarrError::Selection(_) => (InvalidInput, "bad_selection"),
            ZarrError::NoField(_) => (InvalidInput, "bad_field"),
            ZarrError::Data(_) | ZarrError::BadElement(_) => (Unprocessable, "bad_data"),
            ZarrError::DataType(_) | ZarrError::FillValue(_) => (Unprocessable, "bad_metadata"),
            ZarrError::Metadata { .. } => (CorruptData, "invalid_metadata"),
            ZarrError::CorruptChunk { .. } => (CorruptData, "corrupt_chunk"),
            ZarrError::Codec { .. } => (CorruptData, "codec_error"),
            ZarrError::UnsupportedCodec { .. } => (Unprocessable, "unsupported_codec"),
            ZarrError::Internal(_) => (Internal, "internal"),
            ZarrError::NotAllowed(_) => (Forbidden, "forbidden"),
            ZarrError::TooLarge(_) => (TooLarge, "too_large"),
        };
        ServiceError::new(kind, code, e.to_string())
    }
}
