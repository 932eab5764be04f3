//! What the rest of the store knows of Icechunk repositories, whether or not
//! zarrd is built with them (the `icechunk` feature): how versions are named
//! in keys, what a repository lists, and its errors.

use chrono::{DateTime, Utc};

/// The folder of a key that names a version: `__version/{ref}/{key}`.
pub const VERSION_FOLDER: &str = "__version";
/// The branch read when no version is named.
pub const DEFAULT_BRANCH: &str = "main";
/// `ObjectMeta::version` of values read at a snapshot id: they can never
/// change (see `KeyMeta::immutable`).
pub const PINNED: &str = "icechunk-snapshot:";

/// The Zarr key of a store path, without the version that may lead it.
pub fn zarr_key(location: &str) -> &str {
    match location
        .strip_prefix(VERSION_FOLDER)
        .and_then(|r| r.strip_prefix('/'))
    {
        Some(rest) => rest.split_once('/').map_or("", |(_, key)| key),
        None => location,
    }
}

/// A branch, a tag, or a snapshot of a repository, as listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SnapshotEntry {
    pub id: String,
    pub parent_id: Option<String>,
    pub message: String,
    pub written_at: DateTime<Utc>,
}

/// Every named version of a repository and the recent history of `main`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Versions {
    pub branches: Vec<(String, String)>,
    pub tags: Vec<(String, String)>,
    pub snapshots: Vec<SnapshotEntry>,
}

/// A ref that names no branch, tag or snapshot.
#[derive(Debug, thiserror::Error)]
#[error("'{reference}' is not a branch, a tag or a snapshot of the repository {repository}")]
pub struct UnknownVersion {
    pub(in crate::store) reference: String,
    pub(in crate::store) repository: String,
}

/// Why a repository's keys refuse writes (writes go through transactions).
pub const READ_ONLY: &str =
    "of an Icechunk repository (writes to its keys would bypass its transactions)";

/// A key of another version than the transaction's branch.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OtherVersion(pub(in crate::store) String);

/// A Zarr v2 document, which Icechunk cannot hold.
#[derive(Debug, thiserror::Error)]
#[error(
    "an Icechunk repository holds Zarr v3 only (zarr.json documents); create nodes with zarr_format 3"
)]
pub struct V3Only;
