//! Reference stores ("virtual Zarr"): a kerchunk reference set maps each
//! Zarr key to inline bytes or to a byte range of another file (NetCDF4,
//! HDF5, TIFF, ...), so those archives are served as Zarr without copying
//! a byte. Every read of a key is a ranged read of its target through
//! object_store; the set itself never changes while served, and writes are
//! refused (the keys point into files the set does not own).

mod kerchunk;
mod listing;
#[cfg(feature = "parquet")]
mod parquet;
mod targets;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ListResult, ObjectMeta, ObjectStore,
    ObjectStoreExt,
};

use super::read_only::{ReadOnly, Reads};
use sha2::{Digest, Sha256};

#[cfg(feature = "icechunk")]
pub(super) use targets::location_url;
pub use targets::TargetError;
use targets::Targets;

use super::{Store, StoreError};

/// Where one key's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    /// In the reference set itself.
    Inline(Bytes),
    /// `length` bytes of the target from `offset`.
    Range {
        url: Arc<str>,
        offset: u64,
        length: u64,
    },
    /// The whole target.
    Whole { url: Arc<str> },
}

/// Why a key's reference cannot be followed: a target that is missing,
/// shorter than the reference says, or outside the allowed locations.
#[derive(Debug, thiserror::Error)]
#[error("key '{key}': {reason}")]
pub struct Broken {
    pub key: String,
    pub reason: String,
    /// The target is outside the allowed locations (refused, not failed).
    pub disallowed: bool,
}

/// The references of a set: all in memory (JSON), or read as needed (Parquet).
#[derive(Debug, Clone)]
enum Index {
    Json(Arc<BTreeMap<String, Ref>>),
    /// A Parquet set, and every key it holds in order once a listing
    /// needed them.
    #[cfg(feature = "parquet")]
    Parquet(Arc<parquet::ParquetSet>, Arc<SortedKeys>),
}

/// A Parquet set's keys in order: listed once, on the blocking pool (a set
/// may hold millions, and the set never changes), then paged from.
#[cfg(feature = "parquet")]
type SortedKeys = tokio::sync::OnceCell<Arc<Vec<(String, Ref)>>>;

impl Index {
    async fn get(&self, key: &str) -> Result<Option<Ref>, kerchunk::Malformed> {
        match self {
            Index::Json(refs) => Ok(refs.get(key).cloned()),
            #[cfg(feature = "parquet")]
            Index::Parquet(set, _) => set.get(key).await,
        }
    }

    /// The keys directly in `folder` and the folders below it, without
    /// visiting every key beneath those folders.
    async fn children(
        &self,
        folder: &str,
    ) -> Result<(Vec<(String, Ref)>, Vec<String>), kerchunk::Malformed> {
        match self {
            Index::Json(refs) => {
                let base = if folder.is_empty() {
                    String::new()
                } else {
                    format!("{folder}/")
                };
                let (mut keys, mut dirs) = (Vec::new(), Vec::new());
                let mut cursor = base.clone();
                while let Some((k, r)) = refs.range(cursor.clone()..).next() {
                    let Some(rest) = k.strip_prefix(base.as_str()) else {
                        break;
                    };
                    match rest.split_once('/') {
                        Some((dir, _)) => {
                            dirs.push(format!("{base}{dir}"));
                            // '0' is the character after '/': past the folder.
                            cursor = format!("{base}{dir}0");
                        }
                        None => {
                            keys.push((k.clone(), r.clone()));
                            cursor = format!("{k}\0");
                        }
                    }
                }
                Ok((keys, dirs))
            }
            #[cfg(feature = "parquet")]
            Index::Parquet(set, _) => set.children(folder).await,
        }
    }
}

/// A reference set as an object store.
#[derive(Debug)]
pub struct References {
    index: Index,
    targets: Targets,
    /// The set's own URL, for messages.
    source: String,
    /// When the set was read: the time of its inline values.
    loaded: DateTime<Utc>,
}

fn generic(err: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "references",
        source: Box::new(err),
    }
}

/// Why a reference set refuses writes.
pub(super) const READ_ONLY: &str = "of kerchunk references (its keys point into other files)";

/// What tells versions of a target apart: its ETag, or, from a store that
/// gives none (an HTTP server without ETags), its modification time and
/// size, as HTTP caches fall back to `Last-Modified`.
fn target_version(target: &ObjectMeta) -> Vec<u8> {
    match &target.e_tag {
        Some(e_tag) => e_tag.as_bytes().to_vec(),
        None => {
            let mut v = target
                .last_modified
                .timestamp_micros()
                .to_le_bytes()
                .to_vec();
            v.extend_from_slice(&target.size.to_le_bytes());
            v
        }
    }
}

/// A validator that changes when the reference or its target does.
/// 40 hex digits: S3 tools (rclone, mc, s3cmd) take a 32-hex ETag for
/// the MD5 of the bytes and check it, and this is a digest of what names
/// the bytes, not of the bytes.
fn etag(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(&h.finalize()[..20])
}

impl References {
    /// The set in `text`, read from `source`, whose targets may lie under
    /// `allowed` (none: the set's own folder).
    pub fn parse(text: &[u8], source: &str, allowed: &[String]) -> Result<Self, StoreError> {
        let bad = |reason: String| StoreError::BadUrl {
            url: source.to_string(),
            reason,
        };
        let refs = kerchunk::parse(text).map_err(|e| bad(e.0))?;
        References::new(Index::Json(Arc::new(refs)), source, allowed)
    }

    fn new(index: Index, source: &str, allowed: &[String]) -> Result<Self, StoreError> {
        let bad = |reason: String| StoreError::BadUrl {
            url: source.to_string(),
            reason,
        };
        let base = targets::location_url(source).map_err(bad)?;
        let targets = Targets::new(base, allowed).map_err(bad)?;
        Ok(References {
            index,
            targets,
            source: source.to_string(),
            loaded: Utc::now(),
        })
    }

    fn broken(&self, key: &str, reason: String, disallowed: bool) -> object_store::Error {
        generic(Broken {
            key: key.to_string(),
            reason,
            disallowed,
        })
    }

    fn target(&self, key: &str, url: &str) -> object_store::Result<(Arc<dyn ObjectStore>, Path)> {
        self.targets.resolve(url).map_err(|e| {
            let disallowed = matches!(e, TargetError::Disallowed { .. });
            self.broken(key, e.to_string(), disallowed)
        })
    }

    /// A target's failure as the key's: a missing target is a broken
    /// reference (the key exists; its bytes do not), anything else the
    /// backend's error.
    fn target_failed(&self, key: &str, url: &str, e: object_store::Error) -> object_store::Error {
        match e {
            object_store::Error::NotFound { .. } => {
                self.broken(key, format!("its target '{url}' does not exist"), false)
            }
            other => other,
        }
    }

    /// A failed ranged read of a target, explained: stores refuse a range
    /// past the end of a file each in their own words, so when the target
    /// is there, its size says whether the reference is the problem.
    async fn read_failed(
        &self,
        key: &str,
        url: &str,
        (store, path): (&Arc<dyn ObjectStore>, &Path),
        (offset, length): (u64, u64),
        e: object_store::Error,
    ) -> object_store::Error {
        if matches!(e, object_store::Error::NotFound { .. }) || length == u64::MAX {
            return self.target_failed(key, url, e);
        }
        match store.head(path).await {
            Ok(target) => match self.ranged_meta(key, url, offset, length, &target) {
                Err(short) => short,
                Ok(_) => e,
            },
            Err(head) => self.target_failed(key, url, head),
        }
    }

    /// The key's size, validator and time, with one look at its target
    /// (none for inline values).
    async fn meta(&self, key: &str, r: &Ref) -> object_store::Result<ObjectMeta> {
        let location = location_of(key);
        match r {
            Ref::Inline(bytes) => Ok(ObjectMeta {
                location,
                last_modified: self.loaded,
                size: bytes.len() as u64,
                e_tag: Some(etag(&[bytes])),
                version: None,
            }),
            Ref::Range {
                url,
                offset,
                length,
            } => {
                let (store, path) = self.target(key, url)?;
                let target = store
                    .head(&path)
                    .await
                    .map_err(|e| self.target_failed(key, url, e))?;
                self.ranged_meta(key, url, *offset, *length, &target)
            }
            Ref::Whole { url } => {
                let (store, path) = self.target(key, url)?;
                let target = store
                    .head(&path)
                    .await
                    .map_err(|e| self.target_failed(key, url, e))?;
                Ok(ObjectMeta {
                    location,
                    last_modified: target.last_modified,
                    size: target.size,
                    e_tag: Some(etag(&[url.as_bytes(), &target_version(&target)])),
                    version: None,
                })
            }
        }
    }

    fn ranged_meta(
        &self,
        key: &str,
        url: &str,
        offset: u64,
        length: u64,
        target: &ObjectMeta,
    ) -> object_store::Result<ObjectMeta> {
        if offset.saturating_add(length) > target.size {
            return Err(self.broken(
                key,
                format!(
                    "it refers to bytes {offset}..{} of '{url}', which has {} bytes",
                    offset.saturating_add(length),
                    target.size
                ),
                false,
            ));
        }
        Ok(ObjectMeta {
            location: location_of(key),
            last_modified: target.last_modified,
            size: length,
            e_tag: Some(etag(&[
                url.as_bytes(),
                &offset.to_le_bytes(),
                &length.to_le_bytes(),
                &target_version(target),
            ])),
            version: None,
        })
    }

    async fn lookup(&self, location: &Path) -> object_store::Result<Ref> {
        let key = location.as_ref();
        self.index
            .get(key)
            .await
            .map_err(|e| self.broken(key, e.0, false))?
            .ok_or_else(|| object_store::Error::NotFound {
                path: location.to_string(),
                source: format!("no reference in {}", self.source).into(),
            })
    }
}

/// The folder a listing prefix names (`""`: the root).
/// A key as a location, as written: `Path::from` would percent-encode
/// names with `#`, `%` or letters outside ASCII, which listings would then
/// show and page by in that form.
fn location_of(key: &str) -> Path {
    Path::parse(key).unwrap_or_else(|_| Path::from(key))
}

fn folder(prefix: Option<&Path>) -> String {
    prefix.map(|p| p.as_ref().to_string()).unwrap_or_default()
}

/// What a listing says of a key: sizes come from the references; a
/// whole-file reference's size would need a look at its target, which
/// listing leaves to reads.
fn listed(key: String, r: &Ref, loaded: DateTime<Utc>) -> ObjectMeta {
    let (size, tag) = match r {
        Ref::Inline(b) => (b.len() as u64, etag(&[b])),
        Ref::Range {
            url,
            offset,
            length,
        } => (
            *length,
            etag(&[url.as_bytes(), &offset.to_le_bytes(), &length.to_le_bytes()]),
        ),
        Ref::Whole { url } => (0, etag(&[url.as_bytes()])),
    };
    ObjectMeta {
        location: location_of(&key),
        last_modified: loaded,
        size,
        e_tag: Some(tag),
        version: None,
    }
}

impl std::fmt::Display for References {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "References({})", self.source)
    }
}

fn once(bytes: Bytes) -> GetResultPayload {
    GetResultPayload::Stream(futures::stream::once(async move { Ok(bytes) }).boxed())
}

#[async_trait]
impl Reads for References {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let key = location.as_ref();
        let r = &self.lookup(location).await?;
        match r {
            Ref::Inline(bytes) => {
                let meta = self.meta(key, r).await?;
                options.check_preconditions(&meta)?;
                let range =
                    super::get::requested("references", key, options.range.as_ref(), meta.size)?;
                let body = if options.head {
                    Bytes::new()
                } else {
                    bytes.slice(range.start as usize..range.end as usize)
                };
                Ok(super::get::answer(once(body), meta, range))
            }
            Ref::Range {
                url,
                offset,
                length,
            } => {
                let (store, path) = self.target(key, url)?;
                let range =
                    super::get::requested("references", key, options.range.as_ref(), *length)?;
                // Nothing to read (a zero-length reference): stores refuse
                // an empty range, so the target is only looked up.
                if options.head || range.is_empty() {
                    let meta = self.meta(key, r).await?;
                    options.check_preconditions(&meta)?;
                    return Ok(super::get::answer(once(Bytes::new()), meta, range));
                }
                let got = match store
                    .get_opts(
                        &path,
                        GetOptions::new()
                            .with_range(Some(offset + range.start..offset + range.end)),
                    )
                    .await
                {
                    Ok(got) => got,
                    Err(e) => {
                        return Err(self
                            .read_failed(key, url, (&store, &path), (*offset, *length), e)
                            .await)
                    }
                };
                // The target's own validator is only known now: check the
                // client's conditions against the key's, derived from it.
                let meta = self.ranged_meta(key, url, *offset, *length, &got.meta)?;
                options.check_preconditions(&meta)?;
                Ok(super::get::answer(target_payload(key, got), meta, range))
            }
            Ref::Whole { url } => {
                let (store, path) = self.target(key, url)?;
                let meta = self.meta(key, r).await?;
                options.check_preconditions(&meta)?;
                let range =
                    super::get::requested("references", key, options.range.as_ref(), meta.size)?;
                let payload = if options.head || range.is_empty() {
                    once(Bytes::new())
                } else {
                    let got = store
                        .get_opts(&path, GetOptions::new().with_range(Some(range.clone())))
                        .await
                        .map_err(|e| self.target_failed(key, url, e))?;
                    target_payload(key, got)
                };
                Ok(super::get::answer(payload, meta, range))
            }
        }
    }

    /// Ranges of one key are ranges of its target, read together so the
    /// target's store can merge neighbours into one request.
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let key = location.as_ref();
        let r = self.lookup(location).await?;
        let (url, offset, length) = match &r {
            Ref::Inline(bytes) => {
                return ranges
                    .iter()
                    .map(|range| {
                        let range = super::get::requested(
                            "references",
                            key,
                            Some(&GetRange::Bounded(range.clone())),
                            bytes.len() as u64,
                        )?;
                        Ok(bytes.slice(range.start as usize..range.end as usize))
                    })
                    .collect();
            }
            Ref::Range {
                url,
                offset,
                length,
            } => (url, *offset, *length),
            Ref::Whole { url } => (url, 0, u64::MAX),
        };
        if let Some(bad) = ranges.iter().find(|r| r.end > length || r.start > r.end) {
            return Err(self.broken(
                key,
                format!("bytes {}..{} are outside its {length}", bad.start, bad.end),
                false,
            ));
        }
        let (store, path) = self.target(key, url)?;
        let shifted: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| offset + r.start..offset + r.end)
            .collect();
        match store.get_ranges(&path, &shifted).await {
            Ok(parts) => Ok(parts),
            Err(e) => Err(self
                .read_failed(key, url, (&store, &path), (offset, length), e)
                .await),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_with_offset(prefix, &Path::default())
    }

    /// In key order, a batch at a time: a listing holds a batch, not the set.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        listing::in_key_order(self.index.clone(), folder(prefix), offset, self.loaded)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let folder = folder(prefix);
        let (keys, dirs) = self
            .index
            .children(&folder)
            .await
            .map_err(|e| self.broken(&folder, e.0, false))?;
        let objects = keys
            .into_iter()
            .map(|(key, r)| listed(key, &r, self.loaded))
            .collect();
        let common = dirs.iter().map(|d| location_of(d)).collect();
        Ok(ListResult {
            common_prefixes: common,
            objects,
            extensions: Default::default(),
        })
    }
}

impl Store {
    /// A read-only store over the kerchunk reference set at `location` (a
    /// path or URL of a `.json` file, or of a `.parq` folder), whose targets may lie under `allowed`
    /// (none given: the set's own folder).
    pub async fn references(location: &str, allowed: &[String]) -> Result<Store, StoreError> {
        let url = targets::location_url(location).map_err(|reason| StoreError::BadUrl {
            url: location.to_string(),
            reason,
        })?;
        let unreadable = |e: object_store::Error| StoreError::BadUrl {
            url: location.to_string(),
            reason: format!("the reference set cannot be read: {e}"),
        };
        let store = super::backends::bucket_store(&url)?;
        let path = Path::from_url_path(url.path()).map_err(|e| unreadable(e.into()))?;
        #[cfg(not(feature = "parquet"))]
        if url.path().trim_end_matches('/').ends_with(".parq") {
            return Err(StoreError::NotSupported {
                what: format!(
                    "'{location}' is a Parquet reference set, and this zarrd was built without the `parquet` feature"
                ),
            });
        }
        #[cfg(feature = "parquet")]
        if url.path().trim_end_matches('/').ends_with(".parq") {
            let set =
                parquet::ParquetSet::open(store, path)
                    .await
                    .map_err(|e| StoreError::BadUrl {
                        url: location.to_string(),
                        reason: format!("the Parquet reference set cannot be read: {}", e.0),
                    })?;
            let refs = References::new(
                Index::Parquet(Arc::new(set), Default::default()),
                url.as_str().trim_end_matches('/'),
                allowed,
            )?;
            return Ok(Store::over_references(refs, &url));
        }
        let text = store
            .get(&path)
            .await
            .map_err(unreadable)?
            .bytes()
            .await
            .map_err(unreadable)?;
        let refs = References::parse(&text, url.as_str(), allowed)?;
        Ok(Store::over_references(refs, &url))
    }

    fn over_references(refs: References, url: &url::Url) -> Store {
        let refs = Arc::new(refs);
        let mut store = Store::with_coordination(
            Arc::new(ReadOnly::new(refs.clone(), READ_ONLY)),
            format!("references+{url}"),
            super::Coordination::CompareAndSwap,
        );
        store.read_only = true;
        // Its listings come in key order (Index::page), and its folders a
        // page at a time (Index::level_page).
        store.ordered_listing = true;
        store.with_level_pages(refs, "")
    }
}

/// A target's bytes as the answer for reference `key`: a local target file
/// in 1 MiB reads (see [`super::local::handed_file_stream`]), any other as
/// its store streams it.
fn target_payload(key: &str, got: GetResult) -> GetResultPayload {
    let Ok(store_key) = super::StoreKey::new(key) else {
        return GetResultPayload::Stream(got.into_stream());
    };
    match got.payload {
        GetResultPayload::File(file, _) => {
            let meta = super::key_meta(&got.meta);
            let body =
                super::local::handed_file_stream(file, meta, got.range, store_key).map_err(|e| {
                    object_store::Error::Generic {
                        store: "references",
                        source: Box::new(e),
                    }
                });
            GetResultPayload::Stream(body.boxed())
        }
        stream => stream,
    }
}

#[cfg(test)]
mod tests;
