//! A runtime array: metadata plus its codec chain, bound to a store path.
//! Reading and writing selections live in `read` and `write`.

pub mod inflight;
mod output;
mod read;
pub mod recent;
pub mod source;
mod write;

pub use read::{extract_field, FieldView};
pub use source::{ChunkSource, Direct};
pub use write::{ChunkUpdate, WriteStats};

use std::sync::Arc;

use super::buffer::ArrayBytes;
use super::codec::{
    build_v2_chain, build_v3_chain, ChunkRepr, CodecChain, ShardingCodec, V2Filters,
};
use super::error::{Result, ZarrError};
use super::metadata::{ArrayMetadata, CodecSpec, NodeMetadata, Order};
use crate::store::{Store, StoreKey};

/// How many chunks one read or write works on at once.
pub const CHUNK_CONCURRENCY: usize = 32;

/// An array ready for reading and writing.
#[derive(Debug, Clone)]
pub struct Array {
    store: Store,
    path: StoreKey,
    meta: Arc<ArrayMetadata>,
    chain: Arc<CodecChain>,
    chunk_repr: ChunkRepr,
    source: Arc<dyn ChunkSource>,
}

impl Array {
    /// Bind metadata to the array at `path` in `store`, building its codecs.
    pub fn new(store: Store, path: StoreKey, meta: ArrayMetadata) -> Result<Self> {
        let (chain, chunk_repr) = build_chain(&path, &meta)?;
        Ok(Array {
            store,
            path,
            meta: Arc::new(meta),
            chain: Arc::new(chain),
            chunk_repr,
            source: Arc::new(Direct),
        })
    }

    /// Why storing `new` in place of `old`, the node at `path`, replaces the
    /// node rather than edits it: another kind of node or format, or an
    /// array whose stored chunks would read differently (data type, chunk
    /// grid, chunk keys, fill value, codecs as they decode, order) or be
    /// left outside a smaller shape. Attributes, dimension names,
    /// consolidated metadata and a shape that grows are edits. Compared as
    /// read, not as written: `0` and `0.0`, `[]` and `null` filters, a codec
    /// with or without its default settings are the same.
    pub fn replaced_by(path: &StoreKey, old: &NodeMetadata, new: &NodeMetadata) -> Option<String> {
        let (old, new) = match (old, new) {
            (NodeMetadata::Array(old), NodeMetadata::Array(new)) => (old, new),
            (NodeMetadata::Group(old), NodeMetadata::Group(new)) => {
                return (old.zarr_format != new.zarr_format)
                    .then(|| "it changes the group's Zarr format".to_string());
            }
            (old, new) => {
                return Some(format!(
                    "it makes the {} a {}",
                    old.node_type(),
                    new.node_type()
                ))
            }
        };
        if new.shape.len() != old.shape.len()
            || new.shape.iter().zip(&old.shape).any(|(n, o)| n < o)
        {
            return Some(format!(
                "it changes the shape from {:?} to {:?}, leaving stored chunks outside it",
                old.shape, new.shape
            ));
        }
        let changed = if old.zarr_format != new.zarr_format {
            "Zarr format"
        } else if old.dtype != new.dtype {
            "data type"
        } else if old.chunk_shape != new.chunk_shape {
            "chunk grid"
        } else if old.chunk_key_encoding != new.chunk_key_encoding {
            "chunk key encoding"
        } else if old.fill_value != new.fill_value {
            "fill value"
        } else {
            // An old document whose codecs no longer build reads nothing to keep.
            let chain = |meta: &ArrayMetadata| build_chain(path, meta).ok().map(|(c, _)| c.to_v3());
            match (chain(old), chain(new)) {
                (Some(old), Some(new)) if old != new => "codecs",
                _ => return None,
            }
        };
        Some(format!(
            "it changes the array's {changed}, which its stored chunks were written with"
        ))
    }

    /// Whether array metadata can be read and written: its codecs exist,
    /// their configurations are valid, and they fit the chunk shape and data
    /// type. A document that parses but fails this would leave every request
    /// on the array failing.
    pub fn check_metadata(path: &StoreKey, meta: &ArrayMetadata) -> Result<()> {
        build_chain(path, meta).map(|_| ())
    }

    /// Where this array reads decoded chunks from.
    pub fn source(&self) -> &Arc<dyn ChunkSource> {
        &self.source
    }

    /// Read chunks through `source` (a cache) instead of straight from the store.
    pub fn with_source(mut self, source: Arc<dyn ChunkSource>) -> Self {
        self.source = source;
        self
    }

    pub fn metadata(&self) -> &ArrayMetadata {
        &self.meta
    }
    pub fn path(&self) -> &StoreKey {
        &self.path
    }
    pub fn store(&self) -> &Store {
        &self.store
    }
    pub fn codecs(&self) -> &CodecChain {
        &self.chain
    }
    /// The sharding codec, for operations that only exist on sharded arrays.
    pub fn sharding(&self) -> Result<&ShardingCodec> {
        self.chain
            .sharding()
            .ok_or_else(|| ZarrError::Data("array is not sharded".into()))
    }
    pub fn shape(&self) -> &[u64] {
        &self.meta.shape
    }
    /// What every stored chunk decodes to.
    pub fn chunk_repr(&self) -> &ChunkRepr {
        &self.chunk_repr
    }
    /// Element size in bytes (0 for variable-length types).
    pub fn elem_size(&self) -> usize {
        self.meta.dtype.size().unwrap_or(0)
    }

    /// The store key of chunk (or shard) `coords`.
    pub fn chunk_key(&self, coords: &[u64]) -> Result<StoreKey> {
        Ok(self
            .path
            .join(&self.meta.chunk_key_encoding.encode(coords))?)
    }

    /// The inner chunk shape that reads and writes work in: the sharding
    /// codec's inner chunks when sharded, else the chunk grid's chunks.
    pub fn read_chunk_shape(&self) -> Vec<u64> {
        match self.chain.sharding() {
            Some(s) => s.chunk_shape.iter().map(|&c| c as u64).collect(),
            None => self.meta.chunk_shape.clone(),
        }
    }

    /// Tell the chunk source a stored chunk changed outside a write (deleted on resize).
    pub fn forget_chunk(&self, key: &StoreKey) {
        self.source.invalidate(key);
    }

    /// Decode one stored chunk; errors name its key.
    pub fn decode_chunk(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<ArrayBytes> {
        self.chain
            .decode(bytes, &self.chunk_repr)
            .map_err(|e| e.for_chunk(key.as_str()))
    }

    /// Encode one chunk.
    pub fn encode_chunk(&self, data: ArrayBytes) -> Result<Vec<u8>> {
        self.chain.encode(data, &self.chunk_repr)
    }
}

fn build_chain(path: &StoreKey, meta: &ArrayMetadata) -> Result<(CodecChain, ChunkRepr)> {
    let chunk_repr = ChunkRepr {
        shape: meta.chunk_shape.iter().map(|&c| c as usize).collect(),
        dtype: meta.dtype.clone(),
        fill: meta.fill_value.clone(),
    };
    let chain = match &meta.codecs {
        CodecSpec::V3(codecs) => build_v3_chain(codecs, &chunk_repr),
        CodecSpec::V2 {
            filters,
            compressor,
            endian,
        } => build_v2_chain(
            &V2Filters {
                filters,
                compressor,
                fortran_order: meta.order == Order::F,
                endian: *endian,
            },
            &chunk_repr,
        ),
    }
    .map_err(|e| {
        let key = metadata_key(path, meta.zarr_format);
        match e {
            ZarrError::UnsupportedCodec { codec, .. } => ZarrError::UnsupportedCodec { key, codec },
            e => ZarrError::metadata(&key, e.to_string()),
        }
    })?;
    Ok((chain, chunk_repr))
}

/// The key of the document holding an array's metadata.
pub fn metadata_key(path: &StoreKey, zarr_format: u8) -> String {
    let name = match zarr_format {
        1 => "meta",
        2 => ".zarray",
        _ => "zarr.json",
    };
    if path.is_root() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

/// Run CPU-bound work on the rayon pool and await it without blocking the
/// async runtime's threads. A panic in `work` becomes an error, not a crash.
pub async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err(ZarrError::Internal("a chunk task panicked".into())));
        let _ = tx.send(result);
    });
    rx.await
        .unwrap_or_else(|_| Err(ZarrError::Internal("a chunk task was dropped".into())))
}
