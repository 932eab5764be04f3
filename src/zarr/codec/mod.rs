//! Codecs, split by kind as the v3 spec does: array→array (transpose, delta,
//! scale-offset...), array→bytes (bytes, vlen, sharding) and bytes→bytes
//! (compressors and checksums). A [`CodecChain`] composes them; v2
//! filters+compressor are expressed as the same chain.

pub mod blosc;
mod bytes;
mod checksum;
mod compress;
mod numeric;
mod pcodec;
mod registry;
mod sharding;
mod transform;
mod transpose;
mod vlen;
mod zfp;

pub use self::blosc::BloscCodec;
pub use self::bytes::BytesCodec;
pub use self::registry::{build_v2_chain, build_v3_chain, V2Filters};
pub use self::sharding::{IndexLocation, ShardIndex, ShardingCodec};

/// The transpose that turns C order into F order (v2 `order: "F"`).
pub fn transpose_fortran(ndim: usize) -> impl ArrayToArrayCodec {
    transpose::TransposeCodec::fortran(ndim)
}

use std::fmt::Debug;
use std::ops::Range;

use serde_json::Value;

use super::buffer::ArrayBytes;
use super::dtype::DataType;
use super::error::Result;
use super::fill::FillValue;

/// What a codec sees of the chunk it codes: shape, element type, fill value.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRepr {
    pub shape: Vec<usize>,
    pub dtype: DataType,
    pub fill: FillValue,
}

impl ChunkRepr {
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }
    /// A chunk holding only the fill value.
    pub fn filled(&self) -> ArrayBytes {
        ArrayBytes::filled(&self.fill.0, self.num_elements(), self.dtype.is_variable())
    }
    /// Size in bytes of fixed-size data, `None` for variable-length types.
    pub fn nbytes(&self) -> Option<usize> {
        self.dtype.size().map(|s| s * self.num_elements())
    }
}

/// Array → array codecs change layout or values, never the element count's meaning.
pub trait ArrayToArrayCodec: Debug + Send + Sync {
    /// What the encoded array looks like.
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr>;
    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes>;
    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes>;
    /// The codec as v3 metadata writes it.
    fn to_v3(&self) -> Value;
}

/// Array → bytes codecs serialize elements.
pub trait ArrayToBytesCodec: Debug + Send + Sync {
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>>;
    fn decode(&self, bytes: Vec<u8>, repr: &ChunkRepr) -> Result<ArrayBytes>;
    /// Encoded size when it does not depend on the values (for shard indexes).
    fn fixed_encoded_size(&self, _repr: &ChunkRepr) -> Option<usize> {
        None
    }
    fn to_v3(&self) -> Value;
    /// The most bytes encoding any chunk of `repr` can produce, when known
    /// (it bounds what decompressors may produce for this codec to decode).
    fn max_encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        self.fixed_encoded_size(repr)
    }
    /// The sharding codec, for partial reads that fetch inner chunks by range.
    fn as_sharding(&self) -> Option<&ShardingCodec> {
        None
    }
    /// Whether each element decodes from its own bytes alone (the `bytes`
    /// codec), so that a run of elements decodes without the rest.
    fn decodes_elementwise(&self) -> bool {
        false
    }
}

/// What a decoder may produce for a variable-length chunk, whose encoded
/// size the metadata cannot bound.
pub const MAX_VARIABLE_CHUNK_BYTES: usize = 512 << 20;

/// The error for a decoder whose output would pass `limit`.
pub(crate) fn too_large(codec: &str, limit: usize) -> super::error::ZarrError {
    super::error::ZarrError::codec(
        codec,
        format!("decodes to more than {limit} bytes, more than this chunk can hold"),
    )
}

/// Bytes → bytes codecs compress or checksum.
pub trait BytesToBytesCodec: Debug + Send + Sync {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>>;
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>>;
    /// Decode, failing rather than producing more than `limit` bytes: a
    /// corrupt or hostile chunk may expand to any size, and the output must
    /// be bounded before it is allocated. Decompressors override this; the
    /// default suits codecs whose output is no larger than their input.
    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let out = self.decode(bytes)?;
        if out.len() > limit {
            return Err(too_large("codec", limit));
        }
        Ok(out)
    }
    /// The most bytes encoding `n` bytes can produce.
    fn max_encoded_len(&self, n: usize) -> usize {
        match self.fixed_overhead() {
            Some(o) => n.saturating_add(o),
            // Every compressor here expands incompressible input by far less.
            None => n.saturating_add(n / 16).saturating_add(1024),
        }
    }
    /// Whether [`BytesToBytesCodec::decode_range`] may decode less than the
    /// whole value.
    fn decodes_ranges(&self) -> bool {
        false
    }
    /// Bytes `range` of the decoded value, decoding no more of it than they
    /// need, when this codec can (Blosc decodes only the blocks holding
    /// them). `None` when it cannot: decode the whole value instead.
    /// `decoded_len` is what the whole value must decode to.
    fn decode_range(
        &self,
        _bytes: &[u8],
        _range: Range<usize>,
        _decoded_len: usize,
    ) -> Option<Result<Vec<u8>>> {
        None
    }
    /// Bytes added whatever the input, when fixed (checksums); `None` for compressors.
    fn fixed_overhead(&self) -> Option<usize> {
        None
    }
    fn to_v3(&self) -> Value;
}

/// A full pipeline: array→array codecs, one array→bytes codec, bytes→bytes codecs.
#[derive(Debug)]
pub struct CodecChain {
    pub array_to_array: Vec<Box<dyn ArrayToArrayCodec>>,
    pub array_to_bytes: Box<dyn ArrayToBytesCodec>,
    pub bytes_to_bytes: Vec<Box<dyn BytesToBytesCodec>>,
}

impl CodecChain {
    /// The representations seen by each array→array codec, then the array→bytes one.
    fn reprs(&self, decoded: &ChunkRepr) -> Result<Vec<ChunkRepr>> {
        let mut reprs = vec![decoded.clone()];
        for codec in &self.array_to_array {
            let next = codec.encoded_repr(reprs.last().unwrap_or(decoded))?;
            reprs.push(next);
        }
        Ok(reprs)
    }

    pub fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<Vec<u8>> {
        crate::metrics::count(&crate::metrics::CHUNKS_ENCODED);
        let reprs = self.reprs(decoded)?;
        let mut data = data;
        for (codec, repr) in self.array_to_array.iter().zip(&reprs) {
            data = codec.encode(data, repr)?;
        }
        let mut bytes = self.array_to_bytes.encode(data, &reprs[reprs.len() - 1])?;
        for codec in &self.bytes_to_bytes {
            bytes = codec.encode(bytes)?;
        }
        Ok(bytes)
    }

    pub fn decode(&self, bytes: Vec<u8>, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        crate::metrics::count(&crate::metrics::CHUNKS_DECODED);
        let reprs = self.reprs(decoded)?;
        // What each bytes->bytes codec may produce when decoding: what the
        // codec before it can encode to, starting from the serialized chunk.
        let mut limits = Vec::with_capacity(self.bytes_to_bytes.len());
        let mut n = self
            .array_to_bytes
            .max_encoded_size(&reprs[reprs.len() - 1])
            .unwrap_or(MAX_VARIABLE_CHUNK_BYTES);
        for codec in &self.bytes_to_bytes {
            limits.push(n);
            n = codec.max_encoded_len(n);
        }
        let mut bytes = bytes;
        for (codec, limit) in self.bytes_to_bytes.iter().zip(limits).rev() {
            bytes = codec.decode_bounded(bytes, limit)?;
        }
        let mut data = self.array_to_bytes.decode(bytes, &reprs[reprs.len() - 1])?;
        for (codec, repr) in self.array_to_array.iter().zip(&reprs).rev() {
            data = codec.decode(data, repr)?;
        }
        check_decoded(&data, decoded)?;
        Ok(data)
    }

    /// Whether [`CodecChain::decode_rows`] can decode part of a chunk: no
    /// array→array codec, elementwise serialization of fixed-size elements,
    /// and one bytes→bytes codec that may decode ranges.
    pub fn decodes_rows(&self, decoded: &ChunkRepr) -> bool {
        self.array_to_array.is_empty()
            && self.array_to_bytes.decodes_elementwise()
            && self.bytes_to_bytes.len() == 1
            && self.bytes_to_bytes[0].decodes_ranges()
            && decoded.nbytes().is_some()
            && !decoded.shape.is_empty()
    }

    /// Rows `rows` of the outermost dimension of a chunk, decoding only the
    /// stored blocks that hold them: what a window reads of a chunk it only
    /// crosses. The result has the chunk's shape with `rows.len()` rows.
    /// `None` when the chain or this chunk's encoding allows no partial
    /// decode; decode the whole chunk then.
    pub fn decode_rows(
        &self,
        bytes: &[u8],
        decoded: &ChunkRepr,
        rows: Range<usize>,
    ) -> Option<Result<ArrayBytes>> {
        if !self.decodes_rows(decoded) || rows.end > decoded.shape[0] || rows.is_empty() {
            return None;
        }
        let nbytes = decoded.nbytes()?;
        let row_bytes = nbytes / decoded.shape[0].max(1);
        let range = rows.start * row_bytes..rows.end * row_bytes;
        let part = match self.bytes_to_bytes[0].decode_range(bytes, range, nbytes)? {
            Ok(part) => part,
            Err(e) => return Some(Err(e)),
        };
        crate::metrics::count(&crate::metrics::CHUNKS_DECODED);
        let mut repr = decoded.clone();
        repr.shape[0] = rows.len();
        Some(
            self.array_to_bytes
                .decode(part, &repr)
                .and_then(|data| check_decoded(&data, &repr).map(|()| data)),
        )
    }

    /// The most bytes a chunk of `decoded` can encode to, when bounded.
    pub fn max_encoded_size(&self, decoded: &ChunkRepr) -> Option<usize> {
        let reprs = self.reprs(decoded).ok()?;
        let n = self
            .array_to_bytes
            .max_encoded_size(&reprs[reprs.len() - 1])?;
        Some(
            self.bytes_to_bytes
                .iter()
                .fold(n, |n, codec| codec.max_encoded_len(n)),
        )
    }

    /// Encoded size independent of values, if every codec has one.
    pub fn fixed_encoded_size(&self, decoded: &ChunkRepr) -> Option<usize> {
        if !self.array_to_array.is_empty() {
            return None;
        }
        let mut size = self.array_to_bytes.fixed_encoded_size(decoded)?;
        for codec in &self.bytes_to_bytes {
            size += codec.fixed_overhead()?;
        }
        Some(size)
    }

    /// The sharding codec when it is the whole chain (the usual layout).
    pub fn sharding(&self) -> Option<&ShardingCodec> {
        if self.array_to_array.is_empty() && self.bytes_to_bytes.is_empty() {
            self.array_to_bytes.as_sharding()
        } else {
            None
        }
    }

    /// The chain as a v3 `codecs` list.
    pub fn to_v3(&self) -> Value {
        let mut out: Vec<Value> = self.array_to_array.iter().map(|c| c.to_v3()).collect();
        out.push(self.array_to_bytes.to_v3());
        out.extend(self.bytes_to_bytes.iter().map(|c| c.to_v3()));
        Value::Array(out)
    }
}

fn check_decoded(data: &ArrayBytes, repr: &ChunkRepr) -> Result<()> {
    let ok = match (data, repr.nbytes()) {
        (ArrayBytes::Fixed(b), Some(n)) => b.len() == n,
        (ArrayBytes::Variable(v), None) => v.len() == repr.num_elements(),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(super::error::ZarrError::Data(format!(
            "decoded chunk does not hold {} elements of {}",
            repr.num_elements(),
            repr.dtype.name()
        )))
    }
}

/// A v3 codec entry: name and configuration object.
pub(crate) fn v3_entry(name: &str, config: Value) -> Value {
    serde_json::json!({"name": name, "configuration": config})
}

#[cfg(test)]
mod conformance;
