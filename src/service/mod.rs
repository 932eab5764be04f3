//! The service layer: every operation the server offers, over the engine,
//! the store and the caches, with no HTTP in it. HTTP handlers parse a
//! request, call one operation here and encode its answer. This layer owns
//! the caches (decoded chunks, small stored values, and nodes with their
//! runtime arrays, so a codec chain is built once, not per request), the
//! limits on what one answer may cost, and what each write makes stale.

pub mod cache;
mod commit;
mod consolidated;
mod error;
mod events;
mod listing;
mod ome;
mod preview;
mod read;
mod value;
mod write;

use std::sync::Arc;

pub use cache::{Node, ZarrCache};
pub use commit::Writing;
pub use error::{ErrorKind, Result, ServiceError};
pub use events::{Change, ChangeKind, Notice, WATCH_BUFFER};
pub use listing::{Listed, Page};
pub use ome::{Image, Level};
pub use preview::{Preview, PreviewKind};
pub use read::{Content, Data, ReadRequest, Residence};
pub use value::{Got, Value, ValueBody};
pub use write::Preconditions;
pub use write::{Incoming, NodeCreate, Written};

use crate::config::Recheck;
use crate::store::{Store, StoreKey};
use crate::zarr::{Array, Hierarchy, NodeMetadata};

/// What one answer may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Answers built whole in memory (JSON, variable-length data), in bytes.
    pub in_memory: u64,
    /// Answers streamed slab by slab, in bytes.
    pub streamed: u64,
}

/// The operations, shared by every request.
#[derive(Debug)]
pub struct Service {
    store: Store,
    hierarchy: Hierarchy,
    cache: Arc<ZarrCache>,
    limits: Limits,
    /// Consolidated metadata built for groups that store none.
    consolidated: consolidated::Consolidated,
    /// Serve v3 groups' `zarr.json` with consolidated metadata added.
    consolidate_v3: bool,
    /// This service writes into one transaction of a versioned store.
    transactional: bool,
    /// What writes changed, for watchers.
    events: Arc<events::Events>,
}

impl Service {
    pub fn new(store: Store, cache_size: u64, recheck: Recheck, limits: Limits) -> Self {
        let cache = ZarrCache::new(cache_size, recheck);
        // Open files are trusted exactly as long as cached values are.
        match recheck {
            Recheck::Always => {}
            Recheck::After(ttl) => store.keep_files_open(Some(ttl)),
            Recheck::Never => store.keep_files_open(None),
        }
        let hierarchy =
            Hierarchy::new(store.clone()).with_source(Arc::new(cache::CachedSource(cache.clone())));
        Service {
            store,
            hierarchy,
            cache,
            limits,
            consolidated: Default::default(),
            consolidate_v3: true,
            transactional: false,
            events: Default::default(),
        }
    }

    /// Whether a v3 group's `zarr.json` that stores no consolidated
    /// metadata is served with it (on by default).
    pub fn with_v3_consolidation(mut self, on: bool) -> Self {
        self.consolidate_v3 = on;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn cache(&self) -> &Arc<ZarrCache> {
        &self.cache
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The node at `path` (cached, revalidated as configured).
    pub async fn node(&self, path: &StoreKey) -> Result<Arc<Node>> {
        Ok(self.cache.node(&self.hierarchy, path).await?)
    }

    /// The array at `path`, with its codec chain, from the node cache.
    pub async fn array(&self, path: &StoreKey) -> Result<Array> {
        let node = self.node(path).await?;
        node.array.clone().ok_or_else(|| {
            ServiceError::invalid(
                "not_an_array",
                format!("'{path}' is a group; data can only be read from and written to arrays"),
            )
        })
    }

    /// Every node at and below `path`, each with its runtime array when it
    /// is one (or why it cannot be read).
    pub async fn tree(&self, path: &StoreKey) -> Result<Vec<TreeNode>> {
        let nodes = self.hierarchy.walk(path).await?;
        Ok(nodes
            .into_iter()
            .map(|(p, node)| {
                let node = node.map_err(ServiceError::from).map(|meta| {
                    let array = match &meta {
                        NodeMetadata::Array(m) => StoreKey::new(&p)
                            .ok()
                            .and_then(|k| self.hierarchy.bind(&k, (**m).clone()).ok()),
                        NodeMetadata::Group(_) => None,
                    };
                    Node { meta, array }
                });
                TreeNode { path: p, node }
            })
            .collect())
    }

    /// The nodes directly below a group, by name (or why each cannot be read).
    pub async fn members(&self, path: &StoreKey) -> Result<Vec<(String, Result<NodeMetadata>)>> {
        Ok(self
            .hierarchy
            .children(path)
            .await?
            .into_iter()
            .map(|(name, node)| (name, node.map_err(ServiceError::from)))
            .collect())
    }

    /// Branches, tags and the latest `limit` snapshots of the versioned
    /// store (an Icechunk repository) mounted at `path`.
    pub async fn versions(&self, path: &StoreKey, limit: usize) -> Result<crate::store::Versions> {
        Ok(self.store.versions(path, limit).await?)
    }

    /// Stored chunk-grid keys of an array (shards when sharded) and their
    /// bytes; which ones, for grids of at most [`CHUNK_MAP_MAX`] cells.
    pub async fn storage(&self, array: &Array) -> Result<Storage> {
        let meta = array.metadata();
        let prefix_len = if array.path().is_root() {
            0
        } else {
            array.path().as_str().len() + 1
        };
        let mut storage = Storage::default();
        let cells = meta.grid_shape().iter().product::<u64>();
        let mut present = (cells <= CHUNK_MAP_MAX).then(Vec::new);
        for (k, size) in self.store.list_sizes(array.path()).await? {
            if let Some(index) = meta
                .chunk_key_encoding
                .decode(&k.as_str()[prefix_len..], meta.ndim())
            {
                storage.stored_bytes += size;
                storage.chunks_initialized += 1;
                if let Some(p) = present.as_mut() {
                    p.push(index);
                }
            }
        }
        if let Some(p) = present.as_mut() {
            p.sort();
        }
        storage.present = present;
        Ok(storage)
    }
}

/// One node of a tree walk.
#[derive(Debug)]
pub struct TreeNode {
    pub path: String,
    pub node: Result<Node>,
}

/// Grids up to this many cells (chunks, or shards) say which cells are stored.
pub const CHUNK_MAP_MAX: u64 = 4096;

/// What an array occupies in the store.
#[derive(Debug, Default, Clone)]
pub struct Storage {
    pub stored_bytes: u64,
    pub chunks_initialized: u64,
    /// The grid indices of the stored cells, in order, when the grid has at
    /// most [`CHUNK_MAP_MAX`] cells.
    pub present: Option<Vec<Vec<u64>>>,
}
