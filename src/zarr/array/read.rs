//! Reading selections: fetch only the chunks a selection intersects (for
//! sharded arrays only the shard index and the inner chunks needed, in one
//! vectored read per shard), decode them in parallel off the async runtime,
//! and copy the selected elements into the result.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::output::Output;
use super::source::fetch_inner_chunks_then;
use super::{run_blocking, Array, CHUNK_CONCURRENCY};
use crate::store::{KeyMeta, StoreKey};
use crate::zarr::buffer::ArrayBytes;
use crate::zarr::codec::ShardIndex;
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::selection::{ChunkPart, Resolved};

impl Array {
    /// Read a resolved selection. The result has the selection's block shape
    /// (dropped dimensions kept as length 1) in C order.
    pub async fn read(&self, selection: &Resolved) -> Result<ArrayBytes> {
        // Callers bound a selection's size before reading; one whose bytes
        // this machine cannot even count is refused here rather than
        // reserved.
        let elem = self.elem_size();
        let Some(n) = (selection.block_shape().iter())
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|n| n.checked_mul(elem).is_some())
        else {
            return Err(ZarrError::Selection(
                "the selection holds more bytes than this machine can address".into(),
            ));
        };
        let fill = &self.chunk_repr.fill.0;
        let out = Output::new(fill, n, elem, self.meta.dtype.is_variable());
        // Each way of reading says how many elements its parts wrote,
        // copied or filled: the output is only readable when that is all.
        let written = if n == 0 {
            0
        } else if self.chain.sharding().is_some() {
            self.read_sharded(selection, &out).await?
        } else {
            self.read_chunked(selection, &out).await?
        };
        out.into_inner(written)
    }

    /// Read and decode one chunk (`None` when it is not stored).
    pub async fn read_chunk(&self, coords: &[u64]) -> Result<Option<Arc<ArrayBytes>>> {
        let key = self.chunk_key(coords)?;
        self.source.chunk(self, &key).await
    }

    /// Copy a decoded chunk's part into the output (`None`: fill it, the
    /// chunk is not stored): small parts right here (a trip to the blocking
    /// pool costs more than copying them), large ones on the blocking pool,
    /// where parts of different chunks are copied in parallel. The number
    /// of elements written.
    async fn scatter(
        &self,
        chunk: Option<Arc<ArrayBytes>>,
        chunk_shape: Vec<usize>,
        part: ChunkPart,
        out: &Arc<Output>,
        out_shape: &[usize],
    ) -> Result<usize> {
        // SAFETY (both copies): `part` is one chunk's part of a resolved
        // selection; no other chunk's part shares its output elements.
        let inline = part_bytes(&part, self.elem_size()) <= INLINE_COPY_BYTES;
        let write = move |out: &Output, out_shape: &[usize]| match &chunk {
            Some(chunk) => unsafe { out.scatter(chunk, &chunk_shape, &part, out_shape) },
            None => unsafe { out.fill(&chunk_shape, &part, out_shape) },
        };
        if inline {
            let written = write(out, out_shape)?;
            // Cached chunks come without a pause: let other requests on this
            // thread run between copies.
            tokio::task::consume_budget().await;
            return Ok(written);
        }
        let (out, out_shape) = (out.clone(), out_shape.to_vec());
        run_blocking(move || write(&out, &out_shape)).await
    }

    async fn read_chunked(&self, selection: &Resolved, out: &Arc<Output>) -> Result<usize> {
        let out_shape = selection.block_shape();
        let parts = selection.chunks(&self.meta.chunk_shape);
        if let Some(per_load) = self.chunks_per_load(parts.len()) {
            return self.read_loads(parts, per_load, out, &out_shape).await;
        }
        futures::stream::iter(parts)
            .map(|(coords, part)| {
                let out_shape = &out_shape;
                async move {
                    let key = self.chunk_key(&coords)?;
                    if let Some(rows) = self.partial_rows(&part) {
                        return self.read_rows(&key, rows, part, out, out_shape).await;
                    }
                    let chunk = self.source.chunk(self, &key).await?;
                    self.scatter(chunk, self.chunk_repr.shape.clone(), part, out, out_shape)
                        .await
                }
            })
            .buffer_unordered(self.chunks_at_once())
            .try_fold(0, |sum, written| async move { Ok(sum + written) })
            .await
    }

    /// How many chunks one read loads at once: enough to keep every core
    /// decoding, and otherwise no more than [`IN_FLIGHT_BYTES`] of them. A
    /// fixed count let a read of a wide array hold one encoded and one
    /// decoded copy of a whole row of large chunks at once (measured: 4 MiB
    /// chunks, 32 at once against 4, a stream's peak 242 -> 211 MiB at the
    /// same speed).
    pub(super) fn chunks_at_once(&self) -> usize {
        let bytes = self.chunk_repr.nbytes().unwrap_or(0).max(1);
        // Asked once: on Linux the answer reads the cgroup's CPU quota.
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        (IN_FLIGHT_BYTES / bytes)
            .max(cores)
            .clamp(1, CHUNK_CONCURRENCY)
    }

    /// How many of `parts` chunks one load reads and decodes together:
    /// small chunks, from a source that can. A window over many of them
    /// otherwise pays two thread hand-offs (file read, decode) per chunk,
    /// more than the chunk's work, and cached ones a future each. Loads stay
    /// at least [`LOADS_AT_ONCE`] when there are enough chunks, so reads and
    /// decodes still run in parallel.
    pub(super) fn chunks_per_load(&self, parts: usize) -> Option<usize> {
        let bytes = self.chunk_repr.nbytes().filter(|&n| n > 0)?;
        let small = bytes <= LOADED_TOGETHER_MAX && self.source.loads_together();
        (small && parts > 1).then(|| {
            (LOAD_BYTES / bytes)
                .min(parts.div_ceil(LOADS_AT_ONCE))
                .clamp(1, 64)
        })
    }

    /// Read `parts` `per_load` chunks at a time, the loads in parallel.
    async fn read_loads(
        &self,
        parts: Vec<(Vec<u64>, ChunkPart)>,
        per_load: usize,
        out: &Arc<Output>,
        out_shape: &[usize],
    ) -> Result<usize> {
        let mut loads = Vec::with_capacity(parts.len().div_ceil(per_load));
        let mut parts = parts.into_iter().peekable();
        while parts.peek().is_some() {
            let mut keys = Vec::with_capacity(per_load);
            let mut load = Vec::with_capacity(per_load);
            for (coords, part) in parts.by_ref().take(per_load) {
                keys.push(self.chunk_key(&coords)?);
                load.push(part);
            }
            loads.push((keys, load));
        }
        futures::stream::iter(loads)
            .map(|(keys, load)| async move {
                let chunks = self.source.chunks(self, &keys).await?;
                let mut written = 0;
                for (chunk, part) in chunks.into_iter().zip(load) {
                    let shape = self.chunk_repr.shape.clone();
                    written += self.scatter(chunk, shape, part, out, out_shape).await?;
                }
                Ok::<usize, ZarrError>(written)
            })
            .buffer_unordered(LOADS_AT_ONCE)
            .try_fold(0, |sum, written| async move { Ok(sum + written) })
            .await
    }

    /// The outermost rows a chunk's part reads, when the read may decode
    /// only those: the part leaves some rows out, nothing keeps the decoded
    /// chunk for a later read, and the codecs can decode a run of rows.
    /// (Chunks small enough to be loaded several at a time are decoded
    /// whole: see [`Array::chunks_per_load`].)
    fn partial_rows(&self, part: &ChunkPart) -> Option<Range<usize>> {
        let ChunkPart::Block(maps) = part else {
            return None;
        };
        let rows = maps.first()?.src_span()?;
        (rows.len() < self.chunk_repr.shape[0] && self.decodes_part_rows()).then_some(rows)
    }

    /// Whether reads decode only the outermost rows of a chunk they need:
    /// the codecs allow it and the chunk source keeps no chunk (a source
    /// that does wants whole chunks, for later reads).
    pub fn decodes_part_rows(&self) -> bool {
        self.chunk_repr
            .nbytes()
            .is_some_and(|n| !self.source.keeps(n))
            && self.chain.decodes_rows(&self.chunk_repr)
    }

    /// Read rows `rows` of one chunk, decoding only the stored blocks that
    /// hold them (the whole chunk when its encoding allows no less), and
    /// copy the part into the output.
    async fn read_rows(
        &self,
        key: &StoreKey,
        rows: Range<usize>,
        part: ChunkPart,
        out: &Arc<Output>,
        out_shape: &[usize],
    ) -> Result<usize> {
        self.source.read_past(1);
        let Some(bytes) = self.store.get(key).await? else {
            let shape = self.chunk_repr.shape.clone();
            return self.scatter(None, shape, part, out, out_shape).await;
        };
        // Copied into the output on the thread that decoded it, while the
        // rows are still in its cache, rather than after a trip back here
        // (and, for large parts, another trip to the pool).
        let (array, key, out, out_shape) =
            (self.clone(), key.clone(), out.clone(), out_shape.to_vec());
        run_blocking(move || {
            let decoded = array
                .chain
                .decode_rows(&bytes, &array.chunk_repr, rows.clone());
            let (chunk, shape, part) = match decoded {
                Some(rows_data) => {
                    let mut shape = array.chunk_repr.shape.clone();
                    shape[0] = rows.len();
                    (rows_data?, shape, shift_rows(part, rows.start))
                }
                None => (
                    array.chain.decode(Vec::from(bytes), &array.chunk_repr)?,
                    array.chunk_repr.shape.clone(),
                    part,
                ),
            };
            // SAFETY: `part` is one chunk's part of a resolved selection;
            // no other chunk's part shares its output elements.
            unsafe { out.scatter(&chunk, &shape, &part, &out_shape) }
        })
        .await
        .map_err(|e: ZarrError| e.for_chunk(key.as_str()))
    }

    /// The index of one shard and what the store said of the shard's
    /// version, `None` when the shard is not stored.
    pub async fn read_shard_index(&self, key: &StoreKey) -> Result<Option<(ShardIndex, KeyMeta)>> {
        let sharding = self.sharding()?;
        let size = sharding
            .index_size(&self.chunk_repr.shape)
            .map_err(|e| e.for_chunk(key.as_str()))? as u64;
        if sharding.index_location == crate::zarr::codec::IndexLocation::End {
            // One request: the suffix, whose response also says the shard's length.
            let Some((bytes, meta)) = self.store.get_suffix(key, size).await? else {
                return Ok(None);
            };
            return self
                .decode_shard_index(key, &bytes, meta.size)
                .map(|i| Some((i.pinned(meta.version.e_tag.clone()), meta)));
        }
        let Some(meta) = self.store.head(key).await? else {
            return Ok(None);
        };
        self.read_shard_index_of(key, &meta)
            .await
            .map(|i| Some((i, meta)))
    }

    /// The index of the shard version `meta` describes, by a bounded range
    /// of that version (for stores that refuse suffix ranges, and when the
    /// size is known).
    pub async fn read_shard_index_of(&self, key: &StoreKey, meta: &KeyMeta) -> Result<ShardIndex> {
        let sharding = self.sharding()?;
        let range = sharding
            .index_range(&self.chunk_repr.shape, meta.size)
            .map_err(|e| e.for_chunk(key.as_str()))?;
        let e_tag = meta.version.e_tag.clone();
        let bytes = self
            .store
            .get_range_at(key, range, e_tag.as_deref())
            .await?;
        Ok(self
            .decode_shard_index(key, &bytes, meta.size)?
            .pinned(e_tag))
    }

    fn decode_shard_index(
        &self,
        key: &StoreKey,
        bytes: &[u8],
        shard_len: u64,
    ) -> Result<ShardIndex> {
        let sharding = self.sharding()?;
        let size = sharding
            .index_size(&self.chunk_repr.shape)
            .map_err(|e| e.for_chunk(key.as_str()))?;
        if bytes.len() < size {
            return Err(ZarrError::CorruptChunk {
                key: key.to_string(),
                reason: format!("shard of {shard_len} bytes is shorter than its {size}-byte index"),
            });
        }
        sharding
            .decode_index(bytes, &self.chunk_repr.shape, shard_len)
            .map_err(|e| e.for_chunk(key.as_str()))
    }

    async fn read_sharded(&self, selection: &Resolved, out: &Arc<Output>) -> Result<usize> {
        let Some(sharding) = self.chain.sharding() else {
            return Ok(0);
        };
        let inner_shape: Vec<u64> = sharding.chunk_shape.iter().map(|&c| c as u64).collect();
        let cps: Vec<u64> = self
            .meta
            .chunk_shape
            .iter()
            .zip(&inner_shape)
            .map(|(s, c)| s / c)
            .collect();
        // Group the inner chunks the selection touches by the shard holding them.
        let mut by_shard: BTreeMap<Vec<u64>, Vec<(usize, ChunkPart)>> = BTreeMap::new();
        for (inner, part) in selection.chunks(&inner_shape) {
            let shard: Vec<u64> = inner.iter().zip(&cps).map(|(i, c)| i / c).collect();
            let local: Vec<u64> = inner.iter().zip(&cps).map(|(i, c)| i % c).collect();
            let linear = local.iter().zip(&cps).fold(0u64, |acc, (l, c)| acc * c + l) as usize;
            by_shard.entry(shard).or_default().push((linear, part));
        }
        let out_shape = selection.block_shape();
        futures::stream::iter(by_shard)
            .map(|(shard, parts)| {
                let out = out.clone();
                let out_shape = out_shape.clone();
                async move { self.read_from_shard(&shard, parts, &out, &out_shape).await }
            })
            .buffer_unordered(CHUNK_CONCURRENCY)
            .try_fold(0, |sum, written| async move { Ok(sum + written) })
            .await
    }

    /// Read a selection's part of one shard. The index and the inner chunks
    /// come from one version of the shard; when a writer replaces the shard
    /// in between, the read starts over with the new version, and only what
    /// the last attempt wrote counts (the number of elements).
    async fn read_from_shard(
        &self,
        shard: &[u64],
        parts: Vec<(usize, ChunkPart)>,
        out: &Arc<Output>,
        out_shape: &[usize],
    ) -> Result<usize> {
        let key = self.chunk_key(shard)?;
        let mut attempt = 0;
        loop {
            match self.read_shard_version(&key, &parts, out, out_shape).await {
                Err(e) if e.is_version_change() && attempt < SHARD_READ_ATTEMPTS => {
                    attempt += 1;
                    self.source.invalidate(&key);
                    // Writers of one shard follow each other closely; give this one room.
                    tokio::time::sleep(std::time::Duration::from_millis(attempt as u64)).await;
                }
                other => return other,
            }
        }
    }

    async fn read_shard_version(
        &self,
        key: &StoreKey,
        parts: &[(usize, ChunkPart)],
        out: &Arc<Output>,
        out_shape: &[usize],
    ) -> Result<usize> {
        let inner_shape = self
            .chain
            .sharding()
            .map(|s| s.chunk_shape.clone())
            .unwrap_or_default();
        let index = self.source.shard_index(self, key).await?;
        // Inner chunks the shard does not hold (all, without a shard) are
        // filled; the rest are read.
        let mut wanted = Vec::with_capacity(parts.len());
        let mut found = Vec::with_capacity(parts.len());
        let mut missing = Vec::new();
        for (i, part) in parts {
            match index.as_ref().and_then(|index| index.range(*i)) {
                Some(r) => {
                    wanted.push((*i, r));
                    found.push(part.clone());
                }
                None => missing.push(part.clone()),
            }
        }
        let written: usize = futures::future::try_join_all(
            missing
                .into_iter()
                .map(|part| self.scatter(None, inner_shape.clone(), part, out, out_shape)),
        )
        .await?
        .into_iter()
        .sum();
        let (Some(index), false) = (index, wanted.is_empty()) else {
            return Ok(written);
        };
        let parts = found;
        let inner_bytes = inner_shape
            .iter()
            .product::<usize>()
            .saturating_mul(self.elem_size());
        if !self.source.keeps(inner_bytes) {
            // Nothing keeps the chunks: each is copied into the output on
            // the thread that decoded it (in parallel, while in its cache).
            let (out, out_shape) = (out.clone(), out_shape.to_vec());
            self.source.read_past(wanted.len());
            let parts: Arc<[ChunkPart]> = parts.into_iter().collect();
            let copied = fetch_inner_chunks_then(self, key, &index, &wanted, move |i, chunk| {
                // SAFETY: parts of different inner chunks never share
                // output elements.
                unsafe { out.scatter(&chunk, &inner_shape, &parts[i], &out_shape) }
            })
            .await?;
            return Ok(written + copied.iter().sum::<usize>());
        }
        let chunks = self.source.inner_chunks(self, key, &index, &wanted).await?;
        let copied =
            futures::future::try_join_all(chunks.into_iter().zip(parts).map(|(chunk, part)| {
                self.scatter(Some(chunk), inner_shape.clone(), part, out, out_shape)
            }))
            .await?;
        Ok(written + copied.iter().sum::<usize>())
    }
}

/// Parts up to this size are copied on the async thread: a 256 KiB copy
/// takes ~20 µs, about what handing it to the blocking pool and back costs.
const INLINE_COPY_BYTES: usize = 256 << 10;

/// Decoded bytes of chunks one read loads at once, beyond one per core
/// ([`Array::chunks_at_once`]).
const IN_FLIGHT_BYTES: usize = 16 << 20;

/// Chunks up to this size (decoded) are loaded several at a time when
/// the source can ([`Array::chunks_per_load`]).
const LOADED_TOGETHER_MAX: usize = 64 << 10;
/// Decoded bytes one load of small chunks aims at.
const LOAD_BYTES: usize = 512 << 10;
/// Loads of small chunks in flight for one read.
const LOADS_AT_ONCE: usize = 8;

/// Bytes a chunk's part puts into the output (a variable-length element
/// counts as an allocation and a copy of a typical string).
fn part_bytes(part: &ChunkPart, elem: usize) -> usize {
    let elements: usize = match part {
        ChunkPart::Block(maps) => maps.iter().map(|m| m.len()).product(),
        ChunkPart::Points(points) => points.len(),
    };
    elements.saturating_mul(if elem == 0 { 64 } else { elem })
}

/// A part of a chunk as a part of the chunk's rows from `start` on.
fn shift_rows(part: ChunkPart, start: usize) -> ChunkPart {
    match part {
        ChunkPart::Block(mut maps) => {
            if let Some(rows) = maps.first_mut() {
                *rows = rows.src_from(start);
            }
            ChunkPart::Block(maps)
        }
        points => points,
    }
}

/// How often a shard read starts over when writers keep replacing the shard.
const SHARD_READ_ATTEMPTS: u32 = 20;

/// One field taken out of structured data.
#[derive(Debug, Clone)]
pub struct FieldView {
    pub data: ArrayBytes,
    pub dtype: DataType,
    /// The field's subarray shape, appended to the selection's shape.
    pub extra_shape: Vec<u64>,
}

/// Take field `name` out of structured records.
pub fn extract_field(data: &ArrayBytes, dtype: &DataType, name: &str) -> Result<FieldView> {
    let field = dtype.select_field(name)?;
    let record = dtype.size().unwrap_or(0);
    let ArrayBytes::Fixed(bytes) = data else {
        return Err(ZarrError::Selection(
            "fields exist only on structured arrays".into(),
        ));
    };
    let size = field.size();
    let mut out = Vec::with_capacity(bytes.len() / record.max(1) * size);
    for rec in bytes.chunks_exact(record.max(1)) {
        out.extend_from_slice(&rec[field.offset..field.offset + size]);
    }
    Ok(FieldView {
        data: ArrayBytes::Fixed(out),
        dtype: field.dtype.clone(),
        extra_shape: field.shape.iter().map(|&d| d as u64).collect(),
    })
}
