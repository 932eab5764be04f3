//! What a ROOT or a mount serves, and opening it: a directory or store
//! URL, a kerchunk reference set, or an Icechunk repository.

use super::{Store, StoreError};

/// What a root or a mount serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory, or a store URL.
    Store(String),
    /// A kerchunk reference set (virtual Zarr), whose targets may lie
    /// under `targets` (none: the set's own folder).
    References { url: String, targets: Vec<String> },
    /// An Icechunk repository (versioned Zarr), whose virtual chunks are
    /// read from its declared containers under `virtual_chunks` only.
    Icechunk {
        url: String,
        virtual_chunks: Vec<String>,
    },
}

impl Source {
    /// A ROOT as given: a reference set when it names a `.json` file or a
    /// `.parq` folder, an Icechunk repository when it names a directory
    /// holding one (its `refs` and `snapshots` folders).
    pub fn root(location: &str, targets: &[String]) -> Source {
        let dir = std::path::Path::new(location.strip_prefix("file://").unwrap_or(location));
        // Clients of a writable directory can create folders of any name,
        // `refs` and `snapshots` included: a directory once served as a
        // store says so where no client can write, and stays one.
        let served_as_store = dir.join(STORE_MARKER).is_file();
        if !served_as_store && dir.join("refs").is_dir() && dir.join("snapshots").is_dir() {
            return Source::Icechunk {
                url: location.to_string(),
                virtual_chunks: targets.to_vec(),
            };
        }
        let path = location.split(['?', '#']).next().unwrap_or(location);
        let path = path.trim_end_matches('/').to_ascii_lowercase();
        if path.ends_with(".json") || path.ends_with(".parq") {
            Source::References {
                url: location.to_string(),
                targets: targets.to_vec(),
            }
        } else {
            Source::Store(location.to_string())
        }
    }
}

/// Where a directory served as a store is marked so, in the reserved
/// folder no client can read or write.
pub const STORE_MARKER: &str = "__zarrd/store";

/// Mark the directory at `location` (a path or `file://` URL) as served as a
/// store, so the folders clients create in it never make a later start take
/// it for an Icechunk repository. A directory that cannot be written (read
/// only, or not a directory) is left as it is: its clients cannot create
/// folders either.
pub fn mark_served_as_store(location: &str) {
    let dir = std::path::Path::new(location.strip_prefix("file://").unwrap_or(location));
    if !dir.is_dir() || dir.join(STORE_MARKER).is_file() {
        return;
    }
    let marker = dir.join(STORE_MARKER);
    let written = marker
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| {
            std::fs::write(
                &marker,
                "This directory is served by zarrd as a Zarr store, not as an Icechunk repository.\n",
            )
        });
    if let Err(e) = written {
        tracing::debug!(error = %e, "could not mark {} as served as a store", dir.display());
    }
}

impl Store {
    /// The store a [`Source`] names, opened.
    pub async fn open_source(source: &Source) -> Result<Store, StoreError> {
        match source {
            Source::Store(location) => Store::open(location),
            Source::References { url, targets } => Store::references(url, targets).await,
            Source::Icechunk {
                url,
                virtual_chunks,
            } => Store::icechunk(url, virtual_chunks).await,
        }
    }

    /// The store a ROOT names (see [`Source::root`]), with `mounts` (name,
    /// source, read-only) under their top-level names. A writable directory
    /// served as a store is marked so.
    pub async fn serve(
        root: &str,
        targets: &[String],
        read_only: bool,
        mounts: &[(String, Source, bool)],
    ) -> Result<Store, StoreError> {
        let source = Source::root(root, targets);
        let store = Store::open_source(&source).await?;
        // After opening, which creates a directory that is not there yet.
        if let (Source::Store(location), false) = (&source, read_only) {
            mark_served_as_store(location);
        }
        Store::mount_all(store, mounts).await
    }

    /// `store` with `mounts` (name, source, read-only) under their
    /// top-level names.
    pub async fn mount_all(
        store: Store,
        mounts: &[(String, Source, bool)],
    ) -> Result<Store, StoreError> {
        if mounts.is_empty() {
            return Ok(store);
        }
        let mut opened = Vec::new();
        for (name, source, read_only) in mounts {
            opened.push((name.clone(), Store::open_source(source).await?, *read_only));
        }
        Store::with_mounts(store, opened)
    }
}
