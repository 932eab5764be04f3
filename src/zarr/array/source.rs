//! Where decoded chunks come from. The engine reads through a
//! [`ChunkSource`]: [`Direct`] goes to the store every time; the server
//! plugs in a cache. Keeping the cache behind this trait keeps the engine
//! free of any caching policy.

use std::hash::Hash;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
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
        index: &Arc<ShardIndex>,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>>;

    /// The decoded chunks at `keys`, in that order. A source that
    /// [loads them together](ChunkSource::loads_together) overrides this
    /// (see [`load_chunks`]).
    async fn chunks(
        &self,
        array: &Array,
        keys: &[StoreKey],
    ) -> Result<Vec<Option<Arc<ArrayBytes>>>> {
        one_by_one(self, array, keys).await
    }

    /// Whether [`ChunkSource::chunks`] reads and decodes its chunks
    /// together; when it does not, reads ask for small chunks one at a time.
    fn loads_together(&self) -> bool {
        false
    }

    /// The value at `key` (a chunk or a shard) was written or deleted.
    fn invalidate(&self, _key: &StoreKey) {}

    /// Whether a decoded chunk of `bytes` read through this source may be
    /// kept for later reads. When it is not, a read that needs only part of
    /// a chunk may decode only that part, past this source.
    fn keeps(&self, _bytes: usize) -> bool {
        false
    }

    /// A read took `chunks` chunks straight from the store, past this
    /// source, since it [keeps](ChunkSource::keeps) none of them: a source
    /// that counts misses counts these too.
    fn read_past(&self, _chunks: usize) {}
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

/// The chunks at `keys` from `source`, each loaded on its own.
pub async fn one_by_one<S: ChunkSource + ?Sized>(
    source: &S,
    array: &Array,
    keys: &[StoreKey],
) -> Result<Vec<Option<Arc<ArrayBytes>>>> {
    futures::future::try_join_all(keys.iter().map(|key| source.chunk(array, key))).await
}

/// Stored bytes one store call of [`load_chunks`] reads before the rest of
/// its keys wait for the next call: a small chunk's key holding a huge file
/// is read on its own, as a single chunk read would.
const GROUP_STORED_BYTES: u64 = 1 << 20;

/// A chunk [`load_chunks`] read: decoded, with the ETag of the stored value
/// it was decoded from when that can be trusted to change with the value
/// ([`KeyMeta::trusted_e_tag`](crate::store::KeyMeta::trusted_e_tag)).
pub type Loaded = (Arc<ArrayBytes>, Option<String>);

/// Read several chunks in one store call (one trip to the blocking pool
/// for a local directory) and decode them in one task: for small chunks
/// the hand-offs between threads cost more than the reads and decodes.
pub async fn load_chunks(array: &Array, keys: &[StoreKey]) -> Result<Vec<Option<Loaded>>> {
    let mut chunks = Vec::with_capacity(keys.len());
    while chunks.len() < keys.len() {
        let keys = &keys[chunks.len()..];
        let stored = array.store().get_many(keys, GROUP_STORED_BYTES).await?;
        if stored.is_empty() {
            return Err(ZarrError::Internal(format!(
                "the store read none of {} chunks",
                keys.len()
            )));
        }
        let (array, keys) = (array.clone(), keys[..stored.len()].to_vec());
        let decoded: Vec<_> = run_blocking(move || {
            stored
                .into_iter()
                .zip(&keys)
                .map(|(value, key)| {
                    value
                        .map(|v| {
                            let chunk = array.decode_chunk(key, Vec::from(v.bytes))?;
                            Ok((Arc::new(chunk), v.meta.trusted_e_tag()))
                        })
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()
        })
        .await?;
        chunks.extend(decoded);
    }
    Ok(chunks)
}

/// Fetch inner chunks in one vectored read of the shard version `index`
/// describes, and decode them in parallel.
pub async fn fetch_inner_chunks(
    array: &Array,
    key: &StoreKey,
    index: &ShardIndex,
    wanted: &[(usize, Range<u64>)],
) -> Result<Vec<Arc<ArrayBytes>>> {
    fetch_inner_chunks_then(array, key, index, wanted, |_, chunk| Ok(Arc::new(chunk))).await
}

/// [`fetch_inner_chunks`], handing each decoded chunk (with its position
/// in `wanted`) to `then` on the thread that decoded it.
pub async fn fetch_inner_chunks_then<T, F>(
    array: &Array,
    key: &StoreKey,
    index: &ShardIndex,
    wanted: &[(usize, Range<u64>)],
    then: F,
) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize, ArrayBytes) -> Result<T> + Clone + Send + 'static,
{
    let ranges: Vec<Range<u64>> = wanted.iter().map(|(_, r)| r.clone()).collect();
    let blobs = array
        .store()
        .get_ranges_at(key, &ranges, index.e_tag())
        .await?;
    let decodes = blobs.into_iter().enumerate().map(|(i, blob)| {
        let (array, key, then) = (array.clone(), key.clone(), then.clone());
        run_blocking(move || {
            let sharding = array.sharding()?;
            let chunk = sharding
                .decode_inner(Vec::from(blob), array.chunk_repr())
                .map_err(|e| e.for_chunk(key.as_str()))?;
            then(i, chunk)
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

    async fn chunks(
        &self,
        array: &Array,
        keys: &[StoreKey],
    ) -> Result<Vec<Option<Arc<ArrayBytes>>>> {
        let loaded = load_chunks(array, keys).await?;
        Ok(loaded.into_iter().map(|l| l.map(|(c, _)| c)).collect())
    }

    fn loads_together(&self) -> bool {
        true
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
        index: &Arc<ShardIndex>,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>> {
        fetch_inner_chunks(array, key, index, wanted).await
    }
}

/// Keeps a moka cache of large values near its byte bound. moka applies
/// inserts to the bound in batches, after 64 writes or so: a cache of 4 MiB
/// chunks with a 64 MiB bound held four times that between batches
/// (measured while streaming a whole array). Counting the bytes inserted
/// since the bound was last applied, and applying it once they pass an
/// eighth of the bound, keeps the overshoot to that eighth and one entry.
#[derive(Debug)]
pub struct Settle {
    unsettled: AtomicU64,
    /// `None` for a cache that keeps nothing: no insert is left to apply.
    slack: Option<u64>,
}

impl Settle {
    pub fn new(capacity: u64) -> Self {
        Settle {
            unsettled: AtomicU64::new(0),
            slack: (capacity > 0).then(|| (capacity / 8).max(1)),
        }
    }

    /// `weight` bytes were just inserted into `cache`.
    pub async fn inserted<K, V>(&self, cache: &moka::future::Cache<K, V>, weight: u64)
    where
        K: Hash + Eq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        let Some(slack) = self.slack else {
            return;
        };
        let before = self.unsettled.fetch_add(weight, Ordering::Relaxed);
        // One of the inserters that pass the slack together applies the
        // bound, and no count is lost. A request cancelled while applying
        // it leaves that to the next slack's worth (or to moka's own batch).
        if before.saturating_add(weight) >= slack
            && self.unsettled.swap(0, Ordering::AcqRel) >= slack
        {
            cache.run_pending_tasks().await;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Weak;

    use serde_json::json;

    use super::*;
    use crate::store::Store;
    use crate::zarr::metadata::v2;
    use crate::zarr::Selection;

    /// An array of `chunks` stored chunks of 64 KiB each in `store`, every
    /// one written, each element its row number plus one.
    pub(crate) async fn array_of_chunks_in(store: Store, chunks: u64) -> Array {
        let doc = json!({"zarr_format": 2, "shape": [128 * chunks, 128], "chunks": [128, 128],
            "dtype": "<f4", "fill_value": 0, "order": "C", "filters": null, "compressor": null});
        let meta = v2::parse_array("a/.zarray", &doc, None).unwrap();
        let array = Array::new(store, StoreKey::new("a").unwrap(), meta).unwrap();
        let all = Selection::parse(":,:")
            .unwrap()
            .resolve(&[128 * chunks, 128])
            .unwrap();
        let rows: Vec<u8> = (0..128 * chunks)
            .flat_map(|r| (r as f32 + 1.0).to_le_bytes().repeat(128))
            .collect();
        array.write(&all, ArrayBytes::Fixed(rows)).await.unwrap();
        array
    }

    /// One 8 x 8 shard of four 4 x 4 inner chunks of bytes 0 to 63, written.
    pub(crate) async fn one_shard(path: &str) -> Array {
        one_shard_in(Store::memory(), path).await
    }

    /// [`one_shard`] in `store`.
    pub(crate) async fn one_shard_in(store: Store, path: &str) -> Array {
        let doc = json!({"zarr_format": 3, "node_type": "array", "shape": [8, 8],
            "data_type": "uint8", "fill_value": 0,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [4, 4], "codecs": [{"name": "bytes"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}]}}]});
        let crate::zarr::NodeMetadata::Array(meta) =
            crate::zarr::metadata::v3::parse(&format!("{path}/zarr.json"), &doc).unwrap()
        else {
            panic!("not an array");
        };
        let array = Array::new(store, StoreKey::new(path).unwrap(), *meta).unwrap();
        let all = Selection::parse(":,:").unwrap().resolve(&[8, 8]).unwrap();
        array
            .write(&all, ArrayBytes::Fixed((0..64).collect()))
            .await
            .unwrap();
        array
    }

    async fn array_of_chunks(chunks: u64) -> Array {
        array_of_chunks_in(Store::memory(), chunks).await
    }

    #[tokio::test]
    async fn reads_keep_a_byte_bound_of_large_chunks_in_flight() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let big = |side: u64| {
            let doc = json!({"zarr_format": 2, "shape": [side, side], "chunks": [side, side],
                "dtype": "<f4", "fill_value": 0, "order": "C", "filters": null, "compressor": null});
            let meta = v2::parse_array("a/.zarray", &doc, None).unwrap();
            Array::new(Store::memory(), StoreKey::new("a").unwrap(), meta).unwrap()
        };
        // 4 MiB chunks: 16 MiB of them, or one per core.
        assert_eq!(big(1024).chunks_at_once(), cores.clamp(4, 32));
        // 16 KiB chunks: the count bound, not the bytes, applies.
        assert_eq!(big(64).chunks_at_once(), 32);
    }

    #[tokio::test]
    async fn small_chunks_in_a_directory_are_read_several_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let array = array_of_chunks_in(Store::local(dir.path()).unwrap(), 48).await;
        // A chunk that was never written (removed) reads as the fill value.
        std::fs::remove_file(dir.path().join("a/7.0")).unwrap();
        assert_eq!(array.chunks_per_load(48), Some(6));
        let window = Selection::parse("100:5000,3:120")
            .unwrap()
            .resolve(&[128 * 48, 128])
            .unwrap();
        let got = array.read(&window).await.unwrap().into_fixed().unwrap();
        let values: Vec<f32> = got
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values.len(), 4900 * 117);
        for (n, row) in values.chunks_exact(117).enumerate() {
            let r = 100 + n as u64;
            let want = if r / 128 == 7 { 0.0 } else { r as f32 + 1.0 };
            assert!(row.iter().all(|&v| v == want), "row {r}: {:?}", &row[..3]);
        }
        // 48 stored chunks of 64 KiB are more than one store call reads:
        // the rest come from the calls after it, in order.
        let keys: Vec<_> = (0..48).map(|i| array.chunk_key(&[i, 0]).unwrap()).collect();
        let chunks = load_chunks(&array, &keys).await.unwrap();
        let firsts: Vec<Option<f32>> = chunks
            .iter()
            .map(|c| match c.as_ref()?.0.as_ref() {
                ArrayBytes::Fixed(b) => Some(f32::from_le_bytes(b[..4].try_into().unwrap())),
                ArrayBytes::Variable(_) => panic!("fixed-size chunks were written"),
            })
            .collect();
        let want: Vec<Option<f32>> = (0..48u64)
            .map(|i| (i != 7).then(|| (i * 128) as f32 + 1.0))
            .collect();
        assert_eq!(firsts, want);
    }

    /// Read 48 chunks of 64 KiB through `source`, which keeps at most
    /// `bound` bytes: at most an eighth more (and one chunk) may still be
    /// held afterwards. 48 inserts are fewer than moka applies to its bound
    /// at once, so without settling all 3 MiB would be.
    pub(crate) async fn holds_near(source: &dyn ChunkSource, bound: u64) {
        let array = array_of_chunks(48).await;
        let mut seen = Vec::new();
        for i in 0..48 {
            let key = array.chunk_key(&[i, 0]).unwrap();
            let chunk = source.chunk(&array, &key).await.unwrap().unwrap();
            seen.push(Arc::downgrade(&chunk));
        }
        let held: usize = seen
            .iter()
            .filter_map(Weak::upgrade)
            .map(|c| c.footprint())
            .sum();
        let most = (bound + bound / 8) as usize + (64 << 10) + 4096;
        assert!(held <= most, "{held} > {most}");
    }
}
