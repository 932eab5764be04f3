//! `sharding_indexed`: many inner chunks in one stored value, found through
//! an index of (offset, nbytes) pairs at the start or end. Whole-shard coding
//! lives here; the array reader uses [`ShardIndex`] to fetch only the inner
//! chunks a selection needs.

use std::ops::Range;

use serde_json::{json, Value};

use super::{ArrayBytes, ArrayToBytesCodec, ChunkRepr, CodecChain};
use crate::zarr::buffer::{copy_mapped, unravel, DimMap};
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::fill::FillValue;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLocation {
    Start,
    End,
}

#[derive(Debug)]
pub struct ShardingCodec {
    pub chunk_shape: Vec<usize>,
    pub codecs: CodecChain,
    pub index_codecs: CodecChain,
    pub index_location: IndexLocation,
}

/// Where each inner chunk of a shard is, in C order of the inner grid, and
/// which version of the shard that is true of (its ETag, when the store has
/// one): inner chunks must be read from that same version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    entries: Vec<(u64, u64)>,
    e_tag: Option<String>,
}

const MISSING: u64 = u64::MAX;

fn err(reason: impl Into<String>) -> ZarrError {
    ZarrError::codec("sharding_indexed", reason)
}

impl ShardIndex {
    /// The byte range of inner chunk `i`, `None` when it is not stored.
    pub fn range(&self, i: usize) -> Option<Range<u64>> {
        match self.entries.get(i) {
            Some(&(MISSING, MISSING)) | None => None,
            Some(&(offset, nbytes)) => Some(offset..offset + nbytes),
        }
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(|e| e.0 == MISSING)
    }
    /// This index as read from the shard version with ETag `e_tag`.
    pub fn pinned(mut self, e_tag: Option<String>) -> Self {
        self.e_tag = e_tag;
        self
    }
    /// The ETag of the shard version the index describes.
    pub fn e_tag(&self) -> Option<&str> {
        self.e_tag.as_deref()
    }
    /// A number that tells versions of the shard apart, for keying the
    /// inner chunks read at this index: a hash of the ETag and of the index
    /// itself. A rewrite that moves inner chunks changes it even where the
    /// ETag stays (a file rewritten in place within its modification
    /// time's tick, or a store without ETags); one that moves none leaves
    /// them where this index reads them.
    pub fn version(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.e_tag.hash(&mut h);
        self.entries.hash(&mut h);
        h.finish()
    }
    /// Bytes the stored inner chunks occupy.
    pub fn stored_bytes(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.0 != MISSING)
            .map(|e| e.1)
            .sum()
    }
}

impl ShardingCodec {
    /// Inner chunks per shard along each dimension.
    pub fn chunks_per_shard(&self, shard_shape: &[usize]) -> Result<Vec<usize>> {
        if shard_shape.len() != self.chunk_shape.len() {
            return Err(err(format!(
                "chunk_shape {:?} does not match shard shape {shard_shape:?}",
                self.chunk_shape
            )));
        }
        shard_shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(&s, &c)| {
                if c == 0 || s % c != 0 {
                    Err(err(format!(
                        "shard shape {shard_shape:?} is not a multiple of chunk_shape {:?}",
                        self.chunk_shape
                    )))
                } else {
                    Ok(s / c)
                }
            })
            .collect()
    }

    fn index_repr(cps: &[usize]) -> ChunkRepr {
        let mut shape = cps.to_vec();
        shape.push(2);
        ChunkRepr {
            shape,
            dtype: DataType::UInt64,
            fill: FillValue(vec![0xff; 8]),
        }
    }

    /// Size in bytes of the encoded index.
    pub fn index_size(&self, shard_shape: &[usize]) -> Result<usize> {
        let cps = self.chunks_per_shard(shard_shape)?;
        self.index_codecs
            .fixed_encoded_size(&Self::index_repr(&cps))
            .ok_or_else(|| err("index_codecs must produce a fixed size (bytes and checksums only)"))
    }

    /// The inner chunk's representation.
    pub fn inner_repr(&self, shard: &ChunkRepr) -> ChunkRepr {
        ChunkRepr {
            shape: self.chunk_shape.clone(),
            ..shard.clone()
        }
    }

    /// Parse an encoded index; `shard_len` bounds the entries.
    pub fn decode_index(
        &self,
        bytes: &[u8],
        shard_shape: &[usize],
        shard_len: u64,
    ) -> Result<ShardIndex> {
        let cps = self.chunks_per_shard(shard_shape)?;
        let raw = self
            .index_codecs
            .decode(bytes.to_vec(), &Self::index_repr(&cps))?
            .into_fixed()?;
        let entries: Vec<(u64, u64)> = raw
            .chunks_exact(16)
            .map(|e| {
                let offset = u64::from_le_bytes(e[..8].try_into().unwrap_or_default());
                let nbytes = u64::from_le_bytes(e[8..].try_into().unwrap_or_default());
                (offset, nbytes)
            })
            .collect();
        for (i, &(offset, nbytes)) in entries.iter().enumerate() {
            if (offset, nbytes) == (MISSING, MISSING) {
                continue;
            }
            if offset.checked_add(nbytes).is_none_or(|end| end > shard_len) {
                return Err(err(format!(
                    "index entry {i} ({offset}, {nbytes}) points outside the shard of {shard_len} bytes"
                )));
            }
        }
        Ok(ShardIndex {
            entries,
            e_tag: None,
        })
    }

    fn encode_index(&self, index: &ShardIndex, cps: &[usize]) -> Result<Vec<u8>> {
        let raw: Vec<u8> = index
            .entries
            .iter()
            .flat_map(|(o, n)| o.to_le_bytes().into_iter().chain(n.to_le_bytes()))
            .collect();
        self.index_codecs
            .encode(ArrayBytes::Fixed(raw), &Self::index_repr(cps))
    }

    /// The byte range holding the index in a shard of `shard_len` bytes.
    pub fn index_range(&self, shard_shape: &[usize], shard_len: u64) -> Result<Range<u64>> {
        let size = self.index_size(shard_shape)? as u64;
        if shard_len < size {
            return Err(err(format!(
                "shard of {shard_len} bytes is shorter than its {size}-byte index"
            )));
        }
        Ok(match self.index_location {
            IndexLocation::Start => 0..size,
            IndexLocation::End => shard_len - size..shard_len,
        })
    }

    /// Decode one inner chunk's bytes.
    pub fn decode_inner(&self, bytes: Vec<u8>, shard: &ChunkRepr) -> Result<ArrayBytes> {
        self.codecs.decode(bytes, &self.inner_repr(shard))
    }

    /// Maps that place inner chunk `coords` within the shard array.
    pub fn placement(&self, coords: &[usize]) -> Vec<DimMap> {
        coords
            .iter()
            .zip(&self.chunk_shape)
            .map(|(&c, &n)| DimMap::range(0, c * n, n))
            .collect()
    }

    /// Inner-chunk coordinates of linear index `i`.
    pub fn inner_coords(&self, i: usize, cps: &[usize]) -> Vec<usize> {
        unravel(i, cps)
    }
}

impl ShardingCodec {
    /// A shard's bytes from its encoded inner chunks (`None`: not stored), in
    /// C order of the inner grid. An all-missing shard is still a valid value.
    pub fn assemble(
        &self,
        chunks: &[Option<impl AsRef<[u8]>>],
        shard_shape: &[usize],
    ) -> Result<Vec<u8>> {
        let cps = self.chunks_per_shard(shard_shape)?;
        let index_size = self.index_size(shard_shape)? as u64;
        let base = if self.index_location == IndexLocation::Start {
            index_size
        } else {
            0
        };
        let mut body = Vec::new();
        let mut entries = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            match chunk {
                Some(bytes) => {
                    let bytes = bytes.as_ref();
                    entries.push((base + body.len() as u64, bytes.len() as u64));
                    body.extend_from_slice(bytes);
                }
                None => entries.push((MISSING, MISSING)),
            }
        }
        let index = self.encode_index(
            &ShardIndex {
                entries,
                e_tag: None,
            },
            &cps,
        )?;
        Ok(match self.index_location {
            IndexLocation::Start => [index, body].concat(),
            IndexLocation::End => [body, index].concat(),
        })
    }
}

impl ArrayToBytesCodec for ShardingCodec {
    fn encode(&self, data: ArrayBytes, shard: &ChunkRepr) -> Result<Vec<u8>> {
        let cps = self.chunks_per_shard(&shard.shape)?;
        let inner = self.inner_repr(shard);
        let elem = shard.dtype.size().unwrap_or(0);
        let n: usize = cps.iter().product();
        let mut encoded = Vec::with_capacity(n);
        for i in 0..n {
            let coords = self.inner_coords(i, &cps);
            let maps: Vec<DimMap> = self
                .placement(&coords)
                .into_iter()
                .map(|m| m.inverse())
                .collect();
            let mut chunk = inner.filled();
            copy_mapped(&data, &shard.shape, &mut chunk, &inner.shape, &maps, elem);
            encoded.push(if chunk.all_equal(&shard.fill.0) {
                None
            } else {
                Some(self.codecs.encode(chunk, &inner)?)
            });
        }
        self.assemble(&encoded, &shard.shape)
    }

    fn decode(&self, bytes: Vec<u8>, shard: &ChunkRepr) -> Result<ArrayBytes> {
        let range = self.index_range(&shard.shape, bytes.len() as u64)?;
        let index = self.decode_index(
            &bytes[range.start as usize..range.end as usize],
            &shard.shape,
            bytes.len() as u64,
        )?;
        let cps = self.chunks_per_shard(&shard.shape)?;
        let inner = self.inner_repr(shard);
        let elem = shard.dtype.size().unwrap_or(0);
        let mut out = shard.filled();
        for i in 0..index.len() {
            let Some(r) = index.range(i) else { continue };
            let chunk = self
                .codecs
                .decode(bytes[r.start as usize..r.end as usize].to_vec(), &inner)?;
            let coords = self.inner_coords(i, &cps);
            copy_mapped(
                &chunk,
                &inner.shape,
                &mut out,
                &shard.shape,
                &self.placement(&coords),
                elem,
            );
        }
        Ok(out)
    }

    fn to_v3(&self) -> Value {
        json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": self.chunk_shape,
            "codecs": self.codecs.to_v3(),
            "index_codecs": self.index_codecs.to_v3(),
            "index_location": if self.index_location == IndexLocation::Start { "start" } else { "end" },
        }})
    }

    fn max_encoded_size(&self, shard: &ChunkRepr) -> Option<usize> {
        let cps = self.chunks_per_shard(&shard.shape).ok()?;
        let inner = self.codecs.max_encoded_size(&self.inner_repr(shard))?;
        inner
            .checked_mul(cps.iter().product())?
            .checked_add(self.index_size(&shard.shape).ok()?)
    }

    fn as_sharding(&self) -> Option<&ShardingCodec> {
        Some(self)
    }
}
