//! numcodecs' filters as array→array codecs (delta, fixedscaleoffset,
//! quantize, bitround, packbits, categorize, astype) and the byte `shuffle`.
//! Each keeps the configuration it was built from, so metadata round-trips.

use serde_json::{json, Value};

use super::numeric::{self, cast, read_f64, read_i128, round_to, write_f64, write_i128, Kind};
use super::{ArrayBytes, ArrayToArrayCodec, BytesToBytesCodec, ChunkRepr};
use crate::zarr::dtype::{DataType, Endian};
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::fill::FillValue;

/// A numcodecs dtype parameter: the type and its declared byte order.
fn dtype_param(codec: &str, config: &Value, key: &str) -> Result<Option<(DataType, Endian)>> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => DataType::from_v2_json(v)
            .map(Some)
            .map_err(|e| ZarrError::codec(codec, format!("{key}: {e}"))),
    }
}

fn entry(id: &str, config: &Value) -> Value {
    let mut config = config.clone();
    if let Some(o) = config.as_object_mut() {
        o.remove("id");
    }
    json!({"name": format!("numcodecs.{id}"), "configuration": config})
}

/// The element type a filter produces, plus the byte order numcodecs stores it in.
#[derive(Debug, Clone)]
pub struct Typed {
    pub dtype: DataType,
    pub astype: DataType,
}

impl Typed {
    fn parse(codec: &str, config: &Value, array: &DataType) -> Result<Self> {
        let (dtype, _) =
            dtype_param(codec, config, "dtype")?.unwrap_or((array.clone(), Endian::Little));
        let (astype, _) =
            dtype_param(codec, config, "astype")?.unwrap_or((dtype.clone(), Endian::Little));
        Ok(Typed { dtype, astype })
    }
    fn repr(&self, decoded: &ChunkRepr) -> ChunkRepr {
        ChunkRepr {
            shape: decoded.shape.clone(),
            dtype: self.astype.clone(),
            fill: FillValue::zero(&self.astype),
        }
    }
}

/// Filters that change values element by element between `dtype` and `astype`.
#[derive(Debug, Clone)]
pub enum Op {
    Delta,
    FixedScaleOffset { offset: f64, scale: f64 },
    Quantize { digits: i64 },
    AsType,
}

#[derive(Debug, Clone)]
pub struct Elementwise {
    pub id: &'static str,
    pub op: Op,
    pub types: Typed,
    pub config: Value,
}

impl Elementwise {
    pub fn new(id: &'static str, config: &Value, array: &DataType) -> Result<Self> {
        let num = |k: &str| {
            config.get(k).and_then(Value::as_f64).ok_or_else(|| {
                ZarrError::codec(id, format!("{k} is required and must be a number"))
            })
        };
        let (op, types) = match id {
            "delta" => (Op::Delta, Typed::parse(id, config, array)?),
            "fixedscaleoffset" => (
                Op::FixedScaleOffset {
                    offset: num("offset")?,
                    scale: num("scale")?,
                },
                Typed::parse(id, config, array)?,
            ),
            "quantize" => {
                let digits = config
                    .get("digits")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| ZarrError::codec(id, "digits is required"))?;
                let types = Typed::parse(id, config, array)?;
                if !matches!(numeric::kind(&types.dtype), Some(Kind::Float { .. })) {
                    return Err(ZarrError::codec(
                        id,
                        "only floating point types can be quantized",
                    ));
                }
                (Op::Quantize { digits }, types)
            }
            _ => {
                let (decode, _) = dtype_param(id, config, "decode_dtype")?
                    .unwrap_or((array.clone(), Endian::Little));
                let (encode, _) = dtype_param(id, config, "encode_dtype")?
                    .ok_or_else(|| ZarrError::codec(id, "encode_dtype is required"))?;
                (
                    Op::AsType,
                    Typed {
                        dtype: decode,
                        astype: encode,
                    },
                )
            }
        };
        numeric::numeric_kind(id, &types.dtype)?;
        numeric::numeric_kind(id, &types.astype)?;
        Ok(Elementwise {
            id,
            op,
            types,
            config: config.clone(),
        })
    }

    fn is_int(dtype: &DataType) -> bool {
        matches!(numeric::kind(dtype), Some(Kind::Int { .. }))
    }

    /// The float width numpy computes in when mixing `dtype` arrays with Python floats.
    fn compute_type(dtype: &DataType) -> DataType {
        match dtype {
            DataType::Float32 | DataType::Float16 => dtype.clone(),
            _ => DataType::Float64,
        }
    }
}

impl ArrayToArrayCodec for Elementwise {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        Ok(self.types.repr(decoded))
    }

    fn encode(&self, data: ArrayBytes, _decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let buf = data.into_fixed()?;
        let Typed { dtype, astype, .. } = &self.types;
        let id = self.id;
        let out = match &self.op {
            Op::Delta if Self::is_int(dtype) => {
                let v = read_i128(id, dtype, &buf)?;
                let bits = 8 * dtype.size().unwrap_or(8) as u32;
                let wrap = |x: i128| x.rem_euclid(1i128 << bits);
                let diffs: Vec<i128> = (0..v.len())
                    .map(|i| if i == 0 { v[0] } else { wrap(v[i] - v[i - 1]) })
                    .collect();
                write_i128(id, astype, &diffs)?
            }
            Op::Delta => {
                let v = read_f64(id, dtype, &buf)?;
                let diffs: Vec<f64> = (0..v.len())
                    .map(|i| {
                        if i == 0 {
                            v[0]
                        } else {
                            round_to(dtype, v[i] - v[i - 1])
                        }
                    })
                    .collect();
                write_f64(id, astype, &diffs)?
            }
            Op::FixedScaleOffset { offset, scale } => {
                let ct = Self::compute_type(dtype);
                let v = read_f64(id, dtype, &buf)?;
                let enc: Vec<f64> = v
                    .iter()
                    .map(|&x| round_to(&ct, round_to(&ct, x - offset) * scale).round_ties_even())
                    .collect();
                write_f64(id, astype, &enc)?
            }
            Op::Quantize { digits } => {
                let precision = 10f64.powi(-*digits as i32);
                let exp = precision.log10();
                let exp = if exp < 0.0 { exp.floor() } else { exp.ceil() };
                let bits = (10f64.powf(-exp)).log2().ceil();
                let scale = 2f64.powf(bits);
                let v = read_f64(id, dtype, &buf)?;
                let enc: Vec<f64> = v
                    .iter()
                    .map(|&x| round_to(dtype, round_to(dtype, scale * x).round_ties_even() / scale))
                    .collect();
                write_f64(id, astype, &enc)?
            }
            Op::AsType => cast(id, dtype, astype, &buf)?,
        };
        Ok(ArrayBytes::Fixed(out))
    }

    fn decode(&self, data: ArrayBytes, _decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let buf = data.into_fixed()?;
        let Typed { dtype, astype, .. } = &self.types;
        let id = self.id;
        let out = match &self.op {
            Op::Delta if Self::is_int(dtype) => {
                let enc = read_i128(id, astype, &buf)?;
                let mut acc = 0i128;
                let sums: Vec<i128> = enc
                    .iter()
                    .map(|&e| {
                        acc = acc.wrapping_add(e);
                        acc
                    })
                    .collect();
                write_i128(id, dtype, &sums)?
            }
            Op::Delta => {
                let enc = read_f64(id, astype, &buf)?;
                let mut acc = 0f64;
                let sums: Vec<f64> = enc
                    .iter()
                    .map(|&e| {
                        acc = round_to(dtype, acc + e);
                        acc
                    })
                    .collect();
                write_f64(id, dtype, &sums)?
            }
            Op::FixedScaleOffset { offset, scale } => {
                let ct = Self::compute_type(astype);
                let enc = read_f64(id, astype, &buf)?;
                let dec: Vec<f64> = enc
                    .iter()
                    .map(|&e| round_to(&ct, round_to(&ct, e / scale) + offset))
                    .collect();
                write_f64(id, dtype, &dec)?
            }
            Op::Quantize { .. } | Op::AsType => cast(id, astype, dtype, &buf)?,
        };
        Ok(ArrayBytes::Fixed(out))
    }

    fn to_v3(&self) -> Value {
        entry(self.id, &self.config)
    }
}

/// numcodecs `bitround`: keep `keepbits` mantissa bits, rounding to nearest.
#[derive(Debug, Clone)]
pub struct BitRound {
    pub keepbits: u32,
}

fn bitround<const N: usize>(buf: &mut [u8], mantissa: u32, keepbits: u32) {
    let bits = (N * 8) as u32;
    let maskbits = mantissa - keepbits;
    if maskbits == 0 {
        return;
    }
    for chunk in buf.chunks_exact_mut(N) {
        let mut raw = [0u8; 8];
        raw[..N].copy_from_slice(chunk);
        // Sign-extend to i64 so shifts behave as on numpy's signed view.
        let b = (i64::from_le_bytes(raw) << (64 - bits)) >> (64 - bits);
        let mask = (-1i64 >> maskbits) << maskbits;
        let half_quantum = (1i64 << (maskbits - 1)) - 1;
        let rounded = b.wrapping_add(((b >> maskbits) & 1) + half_quantum) & mask;
        chunk.copy_from_slice(&rounded.to_le_bytes()[..N]);
    }
}

impl ArrayToArrayCodec for BitRound {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        Ok(decoded.clone())
    }
    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let mut buf = data.into_fixed()?;
        let mantissa = match decoded.dtype {
            DataType::Float16 => 10,
            DataType::Float32 => 23,
            DataType::Float64 => 52,
            _ => {
                return Err(ZarrError::codec(
                    "bitround",
                    format!("{} is not a float type", decoded.dtype.name()),
                ))
            }
        };
        if self.keepbits > mantissa {
            return Err(ZarrError::codec(
                "bitround",
                format!("keepbits {} is over {mantissa}", self.keepbits),
            ));
        }
        match decoded.dtype {
            DataType::Float16 => bitround::<2>(&mut buf, mantissa, self.keepbits),
            DataType::Float32 => bitround::<4>(&mut buf, mantissa, self.keepbits),
            _ => bitround::<8>(&mut buf, mantissa, self.keepbits),
        }
        Ok(ArrayBytes::Fixed(buf))
    }
    fn decode(&self, data: ArrayBytes, _decoded: &ChunkRepr) -> Result<ArrayBytes> {
        Ok(data)
    }
    fn to_v3(&self) -> Value {
        json!({"name": "numcodecs.bitround", "configuration": {"keepbits": self.keepbits}})
    }
}

/// numcodecs `packbits`: booleans as bits, after a byte counting the padding bits.
#[derive(Debug, Clone)]
pub struct PackBits;

impl ArrayToArrayCodec for PackBits {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        if decoded.dtype != DataType::Bool {
            return Err(ZarrError::codec(
                "packbits",
                format!("needs bool data, not {}", decoded.dtype.name()),
            ));
        }
        let n = decoded.num_elements();
        Ok(ChunkRepr {
            shape: vec![1 + n.div_ceil(8)],
            dtype: DataType::UInt8,
            fill: FillValue(vec![0]),
        })
    }
    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let bits = data.into_fixed()?;
        let n = decoded.num_elements();
        let mut out = vec![0u8; 1 + n.div_ceil(8)];
        out[0] = ((8 - n % 8) % 8) as u8;
        for (i, &b) in bits.iter().enumerate() {
            if b != 0 {
                out[1 + i / 8] |= 0x80 >> (i % 8);
            }
        }
        Ok(ArrayBytes::Fixed(out))
    }
    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let packed = data.into_fixed()?;
        let n = decoded.num_elements();
        if packed.len() != 1 + n.div_ceil(8) {
            return Err(ZarrError::codec(
                "packbits",
                format!("{} bytes cannot hold {n} booleans", packed.len()),
            ));
        }
        Ok(ArrayBytes::Fixed(
            (0..n)
                .map(|i| (packed[1 + i / 8] >> (7 - i % 8)) & 1)
                .collect(),
        ))
    }
    fn to_v3(&self) -> Value {
        json!({"name": "numcodecs.packbits", "configuration": {}})
    }
}

/// numcodecs `categorize`: strings as 1-based label indexes (0 for none).
#[derive(Debug, Clone)]
pub struct Categorize {
    pub labels: Vec<String>,
    pub astype: DataType,
    pub config: Value,
}

impl Categorize {
    pub fn new(config: &Value) -> Result<Self> {
        let labels = config
            .get("labels")
            .and_then(Value::as_array)
            .and_then(|l| {
                l.iter()
                    .map(|s| s.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| ZarrError::codec("categorize", "labels must be a list of strings"))?;
        let (astype, _) = dtype_param("categorize", config, "astype")?
            .unwrap_or((DataType::UInt8, Endian::NotApplicable));
        if !matches!(numeric::kind(&astype), Some(Kind::Int { .. })) {
            return Err(ZarrError::codec(
                "categorize",
                "astype must be an integer type",
            ));
        }
        Ok(Categorize {
            labels,
            astype,
            config: config.clone(),
        })
    }

    fn element(&self, dtype: &DataType, label: &str) -> Vec<u8> {
        match dtype {
            DataType::FixedUtf32(n) => {
                let mut b: Vec<u8> = label
                    .chars()
                    .take(*n)
                    .flat_map(|c| (c as u32).to_le_bytes())
                    .collect();
                b.resize(n * 4, 0);
                b
            }
            _ => label.as_bytes().to_vec(),
        }
    }
}

impl ArrayToArrayCodec for Categorize {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr> {
        if !matches!(decoded.dtype, DataType::FixedUtf32(_) | DataType::String) {
            return Err(ZarrError::codec("categorize", "needs U or string data"));
        }
        Ok(ChunkRepr {
            shape: decoded.shape.clone(),
            dtype: self.astype.clone(),
            fill: FillValue::zero(&self.astype),
        })
    }
    fn encode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let labels: Vec<Vec<u8>> = self
            .labels
            .iter()
            .map(|l| self.element(&decoded.dtype, l))
            .collect();
        let index_of = |e: &[u8]| {
            labels
                .iter()
                .position(|l| l == e)
                .map(|i| i as i128 + 1)
                .unwrap_or(0)
        };
        let codes: Vec<i128> = match (&data, decoded.dtype.size()) {
            (ArrayBytes::Fixed(b), Some(size)) => b.chunks_exact(size).map(index_of).collect(),
            (ArrayBytes::Variable(v), _) => v.iter().map(|e| index_of(e)).collect(),
            _ => return Err(ZarrError::codec("categorize", "bad input")),
        };
        Ok(ArrayBytes::Fixed(write_i128(
            "categorize",
            &self.astype,
            &codes,
        )?))
    }
    fn decode(&self, data: ArrayBytes, decoded: &ChunkRepr) -> Result<ArrayBytes> {
        let codes = read_i128("categorize", &self.astype, &data.into_fixed()?)?;
        let empty = self.element(&decoded.dtype, "");
        let labels: Vec<Vec<u8>> = self
            .labels
            .iter()
            .map(|l| self.element(&decoded.dtype, l))
            .collect();
        let pick = |c: i128| -> Vec<u8> {
            if c >= 1 && (c as usize) <= labels.len() {
                labels[c as usize - 1].clone()
            } else {
                empty.clone()
            }
        };
        Ok(if decoded.dtype.is_variable() {
            ArrayBytes::Variable(codes.into_iter().map(pick).collect())
        } else {
            ArrayBytes::Fixed(codes.into_iter().flat_map(pick).collect())
        })
    }
    fn to_v3(&self) -> Value {
        entry("categorize", &self.config)
    }
}

/// numcodecs `shuffle`: byte `j` of every element goes to plane `j`.
#[derive(Debug, Clone)]
pub struct Shuffle {
    pub elementsize: usize,
}

/// Byte `j` of element `i` moves to `j * count + i` (or back, with `unshuffle`);
/// trailing bytes that make no whole element stay where they are.
fn byte_planes(bytes: Vec<u8>, size: usize, unshuffle: bool) -> Vec<u8> {
    if size <= 1 {
        return bytes;
    }
    let count = bytes.len() / size;
    let mut out = bytes.clone();
    for i in 0..count {
        for j in 0..size {
            let (element, plane) = (i * size + j, j * count + i);
            if unshuffle {
                out[element] = bytes[plane];
            } else {
                out[plane] = bytes[element];
            }
        }
    }
    out
}

impl BytesToBytesCodec for Shuffle {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        Ok(byte_planes(bytes, self.elementsize, false))
    }
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        Ok(byte_planes(bytes, self.elementsize, true))
    }
    fn to_v3(&self) -> Value {
        json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": self.elementsize}})
    }
}
