//! Icechunk repositories (transactional, versioned Zarr) as read-only
//! stores, through the `icechunk` crate: each read opens the repository at
//! a branch, a tag or a snapshot and answers the Zarr key from that
//! snapshot, native, inline and virtual chunks alike.
//!
//! The version travels in the key: a mount addressed as `name@ref` hands
//! this store keys below [`VERSION_FOLDER`]`/{ref}/`; keys without it read
//! the branch `main`. (`__` names are reserved by Zarr v3, so no node can
//! be mistaken for a version.)

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use icechunk::format::{ByteRange, SnapshotId};
use icechunk::repository::VersionInfo;
use object_store::path::Path;
use object_store::{GetOptions, GetResult, ListResult, ObjectMeta};

use crate::store::read_only::Reads;
use sha2::{Digest, Sha256};
use tokio::sync::RwLock;

pub use super::names::*;
use crate::store::StoreError;

/// Snapshots kept open (each holds its manifests as they are read).
const OPEN_SNAPSHOTS: u64 = 64;
/// Chunk references and snapshot nodes Icechunk keeps in memory.
const MAX_CHUNK_REFS: u64 = 1_000_000;
const MAX_SNAPSHOT_NODES: u64 = 100_000;

/// An open repository, cheap to clone.
#[derive(Clone)]
pub struct Repo(Arc<Open>);

pub struct Open {
    repo: icechunk::Repository,
    source: String,
    /// A store per snapshot read, with the time it was written, by id.
    snapshots: moka::future::Cache<String, (Arc<icechunk::Store>, DateTime<Utc>)>,
    /// The repository's location as a URL: mounts of one repository under
    /// several names share their branches' turns.
    url: String,
}

impl std::ops::Deref for Repo {
    type Target = Open;

    fn deref(&self) -> &Open {
        &self.0
    }
}

impl std::fmt::Debug for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Repo({})", self.source)
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Icechunk({})", self.source)
    }
}

pub(in crate::store) fn generic(message: impl Into<String>) -> object_store::Error {
    object_store::Error::Generic {
        store: "icechunk",
        source: message.into().into(),
    }
}

fn not_found(key: &str, why: impl std::fmt::Display) -> object_store::Error {
    object_store::Error::NotFound {
        path: key.to_string(),
        source: why.to_string().into(),
    }
}

/// The folder of a bucket or container a URL names, if any.
fn prefix_of(url: &url::Url) -> Option<String> {
    let prefix = url.path().trim_matches('/');
    (!prefix.is_empty()).then(|| prefix.to_string())
}

/// Where a repository lives: a directory, `file://`, `s3://bucket/prefix`
/// (credentials, region and endpoint from the usual `AWS_*` variables),
/// `gs://bucket/prefix` or `az://container/prefix`.
async fn storage(location: &str) -> Result<Arc<dyn icechunk::Storage + Send + Sync>, String> {
    let url = crate::store::references::location_url(location)?;
    match url.scheme() {
        "file" => icechunk::new_local_filesystem_storage(std::path::Path::new(url.path()))
            .await
            .map_err(|e| e.to_string()),
        "s3" | "s3a" => {
            let env = |k: &str| std::env::var(k).ok();
            let endpoint = env("AWS_ENDPOINT_URL").or_else(|| env("AWS_ENDPOINT"));
            let mut options = icechunk::config::S3Options::default();
            options.region = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION"));
            options.allow_http = env("AWS_ALLOW_HTTP").is_some_and(|v| v == "true")
                || endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://"));
            options.endpoint_url = endpoint;
            options.force_path_style =
                env("AWS_VIRTUAL_HOSTED_STYLE_REQUEST").is_none_or(|v| v != "true");
            icechunk::new_s3_object_store_storage(
                options,
                url.host_str().unwrap_or_default().to_string(),
                prefix_of(&url),
                None,
                Vec::new(),
                Vec::new(),
            )
            .await
            .map_err(|e| e.to_string())
        }
        "gs" | "gcs" => {
            // Credentials from the usual GOOGLE_* variables.
            icechunk::storage::new_gcs_storage(
                url.host_str().unwrap_or_default().to_string(),
                prefix_of(&url),
                None,
                None,
                Vec::new(),
                Vec::new(),
            )
            .map_err(|e| e.to_string())
        }
        "az" | "azure" => {
            // Account and credentials from the usual AZURE_* variables
            // (Azurite's account with AZURE_STORAGE_USE_EMULATOR=true).
            let env = |k: &str| std::env::var(k).ok();
            let account = env("AZURE_STORAGE_ACCOUNT_NAME")
                .or_else(|| env("AZURE_STORAGE_ACCOUNT"))
                .or_else(|| {
                    env("AZURE_STORAGE_USE_EMULATOR")
                        .filter(|v| v == "true")
                        .map(|_| "devstoreaccount1".to_string())
                })
                .ok_or("az:// needs AZURE_STORAGE_ACCOUNT_NAME")?;
            icechunk::storage::new_azure_blob_storage(
                account,
                url.host_str().unwrap_or_default().to_string(),
                prefix_of(&url),
                None,
                None,
            )
            .await
            .map_err(|e| e.to_string())
        }
        other => Err(format!(
            "Icechunk repositories are read from a directory, file://, s3://, gs:// or az://, not {other}://"
        )),
    }
}

impl Repo {
    /// The repository at `location`, with access to the virtual chunk
    /// containers its configuration declares that lie under `allowed` URL
    /// prefixes (and no others: whoever can write a repository must not be
    /// able to make the server read any file or host it names).
    pub async fn open(location: &str, allowed: &[String]) -> Result<Repo, StoreError> {
        let bad = |reason: String| StoreError::BadUrl {
            url: location.to_string(),
            reason,
        };
        let storage = storage(location).await.map_err(&bad)?;
        let repo = icechunk::Repository::open(storage.clone())
            .execute()
            .await
            .map_err(|e| bad(format!("not an Icechunk repository: {e}")))?;
        let containers: HashMap<String, Option<icechunk::config::Credentials>> = repo
            .config()
            .virtual_chunk_containers()
            .map(|v| v.url_prefix().to_string())
            // Icechunk's HTTP fetcher follows redirects, which would take a
            // read past this check to any host: HTTP containers stay closed
            // (their chunks answer 502 naming the container).
            .filter(|prefix| {
                let http = prefix.starts_with("http://") || prefix.starts_with("https://");
                if http {
                    tracing::warn!(container = %prefix, "virtual chunks over HTTP are not read from Icechunk repositories: Icechunk's HTTP client follows redirects past the allowed locations");
                }
                !http
            })
            .filter(|prefix| {
                allowed.iter().any(|a| {
                    crate::store::references::location_url(a)
                        .map(|u| {
                            let mut u = u.to_string();
                            if !u.ends_with('/') {
                                u.push('/');
                            }
                            prefix.starts_with(&u) || format!("{prefix}/").starts_with(&u)
                        })
                        .unwrap_or(false)
                })
            })
            .map(|prefix| (prefix, None))
            .collect();
        // Icechunk's own caches of manifests and snapshot nodes are bounded
        // by entries, at defaults sized for a notebook (15 M chunk refs):
        // a server keeps them to about 100 MB per repository and relies on
        // its own cache of decoded chunks.
        let config = icechunk::RepositoryConfig {
            caching: Some(icechunk::config::CachingConfig {
                num_chunk_refs: Some(MAX_CHUNK_REFS),
                num_snapshot_nodes: Some(MAX_SNAPSHOT_NODES),
                ..Default::default()
            }),
            ..Default::default()
        };
        let repo = repo
            .reopen(Some(config), (!containers.is_empty()).then_some(containers))
            .await
            .map_err(|e| bad(e.to_string()))?;
        Ok(Repo(Arc::new(Open {
            repo,
            source: location.to_string(),
            snapshots: moka::future::Cache::new(OPEN_SNAPSHOTS),
            url: crate::store::references::location_url(location)
                .map(|u| u.to_string())
                .unwrap_or_else(|_| location.to_string()),
        })))
    }

    pub(in crate::store) fn repo(&self) -> &icechunk::Repository {
        &self.repo
    }

    /// Where the repository lives, as configured.
    pub(in crate::store) fn source(&self) -> &str {
        &self.source
    }

    /// The turn of `branch`'s writers in this server, whichever mount of
    /// the repository they write through.
    pub(in crate::store) fn branch_turn(&self, branch: &str) -> Arc<tokio::sync::Mutex<()>> {
        /// By repository URL and branch.
        type Turns = std::sync::Mutex<HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>>;
        static TURNS: std::sync::LazyLock<Turns> = std::sync::LazyLock::new(Default::default);
        let mut turns = TURNS.lock().unwrap_or_else(|e| e.into_inner());
        turns
            .entry((self.url.clone(), branch.to_string()))
            .or_default()
            .clone()
    }

    /// The id of the snapshot `reference` points at now.
    pub(in crate::store) async fn snapshot_of(
        &self,
        reference: &str,
    ) -> Result<String, StoreError> {
        let (id, _) = self
            .resolve(reference)
            .await
            .map_err(|e| StoreError::from_backend(&crate::store::StoreKey::root(), e))?;
        Ok(id.to_string())
    }

    /// The snapshot a ref names: a branch's tip, a tag's snapshot, or a
    /// snapshot id; and whether it was named by id (so can never change).
    pub(in crate::store) async fn resolve(
        &self,
        reference: &str,
    ) -> object_store::Result<(SnapshotId, bool)> {
        // A snapshot id first: a branch given the same name must not take
        // over a URL that promises never to change.
        if let Ok(id) = SnapshotId::try_from(reference) {
            if self.repo.lookup_snapshot(&id).await.is_ok() {
                return Ok((id, true));
            }
        }
        if let Ok(id) = self.repo.lookup_branch(reference).await {
            return Ok((id, false));
        }
        if let Ok(id) = self.repo.lookup_tag(reference).await {
            return Ok((id, false));
        }
        Err(object_store::Error::Generic {
            store: "icechunk",
            source: Box::new(UnknownVersion {
                reference: reference.to_string(),
                repository: self.source.clone(),
            }),
        })
    }

    /// The store of one snapshot, opened once, and when it was written.
    async fn at(
        &self,
        id: &SnapshotId,
    ) -> object_store::Result<(Arc<icechunk::Store>, DateTime<Utc>)> {
        let repo = &self.repo;
        self.snapshots
            .try_get_with(id.to_string(), async move {
                let written = repo
                    .lookup_snapshot(id)
                    .await
                    .map_err(|e| e.to_string())?
                    .flushed_at;
                let session = repo
                    .readonly_session(&VersionInfo::SnapshotId(id.clone()))
                    .await
                    .map_err(|e| e.to_string())?;
                let store = icechunk::Store::from_session(Arc::new(RwLock::new(session))).await;
                Ok::<_, String>((Arc::new(store), written))
            })
            .await
            .map_err(|e: Arc<String>| generic(e.as_str()))
    }

    /// The version and Zarr key a store path names.
    fn split<'a>(&self, location: &'a str) -> (&'a str, &'a str) {
        match location
            .strip_prefix(VERSION_FOLDER)
            .and_then(|r| r.strip_prefix('/'))
        {
            Some(rest) => rest.split_once('/').unwrap_or((rest, "")),
            None => (DEFAULT_BRANCH, location),
        }
    }

    /// Every branch and tag with its snapshot, and the history of `main`
    /// (at most `limit` snapshots, newest first).
    pub async fn versions(&self, limit: usize) -> Result<Versions, StoreError> {
        let fail = |e: String| StoreError::Backend {
            key: String::new(),
            source: generic(e),
        };
        let mut branches = Vec::new();
        for b in self
            .repo
            .list_branches()
            .await
            .map_err(|e| fail(e.to_string()))?
        {
            let id = self
                .repo
                .lookup_branch(&b)
                .await
                .map_err(|e| fail(e.to_string()))?;
            branches.push((b, id.to_string()));
        }
        let mut tags = Vec::new();
        for t in self
            .repo
            .list_tags()
            .await
            .map_err(|e| fail(e.to_string()))?
        {
            let id = self
                .repo
                .lookup_tag(&t)
                .await
                .map_err(|e| fail(e.to_string()))?;
            tags.push((t, id.to_string()));
        }
        let history = self
            .repo
            .ancestry(&VersionInfo::BranchTipRef(DEFAULT_BRANCH.into()))
            .await
            .map_err(|e| fail(e.to_string()))?;
        let snapshots: Vec<SnapshotEntry> = history
            .take(limit)
            .map_ok(|s| SnapshotEntry {
                id: s.id.to_string(),
                parent_id: s.parent_id.map(|p| p.to_string()),
                message: s.message,
                written_at: s.flushed_at,
            })
            .try_collect()
            .await
            .map_err(|e| fail(e.to_string()))?;
        Ok(Versions {
            branches,
            tags,
            snapshots,
        })
    }

    /// Size, validator and version of a key at a snapshot.
    pub(in crate::store) fn meta(
        location: &Path,
        at: (&SnapshotId, DateTime<Utc>),
        pinned: bool,
        size: u64,
        key: &str,
    ) -> ObjectMeta {
        let (id, written) = at;
        let mut h = Sha256::new();
        h.update(id.to_string());
        h.update([0]);
        h.update(key);
        ObjectMeta {
            location: location.clone(),
            last_modified: written,
            size,
            // 40 hex digits, not 32: S3 tools check a 32-hex ETag as the
            // MD5 of the bytes, and this names the snapshot and key.
            e_tag: Some(hex::encode(&h.finalize()[..20])),
            version: pinned.then(|| format!("{PINNED}{id}")),
        }
    }

    pub(in crate::store) async fn size(
        store: &icechunk::Store,
        key: &str,
        shown: &str,
    ) -> object_store::Result<u64> {
        let size = store
            .getsize(key)
            .await
            .map_err(|e| icechunk_error(shown, e))?;
        // A chunk never written has size 0 too: tell it from an empty one.
        if size == 0
            && !store
                .exists(key)
                .await
                .map_err(|e| icechunk_error(shown, e))?
        {
            return Err(not_found(shown, "no such key in the snapshot"));
        }
        Ok(size)
    }
}

/// An Icechunk failure as object_store's: a key the snapshot does not hold
/// (or could not hold: Icechunk knows only Zarr v3 keys) is missing; a
/// virtual chunk whose file is missing or short is a broken reference,
/// naming where it points; anything else is the backend's error.
pub(in crate::store) fn icechunk_error(
    key: &str,
    e: icechunk::store::StoreError,
) -> object_store::Error {
    icechunk_error_at(key, e, None)
}

/// Where a virtual chunk points (its URL and byte range), when `key` is one.
async fn virtual_target(store: &icechunk::Store, key: &str) -> Option<String> {
    use icechunk::format::manifest::ChunkPayload;
    let (node, coords) = match key.rsplit_once("/c/") {
        Some((node, coords)) => (format!("/{node}"), coords),
        None => ("/".to_string(), key.strip_prefix("c/")?),
    };
    let coords: Vec<u32> = coords
        .split('/')
        .map(|c| c.parse().ok())
        .collect::<Option<_>>()?;
    let path = icechunk::format::Path::try_from(node.as_str()).ok()?;
    let session = store.session();
    let session = session.read().await;
    match session
        .get_chunk_ref(&path, &icechunk::format::ChunkIndices(coords))
        .await
        .ok()??
    {
        ChunkPayload::Virtual(v) => Some(format!(
            "'{}' bytes {}..{}",
            v.location.url(),
            v.offset,
            v.offset.saturating_add(v.length)
        )),
        _ => None,
    }
}

/// `options` of the key `key` of a snapshot's (or session's) store, whose
/// size and validator `meta` gives: a virtual chunk that cannot be read is
/// named with the file it points into.
pub(in crate::store) async fn read(
    store: &icechunk::Store,
    location: &Path,
    key: &str,
    meta: ObjectMeta,
    options: GetOptions,
) -> object_store::Result<GetResult> {
    options.check_preconditions(&meta)?;
    let range = crate::store::get::requested(
        "icechunk",
        location.as_ref(),
        options.range.as_ref(),
        meta.size,
    )?;
    let bytes = if options.head || range.is_empty() {
        Bytes::new()
    } else {
        match store.get(key, &ByteRange::Bounded(range.clone())).await {
            Ok(bytes) => bytes,
            Err(e) => {
                let target = virtual_target(store, key).await;
                return Err(icechunk_error_at(location.as_ref(), e, target));
            }
        }
    };
    Ok(crate::store::get::in_memory(bytes, meta, range))
}

/// [`icechunk_error`], naming the file a virtual chunk points into.
fn icechunk_error_at(
    key: &str,
    e: icechunk::store::StoreError,
    target: Option<String>,
) -> object_store::Error {
    use icechunk::session::SessionErrorKind;
    use icechunk::store::StoreErrorKind;
    match &e.kind {
        StoreErrorKind::NotFound(_)
        | StoreErrorKind::InvalidKey { .. }
        | StoreErrorKind::SessionError(SessionErrorKind::NodeNotFound { .. })
        | StoreErrorKind::SessionError(SessionErrorKind::AncestorNodeNotFound { .. }) => {
            not_found(key, &e.kind)
        }
        StoreErrorKind::SessionError(SessionErrorKind::VirtualReferenceError(v)) => {
            object_store::Error::Generic {
                store: "icechunk",
                source: Box::new(crate::store::references::Broken {
                    key: key.to_string(),
                    reason: match &target {
                        Some(t) => format!("its virtual chunk ({t}) cannot be read: {v}"),
                        None => format!("its virtual chunk cannot be read: {v}"),
                    },
                    disallowed: false,
                }),
            }
        }
        _ => generic(format!("'{key}': {}", e.kind)),
    }
}

#[async_trait]
impl Reads for Repo {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let (reference, key) = self.split(location.as_ref());
        let (id, pinned) = self.resolve(reference).await?;
        let (store, written) = self.at(&id).await?;
        let size = Repo::size(&store, key, location.as_ref()).await?;
        let meta = Repo::meta(location, (&id, written), pinned, size, key);
        read(&store, location, key, meta, options).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // Listing needs the repository for the whole stream: collect first.
        let location = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        let this = self.clone();
        futures::stream::once(async move { this.list_all(&location).await })
            .map_ok(|metas| futures::stream::iter(metas.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let location = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        let (reference, key) = self.split(&location);
        let (id, pinned) = self.resolve(reference).await?;
        let (store, written) = self.at(&id).await?;
        list_dir_at(&store, (&id, written), pinned, &location, key).await
    }
}

impl Repo {
    /// Every key below `location`, for a recursive listing.
    async fn list_all(&self, location: &str) -> object_store::Result<Vec<ObjectMeta>> {
        let (reference, key) = self.split(location);
        let (id, pinned) = self.resolve(reference).await?;
        let (store, written) = self.at(&id).await?;
        list_all_at(&store, (&id, written), pinned, location, key).await
    }
}

/// One level below `key` of a snapshot's (or session's) store, named as
/// below `location`, the store path that reached it.
pub(in crate::store) async fn list_dir_at(
    store: &icechunk::Store,
    at: (&SnapshotId, DateTime<Utc>),
    pinned: bool,
    location: &str,
    key: &str,
) -> object_store::Result<ListResult> {
    let shown = |name: &str| {
        if location.is_empty() {
            name.to_string()
        } else {
            format!("{location}/{name}")
        }
    };
    let items: Vec<icechunk::store::ListDirItem> = store
        .list_dir_items(key)
        .await
        .map_err(|e| icechunk_error(location, e))?
        .try_collect()
        .await
        .map_err(|e| icechunk_error(location, e))?;
    let mut objects = Vec::new();
    let mut common = Vec::new();
    for item in items {
        match item {
            icechunk::store::ListDirItem::Key(name) => {
                let zarr_key = if key.is_empty() {
                    name.clone()
                } else {
                    format!("{key}/{name}")
                };
                let size = Repo::size(store, &zarr_key, &shown(&name)).await?;
                objects.push(Repo::meta(
                    &Path::from(shown(&name)),
                    at,
                    pinned,
                    size,
                    &zarr_key,
                ));
            }
            icechunk::store::ListDirItem::Prefix(name) => common.push(Path::from(shown(&name))),
        }
    }
    Ok(ListResult {
        common_prefixes: common,
        objects,
        extensions: Default::default(),
    })
}

/// Every key below `key` of a snapshot's (or session's) store, named as
/// below `location`.
pub(in crate::store) async fn list_all_at(
    store: &icechunk::Store,
    at: (&SnapshotId, DateTime<Utc>),
    pinned: bool,
    location: &str,
    key: &str,
) -> object_store::Result<Vec<ObjectMeta>> {
    // The store path of a key: `location`'s version folder (if any) and
    // the key; `location` ends where `key` does.
    let base = if key.is_empty() && !location.is_empty() {
        format!("{location}/")
    } else {
        location[..location.len() - key.len()].to_string()
    };
    let keys: Vec<String> = store
        .list_prefix(if key.is_empty() { "/" } else { key })
        .await
        .map_err(|e| icechunk_error(location, e))?
        .try_collect()
        .await
        .map_err(|e| icechunk_error(location, e))?;
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let shown = format!("{base}{k}");
        let size = Repo::size(store, &k, &shown).await?;
        out.push(Repo::meta(&Path::from(shown.clone()), at, pinned, size, &k));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "repo_tests.rs"]
mod tests;
