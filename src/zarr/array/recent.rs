//! A stream's own short memory of the chunks it decoded last.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::source::{ChunkSource, Settle};
use super::Array;
use crate::store::StoreKey;
use crate::zarr::buffer::ArrayBytes;
use crate::zarr::codec::ShardIndex;
use crate::zarr::error::{Result, ZarrError};

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
    /// Shard indexes, for slabs that split a row of inner chunks (with the
    /// server's cache off, each slab would read them again).
    indexes: moka::future::Cache<String, Option<Arc<ShardIndex>>>,
    settle: Settle,
}

/// Shard indexes one [`Recent`] keeps: a few rows of shards.
const RECENT_INDEXES: u64 = 256;

/// What [`Recent`] weighs an entry: a missing chunk weighs its entry too,
/// so a sparse array cannot let the entries grow without bound.
fn recent_weight(chunk: &Option<Arc<ArrayBytes>>) -> u64 {
    chunk.as_ref().map_or(0, |c| c.footprint() as u64) + 128
}

/// A chunk key, with the inner chunk and the shard version for inner chunks.
type RecentKey = (String, Option<(usize, Option<String>)>);

impl Recent {
    pub fn new(inner: Arc<dyn ChunkSource>, budget: u64) -> Self {
        let kept = moka::future::Cache::builder()
            .max_capacity(budget)
            .weigher(|_, c: &Option<Arc<ArrayBytes>>| {
                u32::try_from(recent_weight(c)).unwrap_or(u32::MAX)
            })
            // A reader moves on through the array: what it used last is
            // what it needs next, so no admission by frequency.
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .build();
        Recent {
            inner,
            budget,
            kept,
            indexes: moka::future::Cache::new(RECENT_INDEXES),
            settle: Settle::new(budget),
        }
    }
}

#[async_trait]
impl ChunkSource for Recent {
    async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>> {
        let loaded = AtomicBool::new(false);
        let chunk = self
            .kept
            .try_get_with((key.as_str().to_string(), None), async {
                loaded.store(true, Ordering::Relaxed);
                self.inner.chunk(array, key).await
            })
            .await
            .map_err(ZarrError::unshare)?;
        if loaded.load(Ordering::Relaxed) {
            self.settle
                .inserted(&self.kept, recent_weight(&chunk))
                .await;
        }
        Ok(chunk)
    }

    async fn shard_index(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ShardIndex>>> {
        self.indexes
            .try_get_with(key.as_str().to_string(), async {
                self.inner.shard_index(array, key).await
            })
            .await
            .map_err(ZarrError::unshare)
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
                    let chunk = Some(chunk);
                    self.kept.insert(id(*i), chunk.clone()).await;
                    self.settle
                        .inserted(&self.kept, recent_weight(&chunk))
                        .await;
                    *slot = chunk;
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

    fn read_past(&self, chunks: usize) {
        self.inner.read_past(chunks);
    }

    fn invalidate(&self, key: &StoreKey) {
        self.inner.invalidate(key);
        // Rare (a shard replaced mid-read): drop everything rather than scan.
        self.kept.invalidate_all();
        self.indexes.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::Store;
    use crate::zarr::array::source::tests::holds_near;
    use crate::zarr::array::Direct;
    use crate::zarr::Selection;

    #[tokio::test]
    async fn a_stream_reads_a_shard_index_once_until_the_shard_changes() {
        let doc = json!({"zarr_format": 3, "node_type": "array", "shape": [8, 8],
            "data_type": "uint8", "fill_value": 0,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [4, 4], "codecs": [{"name": "bytes"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}]}}]});
        let crate::zarr::NodeMetadata::Array(meta) =
            crate::zarr::metadata::v3::parse("a/zarr.json", &doc).unwrap()
        else {
            panic!("not an array");
        };
        let array = Array::new(Store::memory(), StoreKey::new("a").unwrap(), *meta).unwrap();
        let all = Selection::parse(":,:").unwrap().resolve(&[8, 8]).unwrap();
        array
            .write(&all, ArrayBytes::Fixed(vec![7; 64]))
            .await
            .unwrap();
        let recent = Recent::new(Arc::new(Direct), 1 << 20);
        let key = array.chunk_key(&[0, 0]).unwrap();
        let first = recent.shard_index(&array, &key).await.unwrap().unwrap();
        let again = recent.shard_index(&array, &key).await.unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again), "read again");
        recent.invalidate(&key);
        let fresh = recent.shard_index(&array, &key).await.unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &fresh), "kept past an invalidation");
    }

    #[tokio::test]
    async fn a_stream_s_recent_chunks_stay_near_their_budget() {
        holds_near(&Recent::new(Arc::new(Direct), 256 << 10), 256 << 10).await;
    }
}
