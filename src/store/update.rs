//! Safe read-modify-write of one key when many writers share a store.
//!
//! Two layers, named as the design names them:
//!
//! - **In-process chunk locks** ([`KeyLocks`]): a striped table of async
//!   mutexes keyed by store key, held only around one key's read-modify-write,
//!   so writes to different chunks proceed in parallel and there is no global lock.
//! - **Across processes**, per store kind ([`Coordination`]):
//!   - object stores and memory: **compare-and-swap**: read the value with its
//!     version, put with `PutMode::Update` (or `Create` when it was missing),
//!     and on a conflict re-read and retry with backoff a bounded number of
//!     times, then fail with a conflict. Deletes cannot be conditional there,
//!     so a value that should disappear (a chunk equal to the fill value) is
//!     stored instead.
//!   - local directories: `object_store`'s `LocalFileSystem` cannot do
//!     `PutMode::Update`, so the read-modify-write runs under an **advisory
//!     file lock** (`flock`) on a lock file under `__zarrd/locks/` in the
//!     store root (hidden from listings), the way zarr-python's
//!     ProcessSynchronizer locks chunks. Every zarrd process sharing the
//!     directory takes the same lock.
//!
//! Puts are atomic in every backend (a temporary file renamed into place
//! locally), so a killed writer leaves the old value or the new one.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::{PutCondition, Store, StoreError, StoreKey, Version, Versioned};

/// Striped in-process locks: one async mutex per stripe of keys.
#[derive(Debug)]
pub struct KeyLocks {
    stripes: Vec<Arc<Mutex<()>>>,
}

const STRIPES: usize = 4096;

fn key_hash(key: &str) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
        }
    }
}

impl KeyLocks {
    /// The lock of `key`'s stripe, owned, so that a write can take it
    /// into a task of its own (see [`Updater::store_holding`]).
    async fn lock(&self, key: &str) -> OwnedMutexGuard<()> {
        self.stripes[(key_hash(key) % STRIPES as u64) as usize]
            .clone()
            .lock_owned()
            .await
    }
}

/// How writers in other processes are kept out of one key's read-modify-write.
#[derive(Debug, Clone)]
pub enum Coordination {
    /// Conditional puts (`PutMode::Update` / `Create`), retried on conflict.
    CompareAndSwap,
    /// `flock` on lock files in this directory (local file system stores).
    FileLocks { dir: PathBuf },
    /// None beyond this process: the store is one writer's uncommitted
    /// transaction (an Icechunk session), which no other process sees.
    Session,
}

/// The new value a read-modify-write produces.
#[derive(Debug)]
pub struct Replacement {
    pub bytes: Vec<u8>,
    /// The value only holds the fill value: it may be deleted instead of
    /// stored where deletes are safe.
    pub removable: bool,
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Stored, as this version (what its writer may name in `If-Match`).
    Stored(Version),
    Deleted,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct UpdateStats {
    pub lock_waits: AtomicU64,
    pub lock_wait_micros: AtomicU64,
    pub cas_retries: AtomicU64,
    pub cas_conflicts: AtomicU64,
}

/// A snapshot of [`UpdateStats`], which adds up across stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateTotals {
    pub lock_waits: u64,
    pub lock_wait_micros: u64,
    pub cas_retries: u64,
    pub cas_conflicts: u64,
}

impl UpdateStats {
    pub fn snapshot(&self) -> UpdateTotals {
        use std::sync::atomic::Ordering::Relaxed;
        UpdateTotals {
            lock_waits: self.lock_waits.load(Relaxed),
            lock_wait_micros: self.lock_wait_micros.load(Relaxed),
            cas_retries: self.cas_retries.load(Relaxed),
            cas_conflicts: self.cas_conflicts.load(Relaxed),
        }
    }
}

impl std::ops::Add for UpdateTotals {
    type Output = UpdateTotals;

    fn add(self, o: UpdateTotals) -> UpdateTotals {
        UpdateTotals {
            lock_waits: self.lock_waits + o.lock_waits,
            lock_wait_micros: self.lock_wait_micros + o.lock_wait_micros,
            cas_retries: self.cas_retries + o.cas_retries,
            cas_conflicts: self.cas_conflicts + o.cas_conflicts,
        }
    }
}

/// Coordinates read-modify-writes of keys in one store.
#[derive(Debug)]
pub struct Updater {
    locks: KeyLocks,
    coordination: Coordination,
    max_retries: u32,
    pub stats: UpdateStats,
}

/// Errors an update closure may return, or the store's.
pub trait UpdateError: From<StoreError> + Send {}
impl<E: From<StoreError> + Send> UpdateError for E {}

/// A key's locks while it is written: this process's, and the file lock
/// other processes sharing the directory take.
type Held = (OwnedMutexGuard<()>, Option<FileLock>);

/// What a read-modify-write stores.
enum Change {
    Put(Bytes),
    Delete,
}

/// A held cross-process file lock; released when dropped.
struct FileLock(std::fs::File);

impl FileLock {
    /// Take the lock, waiting off the blocking pool: each try is a short
    /// blocking call, and the waits between tries are async sleeps. A
    /// blocking `flock` would hold a thread of that bounded pool for as long
    /// as another process holds the lock, and enough such waits in two
    /// replicas would end up waiting on each other's writes.
    async fn acquire(dir: PathBuf, key: &str) -> Result<FileLock, StoreError> {
        let name = format!("{:04x}.lock", key_hash(key) % STRIPES as u64);
        let owned = key.to_string();
        let fail = move |e: std::io::Error| StoreError::Backend {
            key: owned.clone(),
            source: object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            },
        };
        let joined = |e: tokio::task::JoinError| StoreError::Backend {
            key: String::new(),
            source: object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            },
        };
        let opened = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(name))?;
            try_lock(file)
        })
        .await
        .map_err(joined)?;
        let mut pause = Duration::from_micros(100);
        let mut attempt = opened.map_err(&fail)?;
        loop {
            match attempt {
                Ok(lock) => return Ok(lock),
                Err(file) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(5));
                    attempt = tokio::task::spawn_blocking(move || try_lock(file))
                        .await
                        .map_err(joined)?
                        .map_err(&fail)?;
                }
            }
        }
    }
}

/// One try at an exclusive `flock` on `file`: the lock, or the file back
/// when another holder has it.
fn try_lock(file: std::fs::File) -> std::io::Result<Result<FileLock, std::fs::File>> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a file descriptor this function owns; LOCK_NB never waits.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Ok(FileLock(file)));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(Err(file)),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking our own descriptor; closing it would release the lock anyway.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl Updater {
    pub fn new(coordination: Coordination) -> Self {
        Updater {
            locks: KeyLocks::default(),
            coordination,
            max_retries: 64,
            stats: UpdateStats::default(),
        }
    }

    pub fn coordination(&self) -> &Coordination {
        &self.coordination
    }

    /// Replace the value at `key` with `update(current)` so that no
    /// concurrent update of the same key is lost. `update` may run more than
    /// once (after a conflict) and must not have side effects. With `blind`,
    /// the new value does not depend on the current one, which is then not read.
    pub async fn update<F, Fut, E>(
        &self,
        store: &Store,
        key: &StoreKey,
        blind: bool,
        update: F,
    ) -> Result<Outcome, E>
    where
        F: Fn(Option<Versioned>) -> Fut,
        Fut: std::future::Future<Output = Result<Replacement, E>>,
        E: UpdateError,
    {
        let started = Instant::now();
        let local = self.locks.lock(key.as_str()).await;
        let waited = started.elapsed();
        if waited > Duration::from_micros(50) {
            self.stats.lock_waits.fetch_add(1, Ordering::Relaxed);
            self.stats
                .lock_wait_micros
                .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
        }
        match &self.coordination {
            Coordination::FileLocks { dir } => {
                let file = FileLock::acquire(dir.clone(), key.as_str()).await?;
                Self::replace(store, key, blind, update, (local, Some(file))).await
            }
            Coordination::Session => Self::replace(store, key, blind, update, (local, None)).await,
            Coordination::CompareAndSwap => {
                let _local = local;
                self.compare_and_swap(store, key, blind, update).await
            }
        }
    }

    /// Read, update and write `key` where no other process can interleave:
    /// `held` are the key's locks.
    async fn replace<F, Fut, E>(
        store: &Store,
        key: &StoreKey,
        blind: bool,
        update: F,
        held: Held,
    ) -> Result<Outcome, E>
    where
        F: Fn(Option<Versioned>) -> Fut,
        Fut: std::future::Future<Output = Result<Replacement, E>>,
        E: UpdateError,
    {
        let current = if blind {
            None
        } else {
            store.get_versioned(key).await?
        };
        let next = update(current).await?;
        let change = if next.removable {
            Change::Delete
        } else {
            Change::Put(Bytes::from(next.bytes))
        };
        Ok(Self::store_holding(store, key, change, held).await?)
    }

    /// Make `change` in a task of its own that keeps `held` (the key's
    /// locks) until the store has answered. A caller may stop waiting
    /// (its client went away, its request timed out) while the write goes
    /// on regardless: a local file is written and renamed on the blocking
    /// pool. Were the locks let go with the caller, the next writer's
    /// read-modify-write would run meanwhile, and the late rename would
    /// replace what that writer stored and acknowledged.
    async fn store_holding(
        store: &Store,
        key: &StoreKey,
        change: Change,
        held: Held,
    ) -> Result<Outcome, StoreError> {
        let (store, key) = (store.clone(), key.clone());
        let named = key.to_string();
        let write = tokio::spawn(async move {
            let done = match change {
                Change::Put(bytes) => store.put(&key, bytes).await.map(Outcome::Stored),
                Change::Delete => store.delete(&key).await.map(|_| Outcome::Deleted),
            };
            drop(held);
            done
        });
        write.await.map_err(|e| StoreError::Backend {
            key: named,
            source: object_store::Error::Generic {
                store: "zarrd",
                source: Box::new(e),
            },
        })?
    }

    /// Delete `key`, if `expected_etag` is given only while it has that ETag.
    /// Under file locks this is atomic; object stores have no conditional
    /// delete, so there the check and the delete are only serialized within
    /// this process.
    pub async fn delete(
        &self,
        store: &Store,
        key: &StoreKey,
        expected_etag: Option<&str>,
    ) -> Result<(), StoreError> {
        let local = self.locks.lock(key.as_str()).await;
        let file = match &self.coordination {
            Coordination::FileLocks { dir } => {
                Some(FileLock::acquire(dir.clone(), key.as_str()).await?)
            }
            Coordination::CompareAndSwap | Coordination::Session => None,
        };
        if let Some(expected) = expected_etag {
            let current = store.head(key).await?.and_then(|m| m.version.e_tag);
            if current.as_deref().map(|t| t.trim_matches('"')) != Some(expected.trim_matches('"')) {
                return Err(StoreError::Precondition {
                    key: key.to_string(),
                });
            }
        }
        Self::store_holding(store, key, Change::Delete, (local, file))
            .await
            .map(|_| ())
    }

    async fn compare_and_swap<F, Fut, E>(
        &self,
        store: &Store,
        key: &StoreKey,
        blind: bool,
        update: F,
    ) -> Result<Outcome, E>
    where
        F: Fn(Option<Versioned>) -> Fut,
        Fut: std::future::Future<Output = Result<Replacement, E>>,
        E: UpdateError,
    {
        let mut backoff = Duration::from_millis(2);
        for attempt in 0..=self.max_retries {
            if blind {
                let next = update(None).await?;
                let version = store.put(key, Bytes::from(next.bytes)).await?;
                return Ok(Outcome::Stored(version));
            }
            let current = store.get_versioned(key).await?;
            let condition = match &current {
                Some(v) => PutCondition::Update(v.meta.version.clone()),
                None => PutCondition::Create,
            };
            let next = update(current).await?;
            match store
                .put_with(key, Bytes::from(next.bytes), condition)
                .await
            {
                Ok(version) => return Ok(Outcome::Stored(version)),
                Err(StoreError::Precondition { .. } | StoreError::AlreadyExists { .. })
                    if attempt < self.max_retries =>
                {
                    self.stats.cas_retries.fetch_add(1, Ordering::Relaxed);
                    // Jittered exponential backoff so retrying writers spread out.
                    let jitter = key_hash(&format!("{key}{attempt}{:?}", Instant::now()))
                        % (backoff.as_micros() as u64 + 1);
                    tokio::time::sleep(backoff / 2 + Duration::from_micros(jitter)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Err(StoreError::Precondition { .. } | StoreError::AlreadyExists { .. }) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.stats.cas_conflicts.fetch_add(1, Ordering::Relaxed);
        Err(StoreError::Conflict {
            key: key.to_string(),
            attempts: self.max_retries + 1,
        }
        .into())
    }
}

/// The shared updater of a store, for callers that hold the store.
pub type SharedUpdater = Arc<Updater>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Waiting for a file lock another holder has must not take a thread of
    /// the blocking pool: with one such thread, other file I/O still runs.
    #[test]
    fn waiting_for_a_file_lock_holds_no_blocking_thread() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let locks = dir.path().join("locks");
        runtime.block_on(async {
            // Another holder: a lock on a descriptor of its own, as another process has.
            let held = FileLock::acquire(locks.clone(), "a/0").await.unwrap();
            let waiter = tokio::spawn(FileLock::acquire(locks.clone(), "a/0"));
            tokio::time::sleep(Duration::from_millis(50)).await;
            let io = tokio::task::spawn_blocking(|| 7);
            let ran = tokio::time::timeout(Duration::from_secs(5), io).await;
            assert_eq!(ran.expect("other file I/O ran").unwrap(), 7);
            assert!(!waiter.is_finished(), "the lock is still held");
            drop(held);
            let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert!(got.expect("the waiter got the lock").unwrap().is_ok());
        });
    }
}
