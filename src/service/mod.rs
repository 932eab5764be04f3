//! The service layer: every operation the server offers, over the engine,
//! the store and the caches, with no HTTP in it. HTTP handlers parse a
//! request, call one operation here and encode its answer. This layer owns
//! the caches (decoded chunks, small stored values, and nodes with their
//! runtime arrays, so a codec chain is built once, not per request), the
//! limits on what one answer may cost, and what each write makes stale.

mod blocks;
pub mod budget;
pub mod cache;
mod commit;
mod compute;
mod consolidated;
mod dataset;
mod error;
mod events;
mod listing;
mod maps;
mod ome;
mod preview;
mod read;
pub mod records;
mod tree;
mod value;
mod variables;
mod write;

use std::sync::Arc;

pub use budget::{Budget, Reservation, REFUSED as BUDGET_REFUSED};
pub use cache::{Node, ZarrCache};
pub use commit::Writing;
pub use compute::{Statistics, MAX_BINS};
pub use dataset::{number_json, Axis, AxisValues, DatasetView, Query, Reduction, VariableView};
pub use error::{ErrorKind, Result, ServiceError};
pub use events::{Change, ChangeKind, Notice, WATCH_BUFFER};
pub use listing::{Listed, Page};
pub use maps::{
    Interpolation, MapLayer, MapLevel, OtherDim, Place, PointValue, Raster, Sampled,
    MAX_PICTURE_PIXELS,
};
pub use variables::{Described, Variable};
// What a map request is made of, as the engine defines it.
pub use crate::zarr::geo::tms;
pub use crate::zarr::geo::warp::{Resampling, Target};
pub use crate::zarr::geo::Crs;
pub use ome::{Image, Level};
pub use preview::{Preview, PreviewKind};
pub use read::{Content, Data, ReadRequest, Residence};
pub use tree::{TreeNode, TreePage, MAX_TREE_PAGE, TREE_PAGE};
pub use value::{Got, Value, ValueBody};
pub use write::Preconditions;
pub use write::{Incoming, NodeCreate, Written};

use crate::config::Recheck;
use crate::store::{Change as KeyChange, Store, StoreKey};
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
    /// Answer `.zmetadata` of v2 groups that store none.
    consolidate_v2: bool,
    /// Check metadata documents written as raw keys before storing them.
    check_documents: bool,
    /// This service writes into one transaction of a versioned store.
    transactional: bool,
    /// What writes changed, for watchers.
    events: Arc<events::Events>,
    /// Memory every costly answer reserves before its work starts.
    budget: Budget,
    /// Coordinates read whole: the index of their dimension's labels.
    coordinates: dataset::Coordinates,
    /// Map layers and default colour ranges, briefly kept.
    maps: maps::MapCaches,
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
            consolidate_v2: true,
            check_documents: true,
            transactional: false,
            events: Default::default(),
            budget: Budget::new(
                crate::config::default_memory_budget(cache_size),
                std::time::Duration::from_secs(1),
            ),
            coordinates: dataset::coordinates_cache(),
            maps: Default::default(),
        }
    }

    /// Answers reserve their memory from `budget` (shared with whoever
    /// holds a clone of it).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The process's memory budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Whether a v3 group's `zarr.json` that stores no consolidated
    /// metadata is served with it (on by default).
    pub fn with_v3_consolidation(mut self, on: bool) -> Self {
        self.consolidate_v3 = on;
        self
    }

    /// Whether metadata documents written as raw keys are checked (parse
    /// as what their names say, nodes placed and replaced as the API
    /// allows) before they are stored; on by default.
    pub fn with_document_checks(mut self, on: bool) -> Self {
        self.check_documents = on;
        self
    }

    /// Whether `.zmetadata` of a v2 group that stores none is answered
    /// with one built from the hierarchy (on by default).
    pub fn with_v2_consolidation(mut self, on: bool) -> Self {
        self.consolidate_v2 = on;
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
        if let Some(why) = &node.undecodable {
            return Err(why.shared_copy().into());
        }
        node.array.clone().ok_or_else(|| {
            ServiceError::invalid(
                "not_an_array",
                format!("'{path}' is a group; data can only be read from and written to arrays"),
            )
        })
    }

    /// `keys` with the ETags they have now, for [`Service::unchanged`]:
    /// `None` for a key that is missing.
    pub async fn versions_of(
        &self,
        keys: Vec<StoreKey>,
    ) -> Result<Vec<(StoreKey, Option<String>)>> {
        let asks: Vec<(StoreKey, Option<String>)> = keys.into_iter().map(|k| (k, None)).collect();
        let now = self.store.changed_since_many(&asks).await?;
        Ok(asks
            .into_iter()
            .zip(now)
            .map(|((key, _), change)| {
                let tag = match change {
                    KeyChange::Changed(meta) => Some(validator(&meta)),
                    KeyChange::Unchanged | KeyChange::Missing => None,
                };
                (key, tag)
            })
            .collect())
    }

    /// Whether every one of `sources` (from [`Service::versions_of`], or
    /// values read with [`validator`]) is as it was: unchanged by its ETag,
    /// or still missing. A value whose ETag was not trusted counts as changed.
    pub async fn unchanged(&self, sources: &[(StoreKey, Option<String>)]) -> Result<bool> {
        let now = self.store.changed_since_many(sources).await?;
        Ok(now
            .iter()
            .zip(sources)
            .all(|(change, (_, tag))| match change {
                KeyChange::Unchanged => true,
                KeyChange::Missing => tag.is_none(),
                KeyChange::Changed(_) => false,
            }))
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
        let mut storage = Storage {
            complete: true,
            ..Default::default()
        };
        let cells = meta.grid_shape().iter().product::<u64>();
        let mut present = (cells <= CHUNK_MAP_MAX).then(Vec::new);
        // Page by page, and only so far: what a description costs must not
        // grow with the chunks an array has stored.
        let mut offset: Option<StoreKey> = None;
        let mut listed = 0u64;
        loop {
            let page = self
                .store
                .list_page(
                    array.path(),
                    offset.as_ref().map(|k| k.as_str()),
                    STORAGE_PAGE,
                )
                .await?;
            let last = page.len() < STORAGE_PAGE;
            listed += page.len() as u64;
            offset = page.last().map(|(k, _)| k.clone());
            for (k, m) in page {
                if let Some(index) = meta
                    .chunk_key_encoding
                    .decode(&k.as_str()[prefix_len..], meta.ndim())
                {
                    storage.stored_bytes += m.size;
                    storage.chunks_initialized += 1;
                    if let Some(p) = present.as_mut() {
                        p.push(index);
                    }
                }
            }
            if last {
                break;
            }
            if listed >= MAX_STORAGE_KEYS {
                // Complete if nothing follows the last full page.
                let after = offset.as_ref().map(|k| k.as_str());
                storage.complete = self
                    .store
                    .list_page(array.path(), after, 1)
                    .await?
                    .is_empty();
                if !storage.complete {
                    present = None;
                }
                break;
            }
        }
        if let Some(p) = present.as_mut() {
            p.sort();
        }
        storage.present = present;
        Ok(storage)
    }
}

/// Grids up to this many cells (chunks, or shards) say which cells are stored.
pub const CHUNK_MAP_MAX: u64 = 4096;

/// What a value read with `meta` is revalidated by: its ETag, or, when that
/// cannot be trusted yet (changed within the last seconds, see
/// `KeyMeta::settled`), a tag no value has, so it counts as changed.
pub fn validator(meta: &crate::store::KeyMeta) -> String {
    meta.trusted_e_tag()
        .unwrap_or_else(|| UNTRUSTED.to_string())
}

/// The tag of a value whose ETag was not trusted.
const UNTRUSTED: &str = "zarrd-untrusted";

/// Keys listed a page at a time when an array's storage is counted.
const STORAGE_PAGE: usize = 4096;
/// Most keys counted: past them the counts are lower bounds.
pub const MAX_STORAGE_KEYS: u64 = 100_000;

/// What an array occupies in the store.
#[derive(Debug, Default, Clone)]
pub struct Storage {
    /// Whether every stored key was counted (false past [`MAX_STORAGE_KEYS`]:
    /// the counts are then lower bounds).
    pub complete: bool,
    pub stored_bytes: u64,
    pub chunks_initialized: u64,
    /// The grid indices of the stored cells, in order, when the grid has at
    /// most [`CHUNK_MAP_MAX`] cells.
    pub present: Option<Vec<Vec<u64>>>,
}

#[cfg(test)]
mod derived_tests;
