//! `vlen-utf8` and `vlen-bytes`: variable-length elements as numcodecs frames
//! them (u32 count, then u32 length + bytes per element, little-endian).

use serde_json::{json, Value};

use super::{ArrayBytes, ArrayToBytesCodec, ChunkRepr};
use crate::zarr::error::{Result, ZarrError};

#[derive(Debug, Clone)]
pub struct VlenCodec {
    /// `vlen-utf8` checks that elements are UTF-8.
    pub utf8: bool,
}

impl VlenCodec {
    fn name(&self) -> &'static str {
        if self.utf8 {
            "vlen-utf8"
        } else {
            "vlen-bytes"
        }
    }
}

impl ArrayToBytesCodec for VlenCodec {
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>> {
        let items = data.into_variable()?;
        let total: usize = items.iter().map(|i| i.len() + 4).sum();
        let mut out = Vec::with_capacity(4 + total);
        let count = u32::try_from(items.len())
            .map_err(|_| ZarrError::codec(self.name(), "too many elements"))?;
        out.extend_from_slice(&count.to_le_bytes());
        for item in &items {
            let len = u32::try_from(item.len())
                .map_err(|_| ZarrError::codec(self.name(), "element over 4 GiB"))?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(item);
        }
        debug_assert_eq!(items.len(), repr.num_elements());
        Ok(out)
    }

    fn decode(&self, bytes: Vec<u8>, repr: &ChunkRepr) -> Result<ArrayBytes> {
        let err = |why: String| ZarrError::codec(self.name(), why);
        let read_u32 = |at: usize| -> Result<usize> {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or_else(|| err(format!("truncated at byte {at}")))
        };
        let count = read_u32(0)?;
        if count != repr.num_elements() {
            return Err(err(format!(
                "holds {count} elements, the chunk has {}",
                repr.num_elements()
            )));
        }
        let mut items = Vec::with_capacity(count);
        let mut at = 4;
        for _ in 0..count {
            let len = read_u32(at)?;
            let item = bytes
                .get(at + 4..at + 4 + len)
                .ok_or_else(|| err(format!("element at byte {at} runs past the end")))?;
            if self.utf8 && std::str::from_utf8(item).is_err() {
                return Err(err(format!("element at byte {at} is not UTF-8")));
            }
            items.push(item.to_vec());
            at += 4 + len;
        }
        Ok(ArrayBytes::Variable(items))
    }

    fn to_v3(&self) -> Value {
        json!({"name": self.name(), "configuration": {}})
    }
}
