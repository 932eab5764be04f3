//! The `bytes` array→bytes codec: elements as they are in memory, in a byte order.

use serde_json::{json, Value};

use super::{v3_entry, ArrayBytes, ArrayToBytesCodec, ChunkRepr};
use crate::zarr::dtype::Endian;
use crate::zarr::error::{Result, ZarrError};

/// How stored bytes are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// v3: one order for every multi-byte unit (`None`: single-byte types only).
    Uniform(Option<Endian>),
    /// v2: the order the dtype declares (per field for structured types).
    Declared(Endian),
}

#[derive(Debug, Clone)]
pub struct BytesCodec {
    pub order: ByteOrder,
}

impl BytesCodec {
    pub fn from_v3(config: Option<&Value>) -> Result<Self> {
        let endian = match config.and_then(|c| c.get("endian")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "little" => Some(Endian::Little),
            Some(Value::String(s)) if s == "big" => Some(Endian::Big),
            Some(other) => {
                return Err(ZarrError::codec(
                    "bytes",
                    format!("endian {other} is not \"little\" or \"big\""),
                ))
            }
        };
        Ok(BytesCodec {
            order: ByteOrder::Uniform(endian),
        })
    }

    fn swap(&self, buf: &mut [u8], repr: &ChunkRepr) -> Result<()> {
        match self.order {
            ByteOrder::Declared(endian) => repr.dtype.swap_declared(buf, endian),
            ByteOrder::Uniform(Some(Endian::Big)) => repr.dtype.swap_all(buf),
            // The spec requires `endian` for multi-byte types, but zarr-python
            // omits it for structured types and writes them little-endian.
            ByteOrder::Uniform(_) => {}
        }
        Ok(())
    }
}

impl ArrayToBytesCodec for BytesCodec {
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>> {
        let mut buf = data.into_fixed()?;
        self.swap(&mut buf, repr)?;
        Ok(buf)
    }

    fn decode(&self, mut bytes: Vec<u8>, repr: &ChunkRepr) -> Result<ArrayBytes> {
        let expected = repr.nbytes().ok_or_else(|| {
            ZarrError::codec(
                "bytes",
                format!("cannot hold variable-length {}", repr.dtype.name()),
            )
        })?;
        if bytes.len() != expected {
            return Err(ZarrError::codec(
                "bytes",
                format!(
                    "expected {expected} bytes for shape {:?}, found {}",
                    repr.shape,
                    bytes.len()
                ),
            ));
        }
        self.swap(&mut bytes, repr)?;
        Ok(ArrayBytes::Fixed(bytes))
    }

    fn fixed_encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        repr.nbytes()
    }

    fn decodes_elementwise(&self) -> bool {
        true
    }

    fn to_v3(&self) -> Value {
        match self.order {
            ByteOrder::Uniform(None) => json!({"name": "bytes"}),
            ByteOrder::Uniform(Some(Endian::Big)) | ByteOrder::Declared(Endian::Big) => {
                v3_entry("bytes", json!({"endian": "big"}))
            }
            _ => v3_entry("bytes", json!({"endian": "little"})),
        }
    }
}
