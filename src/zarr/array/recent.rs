//! A stream's own short memory of the chunks it decoded last.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;

use super::inflight::InFlight;
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
/// per slab. Loads are shared by concurrent slabs: one chunk's through the
/// cache below, inner chunks of a shard through [`InFlight`] (two
/// slabs side by side at the start of each row of inner chunks otherwise
/// both fetched and decoded the whole row: measured, a whole read of a
/// 1024 x 32768 array of 256^2 inner chunks made 912 loads of its 528
/// chunks and indexes).
#[derive(Debug)]
pub struct Recent {
    inner: Arc<dyn ChunkSource>,
    budget: u64,
    kept: moka::future::Cache<RecentKey, Option<Arc<ArrayBytes>>>,
    /// Shard indexes, for slabs that split a row of inner chunks (with the
    /// server's cache off, each slab would read them again).
    indexes: moka::future::Cache<String, Option<Arc<ShardIndex>>>,
    /// Inner chunks being loaded, shared by the slabs that want them.
    in_flight: InFlight<RecentKey>,
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
type RecentKey = (String, Option<(usize, u64)>);

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
            in_flight: InFlight::default(),
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
        index: &Arc<ShardIndex>,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>> {
        let version = index.version();
        let id = |i: usize| (key.as_str().to_string(), Some((i, version)));
        let find = |k: RecentKey| async move { self.kept.get(&k).await.flatten() };
        let keep = |k: RecentKey, chunk: Arc<ArrayBytes>| async move {
            let chunk = Some(chunk);
            let weight = recent_weight(&chunk);
            self.kept.insert(k, chunk).await;
            self.settle.inserted(&self.kept, weight).await;
        };
        let (inner, array, key, index) = (
            self.inner.clone(),
            array.clone(),
            key.clone(),
            index.clone(),
        );
        let load = move |ranges: Vec<(usize, Range<u64>)>| {
            async move { inner.inner_chunks(&array, &key, &index, &ranges).await }.boxed()
        };
        self.in_flight
            .inner_chunks(wanted, id, find, load, keep)
            .await
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
        self.in_flight.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::array::source::tests::{holds_near, one_shard};
    use crate::zarr::array::Direct;

    /// Reads straight from the store, slowly, counting the inner chunks
    /// it fetches.
    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    #[async_trait]
    impl ChunkSource for Counting {
        async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>> {
            Direct.chunk(array, key).await
        }
        async fn shard_index(
            &self,
            array: &Array,
            key: &StoreKey,
        ) -> Result<Option<Arc<ShardIndex>>> {
            Direct.shard_index(array, key).await
        }
        async fn inner_chunks(
            &self,
            array: &Array,
            key: &StoreKey,
            index: &Arc<ShardIndex>,
            wanted: &[(usize, Range<u64>)],
        ) -> Result<Vec<Arc<ArrayBytes>>> {
            self.0.fetch_add(wanted.len(), Ordering::Relaxed);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Direct.inner_chunks(array, key, index, wanted).await
        }
    }

    #[tokio::test]
    async fn slabs_side_by_side_load_an_inner_chunk_once() {
        let array = one_shard("a").await;
        let counting = Arc::new(Counting::default());
        let recent = Recent::new(counting.clone(), 1 << 20);
        let key = array.chunk_key(&[0, 0]).unwrap();
        let index = recent.shard_index(&array, &key).await.unwrap().unwrap();
        let range = |i: usize| (i, index.range(i).unwrap());
        // The first asks for inner chunks 0 and 1, the second (while the
        // first is loading) for 1 and 2, the third for 0 to 3.
        let (wa, wb, wc) = (
            [range(0), range(1)],
            [range(1), range(2)],
            [range(0), range(1), range(2), range(3)],
        );
        let (a, b, c) = futures::join!(
            recent.inner_chunks(&array, &key, &index, &wa),
            recent.inner_chunks(&array, &key, &index, &wb),
            recent.inner_chunks(&array, &key, &index, &wc),
        );
        let first = |c: &Arc<ArrayBytes>| c.as_ref().clone().into_fixed().unwrap()[0];
        let firsts =
            |r: Result<Vec<Arc<ArrayBytes>>>| r.unwrap().iter().map(first).collect::<Vec<_>>();
        assert_eq!(firsts(a), vec![0, 4]);
        assert_eq!(firsts(b), vec![4, 32]);
        assert_eq!(firsts(c), vec![0, 4, 32, 36]);
        assert_eq!(
            counting.0.load(Ordering::Relaxed),
            4,
            "each inner chunk loaded once"
        );
        assert!(recent.in_flight.is_empty(), "loads still pending");
        // A read dropped while it loads takes its entries with it.
        let other = one_shard("a").await;
        let other_recent = Recent::new(counting.clone(), 1 << 20);
        let other_index = other_recent
            .shard_index(&other, &key)
            .await
            .unwrap()
            .unwrap();
        let wanted = [(0, other_index.range(0).unwrap())];
        {
            let read = other_recent.inner_chunks(&other, &key, &other_index, &wanted);
            futures::pin_mut!(read);
            assert!(futures::poll!(read.as_mut()).is_pending());
            assert_eq!(other_recent.in_flight.len(), 1);
        }
        assert!(other_recent.in_flight.is_empty(), "left by a dropped read");
        // Kept now: asking again loads nothing.
        recent
            .inner_chunks(&array, &key, &index, &[range(3)])
            .await
            .unwrap();
        assert_eq!(counting.0.load(Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn a_stream_reads_a_shard_index_once_until_the_shard_changes() {
        let array = one_shard("a").await;
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
