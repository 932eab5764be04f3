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
use crate::zarr::error::Result;

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
