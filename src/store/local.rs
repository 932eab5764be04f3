//! Reads from a local directory in as few trips to the blocking pool as
//! possible. object_store's `LocalFileSystem` opens and stats a file in one
//! trip and reads it in more (8 KiB at a time when streamed); on a busy
//! server each trip is a thread wake-up and two context switches, which cost
//! more than reading a small key. Here a read opens, stats and reads its
//! first block in one trip, and streams the rest 1 MiB at a time.
//!
//! Metadata (ETag, size, modification time) is computed exactly as
//! `LocalFileSystem` computes it, so versions seen here and through
//! object_store (conditional requests, cache revalidation) agree; a test
//! holds the two to each other.

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::GetRange;

use super::chrono_like::Timestamp;
use super::confined::ConfinedDir;
use super::{path_of, GetResponse, KeyMeta, StoreError, StoreKey, StoreRange, Version};

/// How much one trip to the blocking pool reads.
const BLOCK: u64 = 1 << 20;

/// Reads of one local directory, confined to it as every other access is.
#[derive(Debug, Clone)]
pub(super) struct LocalReads {
    dir: Arc<ConfinedDir>,
}

impl LocalReads {
    pub(super) fn new(dir: Arc<ConfinedDir>) -> Self {
        LocalReads { dir }
    }

    fn path(&self, key: &StoreKey) -> Result<PathBuf, StoreError> {
        self.dir
            .file_path(&path_of(key))
            .map_err(|e| StoreError::from_backend(key, e))
    }

    /// Ranges of the version of the value whose ETag is `e_tag`, read
    /// through one open file in one trip: a rename that replaces the file
    /// meanwhile does not change what this handle reads.
    pub(super) async fn get_ranges_at(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
        e_tag: &str,
    ) -> Result<Vec<Bytes>, StoreError> {
        let path = self.path(key)?;
        let (dir, owned, ranges) = (self.dir.clone(), key.clone(), ranges.to_vec());
        let wanted = e_tag.trim_matches('"').to_string();
        blocking(key, move || {
            let io = |e| io_error(&owned, e);
            let file = match dir.open_read(&path) {
                Ok(Some(f)) => f,
                // Gone since the version was seen: that version is gone.
                Ok(None) => {
                    return Err(StoreError::Precondition {
                        key: owned.to_string(),
                    })
                }
                Err(e) => return Err(StoreError::from_backend(&owned, e)),
            };
            let meta = key_meta(&file.metadata().map_err(io)?);
            if meta.version.e_tag.as_deref().map(|t| t.trim_matches('"')) != Some(wanted.as_str()) {
                return Err(StoreError::Precondition {
                    key: owned.to_string(),
                });
            }
            ranges
                .iter()
                .map(|r| {
                    if r.end > meta.size || r.start > r.end {
                        return Err(StoreError::RangeNotSatisfiable {
                            key: owned.to_string(),
                            start: r.start,
                            end: r.end,
                            size: meta.size,
                        });
                    }
                    read_at(&file, r.start, (r.end - r.start) as usize)
                        .map(Bytes::from)
                        .map_err(io)
                })
                .collect()
        })
        .await
    }

    /// The value (or a range of it) as a stream whose first block was read
    /// in the same trip that opened the file. `None` when the key is missing.
    pub(super) async fn get(
        &self,
        key: &StoreKey,
        range: Option<StoreRange>,
    ) -> Result<Option<GetResponse>, StoreError> {
        let path = self.path(key)?;
        let (dir, owned) = (self.dir.clone(), key.clone());
        let opened = blocking(key, move || {
            open_and_read(&dir, &owned, &path, range, BLOCK)
        })
        .await?;
        let Some(Opened {
            meta,
            range,
            first,
            file,
        }) = opened
        else {
            return Ok(None);
        };
        let rest = (range.start + first.len() as u64)..range.end;
        let head = futures::stream::once(async move { Ok(first) });
        let body = match file {
            Some(file) if !rest.is_empty() => {
                head.chain(file_stream(file, rest, key.clone())).boxed()
            }
            _ => head.boxed(),
        };
        Ok(Some(GetResponse { meta, range, body }))
    }

    /// The whole value with its metadata, in one trip. `None` when missing.
    pub(super) async fn get_whole(
        &self,
        key: &StoreKey,
    ) -> Result<Option<(Bytes, KeyMeta)>, StoreError> {
        let path = self.path(key)?;
        let (dir, owned) = (self.dir.clone(), key.clone());
        let opened = blocking(key, move || {
            open_and_read(&dir, &owned, &path, None, u64::MAX)
        })
        .await?;
        Ok(opened.map(|o| (o.first, o.meta)))
    }
}

struct Opened {
    meta: KeyMeta,
    range: Range<u64>,
    first: Bytes,
    /// Still open when more than the first block remains.
    file: Option<File>,
}

fn open_and_read(
    dir: &ConfinedDir,
    key: &StoreKey,
    path: &std::path::Path,
    range: Option<StoreRange>,
    first_block: u64,
) -> Result<Option<Opened>, StoreError> {
    let io = |e| io_error(key, e);
    // A missing file, or a path through a file ("a/b" where "a" is a value), is `None`.
    let Some(file) = dir
        .open_read(path)
        .map_err(|e| StoreError::from_backend(key, e))?
    else {
        return Ok(None);
    };
    let metadata = file.metadata().map_err(io)?;
    if metadata.is_dir() {
        return Ok(None);
    }
    let meta = key_meta(&metadata);
    let range = match range {
        None => 0..meta.size,
        Some(r) => resolve(key, r, meta.size)?,
    };
    let len = (range.end - range.start).min(first_block) as usize;
    let buf = read_at(&file, range.start, len).map_err(io)?;
    let more = range.start + (len as u64) < range.end;
    Ok(Some(Opened {
        meta,
        range,
        first: Bytes::from(buf),
        file: more.then_some(file),
    }))
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
fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len);
    file.take(len as u64).read_to_end(&mut buf)?;
    if buf.len() < len {
        return Err(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            format!("file ended {} bytes early", len - buf.len()),
        ));
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

/// Bytes of a local file in `range`, read 1 MiB at a time on the blocking pool.
pub(super) fn file_stream(
    file: File,
    range: Range<u64>,
    key: StoreKey,
) -> BoxStream<'static, Result<Bytes, StoreError>> {
    let file = Arc::new(file);
    futures::stream::try_unfold(range.start, move |at| {
        let (file, key, end) = (file.clone(), key.clone(), range.end);
        async move {
            if at >= end {
                return Ok(None);
            }
            let len = (end - at).min(BLOCK) as usize;
            let reader = key.clone();
            let buf = blocking(&key, move || {
                read_at(&file, at, len).map_err(|e| io_error(&reader, e))
            })
            .await?;
            Ok(Some((Bytes::from(buf), at + len as u64)))
        }
    })
    .boxed()
}
