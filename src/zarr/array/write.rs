//! Writing selections. Each touched chunk goes through one read-modify-write
//! ([`Array::update_chunk`]) that callers can wrap in a lock; a chunk the
//! write covers entirely skips the read, and a chunk left equal to the fill
//! value is deleted rather than stored. Sharded arrays rewrite only the shards
//! they touch, re-encoding only the inner chunks that change.

use futures::{StreamExt, TryStreamExt};

use super::{run_blocking, Array, CHUNK_CONCURRENCY};
use std::sync::Arc;

use crate::store::{Outcome, Replacement, StoreKey, Versioned};
use crate::zarr::buffer::{c_strides, copy_mapped, ArrayBytes, DimMap};
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::selection::{ChunkPart, Indices, Resolved, ResolvedDim};

/// What a write did to the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    pub chunks_written: usize,
    pub chunks_deleted: usize,
}

impl WriteStats {
    fn add(mut self, other: WriteStats) -> Self {
        self.chunks_written += other.chunks_written;
        self.chunks_deleted += other.chunks_deleted;
        self
    }
}

/// One chunk's share of a write: where the new values go in the chunk.
#[derive(Debug, Clone)]
pub struct ChunkUpdate {
    pub coords: Vec<u64>,
    pub part: ChunkPart,
    /// The write covers every in-bounds element, so the old value need not be read.
    pub full: bool,
}

/// Where a write's values come from.
#[derive(Debug)]
enum Values {
    /// One value per selected element, in the selection's block shape.
    Block(ArrayBytes, Vec<usize>),
    /// One value for every selected element (a broadcast): never expanded
    /// beyond one chunk's part, so a write of any size needs chunk-sized memory.
    Scalar(ArrayBytes),
}

impl Values {
    /// Put these values' share of `part` into `chunk`.
    fn gather(&self, part: &ChunkPart, chunk: &mut ArrayBytes, chunk_shape: &[usize], elem: usize) {
        match self {
            Values::Block(data, shape) => gather_part(data, shape, part, chunk, chunk_shape, elem),
            Values::Scalar(value) => {
                // The part as its own small block of the scalar, at most one chunk.
                let (shape, part) = match part {
                    ChunkPart::Block(maps) => (
                        maps.iter().map(DimMap::len).collect::<Vec<_>>(),
                        ChunkPart::Block(maps.iter().map(DimMap::compacted).collect()),
                    ),
                    ChunkPart::Points(points) => (
                        vec![points.len()],
                        ChunkPart::Points(
                            points
                                .iter()
                                .enumerate()
                                .map(|(i, (_, local))| (i, local.clone()))
                                .collect(),
                        ),
                    ),
                };
                let element = match value {
                    ArrayBytes::Fixed(b) => b.clone(),
                    ArrayBytes::Variable(v) => v.first().cloned().unwrap_or_default(),
                };
                let n = shape.iter().product();
                let block =
                    ArrayBytes::filled(&element, n, matches!(value, ArrayBytes::Variable(_)));
                gather_part(&block, &shape, &part, chunk, chunk_shape, elem);
            }
        }
    }
}

/// Copy the selected values from `data` (of `data_shape`) into a chunk.
fn gather_part(
    data: &ArrayBytes,
    data_shape: &[usize],
    part: &ChunkPart,
    chunk: &mut ArrayBytes,
    chunk_shape: &[usize],
    elem: usize,
) {
    match part {
        ChunkPart::Block(maps) => {
            let inverse: Vec<DimMap> = maps.iter().map(DimMap::inverse).collect();
            copy_mapped(data, data_shape, chunk, chunk_shape, &inverse, elem);
        }
        ChunkPart::Points(points) => {
            let strides = c_strides(chunk_shape);
            for (src, local) in points {
                let dst: usize = local.iter().zip(&strides).map(|(i, s)| i * s).sum();
                match (data, &mut *chunk) {
                    (ArrayBytes::Fixed(d), ArrayBytes::Fixed(c)) => c[dst * elem..(dst + 1) * elem]
                        .copy_from_slice(&d[src * elem..(src + 1) * elem]),
                    (ArrayBytes::Variable(d), ArrayBytes::Variable(c)) => c[dst] = d[*src].clone(),
                    _ => {}
                }
            }
        }
    }
}

/// Whether `part` covers every element of the chunk, so its old value need
/// not be read. Edge chunks never qualify: the part beyond the array's shape
/// may hold rows a concurrent append has just written there.
fn covers_chunk(part: &ChunkPart, chunk_shape: &[u64]) -> bool {
    let ChunkPart::Block(maps) = part else {
        return false;
    };
    maps.iter().enumerate().all(|(d, m)| {
        let extent = chunk_shape[d] as usize;
        match m {
            // Worked out, not walked: a broadcast of one value over chunks
            // of a billion elements walked (and marked) every one of them
            // on an async thread before anything was written.
            DimMap::Strided {
                src, src_step, len, ..
            } => {
                extent == 0
                    || (*src == 0
                        && *len > 0
                        && (extent == 1 || (*src_step == 1 && *len >= extent)))
            }
            // A list shorter than the chunk cannot cover it; one as long
            // is as long as the request that sent it.
            DimMap::List { src, .. } if src.len() < extent => false,
            DimMap::List { src, .. } => {
                let mut seen = vec![false; extent];
                for &i in src {
                    if i < extent {
                        seen[i] = true;
                    }
                }
                seen.into_iter().all(|s| s)
            }
        }
    })
}

impl Array {
    /// The chunk updates a write of `selection` makes, in the chunks reads and
    /// writes work in (inner chunks when sharded).
    pub fn plan_write(&self, selection: &Resolved) -> Vec<ChunkUpdate> {
        let chunk_shape = self.read_chunk_shape();
        selection
            .chunks(&chunk_shape)
            .into_iter()
            .map(|(coords, part)| {
                let full = covers_chunk(&part, &chunk_shape);
                ChunkUpdate { coords, part, full }
            })
            .collect()
    }

    fn check_data(&self, selection: &Resolved, data: &ArrayBytes) -> Result<()> {
        let want: usize = selection.block_shape().iter().product();
        let have = data.len(self.elem_size());
        let kind_ok = matches!(
            (data, self.meta.dtype.is_variable()),
            (ArrayBytes::Fixed(_), false) | (ArrayBytes::Variable(_), true)
        );
        if !kind_ok
            || have != want
            || (!self.meta.dtype.is_variable() && data.len(1) != want * self.elem_size())
        {
            return Err(ZarrError::Data(format!(
                "the selection has shape {:?} ({want} elements of {}), the data holds {have}",
                selection.shape(),
                self.meta.dtype.name()
            )));
        }
        // numpy reads any non-zero byte as True, but such an element
        // compares unequal to True; readers only ever write 0 and 1.
        if let (DataType::Bool, ArrayBytes::Fixed(bytes)) = (&self.meta.dtype, data) {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(ZarrError::BadElement(format!(
                    "element {i} of the data is the byte {}; a bool is stored as 0 or 1",
                    bytes[i]
                )));
            }
        }
        Ok(())
    }

    /// Whether `data` holds a block of `shape` of this array's elements.
    pub fn check_block(&self, shape: &[u64], data: &ArrayBytes) -> Result<()> {
        let block = Resolved::Orthogonal(
            shape
                .iter()
                .map(|&len| ResolvedDim {
                    indices: Indices::Range {
                        start: 0,
                        step: 1,
                        len,
                    },
                    keep: true,
                })
                .collect(),
        );
        self.check_data(&block, data)
    }

    /// Write `data` (the selection's block shape, C order) into `selection`.
    pub async fn write(&self, selection: &Resolved, data: ArrayBytes) -> Result<WriteStats> {
        self.check_data(selection, &data)?;
        let values = Values::Block(data, selection.block_shape());
        self.write_values(selection, Arc::new(values)).await
    }

    /// Write one value (`value` holds one element) into every element of
    /// `selection`, chunk by chunk.
    pub async fn write_broadcast(
        &self,
        selection: &Resolved,
        value: ArrayBytes,
    ) -> Result<WriteStats> {
        let one = Resolved::Points {
            coords: vec![vec![0; self.shape().len()]],
        };
        self.check_data(&one, &value)?;
        self.write_values(selection, Arc::new(Values::Scalar(value)))
            .await
    }

    async fn write_values(&self, selection: &Resolved, values: Arc<Values>) -> Result<WriteStats> {
        let updates = self.plan_write(selection);
        if self.chain.sharding().is_some() {
            return self.write_sharded(updates, values).await;
        }
        futures::stream::iter(updates)
            .map(|update| {
                let values = values.clone();
                async move {
                    let elem = self.elem_size();
                    let chunk_shape = self.chunk_repr.shape.clone();
                    let part = update.part.clone();
                    self.update_chunk(&update.coords, update.full, move |chunk| {
                        values.gather(&part, chunk, &chunk_shape, elem);
                    })
                    .await
                }
            })
            .buffer_unordered(CHUNK_CONCURRENCY)
            .try_fold(
                WriteStats::default(),
                |acc, s| async move { Ok(acc.add(s)) },
            )
            .await
    }

    /// Read-modify-write one (unsharded) chunk: decode the stored chunk (or
    /// start from the fill value, or skip the read when `full`), apply
    /// `modify`, then store it, or delete it if it now equals the fill value.
    /// The store's [`Updater`](crate::store::Updater) makes this safe against
    /// concurrent writers of the same chunk, in this process and in others;
    /// `modify` may run again if another writer got there first.
    pub async fn update_chunk(
        &self,
        coords: &[u64],
        full: bool,
        modify: impl Fn(&mut ArrayBytes) + Send + Sync + 'static,
    ) -> Result<WriteStats> {
        let key = self.chunk_key(coords)?;
        let modify = Arc::new(modify);
        let outcome = self
            .store
            .update(&key, full, |current: Option<Versioned>| {
                let (this, key, modify) = (self.clone(), key.clone(), modify.clone());
                run_blocking(move || {
                    let mut chunk = match current {
                        Some(v) => this.decode_chunk(&key, Vec::from(v.bytes))?,
                        None => this.chunk_repr.filled(),
                    };
                    modify(&mut chunk);
                    let removable = chunk.all_equal(&this.chunk_repr.fill.0);
                    Ok(Replacement {
                        bytes: this.encode_chunk(chunk)?,
                        removable,
                    })
                })
            })
            .await;
        // Whatever happened, a cached copy may now be stale.
        self.source.invalidate(&key);
        Ok(WriteStats::from(outcome?))
    }

    async fn write_sharded(
        &self,
        updates: Vec<ChunkUpdate>,
        values: Arc<Values>,
    ) -> Result<WriteStats> {
        let Some(sharding) = self.chain.sharding() else {
            return Ok(WriteStats::default());
        };
        let cps: Vec<u64> = self
            .meta
            .chunk_shape
            .iter()
            .zip(&sharding.chunk_shape)
            .map(|(&s, &c)| s / c as u64)
            .collect();
        let mut by_shard: std::collections::BTreeMap<Vec<u64>, Vec<(usize, ChunkUpdate)>> =
            Default::default();
        for update in updates {
            let shard: Vec<u64> = update.coords.iter().zip(&cps).map(|(i, c)| i / c).collect();
            let linear = update
                .coords
                .iter()
                .zip(&cps)
                .fold(0u64, |acc, (i, c)| acc * c + i % c) as usize;
            by_shard.entry(shard).or_default().push((linear, update));
        }
        futures::stream::iter(by_shard)
            .map(|(shard, inner)| {
                let values = values.clone();
                async move { self.update_shard(&shard, inner, values).await }
            })
            .buffer_unordered(CHUNK_CONCURRENCY)
            .try_fold(
                WriteStats::default(),
                |acc, s| async move { Ok(acc.add(s)) },
            )
            .await
    }

    /// Read-modify-write one shard (the unit of locking and compare-and-swap
    /// for sharded arrays), re-encoding only the inner chunks written.
    async fn update_shard(
        &self,
        shard: &[u64],
        inner: Vec<(usize, ChunkUpdate)>,
        values: Arc<Values>,
    ) -> Result<WriteStats> {
        let key = self.chunk_key(shard)?;
        let inner = Arc::new(inner);
        let outcome = self
            .store
            .update(&key, false, |current: Option<Versioned>| {
                let (this, key, inner, values) =
                    (self.clone(), key.clone(), inner.clone(), values.clone());
                run_blocking(move || {
                    this.rewrite_shard(&key, current.map(|v| v.bytes), &inner, &values)
                })
            })
            .await;
        self.source.invalidate(&key);
        Ok(WriteStats::from(outcome?))
    }

    fn rewrite_shard(
        &self,
        key: &StoreKey,
        existing: Option<bytes::Bytes>,
        inner: &[(usize, ChunkUpdate)],
        values: &Values,
    ) -> Result<Replacement> {
        let sharding = self.sharding()?;
        let shard_shape = &self.chunk_repr.shape;
        let n: usize = sharding.chunks_per_shard(shard_shape)?.iter().product();
        let mut chunks: Vec<Option<Vec<u8>>> = vec![None; n];
        if let Some(bytes) = &existing {
            let range = sharding
                .index_range(shard_shape, bytes.len() as u64)
                .map_err(|e| e.for_chunk(key.as_str()))?;
            let index = sharding
                .decode_index(
                    &bytes[range.start as usize..range.end as usize],
                    shard_shape,
                    bytes.len() as u64,
                )
                .map_err(|e| e.for_chunk(key.as_str()))?;
            for (i, slot) in chunks.iter_mut().enumerate() {
                *slot = index
                    .range(i)
                    .map(|r| bytes[r.start as usize..r.end as usize].to_vec());
            }
        }
        let inner_repr = sharding.inner_repr(&self.chunk_repr);
        for (i, update) in inner {
            let mut chunk = match (&chunks[*i], update.full) {
                (Some(old), false) => sharding
                    .decode_inner(old.clone(), &self.chunk_repr)
                    .map_err(|e| e.for_chunk(key.as_str()))?,
                _ => inner_repr.filled(),
            };
            values.gather(
                &update.part,
                &mut chunk,
                &inner_repr.shape,
                self.elem_size(),
            );
            chunks[*i] = if chunk.all_equal(&inner_repr.fill.0) {
                None
            } else {
                Some(sharding.codecs.encode(chunk, &inner_repr)?)
            };
        }
        let removable = chunks.iter().all(Option::is_none);
        Ok(Replacement {
            bytes: sharding.assemble(&chunks, shard_shape)?,
            removable,
        })
    }
}

impl From<Outcome> for WriteStats {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Stored(_) => WriteStats {
                chunks_written: 1,
                chunks_deleted: 0,
            },
            Outcome::Deleted => WriteStats {
                chunks_written: 0,
                chunks_deleted: 1,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coverage as the definition says: every index below the extent is a
    /// source index of the map.
    fn walked(map: &DimMap, extent: usize) -> bool {
        (0..extent).all(|i| map.pairs().any(|(s, _)| s == i))
    }

    #[test]
    fn coverage_is_worked_out_as_walking_would_find_it() {
        for extent in 0..6 {
            for src in 0..3 {
                for step in 0..3 {
                    for len in 0..8 {
                        let map = DimMap::Strided {
                            src,
                            src_step: step,
                            dst: 0,
                            dst_step: 1,
                            len,
                        };
                        let part = ChunkPart::Block(vec![map.clone()]);
                        assert_eq!(
                            covers_chunk(&part, &[extent as u64]),
                            walked(&map, extent),
                            "{map:?} over {extent}"
                        );
                    }
                }
            }
        }
        for (list, extent, covers) in [
            (vec![2, 0, 1], 3, true),
            (vec![2, 0, 0], 3, false),
            (vec![0, 1], 3, false),
            (vec![0, 1, 5], 3, false),
        ] {
            let map = DimMap::list(list.clone(), (0..list.len()).collect());
            let part = ChunkPart::Block(vec![map]);
            assert_eq!(covers_chunk(&part, &[extent]), covers, "{list:?}");
        }
        // A chunk of 2^30 elements, and all of it or all but one.
        let huge = 1usize << 30;
        let whole = ChunkPart::Block(vec![DimMap::range(0, 0, huge)]);
        assert!(covers_chunk(&whole, &[huge as u64]));
        let short = ChunkPart::Block(vec![DimMap::range(0, 0, huge - 1)]);
        assert!(!covers_chunk(&short, &[huge as u64]));
    }
}
