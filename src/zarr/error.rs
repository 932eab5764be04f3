//! The engine's error type: every failure names the key or field it came from.

use crate::store::StoreError;

/// Errors raised while parsing metadata, coding chunks, selecting or writing.
#[derive(Debug, thiserror::Error)]
pub enum ZarrError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A metadata document is not valid (missing field, wrong type, unsupported value).
    #[error("invalid metadata in {key}: {reason}")]
    Metadata { key: String, reason: String },
    /// No node (array or group) exists at a path.
    #[error("no array or group at '{path}'")]
    NodeNotFound { path: String },
    /// A node exists where it must not (create without overwrite).
    #[error("a node already exists at '{path}'")]
    NodeExists { path: String },
    /// An operation needs an array but found a group, or the other way round.
    #[error("'{path}' is a {found}, not a {expected}")]
    WrongNodeType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A codec name or configuration is not understood.
    #[error("codec '{codec}': {reason}")]
    Codec { codec: String, reason: String },
    /// A stored chunk could not be decoded (truncated, corrupt, checksum mismatch).
    #[error("chunk '{key}' could not be decoded: {reason}")]
    CorruptChunk { key: String, reason: String },
    /// A data type string or document is not understood.
    #[error("data type {0}")]
    DataType(String),
    /// A fill value does not fit the data type.
    #[error("fill value {0}")]
    FillValue(String),
    /// A selection does not fit the array.
    #[error("selection: {0}")]
    Selection(String),
    /// Data given for a write does not fit the selection or the data type.
    #[error("data: {0}")]
    Data(String),
}

/// Result alias for the engine.
pub type Result<T, E = ZarrError> = std::result::Result<T, E>;

impl ZarrError {
    pub(crate) fn codec(codec: &str, reason: impl Into<String>) -> Self {
        ZarrError::Codec {
            codec: codec.to_string(),
            reason: reason.into(),
        }
    }
    pub fn metadata(key: &str, reason: impl Into<String>) -> Self {
        ZarrError::Metadata {
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// Attach a store key to a codec failure, turning it into a corrupt-chunk error.
    pub fn for_chunk(self, key: &str) -> Self {
        match self {
            ZarrError::Codec { codec, reason } => ZarrError::CorruptChunk {
                key: key.to_string(),
                reason: format!("{codec}: {reason}"),
            },
            ZarrError::Data(reason) => ZarrError::CorruptChunk {
                key: key.to_string(),
                reason,
            },
            other => other,
        }
    }
}
