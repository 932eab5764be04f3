//! One writer's transaction on a branch of an Icechunk repository: a store
//! over a writable session, whose changes become one commit or nothing.
//!
//! The engine writes through it as through any store (chunk by chunk,
//! metadata documents whole). Readers see nothing until
//! [`Transaction::commit`] advances the branch with the repository's
//! conditional update, rebasing over commits made meanwhile by other
//! processes when they touched other chunks and nodes. Within one server,
//! transactions on a branch run one at a time, so they never conflict with
//! each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use icechunk::conflicts::detector::ConflictDetector;
use icechunk::format::SnapshotId;
use icechunk::session::SessionErrorKind;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::sync::{OwnedMutexGuard, RwLock};

use super::names::{OtherVersion, V3Only};
use super::repo::{self as repo, Repo, VERSION_FOLDER};
use crate::store::StoreError;

/// How many times a commit is rebased over other writers' commits before
/// the write is refused as a conflict.
const REBASE_ATTEMPTS: u16 = 8;

/// The uncommitted state of one transaction, as a store.
#[derive(Clone)]
pub struct SessionStore(Arc<Inner>);

struct Inner {
    store: icechunk::Store,
    branch: String,
    base: SnapshotId,
    started: DateTime<Utc>,
    /// Keys written or deleted in this session, with a count that gives
    /// their values new ETags.
    changed: Mutex<HashMap<String, u64>>,
    next: AtomicU64,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionStore({}@{})", self.0.branch, self.0.base)
    }
}

impl std::fmt::Display for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Icechunk session on branch {}", self.0.branch)
    }
}

/// A transaction: commit it, or drop it to discard every change.
pub struct Transaction {
    store: SessionStore,
    repo: Repo,
    /// Held from the start, so that the session's base is the tip no other
    /// writer of this server will move before the commit.
    _turn: OwnedMutexGuard<()>,
}

impl Repo {
    /// A transaction on `branch`: its store (which reads the branch's tip
    /// and this transaction's own changes) and the commit to make of it.
    /// Refused for tags and snapshot ids, which never change.
    pub async fn begin(&self, reference: &str) -> Result<(SessionStore, Transaction), StoreError> {
        if self.repo().lookup_branch(reference).await.is_err() {
            return Err(match self.resolve(reference).await {
                Ok(_) => StoreError::ReadOnly {
                    what: format!(
                        "icechunk+{} at '{reference}' (a tag or a snapshot; only branches take writes)",
                        self.source()
                    ),
                },
                Err(e) => StoreError::from_backend(&crate::store::StoreKey::root(), e),
            });
        }
        let turn = self.branch_turn(reference).lock_owned().await;
        let fail = |e: String| StoreError::Backend {
            key: String::new(),
            source: repo::generic(e),
        };
        let session = self
            .repo()
            .writable_session(reference)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let base = session.snapshot_id().clone();
        let store = icechunk::Store::from_session(Arc::new(RwLock::new(session))).await;
        let store = SessionStore(Arc::new(Inner {
            store,
            branch: reference.to_string(),
            base,
            started: Utc::now(),
            changed: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }));
        let tx = Transaction {
            store: store.clone(),
            repo: self.clone(),
            _turn: turn,
        };
        Ok((store, tx))
    }
}

impl Transaction {
    /// Commit every change as one snapshot on the branch, rebased over
    /// commits made meanwhile where they do not conflict. `None` when
    /// nothing changed (no snapshot is made).
    pub async fn commit(self, message: &str) -> Result<Option<String>, StoreError> {
        let session = self.store.0.store.session();
        let mut session = session.write().await;
        if !session.has_uncommitted_changes() {
            return Ok(None);
        }
        let detector = ConflictDetector;
        let result = session
            .commit(message)
            .rebase(&detector, REBASE_ATTEMPTS)
            .execute()
            .await;
        match result {
            Ok(id) => Ok(Some(id.to_string())),
            Err(e) => match &e.kind {
                SessionErrorKind::NoChangesToCommit => Ok(None),
                SessionErrorKind::RebaseFailed { conflicts, .. } => {
                    let shown: Vec<String> =
                        conflicts.iter().take(4).map(|c| format!("{c:?}")).collect();
                    Err(diverged(format!(
                        "branch '{}' of {} changed meanwhile in a way this write conflicts with ({}); retry the write",
                        self.store.0.branch,
                        self.repo,
                        shown.join("; ")
                    )))
                }
                SessionErrorKind::Conflict { .. } => Err(diverged(format!(
                    "branch '{}' of {} kept changing while this write was committed; retry the write",
                    self.store.0.branch, self.repo
                ))),
                other => Err(StoreError::Backend {
                    key: String::new(),
                    source: repo::generic(format!("commit to '{}': {other}", self.store.0.branch)),
                }),
            },
        }
    }
}

fn diverged(message: String) -> StoreError {
    StoreError::Diverged(message)
}

impl SessionStore {
    /// The Zarr key of a store path: a mount hands `__version/{branch}/key`,
    /// a repository at the root the key itself.
    fn key<'a>(&self, location: &'a str) -> object_store::Result<&'a str> {
        let Some(rest) = location
            .strip_prefix(VERSION_FOLDER)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return Ok(location);
        };
        let (reference, key) = rest.split_once('/').unwrap_or((rest, ""));
        if reference != self.0.branch {
            return Err(object_store::Error::Generic {
                store: "icechunk",
                source: Box::new(OtherVersion(format!(
                    "this write goes to branch '{}', and '{reference}' is another version (at the root, writes go to branch main)",
                    self.0.branch
                ))),
            });
        }
        Ok(key)
    }

    fn changed(&self, key: &str) {
        let n = self.0.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.0.changed.lock() {
            c.insert(key.to_string(), n);
        }
    }

    /// What a key's metadata says: the base snapshot's, with a new ETag
    /// for a value this transaction changed.
    fn meta(&self, location: &Path, size: u64, key: &str) -> ObjectMeta {
        let mut meta = Repo::meta(location, (&self.0.base, self.0.started), false, size, key);
        let change = self.0.changed.lock().ok().and_then(|c| c.get(key).copied());
        if let Some(n) = change {
            meta.e_tag = meta.e_tag.map(|t| format!("{t}-{n}"));
        }
        meta
    }
}

#[async_trait]
impl ObjectStore for SessionStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let key = self.key(location.as_ref())?;
        let store = &self.0.store;
        if matches!(opts.mode, PutMode::Create)
            && store
                .exists(key)
                .await
                .map_err(|e| repo::icechunk_error(location.as_ref(), e))?
        {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "the key exists".into(),
            });
        }
        let bytes: Bytes = payload.into();
        let size = bytes.len() as u64;
        store.set(key, bytes).await.map_err(|e| match e.kind {
            // Icechunk parses keys as Zarr v3's; v2 documents it cannot hold.
            icechunk::store::StoreErrorKind::Unimplemented(_) => object_store::Error::Generic {
                store: "icechunk",
                source: Box::new(V3Only),
            },
            _ => repo::icechunk_error(location.as_ref(), e),
        })?;
        self.changed(key);
        let meta = self.meta(location, size, key);
        Ok(PutResult {
            e_tag: meta.e_tag,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(object_store::Error::NotImplemented {
            operation: format!("multipart upload of '{location}' into an Icechunk session"),
            implementer: "zarrd".into(),
        })
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let key = self.key(location.as_ref())?;
        let store = &self.0.store;
        let size = Repo::size(store, key, location.as_ref()).await?;
        let meta = self.meta(location, size, key);
        repo::read(store, location, key, meta, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let this = self.clone();
        locations
            .and_then(move |location| {
                let this = this.clone();
                async move {
                    let key = this.key(location.as_ref())?.to_string();
                    this.0
                        .store
                        .delete(&key)
                        .await
                        .map_err(|e| repo::icechunk_error(location.as_ref(), e))?;
                    this.changed(&key);
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let location = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        let this = self.clone();
        futures::stream::once(async move {
            let key = this.key(&location)?.to_string();
            let at = (&this.0.base, this.0.started);
            repo::list_all_at(&this.0.store, at, false, &location, &key).await
        })
        .map_ok(|metas| futures::stream::iter(metas.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let location = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        let key = self.key(&location)?;
        let at = (&self.0.base, self.0.started);
        repo::list_dir_at(&self.0.store, at, false, &location, key).await
    }

    async fn copy_opts(&self, from: &Path, _: &Path, _: CopyOptions) -> object_store::Result<()> {
        Err(object_store::Error::NotImplemented {
            operation: format!("copy of '{from}' in an Icechunk session"),
            implementer: "zarrd".into(),
        })
    }
}
