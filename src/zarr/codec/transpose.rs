//! The `transpose` array→array codec, also used for v2 `order: "F"`.

use serde_json::{json, Value};

use super::{v3_entry, ArrayBytes, ArrayToArrayCodec, ChunkRepr};
use crate::zarr::buffer::unravel;
use crate::zarr::error::{Result, ZarrError};

#[derive(Debug, Clone)]
pub struct TransposeCodec {
    /// `order[i]` is the decoded dimension that becomes encoded dimension `i`.
    pub order: Vec<usize>,
}

impl TransposeCodec {
    /// The v2 `order: "F"` layout: dimensions reversed.
    pub fn fortran(ndim: usize) -> Self {
        TransposeCodec {
            order: (0..ndim).rev().collect(),
        }
    }

    pub fn from_v3(config: Option<&Value>, ndim: usize) -> Result<Self> {
        let order = match config.and_then(|c| c.get("order")) {
            Some(Value::String(s)) if s == "C" => (0..ndim).collect(),
            Some(Value::String(s)) if s == "F" => (0..ndim).rev().collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_u64().map(|n| n as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ZarrError::codec("transpose", "order must list integers"))?,
            _ => {
                return Err(ZarrError::codec(
                    "transpose",
                    "configuration.order is required",
                ))
            }
        };
        let mut seen = vec![false; ndim];
        if order.len() != ndim
            || order
                .iter()
                .any(|&d| d >= ndim || std::mem::replace(&mut seen[d], true))
        {
            return Err(ZarrError::codec(
                "transpose",
                format!("order {order:?} is not a permutation of {ndim} dimensions"),
            ));
        }
        Ok(TransposeCodec { order })
    }

    fn encoded_shape(&self, shape: &[usize]) -> Vec<usize> {
        self.order.iter().map(|&d| shape[d]).collect()
    }

    /// For each encoded linear index, the decoded linear index it holds.
    fn gather_indices(&self, decoded_shape: &[usize]) -> Vec<usize> {
        let enc_shape = self.encoded_shape(decoded_shape);
        let n: usize = decoded_shape.iter().product();
        let mut dec_strides = vec![1usize; decoded_shape.len()];
        for i in (0..decoded_shape.len().saturating_sub(1)).rev() {
            dec_strides[i] = dec_strides[i + 1] * decoded_shape[i + 1];
        }
        // Stride in the decoded array of each encoded dimension.
        let strides: Vec<usize> = self.order.iter().map(|&d| dec_strides[d]).collect();
        (0..n)
            .map(|e| {
                unravel(e, &enc_shape)
                    .iter()
                    .zip(&strides)
                    .map(|(i, s)| i * s)
                    .sum()
            })
            .collect()
    }
}

fn gather(data: &ArrayBytes, idx: &[usize], elem: usize) -> ArrayBytes {
    match data {
        ArrayBytes::Fixed(b) => {
            let mut out = Vec::with_capacity(idx.len() * elem);
            for &i in idx {
                out.extend_from_slice(&b[i * elem..(i + 1) * elem]);
            }
            ArrayBytes::Fixed(out)
        }
        ArrayBytes::Variable(v) => {
            ArrayBytes::Variable(idx.iter().map(|&i| v[i].clone()).collect())
        }
    }
}

fn scatter(data: &ArrayBytes, idx: &[usize], elem: usize) -> ArrayBytes {
    match data {
        ArrayBytes::Fixed(b) => {
            let mut out = vec![0u8; b.len()];
            for (e, &d) in idx.iter().enumerate() {
                out[d * elem..(d + 1) * elem].copy_from_slice(&b[e * elem..(e + 1) * elem]);
            }
            ArrayBytes::Fixed(out)
        }
        ArrayBytes::Variable(v) => {
            let mut out = vec![Vec::new(); v.len()];
            for (e, &d) in idx.iter().enumerate() {
                out[d] = v[e].clone();
            }
            ArrayBytes::Variable(out)
        }
    }
}

impl ArrayToArrayCodec for TransposeCodec {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        if decoded.shape.len() != self.order.len() {
            return Err(ZarrError::codec(
                "transpose",
                format!(
                    "order {:?} does not fit shape {:?}",
                    self.order, decoded.shape
                ),
            ));
        }
        Ok(ChunkRepr {
            shape: self.encoded_shape(&decoded.shape),
            ..decoded.clone()
        })
    }

    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let idx = self.gather_indices(&decoded.shape);
        Ok(gather(&data, &idx, decoded.dtype.size().unwrap_or(0)))
    }

    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let idx = self.gather_indices(&decoded.shape);
        if data.len(decoded.dtype.size().unwrap_or(1)) != idx.len() {
            return Err(ZarrError::codec(
                "transpose",
                "element count does not match the chunk shape",
            ));
        }
        Ok(scatter(&data, &idx, decoded.dtype.size().unwrap_or(0)))
    }

    fn to_v3(&self) -> Value {
        v3_entry("transpose", json!({"order": self.order}))
    }
}
