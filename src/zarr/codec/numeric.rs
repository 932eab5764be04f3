//! Element arithmetic for the numcodecs filters: read a little-endian buffer
//! as integers or floats, write it back with numpy's casting rules (integers
//! wrap, floats round to the target precision, float→int truncates).

use half::f16;

use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};

/// How an element type does arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int { bytes: usize, signed: bool },
    Float { bytes: usize },
}

pub fn kind(dtype: &DataType) -> Option<Kind> {
    use DataType::*;
    Some(match dtype {
        Bool | UInt8 => Kind::Int {
            bytes: 1,
            signed: false,
        },
        Int8 => Kind::Int {
            bytes: 1,
            signed: true,
        },
        Int16 => Kind::Int {
            bytes: 2,
            signed: true,
        },
        Int32 => Kind::Int {
            bytes: 4,
            signed: true,
        },
        Int64 | DateTime64 { .. } | TimeDelta64 { .. } => Kind::Int {
            bytes: 8,
            signed: true,
        },
        UInt16 => Kind::Int {
            bytes: 2,
            signed: false,
        },
        UInt32 => Kind::Int {
            bytes: 4,
            signed: false,
        },
        UInt64 => Kind::Int {
            bytes: 8,
            signed: false,
        },
        Float16 => Kind::Float { bytes: 2 },
        Float32 => Kind::Float { bytes: 4 },
        Float64 => Kind::Float { bytes: 8 },
        _ => return None,
    })
}

pub fn numeric_kind(codec: &str, dtype: &DataType) -> Result<Kind> {
    kind(dtype)
        .ok_or_else(|| ZarrError::codec(codec, format!("{} is not a numeric type", dtype.name())))
}

fn read_int(b: &[u8], signed: bool) -> i128 {
    let mut buf = [0u8; 16];
    buf[..b.len()].copy_from_slice(b);
    if signed && b[b.len() - 1] & 0x80 != 0 {
        buf[b.len()..].fill(0xff);
    }
    i128::from_le_bytes(buf)
}

fn read_float(b: &[u8]) -> f64 {
    match b.len() {
        2 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        4 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        _ => f64::from_le_bytes(b.try_into().unwrap_or_default()),
    }
}

/// Elements as integers (floats truncate toward zero).
pub fn read_i128(codec: &str, dtype: &DataType, buf: &[u8]) -> Result<Vec<i128>> {
    Ok(match numeric_kind(codec, dtype)? {
        Kind::Int { bytes, signed } => buf
            .chunks_exact(bytes)
            .map(|b| read_int(b, signed))
            .collect(),
        Kind::Float { bytes } => buf
            .chunks_exact(bytes)
            .map(|b| read_float(b) as i128)
            .collect(),
    })
}

/// Elements as floats.
pub fn read_f64(codec: &str, dtype: &DataType, buf: &[u8]) -> Result<Vec<f64>> {
    Ok(match numeric_kind(codec, dtype)? {
        Kind::Int { bytes, signed } => buf
            .chunks_exact(bytes)
            .map(|b| read_int(b, signed) as f64)
            .collect(),
        Kind::Float { bytes } => buf.chunks_exact(bytes).map(read_float).collect(),
    })
}

/// Integers into `dtype`, wrapping like a C cast.
pub fn write_i128(codec: &str, dtype: &DataType, values: &[i128]) -> Result<Vec<u8>> {
    Ok(match numeric_kind(codec, dtype)? {
        Kind::Int { bytes, .. } => values
            .iter()
            .flat_map(|v| v.to_le_bytes()[..bytes].to_vec())
            .collect(),
        Kind::Float { .. } => {
            let floats: Vec<f64> = values.iter().map(|&v| v as f64).collect();
            return write_f64(codec, dtype, &floats);
        }
    })
}

/// Floats into `dtype`: rounded to the float width, or truncated into integers.
pub fn write_f64(codec: &str, dtype: &DataType, values: &[f64]) -> Result<Vec<u8>> {
    Ok(match numeric_kind(codec, dtype)? {
        Kind::Float { bytes: 2 } => values
            .iter()
            .flat_map(|&v| f16::from_f64(v).to_le_bytes())
            .collect(),
        Kind::Float { bytes: 4 } => values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
        Kind::Float { .. } => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        Kind::Int { bytes, .. } => values
            .iter()
            .flat_map(|&v| (v as i128).to_le_bytes()[..bytes].to_vec())
            .collect(),
    })
}

/// Round `x` to the precision arithmetic in `dtype` would keep (numpy keeps
/// float32 arrays in float32 when combined with Python scalars).
pub fn round_to(dtype: &DataType, x: f64) -> f64 {
    match dtype {
        DataType::Float32 => x as f32 as f64,
        DataType::Float16 => f16::from_f64(x).to_f64(),
        _ => x,
    }
}

/// Convert elements between numeric types the way numpy's `astype` does.
pub fn cast(codec: &str, from: &DataType, to: &DataType, buf: &[u8]) -> Result<Vec<u8>> {
    match (numeric_kind(codec, from)?, numeric_kind(codec, to)?) {
        (Kind::Int { .. }, Kind::Int { .. }) => {
            write_i128(codec, to, &read_i128(codec, from, buf)?)
        }
        _ => write_f64(codec, to, &read_f64(codec, from, buf)?),
    }
}

/// A number that chunks hold little-endian, read and written as whole
/// slices of one type (for codecs that code typed numbers: pcodec, ZFP).
pub trait Le: Copy + Default {
    const SIZE: usize;
    fn from_le(bytes: &[u8]) -> Self;
    fn put_le(self, out: &mut Vec<u8>);

    /// Every whole element of `bytes`.
    fn read_all(bytes: &[u8]) -> Vec<Self> {
        bytes.chunks_exact(Self::SIZE).map(Self::from_le).collect()
    }

    fn write_all(values: &[Self]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * Self::SIZE);
        for v in values {
            v.put_le(&mut out);
        }
        out
    }
}

macro_rules! le {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().unwrap_or_default())
            }
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le!(i16, i32, i64, u16, u32, u64, f16, f32, f64);
