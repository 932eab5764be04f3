//! The store layer: one [`Store`] over any `object_store` backend, speaking in
//! validated [`StoreKey`]s and typed [`StoreError`]s. Everything the engine and
//! the server read or write goes through here.

mod backends;
mod dir;
mod error;
mod get;
mod icechunk;
mod key;
mod list;
mod pages;
mod read_only;
mod records;
mod references;
pub mod source;
mod transaction;
pub mod update;
mod zip;

use self::icechunk as icechunk_repo;
use self::icechunk as icechunk_session;
use dir::{confined, local, walk};

pub use confined::{Escape, NameTooLong, UploadName};
pub use error::StoreError;
pub use icechunk_repo::{SnapshotEntry, Versions};
pub use key::{node_path, StoreKey};
pub use list::LevelEntry;
pub use transaction::Pending;
pub use update::{Coordination, Outcome, Replacement, Updater};

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

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

/// A value changed less than this long before it was read may change
/// again without its ETag changing: a local file's ETag holds its
/// modification time, which file systems advance in ticks (up to 2 s on
/// FAT; HTTP's `Last-Modified` and nginx's ETags count whole seconds).
/// What is kept of such a value is read again at the next recheck rather
/// than trusted by its ETag, as git treats files changed within its
/// index's timestamp.
pub const SETTLED_AFTER_MS: i64 = 2_000;

impl KeyMeta {
    /// The value can never change: it was read at a snapshot id of an
    /// Icechunk repository (a branch or tag can move; a snapshot cannot).
    pub fn immutable(&self) -> bool {
        self.version
            .version
            .as_deref()
            .is_some_and(|v| v.starts_with(icechunk_repo::PINNED))
    }

    /// Last modified long enough ago ([`SETTLED_AFTER_MS`]) that any
    /// change since shows in its ETag. A modification time further ahead
    /// of this machine's clock than that is a clock that differs (files
    /// unpacked from a machine whose clock ran fast), not a recent change,
    /// and counts as settled: such a value would otherwise be read again
    /// at every recheck for as long as the difference lasts. The rule
    /// assumes the store's clock and this machine's agree within it.
    pub fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let age = now.saturating_sub(self.last_modified.millis());
        self.immutable() || !(-SETTLED_AFTER_MS..SETTLED_AFTER_MS).contains(&age)
    }

    /// The ETag to revalidate what is kept of this value by: `None` (read
    /// it again at the next recheck) when there is none, or when the value
    /// has not [settled](KeyMeta::settled).
    pub fn trusted_e_tag(&self) -> Option<String> {
        self.version.e_tag.clone().filter(|_| self.settled())
    }
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

/// One level of a listing with each value's metadata.
#[derive(Debug, Clone, Default)]
pub struct DirValues {
    /// Values directly below the prefix, as names relative to it.
    pub values: Vec<(String, KeyMeta)>,
    /// Sub-prefixes directly below the prefix, as names relative to it.
    pub prefixes: Vec<String>,
}

/// Whether request entity tags (`*` or a list, unquoted) match a stored
/// ETag: the comparison of every conditional read and write.
pub fn etags_match(tags: &[String], stored: Option<&str>) -> bool {
    let stored = stored.map(|t| t.trim_matches('"'));
    tags.iter()
        .any(|t| (t == "*" && stored.is_some()) || Some(t.as_str()) == stored)
}

/// Prefix of keys the server keeps for itself (lock files); hidden from listings.
pub const INTERNAL_PREFIX: &str = "__zarrd";

/// A Zarr store over an `object_store` backend.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    description: String,
    updater: Arc<Updater>,
    /// Its backend refuses writes (wrapped in `ReadOnly`): HTTP and zip
    /// stores, read-only mounts.
    read_only: bool,
    /// Stores mounted under top-level names (`era5/...` reads the `era5` mount).
    mounts: Arc<Vec<(String, Store)>>,
    /// Reads that bypass object_store for a local directory (fewer thread hops).
    local: Option<local::LocalReads>,
    /// The repository, when this store is an Icechunk repository.
    repo: Option<Arc<icechunk_repo::Repo>>,
    /// Writes to its branches become commits (see [`Store::begin`]); not
    /// when mounted read-only.
    commits: bool,
    /// Its backend lists in key order (directories, memory, S3, GCS and
    /// Azure do), so a page of a listing stops at the page's end.
    ordered_listing: bool,
    /// The backend's own paged listings of one level (S3, GCS, Azure).
    pages: Option<Arc<pages::LevelPages>>,
}

/// The object_store path of a key: the key as it is, so that objects and
/// files carry the key's own (Unicode) name and other clients of the bucket
/// or directory see the same names. Keys are validated (no control
/// characters, no empty, `.` or `..` segments), which is all `parse` refuses.
fn path_of(key: &StoreKey) -> Path {
    Path::parse(key.as_str()).unwrap_or_else(|_| Path::from(key.as_str()))
}

/// The key a listed location names; `None` when it is not a valid key.
fn key_of(location: &Path) -> Option<StoreKey> {
    StoreKey::new(location.as_ref()).ok()
}

/// Refuse keys in the server's own folder, at the root of every store.
fn reserved(key: &StoreKey) -> Result<(), StoreError> {
    if is_internal(key.as_str()) {
        return Err(StoreError::InvalidKey {
            key: key.to_string(),
            reason: format!("'{INTERNAL_PREFIX}/' is reserved for the server's lock files"),
        });
    }
    Ok(())
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
            repo: None,
            commits: false,
            ordered_listing: false,
            pages: None,
        }
    }

    /// List levels a page at a time through `list`, the paged listing of
    /// the bucket this store's objects are in, from `root` (where the
    /// store starts in it).
    pub(crate) fn with_level_pages(
        mut self,
        list: Arc<dyn object_store::list::PaginatedListStore>,
        root: &str,
    ) -> Self {
        self.pages = Some(Arc::new(pages::LevelPages::new(list, root)));
        self
    }

    /// A read-only store over the Icechunk repository at `location` (a
    /// directory, `file://` or `s3://` URL). Mounted, it is addressed at a
    /// branch, tag or snapshot as `name@ref`; unnamed, at branch `main`.
    /// Virtual chunks are read from the containers the repository declares
    /// under `virtual_chunks` (URL prefixes or folders; none: no virtual
    /// chunks).
    pub async fn icechunk(location: &str, virtual_chunks: &[String]) -> Result<Store, StoreError> {
        let repo = Arc::new(icechunk_repo::Repo::open(location, virtual_chunks).await?);
        let mut store = Store::with_coordination(
            Arc::new(read_only::ReadOnly::new(
                repo.clone(),
                icechunk_repo::READ_ONLY,
            )),
            format!("icechunk+{location}"),
            Coordination::CompareAndSwap,
        );
        // Its keys refuse writes; writes through the engine become commits.
        store.read_only = true;
        store.repo = Some(repo);
        store.commits = true;
        Ok(store)
    }

    /// Branches, tags and recent snapshots of the Icechunk repository at
    /// `path` (a mount's name, or the root), newest snapshots first.
    pub async fn versions(&self, path: &StoreKey, limit: usize) -> Result<Versions, StoreError> {
        let store = if path.is_root() {
            self
        } else {
            self.mounts
                .iter()
                .find(|(name, _)| name == path.as_str())
                .map(|(_, s)| s)
                .ok_or_else(|| StoreError::NotFound {
                    key: path.to_string(),
                })?
        };
        match &store.repo {
            Some(repo) => repo.versions(limit).await,
            None => Err(StoreError::NotSupported {
                what: format!("versions of '{path}', which is not an Icechunk repository"),
            }),
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
        let mut store = Store::new(
            Arc::new(object_store::memory::InMemory::new()),
            "memory://".to_string(),
        );
        store.ordered_listing = true;
        store
    }

    /// A directory on the local file system, created if missing. Symbolic
    /// links are followed only while they stay inside it.
    pub fn local(dir: &std::path::Path) -> Result<Self, StoreError> {
        let bad = |e: std::io::Error| StoreError::BadUrl {
            url: dir.display().to_string(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(bad)?;
        let confined = Arc::new(confined::ConfinedDir::new(dir).map_err(bad)?);
        // LocalFileSystem cannot put conditionally: writers lock files instead.
        let coordination = Coordination::FileLocks {
            dir: dir.join(INTERNAL_PREFIX).join("locks"),
        };
        let mut store = Store::with_coordination(
            Arc::new(confined::Confined(confined.clone())),
            format!("file://{}", dir.display()),
            coordination,
        );
        store.local = Some(local::LocalReads::new(confined));
        store.ordered_listing = true;
        Ok(store)
    }

    /// Keep the files of local directories (this store's and its mounts')
    /// open between reads for `ttl`, `None` meaning until this server
    /// changes them: what `--recheck-cached` allows for cached values.
    pub fn keep_files_open(&self, ttl: Option<std::time::Duration>) {
        if let Some(local) = &self.local {
            local.keep_files_open(ttl);
        }
        for (_, mount) in self.mounts.iter() {
            mount.keep_files_open(ttl);
        }
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
            // `.ozx`: zipped OME-Zarr (RFC-9), a zip with the hierarchy at its root.
            .is_some_and(|e| e.eq_ignore_ascii_case("zip") || e.eq_ignore_ascii_case("ozx"))
            && path.is_file()
        {
            // A zip file as zarr-python's ZipStore writes it: read-only.
            let zip = zip::ZipStore::open(path)?;
            let what = format!("zip://{location}");
            let mut store = Store::with_coordination(
                Arc::new(read_only::ReadOnly::new(Arc::new(zip), what.clone())),
                what,
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

    /// Writes through the engine become commits (an Icechunk repository
    /// at the root, mounted writable).
    pub fn takes_commits(&self) -> bool {
        self.commits
    }

    /// This store, refusing every write (its backend wrapped in `ReadOnly`).
    pub fn into_read_only(mut self) -> Self {
        self.commits = false;
        if !self.read_only {
            self.inner = Arc::new(read_only::ReadOnly::over(
                self.inner.clone(),
                self.description.clone(),
            ));
            self.read_only = true;
        }
        self
    }

    /// `root` with `mounts` under top-level names: `name/key` is `key` in
    /// that store. A read-only mount refuses writes.
    pub fn with_mounts(
        mut root: Store,
        mounts: Vec<(String, Store, bool)>,
    ) -> Result<Store, StoreError> {
        let mut table = Vec::new();
        for (name, store, read_only) in mounts {
            let key = StoreKey::new(&name)?;
            if name.contains('/') || key.is_root() || is_internal(&name) {
                return Err(StoreError::InvalidKey {
                    key: name,
                    reason: "a mount name is one path segment".into(),
                });
            }
            let store = if read_only {
                store.into_read_only()
            } else {
                store
            };
            table.push((name, store));
        }
        root.mounts = Arc::new(table);
        Ok(root)
    }

    /// The mount name, the version (`name@ref`) and the rest of a key whose
    /// first segment may name a mount.
    fn mount_parts<'k>(&self, key: &'k StoreKey) -> Option<(&'k str, Option<&'k str>, &'k str)> {
        if self.mounts.is_empty() {
            return None;
        }
        let (first, rest) = key.as_str().split_once('/').unwrap_or((key.as_str(), ""));
        Some(match first.split_once('@') {
            Some((name, version)) if !version.is_empty() => (name, Some(version), rest),
            _ => (first, None, rest),
        })
    }

    /// The mounted store and the key within it, when `key` is below a mount.
    fn mount_for(&self, key: &StoreKey) -> Option<(&Store, StoreKey)> {
        let (name, version, rest) = self.mount_parts(key)?;
        let (_, store) = self.mounts.iter().find(|(n, _)| n == name)?;
        let inner = match version {
            None => rest.to_string(),
            Some(_) if store.repo.is_none() => return None,
            Some(v) if rest.is_empty() => format!("{}/{v}", icechunk_repo::VERSION_FOLDER),
            Some(v) => format!("{}/{v}/{rest}", icechunk_repo::VERSION_FOLDER),
        };
        Some((
            store,
            StoreKey::new(&inner).unwrap_or_else(|_| StoreKey::root()),
        ))
    }

    /// The store that holds `key` (this one or a mount) and the key within
    /// it. Every operation on a key goes through here, so the server's own
    /// folder is refused at the root of every store, mounts included.
    fn route<'a>(
        &'a self,
        key: &'a StoreKey,
    ) -> Result<(&'a Store, Cow<'a, StoreKey>), StoreError> {
        reserved(key)?;
        self.versions_named_right(key)?;
        match self.mount_for(key) {
            Some((mount, inner)) => {
                reserved(&StoreKey::new(icechunk_repo::zarr_key(inner.as_str()))?)?;
                Ok((mount, Cow::Owned(inner)))
            }
            None => Ok((self, Cow::Borrowed(key))),
        }
    }

    /// In an Icechunk mount, a version is named after `@`, never empty,
    /// and never as the folder the store keeps versions in.
    fn versions_named_right(&self, key: &StoreKey) -> Result<(), StoreError> {
        let bad = |reason: &str| {
            Err(StoreError::InvalidKey {
                key: key.to_string(),
                reason: reason.to_string(),
            })
        };
        let first = key.as_str().split('/').next().unwrap_or_default();
        if let Some(name) = first.strip_suffix('@') {
            if self
                .mounts
                .iter()
                .any(|(n, m)| n == name && m.repo.is_some())
            {
                return bad("the version after '@' is empty");
            }
        }
        let versioned = match self.mount_parts(key) {
            Some((name, _, rest)) => self
                .mounts
                .iter()
                .any(|(n, m)| n == name && m.repo.is_some())
                .then_some(rest),
            None => None,
        };
        if versioned
            .is_some_and(|rest| rest.split('/').next() == Some(icechunk_repo::VERSION_FOLDER))
        {
            return bad("versions are named as {mount}@{branch, tag or snapshot id}");
        }
        Ok(())
    }

    fn path(&self, key: &StoreKey) -> Path {
        path_of(key)
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
        let (store, key) = self.route(key)?;
        store.updater.update(store, &key, blind, update).await
    }

    /// Delete `key` if it still has `expected_etag` (see [`Updater::delete`]).
    pub async fn delete_if(
        &self,
        key: &StoreKey,
        expected_etag: Option<&str>,
    ) -> Result<(), StoreError> {
        let (store, key) = self.route(key)?;
        store.updater.delete(store, &key, expected_etag).await
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn backend(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
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
        let (store, key) = self.route(key)?;
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
        let result = store
            .inner
            .put_opts(&store.path(&key), PutPayload::from_bytes(value), options)
            .await
            .map_err(|e| StoreError::from_backend(&key, e))?;
        Ok(Version {
            e_tag: result.e_tag,
            version: result.version,
        })
    }

    /// Delete a value; deleting a missing key succeeds.
    pub async fn delete(&self, key: &StoreKey) -> Result<(), StoreError> {
        let (store, key) = self.route(key)?;
        match store.inner.delete(&store.path(&key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StoreError::from_backend(&key, e)),
        }
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
mod suite;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod settle_tests {
    use super::*;

    /// A value is trusted by its ETag once it was last modified 2 s or more
    /// before now; a time further ahead than that is a clock that differs.
    #[test]
    fn values_settle_two_seconds_after_their_last_change() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let at = |offset: i64, version: Option<&str>| KeyMeta {
            size: 1,
            version: Version {
                e_tag: Some("\"t\"".into()),
                version: version.map(str::to_string),
            },
            last_modified: chrono_like::Timestamp::from_millis(now + offset),
        };
        assert!(at(-60_000, None).settled());
        assert!(at(-2_500, None).settled());
        assert!(!at(-500, None).settled(), "changed just now");
        assert!(!at(1_000, None).settled(), "within the clocks' margin");
        assert!(at(3_600_000, None).settled(), "a clock that runs ahead");
        assert_eq!(at(-500, None).trusted_e_tag(), None);
        assert_eq!(at(-60_000, None).trusted_e_tag().as_deref(), Some("\"t\""));
        let pinned = format!("{}snapshot", icechunk_repo::PINNED);
        assert!(
            at(-500, Some(&pinned)).settled(),
            "a snapshot never changes"
        );
    }
}
