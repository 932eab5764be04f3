//! Where decoded chunks come from. The engine reads through a
//! [`ChunkSource`]: [`Direct`] goes to the store every time; the server
//! plugs in a cache. Keeping the cache behind this trait keeps the engine
//! free of any caching policy.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;

use super::{run_blocking, Array};
use crate::store::StoreKey;
use crate::zarr::buffer::ArrayBytes;
use crate::zarr::codec::ShardIndex;
use crate::zarr::error::{Result, ZarrError};

/// Supplies decoded chunks, shard indexes and inner chunks of shards.
#[async_trait]
pub trait ChunkSource: Send + Sync + std::fmt::Debug {
    /// The decoded chunk at `key`, `None` when it is not stored.
    async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>>;

    /// The index of the shard at `key`, `None` when the shard is not stored.
    async fn shard_index(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ShardIndex>>>;

    /// Inner chunks `wanted` (index in the shard, byte range) of the shard
    /// at `key`, from the shard version `index` was read from; a
    /// [`crate::store::StoreError::Precondition`] when that version is gone.
    async fn inner_chunks(
        &self,
        array: &Array,
        key: &StoreKey,
        index: &ShardIndex,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>>;

    /// The value at `key` (a chunk or a shard) was written or deleted.
    fn invalidate(&self, _key: &StoreKey) {}

    /// Whether a decoded chunk of `bytes` read through this source may be
    /// kept for later reads. When it is not, a read that needs only part of
    /// a chunk may decode only that part, past this source.
    fn keeps(&self, _bytes: usize) -> bool {
        false
    }
}

/// Reads straight from the store, decoding on the blocking pool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Direct;

/// Decode one stored chunk off the async runtime.
pub async fn decode_chunk(
    array: &Array,
    key: &StoreKey,
    bytes: bytes::Bytes,
) -> Result<Arc<ArrayBytes>> {
    let (array, key) = (array.clone(), key.clone());
    run_blocking(move || array.decode_chunk(&key, Vec::from(bytes)).map(Arc::new)).await
}

/// Fetch inner chunks in one vectored read of the shard version `index`
/// describes, and decode them in parallel.
pub async fn fetch_inner_chunks(
    array: &Array,
    key: &StoreKey,
    index: &ShardIndex,
    wanted: &[(usize, Range<u64>)],
) -> Result<Vec<Arc<ArrayBytes>>> {
    let ranges: Vec<Range<u64>> = wanted.iter().map(|(_, r)| r.clone()).collect();
    let blobs = array
        .store()
        .get_ranges_at(key, &ranges, index.e_tag())
        .await?;
    let decodes = blobs.into_iter().map(|blob| {
        let (array, key) = (array.clone(), key.clone());
        run_blocking(move || {
            let sharding = array.sharding()?;
            sharding
                .decode_inner(Vec::from(blob), array.chunk_repr())
                .map(Arc::new)
                .map_err(|e| e.for_chunk(key.as_str()))
        })
    });
    futures::future::try_join_all(decodes).await
}

#[async_trait]
impl ChunkSource for Direct {
    async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>> {
        match array.store().get(key).await? {
            Some(bytes) => decode_chunk(array, key, bytes).await.map(Some),
            None => Ok(None),
        }
    }

    async fn shard_index(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ShardIndex>>> {
        Ok(array
            .read_shard_index(key)
            .await?
            .map(|(index, _)| Arc::new(index)))
    }

    async fn inner_chunks(
        &self,
        array: &Array,
        key: &StoreKey,
        index: &ShardIndex,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>> {
        fetch_inner_chunks(array, key, index, wanted).await
    }
}

/// The chunks one reader decoded last, up to a byte budget, in front of
/// another source. A selection streamed slab by slab asks for the same
/// chunks again whenever slabs split a chunk row (and two slabs are read at
/// once); with the server's cache off, or full of data it will not evict
/// for these, each such chunk would otherwise be fetched and decoded once
/// per slab. Loads of one (unsharded) chunk are shared by concurrent slabs;
/// inner chunks of a shard are fetched in vectored reads and kept, not shared
/// while in flight.
#[derive(Debug)]
pub struct Recent {
    inner: Arc<dyn ChunkSource>,
    budget: u64,
    kept: moka::future::Cache<RecentKey, Option<Arc<ArrayBytes>>>,
}

/// A chunk key, with the inner chunk and the shard version for inner chunks.
type RecentKey = (String, Option<(usize, Option<String>)>);

impl Recent {
    pub fn new(inner: Arc<dyn ChunkSource>, budget: u64) -> Self {
        let kept = moka::future::Cache::builder()
            .max_capacity(budget)
            // A missing chunk weighs its entry too: a sparse array must not
            // let the entries grow without bound.
            .weigher(|_, c: &Option<Arc<ArrayBytes>>| {
                let bytes = c.as_ref().map_or(0, |c| c.footprint()) + 128;
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            // A reader moves on through the array: what it used last is
            // what it needs next, so no admission by frequency.
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .build();
        Recent {
            inner,
            budget,
            kept,
        }
    }
}

#[async_trait]
impl ChunkSource for Recent {
    async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>> {
        self.kept
            .try_get_with((key.as_str().to_string(), None), async {
                self.inner.chunk(array, key).await
            })
            .await
            .map_err(ZarrError::unshare)
    }

    async fn shard_index(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ShardIndex>>> {
        self.inner.shard_index(array, key).await
    }

    async fn inner_chunks(
        &self,
        array: &Array,
        key: &StoreKey,
        index: &ShardIndex,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>> {
        let version = index.e_tag().map(str::to_string);
        let id = |i: usize| (key.as_str().to_string(), Some((i, version.clone())));
        let mut found = Vec::with_capacity(wanted.len());
        for (i, _) in wanted {
            found.push(self.kept.get(&id(*i)).await.flatten());
        }
        let missing: Vec<(usize, Range<u64>)> = wanted
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(w, _)| w.clone())
            .collect();
        if !missing.is_empty() {
            // Fetched together, in one vectored read of the shard.
            let fetched = self.inner.inner_chunks(array, key, index, &missing).await?;
            let mut fetched = missing.iter().zip(fetched);
            for slot in found.iter_mut().filter(|f| f.is_none()) {
                if let Some(((i, _), chunk)) = fetched.next() {
                    self.kept.insert(id(*i), Some(chunk.clone())).await;
                    *slot = Some(chunk);
                }
            }
        }
        found
            .into_iter()
            .map(|c| c.ok_or_else(|| ZarrError::Internal("an inner chunk was not read".into())))
            .collect()
    }

    fn keeps(&self, bytes: usize) -> bool {
        self.inner.keeps(bytes) || bytes.saturating_add(128) as u64 <= self.budget
    }

    fn invalidate(&self, key: &StoreKey) {
        self.inner.invalidate(key);
        // Rare (a shard replaced mid-read): drop everything rather than scan.
        self.kept.invalidate_all();
    }
}
