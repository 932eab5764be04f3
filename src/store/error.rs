//! The store layer's one error type, and how object_store's errors (and
//! the typed errors zarrd's own backends wrap in them) become it.

use super::{icechunk_repo, icechunk_session, read_only, references};
use super::{Escape, NameTooLong, StoreKey, UploadName};

/// Errors from the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid key '{key}': {reason}")]
    InvalidKey { key: String, reason: String },
    #[error("key '{key}' not found")]
    NotFound { key: String },
    /// A conditional write or read found another version than the one asked for.
    #[error("key '{key}' was changed by another writer")]
    Precondition { key: String },
    /// A create-only write found the key present.
    #[error("key '{key}' already exists")]
    AlreadyExists { key: String },
    #[error("key '{key}' not modified")]
    NotModified { key: String },
    #[error("range {start}-{end} is outside key '{key}' of {size} bytes")]
    RangeNotSatisfiable {
        key: String,
        start: u64,
        end: u64,
        size: u64,
    },
    /// The store takes no writes (HTTP stores, read-only mounts).
    #[error("the store {what} is read-only")]
    ReadOnly { what: String },
    /// Compare-and-swap kept losing to other writers.
    #[error("key '{key}' is being changed by other writers; gave up after {attempts} attempts")]
    Conflict { key: String, attempts: u32 },
    #[error("the store does not support {what}")]
    NotSupported { what: String },
    /// The key is reserved for the server, or leads outside the store's root.
    #[error("key '{key}' is not accessible: {reason}")]
    Forbidden { key: String, reason: String },
    #[error("store URL '{url}': {reason}")]
    BadUrl { url: String, reason: String },
    /// A reference (virtual Zarr) whose target is missing or too short.
    #[error("{0}")]
    BadReference(String),
    /// A version (branch, tag, snapshot) a versioned store does not have.
    #[error("{0}")]
    UnknownVersion(String),
    /// A commit that conflicts with commits made to its branch meanwhile.
    #[error("{0}")]
    Diverged(String),
    #[error("store error on '{key}': {source}")]
    Backend {
        key: String,
        #[source]
        source: object_store::Error,
    },
}

impl StoreError {
    /// The same error for another waiter on a shared load. Backend errors
    /// keep their kind (a store fault, 502) with the original's message.
    pub fn shared_copy(&self) -> StoreError {
        let key = |k: &String| k.clone();
        match self {
            StoreError::InvalidKey { key: k, reason } => StoreError::InvalidKey {
                key: key(k),
                reason: reason.clone(),
            },
            StoreError::NotFound { key: k } => StoreError::NotFound { key: key(k) },
            StoreError::Precondition { key: k } => StoreError::Precondition { key: key(k) },
            StoreError::AlreadyExists { key: k } => StoreError::AlreadyExists { key: key(k) },
            StoreError::NotModified { key: k } => StoreError::NotModified { key: key(k) },
            StoreError::RangeNotSatisfiable {
                key: k,
                start,
                end,
                size,
            } => StoreError::RangeNotSatisfiable {
                key: key(k),
                start: *start,
                end: *end,
                size: *size,
            },
            StoreError::ReadOnly { what } => StoreError::ReadOnly { what: what.clone() },
            StoreError::Conflict { key: k, attempts } => StoreError::Conflict {
                key: key(k),
                attempts: *attempts,
            },
            StoreError::NotSupported { what } => StoreError::NotSupported { what: what.clone() },
            StoreError::Forbidden { key: k, reason } => StoreError::Forbidden {
                key: key(k),
                reason: reason.clone(),
            },
            StoreError::BadUrl { url, reason } => StoreError::BadUrl {
                url: url.clone(),
                reason: reason.clone(),
            },
            StoreError::BadReference(message) => StoreError::BadReference(message.clone()),
            StoreError::UnknownVersion(message) => StoreError::UnknownVersion(message.clone()),
            StoreError::Diverged(message) => StoreError::Diverged(message.clone()),
            StoreError::Backend { key: k, source } => StoreError::Backend {
                key: key(k),
                source: object_store::Error::Generic {
                    store: "shared load",
                    source: source.to_string().into(),
                },
            },
        }
    }

    pub(crate) fn from_backend(key: &StoreKey, err: object_store::Error) -> Self {
        let key = key.to_string();
        match err {
            object_store::Error::NotFound { .. } => StoreError::NotFound { key },
            object_store::Error::Precondition { .. } => StoreError::Precondition { key },
            object_store::Error::AlreadyExists { .. } => StoreError::AlreadyExists { key },
            object_store::Error::NotModified { .. } => StoreError::NotModified { key },
            object_store::Error::NotImplemented { .. } => StoreError::NotSupported {
                what: format!("this operation (on '{key}')"),
            },
            object_store::Error::Generic { source, .. }
                if source.is::<NameTooLong>() || source.is::<UploadName>() =>
            {
                StoreError::InvalidKey {
                    key,
                    reason: source.to_string(),
                }
            }
            object_store::Error::Generic { source, .. } if source.is::<read_only::Refused>() => {
                StoreError::ReadOnly {
                    what: source
                        .downcast_ref::<read_only::Refused>()
                        .map(|r| r.0.clone())
                        .unwrap_or_default(),
                }
            }
            object_store::Error::Generic { source, .. } if source.is::<references::Broken>() => {
                match source.downcast::<references::Broken>() {
                    Ok(b) if b.disallowed => StoreError::Forbidden {
                        key: b.key,
                        reason: b.reason,
                    },
                    Ok(b) => StoreError::BadReference(b.to_string()),
                    Err(source) => StoreError::Backend {
                        key,
                        source: object_store::Error::Generic {
                            store: "references",
                            source,
                        },
                    },
                }
            }
            object_store::Error::Generic { source, .. }
                if source.is::<icechunk_repo::UnknownVersion>() =>
            {
                StoreError::UnknownVersion(source.to_string())
            }
            object_store::Error::Generic { source, .. }
                if source.is::<icechunk_session::OtherVersion>() =>
            {
                StoreError::InvalidKey {
                    key,
                    reason: source.to_string(),
                }
            }
            object_store::Error::Generic { source, .. }
                if source.is::<icechunk_session::V3Only>() =>
            {
                StoreError::InvalidKey {
                    key: icechunk_repo::zarr_key(&key).to_string(),
                    reason: source.to_string(),
                }
            }
            object_store::Error::Generic { source, .. } if source.is::<Escape>() => {
                StoreError::Forbidden {
                    key,
                    reason:
                        "its path passes through a symbolic link, which the store does not follow"
                            .into(),
                }
            }
            source => StoreError::Backend { key, source },
        }
    }
}
