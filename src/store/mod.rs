//! The store layer: one [`Store`] over any `object_store` backend, speaking in
//! validated [`StoreKey`]s and typed [`StoreError`]s. Everything the engine and
//! the server read or write goes through here.

mod backends;
mod key;
mod local;
pub mod update;
mod zip;

pub use key::{node_path, StoreKey};
pub use update::{Coordination, Outcome, Replacement, Updater};

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

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
    #[error("store URL '{url}': {reason}")]
    BadUrl { url: String, reason: String },
    #[error("store error on '{key}': {source}")]
    Backend {
        key: String,
        #[source]
        source: object_store::Error,
    },
}

impl StoreError {
    fn from_backend(key: &StoreKey, err: object_store::Error) -> Self {
        let key = key.to_string();
        match err {
            object_store::Error::NotFound { .. } => StoreError::NotFound { key },
            object_store::Error::Precondition { .. } => StoreError::Precondition { key },
            object_store::Error::AlreadyExists { .. } => StoreError::AlreadyExists { key },
            object_store::Error::NotModified { .. } => StoreError::NotModified { key },
            object_store::Error::NotImplemented { .. } => StoreError::NotSupported {
                what: format!("this operation (on '{key}')"),
            },
            source => StoreError::Backend { key, source },
        }
    }
}

/// The version of a stored value, for conditional reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Version {
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

/// Size, version and modification time of a stored value.
#[derive(Debug, Clone)]
pub struct KeyMeta {
    pub size: u64,
    pub version: Version,
    pub last_modified: chrono_like::Timestamp,
}

/// A value with the version it was read at.
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Bytes,
    pub meta: KeyMeta,
}

/// How a put treats an existing value.
#[derive(Debug, Clone)]
pub enum PutCondition {
    /// Replace whatever is there.
    Overwrite,
    /// Fail with [`StoreError::AlreadyExists`] if the key exists.
    Create,
    /// Fail with [`StoreError::Precondition`] unless the key is at this version.
    Update(Version),
}

/// A byte range of a stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRange {
    /// `start..end`, clamped to the value's length.
    Bounded(Range<u64>),
    /// From an offset to the end.
    From(u64),
    /// The last n bytes.
    Suffix(u64),
}

/// A read of a whole value or a range of it.
#[derive(Debug, Clone, Default)]
pub struct GetRequest {
    pub range: Option<StoreRange>,
}

/// A streamed value (or part of it) with its metadata.
pub struct GetResponse {
    pub meta: KeyMeta,
    /// The bytes of the value the body holds.
    pub range: Range<u64>,
    pub body: futures::stream::BoxStream<'static, Result<Bytes, StoreError>>,
}

/// Whether a value changed since a version was seen.
#[derive(Debug, Clone)]
pub enum Change {
    Unchanged,
    Changed(KeyMeta),
    Missing,
}

/// One level of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Keys directly below the prefix, as names relative to it.
    pub keys: Vec<String>,
    /// Sub-prefixes directly below the prefix, as names relative to it.
    pub prefixes: Vec<String>,
}

/// Prefix of keys the server keeps for itself (lock files); hidden from listings.
pub const INTERNAL_PREFIX: &str = "__zarrd";

/// A Zarr store over an `object_store` backend.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    description: String,
    updater: Arc<Updater>,
    /// Writes are refused (HTTP stores).
    read_only: bool,
    /// Stores mounted under top-level names (`era5/...` reads the `era5` mount).
    mounts: Arc<Vec<(String, Store)>>,
    /// Reads that bypass object_store for a local directory (fewer thread hops).
    local: Option<local::LocalReads>,
}

fn path_of(key: &StoreKey) -> Path {
    // Keys are validated, so the parts are already safe for `Path`; `from`
    // keeps them verbatim rather than percent-encoding them.
    Path::from(key.as_str())
}

impl Store {
    /// A store whose read-modify-writes use compare-and-swap (object stores, memory).
    pub fn new(inner: Arc<dyn ObjectStore>, description: impl Into<String>) -> Self {
        Store::with_coordination(inner, description, Coordination::CompareAndSwap)
    }

    pub fn with_coordination(
        inner: Arc<dyn ObjectStore>,
        description: impl Into<String>,
        coordination: Coordination,
    ) -> Self {
        Store {
            inner,
            description: description.into(),
            updater: Arc::new(Updater::new(coordination)),
            read_only: false,
            mounts: Arc::new(Vec::new()),
            local: None,
        }
    }

    /// How read-modify-writes of keys are coordinated.
    pub fn updater(&self) -> &Updater {
        &self.updater
    }

    /// Lock and compare-and-swap counters of this store and every mount.
    pub fn update_totals(&self) -> update::UpdateTotals {
        self.mounts
            .iter()
            .fold(self.updater.stats.snapshot(), |sum, (_, m)| {
                sum + m.update_totals()
            })
    }

    /// An empty in-memory store.
    pub fn memory() -> Self {
        Store::new(
            Arc::new(object_store::memory::InMemory::new()),
            "memory://".to_string(),
        )
    }

    /// A directory on the local file system, created if missing.
    pub fn local(dir: &std::path::Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::BadUrl {
            url: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| {
            StoreError::BadUrl {
                url: dir.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        // LocalFileSystem cannot put conditionally: writers lock files instead.
        let coordination = Coordination::FileLocks {
            dir: dir.join(INTERNAL_PREFIX).join("locks"),
        };
        let fs = Arc::new(fs);
        let mut store = Store::with_coordination(
            fs.clone(),
            format!("file://{}", dir.display()),
            coordination,
        );
        store.local = Some(local::LocalReads::new(fs));
        Ok(store)
    }

    /// Open a store from a directory path or a `file://` / `memory://` URL.
    pub fn open(location: &str) -> Result<Self, StoreError> {
        if location == "memory://" || location.starts_with("memory://") {
            return Ok(Store::memory());
        }
        if let Some(path) = location.strip_prefix("file://") {
            return Store::open(path);
        }
        if location.contains("://") {
            return backends::open_url(location);
        }
        let path = std::path::Path::new(location);
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zip"))
            && path.is_file()
        {
            // A zip file as zarr-python's ZipStore writes it: read-only.
            let zip = zip::ZipStore::open(path)?;
            let mut store = Store::with_coordination(
                Arc::new(zip),
                format!("zip://{location}"),
                Coordination::CompareAndSwap,
            );
            store.read_only = true;
            return Ok(store);
        }
        Store::local(std::path::Path::new(location))
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// `root` with `mounts` under top-level names: `name/key` is `key` in
    /// that store. A read-only mount refuses writes.
    pub fn with_mounts(
        mut root: Store,
        mounts: Vec<(String, Store, bool)>,
    ) -> Result<Store, StoreError> {
        let mut table = Vec::new();
        for (name, mut store, read_only) in mounts {
            let key = StoreKey::new(&name)?;
            if name.contains('/') || key.is_root() || is_internal(&name) {
                return Err(StoreError::InvalidKey {
                    key: name,
                    reason: "a mount name is one path segment".into(),
                });
            }
            store.read_only |= read_only;
            table.push((name, store));
        }
        root.mounts = Arc::new(table);
        Ok(root)
    }

    /// The mounted store and the key within it, when `key` is below a mount.
    fn mount_for(&self, key: &StoreKey) -> Option<(&Store, StoreKey)> {
        if self.mounts.is_empty() {
            return None;
        }
        let (first, rest) = key.as_str().split_once('/').unwrap_or((key.as_str(), ""));
        let (_, store) = self.mounts.iter().find(|(name, _)| name == first)?;
        Some((
            store,
            StoreKey::new(rest).unwrap_or_else(|_| StoreKey::root()),
        ))
    }

    /// Read-modify-write `key` safely against concurrent writers, with the
    /// coordination of the store that holds it (see [`Updater::update`]).
    pub async fn update<F, Fut, E>(
        &self,
        key: &StoreKey,
        blind: bool,
        update: F,
    ) -> Result<Outcome, E>
    where
        F: Fn(Option<Versioned>) -> Fut,
        Fut: std::future::Future<Output = Result<Replacement, E>>,
        E: update::UpdateError,
    {
        let (store, key) = match self.mount_for(key) {
            Some((m, k)) => (m, k),
            None => (self, key.clone()),
        };
        store.updater.update(store, &key, blind, update).await
    }

    /// Delete `key` if it still has `expected_etag` (see [`Updater::delete`]).
    pub async fn delete_if(
        &self,
        key: &StoreKey,
        expected_etag: Option<&str>,
    ) -> Result<(), StoreError> {
        let (store, key) = match self.mount_for(key) {
            Some((m, k)) => (m, k),
            None => (self, key.clone()),
        };
        store.updater.delete(store, &key, expected_etag).await
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn backend(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The whole value, or `None` when the key is missing.
    pub async fn get(&self, key: &StoreKey) -> Result<Option<Bytes>, StoreError> {
        Ok(self.get_versioned(key).await?.map(|v| v.bytes))
    }

    /// The whole value with its version, or `None` when missing.
    pub async fn get_versioned(&self, key: &StoreKey) -> Result<Option<Versioned>, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.get_versioned(&k)).await;
        }
        if let Some(local) = &self.local {
            let got = local.get_whole(key).await?;
            return Ok(got.map(|(bytes, meta)| Versioned { bytes, meta }));
        }
        match self.inner.get(&path_of(key)).await {
            Ok(result) => {
                let meta = key_meta(&result.meta);
                let bytes = result
                    .bytes()
                    .await
                    .map_err(|e| StoreError::from_backend(key, e))?;
                Ok(Some(Versioned { bytes, meta }))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::from_backend(key, e)),
        }
    }

    /// A byte range of a value.
    pub async fn get_range(&self, key: &StoreKey, range: Range<u64>) -> Result<Bytes, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.get_range(&k, range)).await;
        }
        self.inner
            .get_range(&path_of(key), range)
            .await
            .map_err(|e| StoreError::from_backend(key, e))
    }

    /// The last `n` bytes of a value (or all of it when shorter), with its size.
    /// `None` when the key is missing.
    pub async fn get_suffix(
        &self,
        key: &StoreKey,
        n: u64,
    ) -> Result<Option<(Bytes, KeyMeta)>, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.get_suffix(&k, n)).await;
        }
        let options = GetOptions {
            range: Some(GetRange::Suffix(n)),
            ..Default::default()
        };
        match self.inner.get_opts(&path_of(key), options).await {
            Ok(result) => {
                let meta = key_meta(&result.meta);
                let bytes = result
                    .bytes()
                    .await
                    .map_err(|e| StoreError::from_backend(key, e))?;
                Ok(Some((bytes, meta)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(object_store::Error::NotSupported { .. }) => {
                // Azure has no suffix ranges: the size first, then a bounded range.
                let Some(meta) = self.head(key).await? else {
                    return Ok(None);
                };
                let start = meta.size.saturating_sub(n);
                let bytes = if start < meta.size {
                    self.get_range(key, start..meta.size).await?
                } else {
                    Bytes::new()
                };
                Ok(Some((bytes, meta)))
            }
            Err(e) => Err(StoreError::from_backend(key, e)),
        }
    }

    /// Several ranges of one value in one call, so the backend can coalesce them.
    pub async fn get_ranges(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.get_ranges(&k, ranges)).await;
        }
        self.inner
            .get_ranges(&path_of(key), ranges)
            .await
            .map_err(|e| StoreError::from_backend(key, e))
    }

    /// Size and version of a value, `None` when missing.
    pub async fn head(&self, key: &StoreKey) -> Result<Option<KeyMeta>, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.head(&k)).await;
        }
        match self.inner.head(&path_of(key)).await {
            Ok(meta) => Ok(Some(key_meta(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::from_backend(key, e)),
        }
    }

    /// Stream a value or a range of it. A range that starts past the end is
    /// [`StoreError::RangeNotSatisfiable`].
    pub async fn get_with(
        &self,
        key: &StoreKey,
        request: GetRequest,
    ) -> Result<GetResponse, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.get_with(&k, request)).await;
        }
        if let Some(local) = &self.local {
            return local
                .get(key, request.range)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    key: key.to_string(),
                });
        }
        let range = request.range.clone().map(|r| match r {
            StoreRange::Bounded(r) => GetRange::Bounded(r),
            StoreRange::From(o) => GetRange::Offset(o),
            StoreRange::Suffix(n) => GetRange::Suffix(n),
        });
        let options = GetOptions {
            range,
            ..Default::default()
        };
        let result = self.inner.get_opts(&path_of(key), options).await;
        if let (Err(object_store::Error::NotSupported { .. }), Some(StoreRange::Suffix(n))) =
            (&result, &request.range)
        {
            return Box::pin(self.get_suffix_as_bounded(key, *n)).await;
        }
        match result {
            Ok(result) => {
                let meta = key_meta(&result.meta);
                let range = result.range.clone();
                let owned = key.clone();
                let body = match result.payload {
                    // object_store streams local files in 8 KiB reads; serve
                    // them in 1 MiB reads instead, each off the async threads.
                    object_store::GetResultPayload::File(file, _) => {
                        local::file_stream(file, range.clone(), owned)
                    }
                    object_store::GetResultPayload::Stream(stream) => stream
                        .map(move |chunk| chunk.map_err(|e| StoreError::from_backend(&owned, e)))
                        .boxed(),
                };
                Ok(GetResponse { meta, range, body })
            }
            Err(
                e @ (object_store::Error::NotFound { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotModified { .. }),
            ) => Err(StoreError::from_backend(key, e)),
            Err(e) => {
                // Backends report a range past the end differently; check it here.
                if let (Some(r), Some(meta)) = (&request.range, self.head(key).await?) {
                    let start = match r {
                        StoreRange::Bounded(r) => r.start,
                        StoreRange::From(o) => *o,
                        StoreRange::Suffix(_) => 0,
                    };
                    if start >= meta.size {
                        return Err(StoreError::RangeNotSatisfiable {
                            key: key.to_string(),
                            start,
                            end: start,
                            size: meta.size,
                        });
                    }
                }
                Err(StoreError::from_backend(key, e))
            }
        }
    }

    /// A suffix range for stores that cannot read one (Azure): the size by a
    /// HEAD, then the equivalent bounded range.
    async fn get_suffix_as_bounded(
        &self,
        key: &StoreKey,
        n: u64,
    ) -> Result<GetResponse, StoreError> {
        let meta = self.head(key).await?.ok_or_else(|| StoreError::NotFound {
            key: key.to_string(),
        })?;
        if meta.size == 0 {
            let body = futures::stream::empty().boxed();
            return Ok(GetResponse {
                meta,
                range: 0..0,
                body,
            });
        }
        let range = StoreRange::Bounded(meta.size.saturating_sub(n)..meta.size);
        self.get_with(key, GetRequest { range: Some(range) }).await
    }

    /// Ask the store whether `key` still has ETag `e_tag`, without reading it
    /// (a conditional HEAD: `If-None-Match`).
    pub async fn changed_since(&self, key: &StoreKey, e_tag: &str) -> Result<Change, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.changed_since(&k, e_tag)).await;
        }
        let options = GetOptions {
            if_none_match: Some(e_tag.to_string()),
            head: true,
            ..Default::default()
        };
        match self.inner.get_opts(&path_of(key), options).await {
            Ok(result) => Ok(Change::Changed(key_meta(&result.meta))),
            Err(object_store::Error::NotModified { .. }) => Ok(Change::Unchanged),
            Err(object_store::Error::NotFound { .. }) => Ok(Change::Missing),
            Err(e) => Err(StoreError::from_backend(key, e)),
        }
    }

    /// Every key below `prefix` with its size.
    pub async fn list_sizes(&self, prefix: &StoreKey) -> Result<Vec<(StoreKey, u64)>, StoreError> {
        if let Some((m, k)) = self.mount_for(prefix) {
            let name = prefix.as_str().split('/').next().unwrap_or("");
            let inner = Box::pin(m.list_sizes(&k)).await?;
            return Ok(inner
                .into_iter()
                .filter_map(|(key, size)| {
                    StoreKey::new(name)
                        .ok()?
                        .join(key.as_str())
                        .ok()
                        .map(|k| (k, size))
                })
                .collect());
        }
        let path = (!prefix.is_root()).then(|| path_of(prefix));
        let metas: Vec<_> = self
            .inner
            .list(path.as_ref())
            .try_collect()
            .await
            .map_err(|e| StoreError::from_backend(prefix, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|m| StoreKey::new(m.location.as_ref()).ok().map(|k| (k, m.size)))
            .filter(|(k, _)| !is_internal(k.as_str()))
            .collect())
    }

    /// Store a value atomically (readers see the old or the new value, never a mix).
    pub async fn put(&self, key: &StoreKey, value: Bytes) -> Result<Version, StoreError> {
        self.put_with(key, value, PutCondition::Overwrite).await
    }

    /// Store a value atomically under a condition.
    pub async fn put_with(
        &self,
        key: &StoreKey,
        value: Bytes,
        condition: PutCondition,
    ) -> Result<Version, StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.put_with(&k, value, condition)).await;
        }
        if self.read_only {
            return Err(StoreError::ReadOnly {
                what: self.description.clone(),
            });
        }
        if key.is_root() {
            return Err(StoreError::InvalidKey {
                key: String::new(),
                reason: "cannot write the root".to_string(),
            });
        }
        let mode = match condition {
            PutCondition::Overwrite => PutMode::Overwrite,
            PutCondition::Create => PutMode::Create,
            PutCondition::Update(v) => PutMode::Update(UpdateVersion {
                e_tag: v.e_tag,
                version: v.version,
            }),
        };
        let options = PutOptions {
            mode,
            ..Default::default()
        };
        let result = self
            .inner
            .put_opts(&path_of(key), PutPayload::from_bytes(value), options)
            .await
            .map_err(|e| StoreError::from_backend(key, e))?;
        Ok(Version {
            e_tag: result.e_tag,
            version: result.version,
        })
    }

    /// Delete a value; deleting a missing key succeeds.
    pub async fn delete(&self, key: &StoreKey) -> Result<(), StoreError> {
        if let Some((m, k)) = self.mount_for(key) {
            return Box::pin(m.delete(&k)).await;
        }
        if self.read_only {
            return Err(StoreError::ReadOnly {
                what: self.description.clone(),
            });
        }
        match self.inner.delete(&path_of(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StoreError::from_backend(key, e)),
        }
    }

    /// Every key below `prefix` (recursively), as full keys, sorted.
    pub async fn list_recursive(&self, prefix: &StoreKey) -> Result<Vec<StoreKey>, StoreError> {
        let mut keys: Vec<StoreKey> = self
            .list_sizes(prefix)
            .await?
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// One level below `prefix`: the keys and sub-prefixes there, as relative names.
    pub async fn list_dir(&self, prefix: &StoreKey) -> Result<Listing, StoreError> {
        if let Some((m, k)) = self.mount_for(prefix) {
            return Box::pin(m.list_dir(&k)).await;
        }
        let path = (!prefix.is_root()).then(|| path_of(prefix));
        let result = self
            .inner
            .list_with_delimiter(path.as_ref())
            .await
            .map_err(|e| StoreError::from_backend(prefix, e))?;
        let strip = |p: &Path| -> Option<String> {
            let full = p.as_ref();
            let rel = if prefix.is_root() {
                full
            } else {
                full.strip_prefix(prefix.as_str())?.strip_prefix('/')?
            };
            (!rel.is_empty() && !is_internal(full)).then(|| rel.to_string())
        };
        let mut listing = Listing {
            keys: result
                .objects
                .iter()
                .filter_map(|m| strip(&m.location))
                .collect(),
            prefixes: result.common_prefixes.iter().filter_map(strip).collect(),
        };
        if prefix.is_root() {
            listing
                .prefixes
                .extend(self.mounts.iter().map(|(name, _)| name.clone()));
            listing.prefixes.dedup();
        }
        listing.keys.sort();
        listing.prefixes.sort();
        Ok(listing)
    }

    /// Delete every key below `prefix` (and `prefix` itself if it is a key).
    pub async fn delete_prefix(&self, prefix: &StoreKey) -> Result<usize, StoreError> {
        let keys = self.list_recursive(prefix).await?;
        let count = keys.len();
        futures::stream::iter(
            keys.into_iter()
                .map(|k| async move { self.delete(&k).await }),
        )
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
        Ok(count)
    }
}

use futures::StreamExt;

fn is_internal(key: &str) -> bool {
    key == INTERNAL_PREFIX || key.starts_with("__zarrd/")
}

fn key_meta(meta: &object_store::ObjectMeta) -> KeyMeta {
    KeyMeta {
        size: meta.size,
        version: Version {
            e_tag: meta.e_tag.clone(),
            version: meta.version.clone(),
        },
        last_modified: chrono_like::Timestamp::from_millis(meta.last_modified.timestamp_millis()),
    }
}

/// A small timestamp type so the public API does not leak `chrono`.
pub mod chrono_like {
    /// Milliseconds since the Unix epoch, UTC.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub struct Timestamp(i64);

    impl Timestamp {
        pub fn from_millis(ms: i64) -> Self {
            Timestamp(ms)
        }
        pub fn millis(self) -> i64 {
            self.0
        }
        pub fn seconds(self) -> i64 {
            self.0.div_euclid(1000)
        }
    }
}

#[cfg(test)]
mod tests;
