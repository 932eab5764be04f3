//! Fill values: parsed from every encoding v2 and v3 metadata use into the
//! bytes of one element (little-endian), and written back the way the
//! reference implementations write them.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use half::{bf16, f16};
use serde_json::{json, Value};

use super::dtype::DataType;
use super::error::{Result, ZarrError};

/// One element's bytes: little-endian for fixed-size types, the content for
/// variable-length ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FillValue(pub Vec<u8>);

impl FillValue {
    /// All-zero bytes (or the empty string) for a type.
    pub fn zero(dtype: &DataType) -> Self {
        FillValue(vec![0; dtype.size().unwrap_or(0)])
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

fn fill_err(dtype: &DataType, value: &Value, why: &str) -> ZarrError {
    ZarrError::FillValue(format!("{value} does not fit {}: {why}", dtype.name()))
}

fn parse_float(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Some(f64::NAN),
            "Infinity" | "inf" => Some(f64::INFINITY),
            "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// `0x...` hex fill: the element's bit pattern, most significant byte first.
fn parse_hex(value: &Value, size: usize) -> Option<Vec<u8>> {
    let hex = value.as_str()?.strip_prefix("0x")?;
    if hex.len() != size * 2 {
        return None;
    }
    let mut bytes = (0..size)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    bytes.reverse();
    Some(bytes)
}

fn float_bytes(dtype: &DataType, value: &Value) -> Result<Vec<u8>> {
    let size = dtype.size().unwrap_or(0);
    if let Some(bits) = parse_hex(value, size) {
        return Ok(bits);
    }
    let x = parse_float(value).ok_or_else(|| fill_err(dtype, value, "not a number"))?;
    Ok(match dtype {
        DataType::Float16 => f16::from_f64(x).to_le_bytes().to_vec(),
        DataType::BFloat16 => bf16::from_f64(x).to_le_bytes().to_vec(),
        DataType::Float32 => (x as f32).to_le_bytes().to_vec(),
        DataType::Float64 => x.to_le_bytes().to_vec(),
        DataType::Float8(_) if x == 0.0 && x.is_sign_positive() => vec![0],
        _ => {
            return Err(fill_err(
                dtype,
                value,
                "use a 0x hex bit pattern for this type",
            ))
        }
    })
}

fn int_value(dtype: &DataType, value: &Value) -> Result<i128> {
    let n = match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 1.9e19)
                    .map(|f| f as i128)
            }),
        Value::Bool(b) => Some(*b as i128),
        Value::String(s) if s == "NaT" => Some(i64::MIN as i128),
        _ => None,
    };
    n.ok_or_else(|| fill_err(dtype, value, "not an integer"))
}

fn int_bytes(dtype: &DataType, value: &Value) -> Result<Vec<u8>> {
    let size = dtype.size().unwrap_or(0);
    if let Some(bits) = parse_hex(value, size) {
        return Ok(bits);
    }
    let n = int_value(dtype, value)?;
    let (lo, hi): (i128, i128) = match dtype {
        DataType::Int4 => (-8, 7),
        DataType::Int8 => (i8::MIN as i128, i8::MAX as i128),
        DataType::Int16 => (i16::MIN as i128, i16::MAX as i128),
        DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
        DataType::Int64 | DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. } => {
            (i64::MIN as i128, i64::MAX as i128)
        }
        DataType::UInt8 => (0, u8::MAX as i128),
        DataType::UInt16 => (0, u16::MAX as i128),
        DataType::UInt32 => (0, u32::MAX as i128),
        _ => (0, u64::MAX as i128),
    };
    if n < lo || n > hi {
        return Err(fill_err(dtype, value, "out of range"));
    }
    Ok(n.to_le_bytes()[..size].to_vec())
}

fn byte_list(value: &Value) -> Option<Vec<u8>> {
    value
        .as_array()?
        .iter()
        .map(|b| b.as_u64().filter(|b| *b < 256).map(|b| b as u8))
        .collect()
}

fn padded(mut bytes: Vec<u8>, size: usize) -> Option<Vec<u8>> {
    if bytes.len() > size {
        return None;
    }
    bytes.resize(size, 0);
    Some(bytes)
}

fn utf32(dtype: &DataType, s: &str, chars: usize) -> Result<Vec<u8>> {
    let mut out: Vec<u8> = s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
    if out.len() > chars * 4 {
        return Err(fill_err(dtype, &json!(s), "too long"));
    }
    out.resize(chars * 4, 0);
    Ok(out)
}

/// Parse a fill value as either format writes it. `null` means the zero element.
pub fn parse_fill(dtype: &DataType, value: &Value) -> Result<FillValue> {
    if value.is_null() {
        return Ok(FillValue::zero(dtype));
    }
    let size = dtype.size().unwrap_or(0);
    let base64 = |v: &Value| v.as_str().and_then(|s| BASE64.decode(s).ok());
    let bytes = match dtype {
        DataType::Bool => match value {
            Value::Bool(b) => vec![*b as u8],
            Value::Number(n) if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
                vec![n.as_u64().unwrap_or(0) as u8]
            }
            _ => return Err(fill_err(dtype, value, "not a boolean")),
        },
        DataType::Float16
        | DataType::BFloat16
        | DataType::Float32
        | DataType::Float64
        | DataType::Float8(_) => float_bytes(dtype, value)?,
        DataType::Complex64 | DataType::Complex128 => {
            let part = if *dtype == DataType::Complex64 {
                DataType::Float32
            } else {
                DataType::Float64
            };
            match value {
                Value::Array(pair) if pair.len() == 2 => {
                    let mut out = float_bytes(&part, &pair[0])?;
                    out.extend(float_bytes(&part, &pair[1])?);
                    out
                }
                other => {
                    // A real number is a complex number with no imaginary part.
                    let mut out = float_bytes(&part, other)?;
                    out.extend(vec![0; size / 2]);
                    out
                }
            }
        }
        DataType::FixedBytes(n) | DataType::RawBytes(n) => byte_list(value)
            .or_else(|| base64(value))
            .and_then(|b| padded(b, *n))
            .ok_or_else(|| fill_err(dtype, value, "expected base64 or a list of bytes"))?,
        DataType::Structured(_) => base64(value)
            .or_else(|| byte_list(value))
            .filter(|b| b.len() == size)
            .or_else(|| (value.as_u64() == Some(0)).then(|| vec![0; size]))
            .ok_or_else(|| fill_err(dtype, value, "expected base64 of one record"))?,
        DataType::FixedUtf32(n) => match value {
            Value::String(s) => utf32(dtype, s, *n)?,
            Value::Number(n0) if n0.as_u64() == Some(0) => vec![0; size],
            _ => return Err(fill_err(dtype, value, "not a string")),
        },
        DataType::String => match value {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Number(n) if n.as_u64() == Some(0) => vec![],
            _ => return Err(fill_err(dtype, value, "not a string")),
        },
        DataType::Bytes => byte_list(value)
            .or_else(|| base64(value))
            .or_else(|| value.as_str().map(|s| s.as_bytes().to_vec()))
            .ok_or_else(|| fill_err(dtype, value, "expected base64 or a list of bytes"))?,
        _ => int_bytes(dtype, value)?,
    };
    Ok(FillValue(bytes))
}

fn float_json(x: f64, bits_le: &[u8]) -> Value {
    if x.is_nan() {
        // A NaN with a non-canonical payload keeps its bits.
        let canonical: &[u8] = match bits_le.len() {
            2 => &[0x00, 0x7e],
            4 => &[0x00, 0x00, 0xc0, 0x7f],
            _ => &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
        };
        if bits_le == canonical {
            json!("NaN")
        } else {
            json!(format!(
                "0x{}",
                bits_le
                    .iter()
                    .rev()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ))
        }
    } else if x.is_infinite() {
        json!(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else if bits_le.len() < 8 {
        // The shortest decimal that reads back as the same narrow float
        // (1.1f32, not 1.100000023841858).
        let text = match bits_le.len() {
            2 => format!("{}", x as f32),
            _ => format!(
                "{}",
                f32::from_le_bytes(bits_le[..4].try_into().unwrap_or_default())
            ),
        };
        text.parse::<f64>()
            .map(|v| json!(v))
            .unwrap_or_else(|_| json!(x))
    } else {
        json!(x)
    }
}

/// One element of a numeric type as a number (`None` for other types),
/// for rendering values as colours.
pub fn element_as_f64(dtype: &DataType, b: &[u8]) -> Option<f64> {
    use DataType::*;
    let int = |n: usize| -> i64 {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(&b[..n]);
        let shift = 64 - 8 * n as u32;
        (i64::from_le_bytes(buf) << shift) >> shift
    };
    let uint = |n: usize| -> u64 {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(buf)
    };
    Some(match dtype {
        Bool => b[0] as f64,
        Int8 | Int16 | Int32 | Int64 => int(dtype.size()?) as f64,
        UInt8 | UInt16 | UInt32 | UInt64 => uint(dtype.size()?) as f64,
        Float16 | BFloat16 | Float32 | Float64 => read_float(dtype, b),
        _ => return None,
    })
}

fn read_float(dtype: &DataType, b: &[u8]) -> f64 {
    match dtype {
        DataType::Float16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DataType::BFloat16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        DataType::Float32 => f32::from_le_bytes(b[..4].try_into().unwrap_or_default()) as f64,
        _ => f64::from_le_bytes(b[..8].try_into().unwrap_or_default()),
    }
}

/// One element as JSON, the way v3 metadata and the JSON output format write it.
pub fn element_to_json(dtype: &DataType, b: &[u8]) -> Value {
    use DataType::*;
    let le_i = |n: usize| -> i64 {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(&b[..n]);
        let shift = 64 - 8 * n as u32;
        (i64::from_le_bytes(buf) << shift) >> shift
    };
    let le_u = |n: usize| -> u64 {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(buf)
    };
    match dtype {
        Bool => json!(b[0] != 0),
        Int4 => json!(((b[0] as i8) << 4) >> 4),
        Int8 | Int16 | Int32 | Int64 | DateTime64 { .. } | TimeDelta64 { .. } => {
            json!(le_i(dtype.size().unwrap_or(8)))
        }
        UInt8 | UInt16 | UInt32 | UInt64 => json!(le_u(dtype.size().unwrap_or(8))),
        Float16 | BFloat16 | Float32 | Float64 => float_json(read_float(dtype, b), b),
        Float8(_) => json!(format!("0x{:02x}", b[0])),
        Complex64 | Complex128 => {
            let part = if *dtype == Complex64 {
                Float32
            } else {
                Float64
            };
            let half = b.len() / 2;
            json!([
                element_to_json(&part, &b[..half]),
                element_to_json(&part, &b[half..])
            ])
        }
        FixedUtf32(_) => json!(decode_utf32(b)),
        String => json!(std::string::String::from_utf8_lossy(b)),
        FixedBytes(_) | RawBytes(_) | Bytes | Structured(_) => json!(BASE64.encode(b)),
    }
}

/// A numpy `U` element as a string (trailing NULs dropped).
pub fn decode_utf32(b: &[u8]) -> std::string::String {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&c| c != 0)
        .map(|c| char::from_u32(c).unwrap_or('\u{FFFD}'))
        .collect()
}

/// The fill value as v3 metadata writes it.
pub fn fill_to_v3_json(dtype: &DataType, fill: &FillValue) -> Value {
    if let DataType::RawBytes(_) = dtype {
        return json!(fill.0);
    }
    element_to_json(dtype, &fill.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_encodings() {
        let f4 = DataType::Float32;
        assert!(f32::from_le_bytes(
            parse_fill(&f4, &json!("NaN"))
                .unwrap()
                .0
                .try_into()
                .unwrap()
        )
        .is_nan());
        assert_eq!(
            parse_fill(&f4, &json!("-Infinity")).unwrap().0,
            f32::NEG_INFINITY.to_le_bytes()
        );
        assert_eq!(
            parse_fill(&f4, &json!("0x7fc00001")).unwrap().0,
            [1, 0, 0xc0, 0x7f]
        );
        assert_eq!(
            fill_to_v3_json(&f4, &FillValue(vec![1, 0, 0xc0, 0x7f])),
            json!("0x7fc00001")
        );
        assert_eq!(
            fill_to_v3_json(&f4, &parse_fill(&f4, &json!("NaN")).unwrap()),
            json!("NaN")
        );
        assert_eq!(
            parse_fill(&DataType::Float16, &json!(1.0)).unwrap().0,
            [0x00, 0x3c]
        );
        assert_eq!(
            parse_fill(&DataType::Complex64, &json!([1.0, "NaN"]))
                .unwrap()
                .0
                .len(),
            8
        );
    }

    #[test]
    fn integer_ranges() {
        assert_eq!(
            parse_fill(&DataType::Int16, &json!(-2)).unwrap().0,
            [0xfe, 0xff]
        );
        assert_eq!(
            parse_fill(&DataType::UInt64, &json!(u64::MAX)).unwrap().0,
            [0xff; 8]
        );
        assert!(parse_fill(&DataType::UInt8, &json!(256)).is_err());
        assert!(parse_fill(&DataType::Int8, &json!("x")).is_err());
        assert_eq!(element_to_json(&DataType::Int16, &[0xfe, 0xff]), json!(-2));
    }

    #[test]
    fn bytes_and_strings() {
        assert_eq!(
            parse_fill(&DataType::RawBytes(3), &json!("AAEC"))
                .unwrap()
                .0,
            [0, 1, 2]
        );
        assert_eq!(
            parse_fill(&DataType::RawBytes(2), &json!([7, 8]))
                .unwrap()
                .0,
            [7, 8]
        );
        assert_eq!(
            parse_fill(&DataType::FixedBytes(4), &json!("YWI="))
                .unwrap()
                .0,
            b"ab\0\0"
        );
        assert_eq!(
            parse_fill(&DataType::FixedUtf32(2), &json!("é")).unwrap().0,
            [0xe9, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(parse_fill(&DataType::FixedUtf32(1), &json!("ab")).is_err());
        assert_eq!(
            parse_fill(&DataType::String, &json!("hi")).unwrap().0,
            b"hi"
        );
    }
}
