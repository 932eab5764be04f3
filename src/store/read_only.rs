//! A store that refuses writes, whatever its backend: backends that only
//! read (zip files, reference sets, an Icechunk repository's keys)
//! implement [`Reads`], and they, read-only mounts and plain HTTP stores
//! are wrapped in [`ReadOnly`], the one place writes are refused, so no
//! operation of `Store` has to remember to check a flag.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// Why a write was refused: the store (named) is read-only.
#[derive(Debug, thiserror::Error)]
#[error("the store {0} is read-only")]
pub struct Refused(pub String);

/// What a backend that only reads implements: object_store's reads and
/// nothing else. [`ReadOnly`] makes one an `ObjectStore` whose writes are
/// refused, so zip files, reference sets and an Icechunk repository's keys
/// write no refusals of their own.
#[async_trait]
pub trait Reads: std::fmt::Debug + std::fmt::Display + Send + Sync + 'static {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult>;

    /// Several ranges of one value: by default read as object_store reads
    /// them, nearby ranges together.
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        object_store::coalesce_ranges(
            ranges,
            |range| async move {
                let options = GetOptions {
                    range: Some(range.into()),
                    ..Default::default()
                };
                self.get_opts(location, options).await?.bytes().await
            },
            object_store::OBJECT_STORE_COALESCE_DEFAULT,
        )
        .await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>>;

    /// Values after `offset`; by default `list` filtered.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let offset = offset.clone();
        self.list(prefix)
            .filter(move |m| {
                futures::future::ready(m.as_ref().map_or(true, |m| m.location > offset))
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult>;
}

/// Any object store, read through (read-only mounts, plain HTTP servers).
#[derive(Debug)]
struct Through(Arc<dyn ObjectStore>);

impl std::fmt::Display for Through {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[async_trait]
impl Reads for Through {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.0.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.0.get_ranges(location, ranges).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    // Forwarded, not left to the default (a filtered `list`): the inner
    // store may list in key order from the offset, which pages rely on.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.0.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
}

/// A store of reads only, as an `ObjectStore` that refuses every write
/// naming `what` is read-only.
#[derive(Debug)]
pub struct ReadOnly {
    inner: Arc<dyn Reads>,
    what: String,
}

impl ReadOnly {
    pub fn new(inner: Arc<dyn Reads>, what: impl Into<String>) -> Self {
        ReadOnly {
            inner,
            what: what.into(),
        }
    }

    /// Any object store, its writes refused.
    pub fn over(inner: Arc<dyn ObjectStore>, what: impl Into<String>) -> Self {
        ReadOnly::new(Arc::new(Through(inner)), what)
    }

    fn refused(&self) -> object_store::Error {
        object_store::Error::Generic {
            store: "read-only",
            source: Box::new(Refused(self.what.clone())),
        }
    }
}

impl std::fmt::Display for ReadOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadOnly({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for ReadOnly {
    async fn put_opts(
        &self,
        _: &Path,
        _: PutPayload,
        _: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(self.refused())
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(self.refused())
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let what = self.what.clone();
        locations
            .map(move |_| {
                Err(object_store::Error::Generic {
                    store: "read-only",
                    source: Box::new(Refused(what.clone())),
                })
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    // Forwarded, not left to the default (a filtered `list`): the inner
    // store may list in key order from the offset, which pages rely on.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> object_store::Result<()> {
        Err(self.refused())
    }

    async fn rename_opts(&self, _: &Path, _: &Path, _: RenameOptions) -> object_store::Result<()> {
        Err(self.refused())
    }
}
