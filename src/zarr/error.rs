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
    /// A node would be created below an array, whose chunk keys it would share.
    #[error("cannot create a node at '{path}': '{array}' is an array, whose chunk keys its keys would share")]
    InsideArray { path: String, array: String },
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
    /// A codec zarrd does not implement. The array's keys are stored and
    /// served as they are; only decoding them is refused.
    #[error("codec '{codec}' in {key} is not one zarrd decodes (the array's keys are stored and served raw; read them with a client that has the codec)")]
    UnsupportedCodec { key: String, codec: String },
    /// A stored chunk could not be decoded (truncated, corrupt, checksum mismatch).
    #[error("chunk '{key}' could not be decoded: {reason}")]
    CorruptChunk { key: String, reason: String },
    /// A data type string or document is not understood.
    #[error("data type {0}")]
    DataType(String),
    /// A fill value does not fit the data type.
    #[error("fill value {0}")]
    FillValue(String),
    /// A field of a structured type that is not there.
    #[error("{0}")]
    NoField(String),
    /// A selection does not fit the array.
    #[error("selection: {0}")]
    Selection(String),
    /// Data given for a write does not fit the selection or the data type.
    #[error("data: {0}")]
    Data(String),
    /// Data of the right shape holds an element its type does not allow.
    #[error("data: {0}")]
    BadElement(String),
    /// What was asked would be larger than zarrd writes or holds.
    #[error("{0}")]
    TooLarge(String),
    /// The operation is possible but was not allowed to the caller.
    #[error("{0}")]
    NotAllowed(String),
    /// An invariant of the engine itself broke (a bug, not bad input).
    #[error("internal error: {0}")]
    Internal(String),
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
    pub(crate) fn unsupported_codec(codec: &str) -> Self {
        ZarrError::UnsupportedCodec {
            key: "the array's metadata".to_string(),
            codec: codec.to_string(),
        }
    }
    pub fn metadata(key: &str, reason: impl Into<String>) -> Self {
        ZarrError::Metadata {
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// Whether a read failed because the value changed under it (the
    /// version it was pinned to is gone); reading again is the answer.
    pub fn is_version_change(&self) -> bool {
        matches!(self, ZarrError::Store(StoreError::Precondition { .. }))
    }

    /// The error of a shared load (moka hands each waiter an `Arc`): the
    /// error itself for the last holder, else a copy of the same kind.
    pub fn unshare(shared: std::sync::Arc<ZarrError>) -> ZarrError {
        std::sync::Arc::try_unwrap(shared).unwrap_or_else(|e| e.shared_copy())
    }

    /// A copy of an error that several waiters share (a cache load that
    /// failed): the same kind, so each waiter gets the same status.
    pub fn shared_copy(&self) -> ZarrError {
        match self {
            ZarrError::Store(e) => ZarrError::Store(e.shared_copy()),
            ZarrError::Metadata { key, reason } => ZarrError::Metadata {
                key: key.clone(),
                reason: reason.clone(),
            },
            ZarrError::NodeNotFound { path } => ZarrError::NodeNotFound { path: path.clone() },
            ZarrError::NodeExists { path } => ZarrError::NodeExists { path: path.clone() },
            ZarrError::InsideArray { path, array } => ZarrError::InsideArray {
                path: path.clone(),
                array: array.clone(),
            },
            ZarrError::WrongNodeType {
                path,
                expected,
                found,
            } => ZarrError::WrongNodeType {
                path: path.clone(),
                expected,
                found,
            },
            ZarrError::Codec { codec, reason } => ZarrError::Codec {
                codec: codec.clone(),
                reason: reason.clone(),
            },
            ZarrError::UnsupportedCodec { key, codec } => ZarrError::UnsupportedCodec {
                key: key.clone(),
                codec: codec.clone(),
            },
            ZarrError::CorruptChunk { key, reason } => ZarrError::CorruptChunk {
                key: key.clone(),
                reason: reason.clone(),
            },
            ZarrError::DataType(m) => ZarrError::DataType(m.clone()),
            ZarrError::FillValue(m) => ZarrError::FillValue(m.clone()),
            ZarrError::Selection(m) => ZarrError::Selection(m.clone()),
            ZarrError::NoField(m) => ZarrError::NoField(m.clone()),
            ZarrError::Data(m) => ZarrError::Data(m.clone()),
            ZarrError::BadElement(m) => ZarrError::BadElement(m.clone()),
            ZarrError::Internal(m) => ZarrError::Internal(m.clone()),
            ZarrError::NotAllowed(m) => ZarrError::NotAllowed(m.clone()),
            ZarrError::TooLarge(m) => ZarrError::TooLarge(m.clone()),
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
