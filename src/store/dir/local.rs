//! Reads from a local directory in as few trips to the blocking pool as
//! possible. object_store's `LocalFileSystem` opens and stats a file in one
//! trip and reads it in more (8 KiB at a time when streamed); on a busy
//! server each trip is a thread wake-up and two context switches, which cost
//! more than reading a small key. Here a read opens, stats and reads its
//! first block in one trip, and streams the rest 1 MiB at a time; with files
//! kept open ([`super::open_files`]), raw reads take blocks the page cache
//! holds without any trip. Reads that load caches or decide writes always
//! open the file as it is now, and on a local file system do that without
//! a trip too when the kernel has the path cached
//! ([`ConfinedDir::open_read_at_once`]): with `--recheck-cached always`,
//! every read of a cached value opens its file to compare versions, and the
//! trip cost more than the open.
//!
//! Metadata (ETag, size, modification time) is computed exactly as
//! `LocalFileSystem` computes it, so versions seen here and through
//! object_store (conditional requests, cache revalidation) agree; a test
//! holds the two to each other.

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::GetRange;

use super::confined::{Attempt, ConfinedDir};
use super::open_files::read_cached;
pub(in crate::store) use super::open_files::OpenFile;
use crate::store::chrono_like::Timestamp;
use crate::store::{
    path_of, Change, GetResponse, KeyMeta, StoreError, StoreKey, StoreRange, Version, Versioned,
};

/// How much one trip to the blocking pool reads.
const BLOCK: u64 = 1 << 20;

/// Files one call opens on the async thread at most before handing the
/// rest to the blocking pool: each is a few microseconds, and a read of
/// many small chunks should not hold the thread other requests need.
const AT_ONCE_FILES: usize = 16;

/// A file opened for a read: the handle, the range it serves, and the
/// first block of that range.
type Opened = (Arc<OpenFile>, Range<u64>, Bytes);

/// Reads of one local directory, confined to it as every other access is.
#[derive(Debug, Clone)]
pub(in crate::store) struct LocalReads {
    dir: Arc<ConfinedDir>,
}

impl LocalReads {
    pub(in crate::store) fn new(dir: Arc<ConfinedDir>) -> Self {
        LocalReads { dir }
    }

    /// Up to `limit` files and folders directly below `key`, in key order
    /// after `offset` (relative to the folder): see
    /// [`ConfinedDir::list_level`].
    pub(in crate::store) async fn list_level(
        &self,
        key: &StoreKey,
        offset: Option<String>,
        limit: usize,
    ) -> Result<Vec<super::walk::Found<object_store::ObjectMeta>>, StoreError> {
        let (dir, prefix) = (self.dir.clone(), (!key.is_root()).then(|| path_of(key)));
        tokio::task::spawn_blocking(move || dir.list_level(prefix.as_ref(), offset, limit))
            .await
            .map_err(|e| io_error(key, std::io::Error::other(e)))?
            .map_err(|e| StoreError::from_backend(key, e))
    }

    fn path(&self, key: &StoreKey) -> Result<PathBuf, StoreError> {
        // The location is the key itself (see `path_of`).
        self.dir
            .key_path(key.as_str())
            .unwrap_or_else(|| self.dir.file_path(&path_of(key)))
            .map_err(|e| StoreError::from_backend(key, e))
    }

    /// Whether `other` reads the same directory.
    pub(in crate::store) fn same_dir(&self, other: &LocalReads) -> bool {
        Arc::ptr_eq(&self.dir, &other.dir)
    }

    /// Keep files open between reads for `ttl` (see [`super::open_files`]).
    pub(in crate::store) fn keep_files_open(&self, ttl: Option<std::time::Duration>) {
        self.dir.open_files.enable(ttl);
    }

    /// The file at `key`, open: kept open from an earlier read, or opened
    /// now on the blocking pool (and kept when files are kept open).
    /// `None` when it does not exist or is a directory.
    async fn open(&self, key: &StoreKey) -> Result<Option<Arc<OpenFile>>, StoreError> {
        // The location is the key itself (see `path_of`).
        if let Some(open) = self.dir.open_files.get(key.as_str()) {
            return Ok(Some(open));
        }
        Ok(self
            .open_now(key, None, 0)
            .await?
            .map(|(opened, _, _)| opened))
    }

    /// Open the file as it is now and read the first `first_block` bytes of
    /// `range`: on this thread when the kernel can open it without waiting
    /// and the page cache holds those bytes, else in one trip to the
    /// blocking pool. The file is kept open for later reads when files are
    /// kept open.
    async fn open_now(
        &self,
        key: &StoreKey,
        range: Option<StoreRange>,
        first_block: u64,
    ) -> Result<Option<Opened>, StoreError> {
        let path = self.path(key)?;
        if let Attempt::Done(opened) = open_keeping_at_once(&self.dir, key, &path)? {
            let Some(opened) = opened else {
                return Ok(None);
            };
            let range = match range {
                None => 0..opened.meta.size,
                Some(r) => resolve(key, r, opened.meta.size)?,
            };
            let len = (range.end - range.start).min(first_block) as usize;
            let first = read_block(opened.clone(), range.start, len, key).await?;
            return Ok(Some((opened, range, first)));
        }
        let (dir, owned) = (self.dir.clone(), key.clone());
        blocking(key, move || {
            open_read_now(&dir, &owned, &path, range, first_block)
        })
        .await
    }

    /// Whole values of the first of `keys`, as the files are now: the
    /// first few on this thread while the kernel can open them without
    /// waiting and the page cache holds them (up to [`BLOCK`] bytes in all),
    /// the rest in one trip to the blocking pool (a window over many small
    /// chunks otherwise pays a thread hand-off per file, more than reading
    /// it). `None` for a missing key. Stops before a file that would take
    /// the bytes read past `budget` (see [`crate::store::Store::get_many`]).
    pub(in crate::store) async fn get_many_whole(
        &self,
        keys: Vec<StoreKey>,
        budget: u64,
    ) -> Result<Vec<Option<Versioned>>, StoreError> {
        let mut values = Vec::with_capacity(keys.len());
        let mut read = 0u64;
        for key in keys.iter().take(AT_ONCE_FILES) {
            let Attempt::Done(opened) = open_keeping_at_once(&self.dir, key, &self.path(key)?)?
            else {
                break;
            };
            let Some(opened) = opened else {
                values.push(None);
                continue;
            };
            let size = opened.meta.size;
            if !values.is_empty() && read.saturating_add(size) > budget {
                return Ok(values);
            }
            if read.saturating_add(size) > BLOCK {
                break;
            }
            let Some(bytes) = read_cached(&opened.file, 0, size as usize) else {
                break;
            };
            read += size;
            values.push(Some(Versioned {
                bytes: Bytes::from(bytes),
                meta: opened.meta.clone(),
            }));
        }
        if values.len() == keys.len() {
            return Ok(values);
        }
        let first_taken = !values.is_empty();
        let rest = keys[values.len()..].to_vec();
        let rest = self
            .on_files(rest, move |dir, keys, paths| {
                let (mut values, mut read) = (Vec::with_capacity(keys.len()), read);
                for (key, path) in keys.iter().zip(paths) {
                    let Some(opened) = open_keeping(dir, key, path)? else {
                        values.push(None);
                        continue;
                    };
                    let size = opened.meta.size;
                    if (first_taken || !values.is_empty()) && read.saturating_add(size) > budget {
                        break;
                    }
                    let bytes =
                        read_at(&opened.file, 0, size as usize).map_err(|e| io_error(key, e))?;
                    read += size;
                    values.push(Some(Versioned {
                        bytes: Bytes::from(bytes),
                        meta: opened.meta.clone(),
                    }));
                }
                Ok(values)
            })
            .await?;
        values.extend(rest);
        Ok(values)
    }

    /// Whether each file still has the ETag given (see
    /// [`crate::store::Store::changed_since_many`]). Files are opened as they are
    /// now and not kept: the first few on this thread while the kernel can
    /// open them without waiting, the rest in one trip to the blocking pool.
    pub(in crate::store) async fn changed_since_many(
        &self,
        keys: Vec<StoreKey>,
        e_tags: Vec<Option<String>>,
    ) -> Result<Vec<Change>, StoreError> {
        fn change(now: Option<OpenFile>, e_tag: &Option<String>) -> Change {
            match now {
                None => Change::Missing,
                Some(now)
                    if now.meta.version.e_tag.is_some() && now.meta.version.e_tag == *e_tag =>
                {
                    Change::Unchanged
                }
                Some(now) => Change::Changed(now.meta),
            }
        }
        let mut done = Vec::with_capacity(keys.len());
        for (key, e_tag) in keys.iter().zip(&e_tags).take(AT_ONCE_FILES) {
            match open_file_at_once(&self.dir, key, &self.path(key)?)? {
                Attempt::Done(now) => done.push(change(now, e_tag)),
                Attempt::WouldBlock => break,
            }
        }
        if done.len() == keys.len() {
            return Ok(done);
        }
        let (keys, e_tags) = (keys[done.len()..].to_vec(), e_tags[done.len()..].to_vec());
        let rest = self
            .on_files(keys, move |dir, keys, paths| {
                keys.iter()
                    .zip(paths)
                    .zip(&e_tags)
                    .map(|((key, path), e_tag)| Ok(change(open_file(dir, key, path)?, e_tag)))
                    .collect::<Result<Vec<_>, StoreError>>()
            })
            .await?;
        done.extend(rest);
        Ok(done)
    }

    /// Run `work` on the files of `keys` (their paths in this directory)
    /// in one trip to the blocking pool; no trip for no keys.
    async fn on_files<T: Default + Send + 'static>(
        &self,
        keys: Vec<StoreKey>,
        work: impl FnOnce(&ConfinedDir, &[StoreKey], &[PathBuf]) -> Result<T, StoreError>
            + Send
            + 'static,
    ) -> Result<T, StoreError> {
        let Some(first) = keys.first().cloned() else {
            return Ok(T::default());
        };
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<_>, _>>()?;
        let dir = self.dir.clone();
        blocking(&first, move || work(&dir, &keys, &paths)).await
    }

    /// Open the file (a kept one when `kept_ok`) and read the first block of
    /// `range`. A kept file that fails to read (replaced on a network file
    /// system, truncated in place) is dropped and the file opened anew.
    async fn open_and_read(
        &self,
        key: &StoreKey,
        range: Option<StoreRange>,
        first_block: u64,
        kept_ok: bool,
    ) -> Result<Option<Opened>, StoreError> {
        if let Some(kept) = kept_ok
            .then(|| self.dir.open_files.get(key.as_str()))
            .flatten()
        {
            let range = match range.clone() {
                None => 0..kept.meta.size,
                Some(r) => resolve(key, r, kept.meta.size)?,
            };
            let len = (range.end - range.start).min(first_block) as usize;
            match read_block(kept.clone(), range.start, len, key).await {
                Ok(first) => return Ok(Some((kept, range, first))),
                Err(_) => self.dir.open_files.forget_stale(key.as_str(), &kept),
            }
        }
        self.open_now(key, range, first_block).await
    }

    /// Ranges of the version of the value whose ETag is `e_tag`, read
    /// through one open file: a rename that replaces the file meanwhile
    /// does not change what this handle reads.
    pub(in crate::store) async fn get_ranges_at(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
        e_tag: &str,
    ) -> Result<Vec<Bytes>, StoreError> {
        let wanted = e_tag.trim_matches('"');
        let gone = || StoreError::Precondition {
            key: key.to_string(),
        };
        let mut opened = self.open(key).await?.ok_or_else(gone)?;
        if etag_of(&opened.meta) != Some(wanted) {
            // A file kept open may be older than the version asked for.
            self.dir.open_files.forget_stale(key.as_str(), &opened);
            opened = self.open(key).await?.ok_or_else(gone)?;
            if etag_of(&opened.meta) != Some(wanted) {
                return Err(gone());
            }
        }
        let size = opened.meta.size;
        for r in ranges {
            if r.end > size || r.start > r.end {
                return Err(StoreError::RangeNotSatisfiable {
                    key: key.to_string(),
                    start: r.start,
                    end: r.end,
                    size,
                });
            }
        }
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        if total <= BLOCK {
            let inline: Option<Vec<Bytes>> = ranges
                .iter()
                .map(|r| {
                    read_cached(&opened.file, r.start, (r.end - r.start) as usize).map(Bytes::from)
                })
                .collect();
            if let Some(read) = inline {
                return Ok(read);
            }
        }
        let (owned, ranges) = (key.clone(), ranges.to_vec());
        blocking(key, move || {
            ranges
                .iter()
                .map(|r| {
                    read_at(&opened.file, r.start, (r.end - r.start) as usize)
                        .map(Bytes::from)
                        .map_err(|e| io_error(&owned, e))
                })
                .collect()
        })
        .await
    }

    /// The value (or a range of it) as a stream of blocks, from a file kept
    /// open when there is one (what a raw GET serves: as fresh as
    /// `--recheck-cached` allows). `None` when the key is missing.
    pub(in crate::store) async fn get(
        &self,
        key: &StoreKey,
        range: Option<StoreRange>,
    ) -> Result<Option<GetResponse>, StoreError> {
        let Some((opened, range, first)) = self.open_and_read(key, range, BLOCK, true).await?
        else {
            return Ok(None);
        };
        let meta = opened.meta.clone();
        let rest = (range.start + first.len() as u64)..range.end;
        let head = futures::stream::once(async move { Ok(first) });
        let body = if rest.is_empty() {
            head.boxed()
        } else {
            head.chain(file_stream(opened, rest, key.clone())).boxed()
        };
        Ok(Some(GetResponse { meta, range, body }))
    }

    /// The whole value with its metadata, as the file is now: these reads
    /// load cache entries and decide read-modify-writes, which must not
    /// start from a file another process has since replaced. `None` when
    /// missing.
    pub(in crate::store) async fn get_whole(
        &self,
        key: &StoreKey,
    ) -> Result<Option<(Bytes, KeyMeta)>, StoreError> {
        Ok(self
            .open_now(key, None, u64::MAX)
            .await?
            .map(|(opened, _, bytes)| (bytes, opened.meta.clone())))
    }

    /// The last `n` bytes of the file as it is now (all of it when
    /// shorter), with its size and version, in one trip to the blocking
    /// pool. `None` when missing.
    pub(in crate::store) async fn get_suffix(
        &self,
        key: &StoreKey,
        n: u64,
    ) -> Result<Option<(Bytes, KeyMeta)>, StoreError> {
        Ok(self
            .open_now(key, Some(StoreRange::Suffix(n)), u64::MAX)
            .await?
            .map(|(opened, _, bytes)| (bytes, opened.meta.clone())))
    }
}

/// Open the file at `path` as it is now and read the first `first_block`
/// bytes of `range`; the file is kept open for later reads when files are
/// kept open. Blocking.
fn open_read_now(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
    range: Option<StoreRange>,
    first_block: u64,
) -> Result<Option<Opened>, StoreError> {
    let Some(opened) = open_keeping(dir, key, path)? else {
        return Ok(None);
    };
    let range = match range {
        None => 0..opened.meta.size,
        Some(r) => resolve(key, r, opened.meta.size)?,
    };
    let len = (range.end - range.start).min(first_block) as usize;
    let first = read_at(&opened.file, range.start, len).map_err(|e| io_error(key, e))?;
    Ok(Some((opened, range, Bytes::from(first))))
}

/// Open the file as it is now and keep it open for raw reads. Blocking.
fn open_keeping(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
) -> Result<Option<Arc<OpenFile>>, StoreError> {
    let ticket = dir.open_files.ticket(key.as_str());
    Ok(keep(dir, key, open_file(dir, key, path)?, ticket))
}

/// [`open_keeping`] when the kernel can open the file without waiting.
fn open_keeping_at_once(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
) -> Result<Attempt<Option<Arc<OpenFile>>>, StoreError> {
    let ticket = dir.open_files.ticket(key.as_str());
    Ok(match open_file_at_once(dir, key, path)? {
        Attempt::Done(opened) => Attempt::Done(keep(dir, key, opened, ticket)),
        Attempt::WouldBlock => Attempt::WouldBlock,
    })
}

/// Remember a file opened after `ticket` for raw reads (see
/// [`super::open_files::OpenFiles::remember`]).
fn keep(
    dir: &ConfinedDir,
    key: &StoreKey,
    opened: Option<OpenFile>,
    ticket: u64,
) -> Option<Arc<OpenFile>> {
    let opened = Arc::new(opened?);
    dir.open_files
        .remember(key.as_str().to_string(), opened.clone(), ticket);
    Some(opened)
}

fn etag_of(meta: &KeyMeta) -> Option<&str> {
    meta.version.e_tag.as_deref().map(|t| t.trim_matches('"'))
}

/// Open `path` and take its size and version. Blocking.
fn open_file(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
) -> Result<Option<OpenFile>, StoreError> {
    // A missing file, or a path through a file ("a/b" where "a" is a value), is `None`.
    let opened = match dir.open_read(path) {
        // Out of file descriptors: the ones kept open go first.
        Err(e) if out_of_descriptors(&e) => {
            dir.open_files.close_all();
            dir.open_read(path)
        }
        other => other,
    };
    let Some(file) = opened.map_err(|e| StoreError::from_backend(key, e))? else {
        return Ok(None);
    };
    with_meta(key, file)
}

/// [`open_file`] on this thread when the kernel can do it without waiting
/// (see [`ConfinedDir::open_read_at_once`]; `fstat` of a file so opened
/// reads memory only).
fn open_file_at_once(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
) -> Result<Attempt<Option<OpenFile>>, StoreError> {
    match dir
        .open_read_at_once(path)
        .map_err(|e| StoreError::from_backend(key, e))?
    {
        Attempt::Done(Some(file)) => Ok(Attempt::Done(with_meta(key, file)?)),
        Attempt::Done(None) => Ok(Attempt::Done(None)),
        Attempt::WouldBlock => Ok(Attempt::WouldBlock),
    }
}

/// An open file with its size and version; `None` for anything but a
/// regular file: a directory, and a FIFO or a device, whose reads would
/// wait or never end.
fn with_meta(key: &StoreKey, file: File) -> Result<Option<OpenFile>, StoreError> {
    let metadata = file.metadata().map_err(|e| io_error(key, e))?;
    if !metadata.is_file() {
        return Ok(None);
    }
    let meta = key_meta(&metadata);
    Ok(Some(OpenFile { file, meta }))
}

fn out_of_descriptors(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        }
        source = err.source();
    }
    false
}

/// `len` bytes at `offset`: in place when the page cache holds them and
/// the block is small, else on the blocking pool.
async fn read_block(
    opened: Arc<OpenFile>,
    offset: u64,
    len: usize,
    key: &StoreKey,
) -> Result<Bytes, StoreError> {
    if len as u64 <= BLOCK {
        if let Some(buf) = read_cached(&opened.file, offset, len) {
            return Ok(Bytes::from(buf));
        }
    }
    let owned = key.clone();
    blocking(key, move || {
        read_at(&opened.file, offset, len)
            .map(Bytes::from)
            .map_err(|e| io_error(&owned, e))
    })
    .await
}

/// A requested range against the value's length, as object_store resolves it.
fn resolve(key: &StoreKey, range: StoreRange, size: u64) -> Result<Range<u64>, StoreError> {
    let get = match range {
        StoreRange::Bounded(r) => GetRange::Bounded(r),
        StoreRange::From(o) => GetRange::Offset(o),
        StoreRange::Suffix(n) => GetRange::Suffix(n),
    };
    get.as_range(size).map_err(|_| {
        let start = match get {
            GetRange::Bounded(r) => r.start,
            GetRange::Offset(o) => o,
            GetRange::Suffix(_) => 0,
        };
        StoreError::RangeNotSatisfiable {
            key: key.to_string(),
            start,
            end: start,
            size,
        }
    })
}

/// Exactly `len` bytes at `offset`, read into a buffer that is not zeroed
/// first (for a multi-megabyte chunk, zeroing costs as much as the read).
/// Positioned reads only: an open file is shared by concurrent readers, so
/// its seek offset belongs to none of them.
fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        let at = i64::try_from(at).map_err(std::io::Error::other)?;
        let want = len - buf.len();
        let spare = &mut buf.spare_capacity_mut()[..want];
        // SAFETY: the kernel writes at most `spare.len()` bytes into spare capacity.
        let n =
            unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("file ended {} bytes early", len - buf.len()),
            ));
        }
        // SAFETY: `n` more bytes were written.
        unsafe { buf.set_len(buf.len() + n as usize) };
    }
    Ok(buf)
}

/// Size, ETag and modification time, computed as `LocalFileSystem` does.
fn key_meta(metadata: &Metadata) -> KeyMeta {
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let (inode, size) = (metadata.ino(), metadata.len());
    KeyMeta {
        size,
        version: Version {
            e_tag: Some(format!("\"{inode:x}-{:x}-{size:x}\"", mtime.as_micros())),
            version: None,
        },
        last_modified: Timestamp::from_millis(mtime.as_millis() as i64),
    }
}

/// Run file I/O on the blocking pool.
async fn blocking<T: Send + 'static>(
    key: &StoreKey,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io_error(key, std::io::Error::other(e)))?
}

fn io_error(key: &StoreKey, e: std::io::Error) -> StoreError {
    StoreError::Backend {
        key: key.to_string(),
        source: object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(e),
        },
    }
}

/// A file object_store's local backend handed over (its
/// `GetResultPayload::File`), `range` of it 1 MiB at a time: object_store
/// would stream it in 8 KiB reads, each a trip to the blocking pool (a
/// 1 MiB chunk: 128 trips, and as many threads started under load).
pub(in crate::store) fn handed_file_stream(
    file: std::fs::File,
    meta: KeyMeta,
    range: Range<u64>,
    key: StoreKey,
) -> BoxStream<'static, Result<Bytes, StoreError>> {
    file_stream(Arc::new(OpenFile { file, meta }), range, key)
}

/// Bytes of an open file in `range`, 1 MiB at a time: from the page cache
/// in place when it holds them, else on the blocking pool.
pub(in crate::store) fn file_stream(
    file: Arc<OpenFile>,
    range: Range<u64>,
    key: StoreKey,
) -> BoxStream<'static, Result<Bytes, StoreError>> {
    futures::stream::try_unfold(range.start, move |at| {
        let (file, key, end) = (file.clone(), key.clone(), range.end);
        async move {
            if at >= end {
                return Ok(None);
            }
            let len = (end - at).min(BLOCK) as usize;
            let buf = read_block(file, at, len, &key).await?;
            Ok(Some((buf, at + len as u64)))
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_sockets_are_no_values_and_opening_them_waits_for_nothing() {
        let root = tempfile::tempdir().unwrap();
        let fifo = root.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(root.path().join("socket")).unwrap();
        std::fs::write(root.path().join("v"), "value").unwrap();
        let dir = Arc::new(ConfinedDir::new(root.path()).unwrap());
        let at_once = super::super::confined::opens_at_once(&dir);
        let (tx, rx) = std::sync::mpsc::channel();
        let probe = dir.clone();
        // A thread, so that an open waiting for a writer fails the test
        // instead of hanging it.
        std::thread::spawn(move || {
            let path = |key: &str| {
                probe
                    .file_path(&object_store::path::Path::from(key))
                    .unwrap()
            };
            let key = |key: &str| StoreKey::new(key).unwrap();
            let mut seen = Vec::new();
            for name in ["fifo", "socket", "v"] {
                // Looked up once, as the pool would have.
                let pool = open_file(&probe, &key(name), &path(name))
                    .unwrap()
                    .is_some();
                let now = match open_file_at_once(&probe, &key(name), &path(name)).unwrap() {
                    Attempt::Done(Some(_)) => "value",
                    Attempt::Done(None) => "missing",
                    Attempt::WouldBlock => "pool",
                };
                seen.push((name, pool, now));
            }
            tx.send(seen).unwrap();
        });
        let seen = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("no open waits");
        // A socket cannot be opened at all (ENXIO): the pool decides.
        let want = if at_once {
            [
                ("fifo", false, "missing"),
                ("socket", false, "pool"),
                ("v", true, "value"),
            ]
        } else {
            [
                ("fifo", false, "pool"),
                ("socket", false, "pool"),
                ("v", true, "pool"),
            ]
        };
        assert_eq!(seen, want);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_under_a_write_lease_is_read_once_its_holder_lets_go() {
        use std::os::fd::AsRawFd;
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("v");
        std::fs::write(&path, "value").unwrap();
        let dir = ConfinedDir::new(root.path()).unwrap();
        let holder = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let fd = holder.as_raw_fd();
        // The break is signalled to the holder, this process: SIGWINCH,
        // which is ignored, rather than SIGIO, which would end it. (The
        // libc crate does not name F_SETSIG; it is 10 on Linux.)
        const F_SETSIG: libc::c_int = 10;
        // SAFETY: fcntl on a descriptor this test owns.
        unsafe {
            assert_eq!(libc::fcntl(fd, F_SETSIG, libc::SIGWINCH), 0);
            if libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) != 0 {
                // Leases turned off (fs.leases-enable), or not offered by
                // the file system of the temporary directory.
                eprintln!("skipped: no lease: {}", std::io::Error::last_os_error());
                return;
            }
        }
        let key = StoreKey::new("v").unwrap();
        // In place the open would wait: it is left to the pool.
        assert!(matches!(
            open_file_at_once(&dir, &key, &path).unwrap(),
            Attempt::WouldBlock
        ));
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            // SAFETY: as above.
            unsafe { libc::fcntl(holder.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        });
        // The pool's open waits for the lease to be given up, and the
        // file is a value, not a missing key.
        let opened = open_file(&dir, &key, &path).unwrap();
        letting_go.join().unwrap();
        let opened = opened.expect("a leased regular file is a value");
        assert_eq!(opened.meta.size, 5);
    }
}
