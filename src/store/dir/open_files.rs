//! Files of a local directory kept open between reads, as nginx's
//! `open_file_cache` keeps them, and reads served from the page cache
//! without leaving the async thread.
//!
//! A raw GET of a small key or a range otherwise costs an `openat2`, an
//! `fstat`, a read and a `close` on the blocking pool: two thread wake-ups
//! and more system calls than bytes. With the file open and its pages
//! cached, `preadv2(RWF_NOWAIT)` answers at once, or says it would block,
//! and only then does the read go to the pool.
//!
//! An open file goes on reading what it opened: a file replaced by a rename
//! keeps serving its old bytes. Only raw reads use kept files (reads that
//! load caches or decide writes open the file as it is now). Writes through
//! this store forget the files they replace; changes by other processes
//! are seen once an entry is older than the time-to-live, which the server
//! sets from `--recheck-cached` (off when every use is rechecked).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::store::KeyMeta;

/// Files one directory store keeps open at most (each one file
/// descriptor), and at most an eighth of the process's descriptor limit.
const MAX_OPEN: u64 = 4096;

fn max_open() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    MAX_OPEN.min(soft / 8)
}

const STRIPES: usize = 32;

fn stripe(location: &str) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    (hasher.hash_one(location) % STRIPES as u64) as usize
}

/// Longer times to live are treated as none (moka refuses above 1,000 years).
const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// A file as it was opened: the handle and the value's size and version then.
#[derive(Debug)]
pub(in crate::store) struct OpenFile {
    pub file: File,
    pub meta: KeyMeta,
}

/// Open files by location (the key below the directory); empty (and every lookup a miss) until enabled.
#[derive(Default)]
pub(in crate::store) struct OpenFiles {
    cache: OnceLock<moka::sync::Cache<String, Arc<OpenFile>>>,
    /// Counts writes, so that a file opened before a write cannot be
    /// remembered after it (see [`OpenFiles::remember`]); striped by key, so
    /// that steady writes elsewhere do not keep every file from being kept.
    writes: [AtomicU64; STRIPES],
}

impl std::fmt::Debug for OpenFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenFiles")
            .field("enabled", &self.cache.get().is_some())
            .finish()
    }
}

impl OpenFiles {
    /// Keep files open for `ttl` (`None`: until this server changes them or
    /// they are evicted; zero: not at all). The first call wins.
    pub fn enable(&self, ttl: Option<Duration>) {
        if ttl.is_some_and(|t| t.is_zero()) {
            return;
        }
        self.cache.get_or_init(|| {
            let builder = moka::sync::Cache::builder().max_capacity(max_open());
            match ttl.filter(|t| *t <= MAX_TTL) {
                Some(ttl) => builder.time_to_live(ttl).build(),
                None => builder.build(),
            }
        });
    }

    /// Close every file kept open (the process ran out of descriptors).
    pub fn close_all(&self) {
        if let Some(cache) = self.cache.get() {
            cache.invalidate_all();
            cache.run_pending_tasks();
        }
    }

    pub fn get(&self, location: &str) -> Option<Arc<OpenFile>> {
        self.cache.get()?.get(location)
    }

    /// The write count of `location`'s stripe, read before opening a file
    /// that may be remembered.
    pub fn ticket(&self, location: &str) -> u64 {
        self.writes[stripe(location)].load(Ordering::SeqCst)
    }

    /// Remember a file opened after `ticket` was taken, unless a write
    /// happened since: that write may have replaced what was opened.
    pub fn remember(&self, location: String, file: Arc<OpenFile>, ticket: u64) {
        let Some(cache) = self.cache.get() else {
            return;
        };
        cache.insert(location.clone(), file);
        // A writer counts before it forgets: either it forgets this entry,
        // or this check sees its count.
        if self.writes[stripe(&location)].load(Ordering::SeqCst) != ticket {
            cache.invalidate(&location);
        }
    }

    /// Drop `stale` if it is still what is kept for `path` (it turned out
    /// older than a version a reader has seen).
    pub fn forget_stale(&self, location: &str, stale: &Arc<OpenFile>) {
        if let Some(cache) = self.cache.get() {
            // Racing a reader that kept a newer file costs that reader's
            // entry, not correctness.
            if cache
                .get(location)
                .is_some_and(|kept| Arc::ptr_eq(&kept, stale))
            {
                cache.invalidate(location);
            }
        }
    }

    /// The file at `location` was written, replaced or deleted.
    pub fn forget(&self, location: &str) {
        self.writes[stripe(location)].fetch_add(1, Ordering::SeqCst);
        if let Some(cache) = self.cache.get() {
            cache.invalidate(location);
        }
    }
}

/// `len` bytes at `offset` if the page cache holds all of them; `None` when
/// reading would block (or the file system cannot tell), and the caller
/// reads on the blocking pool instead.
pub(in crate::store) fn read_cached(file: &File, offset: u64, len: usize) -> Option<Vec<u8>> {
    let offset = i64::try_from(offset).ok()?;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: the iovec covers the buffer's capacity, which outlives the call.
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
    // Errors (EAGAIN, EOPNOTSUPP) and short reads alike go to the pool.
    if n < 0 || n as usize != len {
        return None;
    }
    // SAFETY: the kernel wrote exactly `len` bytes.
    unsafe { buf.set_len(len) };
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{chrono_like::Timestamp, Version};

    fn open(path: &std::path::Path) -> Arc<OpenFile> {
        Arc::new(OpenFile {
            file: File::open(path).unwrap(),
            meta: KeyMeta {
                size: 0,
                version: Version::default(),
                last_modified: Timestamp::from_millis(0),
            },
        })
    }

    #[test]
    fn cached_pages_are_read_in_place_and_a_read_past_the_end_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = File::open(&path).unwrap();
        // Just written, so in the page cache.
        assert_eq!(read_cached(&file, 2, 4).as_deref(), Some(&b"2345"[..]));
        assert_eq!(read_cached(&file, 8, 4), None);
    }

    #[test]
    fn a_write_between_open_and_remember_keeps_the_file_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        std::fs::write(&path, b"old").unwrap();
        let files = OpenFiles::default();
        files.enable(None);
        let ticket = files.ticket("v");
        let opened = open(&path);
        files.forget("v");
        files.remember("v".into(), opened.clone(), ticket);
        assert!(files.get("v").is_none());
        files.remember("v".into(), opened.clone(), files.ticket("v"));
        assert!(files.get("v").is_some());
        files.forget("v");
        assert!(files.get("v").is_none());
        // Writes to other keys (in another stripe) do not keep it out.
        let other = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| stripe(k) != stripe("v"))
            .unwrap();
        let ticket = files.ticket("v");
        files.forget(&other);
        files.remember("v".into(), opened, ticket);
        assert!(files.get("v").is_some());
    }

    #[test]
    fn nothing_is_kept_until_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        std::fs::write(&path, b"x").unwrap();
        let files = OpenFiles::default();
        files.remember("v".into(), open(&path), files.ticket("v"));
        assert!(files.get("v").is_none());
    }
}
