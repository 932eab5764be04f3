//! zarrd built without the `icechunk` feature: a ROOT or mount that names
//! an Icechunk repository is refused at start, saying why. The types are
//! uninhabited, so nothing else in the store needs to know.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::Versions;
use crate::store::read_only::Reads;
use crate::store::StoreError;

/// An open repository: none can be opened in this build.
#[derive(Debug, Clone)]
pub enum Repo {}

/// A branch's session: none exists in this build.
#[derive(Debug)]
pub enum SessionStore {}

/// A transaction: none exists in this build.
pub enum Transaction {}

impl Repo {
    pub async fn open(location: &str, _: &[String]) -> Result<Repo, StoreError> {
        Err(StoreError::NotSupported {
            what: format!(
                "'{location}' is an Icechunk repository, and this zarrd was built without the `icechunk` feature"
            ),
        })
    }

    pub async fn begin(&self, _: &str) -> Result<(SessionStore, Transaction), StoreError> {
        match *self {}
    }

    pub(in crate::store) async fn snapshot_of(&self, _: &str) -> Result<String, StoreError> {
        match *self {}
    }

    pub async fn versions(&self, _: usize) -> Result<Versions, StoreError> {
        match *self {}
    }
}

impl Transaction {
    pub async fn commit(self, _: &str) -> Result<Option<String>, StoreError> {
        match self {}
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::fmt::Display for SessionStore {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

#[async_trait]
impl Reads for Repo {
    async fn get_opts(&self, _: &Path, _: GetOptions) -> object_store::Result<GetResult> {
        match *self {}
    }

    async fn get_ranges(&self, _: &Path, _: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        match *self {}
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match *self {}
    }

    async fn list_with_delimiter(&self, _: Option<&Path>) -> object_store::Result<ListResult> {
        match *self {}
    }
}

#[async_trait]
impl ObjectStore for SessionStore {
    async fn put_opts(
        &self,
        _: &Path,
        _: PutPayload,
        _: PutOptions,
    ) -> object_store::Result<PutResult> {
        match *self {}
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        match *self {}
    }

    async fn get_opts(&self, _: &Path, _: GetOptions) -> object_store::Result<GetResult> {
        match *self {}
    }

    fn delete_stream(
        &self,
        _: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        match *self {}
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match *self {}
    }

    async fn list_with_delimiter(&self, _: Option<&Path>) -> object_store::Result<ListResult> {
        match *self {}
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> object_store::Result<()> {
        match *self {}
    }
}
