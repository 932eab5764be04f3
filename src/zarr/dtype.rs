//! Data types: one runtime model for numpy typestrs (v2), v3 data type names
//! and the extension types peers write. Decoded chunks always hold elements
//! in the host's (little-endian) byte order; byte order only matters at the
//! codec that meets the store.

use serde_json::{json, Value};

use super::error::{Result, ZarrError};

#[cfg(target_endian = "big")]
compile_error!("zarrd keeps decoded data in little-endian order and needs a little-endian host");

/// Byte order of stored elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
    /// Single-byte or byte-string types, numpy's `|`.
    NotApplicable,
}

impl Endian {
    fn numpy_char(self) -> char {
        match self {
            Endian::Little => '<',
            Endian::Big => '>',
            Endian::NotApplicable => '|',
        }
    }
}

/// The 8-bit float formats of ml_dtypes (TensorStore and zarrs write them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Float8 {
    E3M4,
    E4M3,
    E4M3FN,
    E4M3FNUZ,
    E4M3B11FNUZ,
    E5M2,
    E5M2FNUZ,
    E8M0FNU,
}

const FLOAT8_NAMES: [(&str, Float8); 8] = [
    ("float8_e3m4", Float8::E3M4),
    ("float8_e4m3", Float8::E4M3),
    ("float8_e4m3fn", Float8::E4M3FN),
    ("float8_e4m3fnuz", Float8::E4M3FNUZ),
    ("float8_e4m3b11fnuz", Float8::E4M3B11FNUZ),
    ("float8_e5m2", Float8::E5M2),
    ("float8_e5m2fnuz", Float8::E5M2FNUZ),
    ("float8_e8m0fnu", Float8::E8M0FNU),
];

impl Float8 {
    pub fn name(self) -> &'static str {
        FLOAT8_NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map(|(n, _)| *n)
            .unwrap_or("float8")
    }
    fn from_name(name: &str) -> Option<Self> {
        FLOAT8_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }
}

/// One field of a structured data type.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub dtype: DataType,
    /// Byte order as declared in v2 metadata; v3 fields follow the bytes codec.
    pub endian: Endian,
    /// Subarray shape (`[]` for a scalar field).
    pub shape: Vec<usize>,
    /// Byte offset in the packed record.
    pub offset: usize,
}

impl Field {
    /// Bytes the field occupies in a record.
    pub fn size(&self) -> usize {
        self.dtype.size().unwrap_or(0) * self.shape.iter().product::<usize>()
    }
}

/// Element type of an array.
#[derive(Debug, Clone, PartialEq)]
pub enum DataType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    /// 4-bit signed integer held in one byte per element (TensorStore's `int4`).
    Int4,
    Float8(Float8),
    Float16,
    BFloat16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    /// numpy `datetime64[scale unit]`: i64 counts, `i64::MIN` is NaT.
    DateTime64 {
        unit: String,
        scale: u32,
    },
    /// numpy `timedelta64[scale unit]`.
    TimeDelta64 {
        unit: String,
        scale: u32,
    },
    /// numpy `S<n>`: zero-padded byte strings.
    FixedBytes(usize),
    /// numpy `V<n>`, v3 `r<8n>` / `raw_bytes`: opaque bytes.
    RawBytes(usize),
    /// numpy `U<n>`: n UTF-32 code units.
    FixedUtf32(usize),
    Structured(Vec<Field>),
    /// Variable-length UTF-8 strings (`vlen-utf8`).
    String,
    /// Variable-length byte strings (`vlen-bytes`).
    Bytes,
}

const TIME_UNITS: [&str; 13] = [
    "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as",
];

/// The largest element zarrd accepts (structured records, `S`/`U`/`V` types),
/// so a hostile document cannot make one element overflow or exhaust memory.
pub const MAX_ELEMENT_SIZE: usize = 1 << 24;

fn bounded(size: Option<usize>, what: &str) -> Result<usize> {
    size.filter(|&s| s <= MAX_ELEMENT_SIZE).ok_or_else(|| {
        type_err(format!(
            "{what} is larger than {MAX_ELEMENT_SIZE} bytes per element"
        ))
    })
}

/// A field's size, checked: element size times the subarray's element count.
fn field_size(dtype: &DataType, shape: &[usize], name: &str) -> Result<usize> {
    // A subarray is as many lists as its elements, which its bytes bound,
    // unless it has no bytes: [4e9, 0] would be four billion empty lists.
    if !shape.is_empty() && dtype.size() == Some(0) {
        return Err(type_err(format!(
            "field '{name}' is a subarray of zero-size elements"
        )));
    }
    if shape.len() > 1 && shape.contains(&0) {
        return Err(type_err(format!(
            "field '{name}' has shape {shape:?}: a subarray without elements has one dimension"
        )));
    }
    let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    bounded(
        count.and_then(|c| c.checked_mul(dtype.size().unwrap_or(0))),
        &format!("field '{name}'"),
    )
}

fn type_err(msg: impl Into<String>) -> ZarrError {
    ZarrError::DataType(msg.into())
}

impl DataType {
    /// The dimensions a record's subarray fields add, at their deepest
    /// (0 for types other than records).
    pub fn field_dimensions(&self) -> usize {
        match self {
            DataType::Structured(fields) => fields
                .iter()
                .map(|f| f.shape.len() + f.dtype.field_dimensions())
                .max()
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// Bytes per element, `None` for variable-length types.
    pub fn size(&self) -> Option<usize> {
        use DataType::*;
        Some(match self {
            Bool | Int8 | UInt8 | Int4 | Float8(_) => 1,
            Int16 | UInt16 | Float16 | BFloat16 => 2,
            Int32 | UInt32 | Float32 => 4,
            Int64 | UInt64 | Float64 | Complex64 | DateTime64 { .. } | TimeDelta64 { .. } => 8,
            Complex128 => 16,
            FixedBytes(n) | RawBytes(n) => *n,
            FixedUtf32(n) => 4 * n,
            Structured(fields) => fields
                .iter()
                .map(|f| f.offset + f.size())
                .max()
                .unwrap_or(0),
            String | Bytes => return None,
        })
    }

    pub fn is_variable(&self) -> bool {
        matches!(self, DataType::String | DataType::Bytes)
    }

    /// Width of the units a byte swap reverses (1: nothing to swap).
    fn swap_unit(&self) -> usize {
        use DataType::*;
        match self {
            Int16 | UInt16 | Float16 | BFloat16 => 2,
            Int32 | UInt32 | Float32 | Complex64 | FixedUtf32(_) => 4,
            Int64 | UInt64 | Float64 | Complex128 | DateTime64 { .. } | TimeDelta64 { .. } => 8,
            _ => 1,
        }
    }

    /// Reverse the byte order of every multi-byte unit in `buf` (whole elements).
    pub fn swap_all(&self, buf: &mut [u8]) {
        match self {
            DataType::Structured(_) => self.for_each_field(buf, |f, bytes| {
                f.dtype.swap_all(bytes);
            }),
            _ => swap_units(buf, self.swap_unit()),
        }
    }

    /// Convert between the byte order declared in v2 metadata (`endian` for
    /// simple types, each field's own for structured ones) and little-endian.
    /// The conversion is its own inverse.
    pub fn swap_declared(&self, buf: &mut [u8], endian: Endian) {
        match self {
            DataType::Structured(_) => self.for_each_field(buf, |f, bytes| {
                f.dtype.swap_declared(bytes, f.endian);
            }),
            _ if endian == Endian::Big => swap_units(buf, self.swap_unit()),
            _ => {}
        }
    }

    fn for_each_field(&self, buf: &mut [u8], mut visit: impl FnMut(&Field, &mut [u8])) {
        let DataType::Structured(fields) = self else {
            return;
        };
        let Some(size) = self.size().filter(|s| *s > 0) else {
            return;
        };
        for record in buf.chunks_exact_mut(size) {
            for field in fields {
                let end = field.offset + field.size();
                visit(field, &mut record[field.offset..end]);
            }
        }
    }

    /// Whether any multi-byte unit exists (so byte order matters).
    pub fn has_byte_order(&self) -> bool {
        match self {
            DataType::Structured(fields) => fields.iter().any(|f| f.dtype.has_byte_order()),
            _ => self.swap_unit() > 1,
        }
    }

    // ---- numpy typestrs (v2 metadata, npy headers) ----

    /// The numpy typestr of a non-structured type in the given byte order.
    pub fn numpy_typestr(&self, endian: Endian) -> String {
        use DataType::*;
        let order = if self.has_byte_order() {
            endian.numpy_char()
        } else {
            '|'
        };
        match self {
            Bool => "|b1".into(),
            Int8 => "|i1".into(),
            UInt8 => "|u1".into(),
            Int16 | Int32 | Int64 => format!("{order}i{}", self.size().unwrap_or(0)),
            UInt16 | UInt32 | UInt64 => format!("{order}u{}", self.size().unwrap_or(0)),
            Float16 | Float32 | Float64 => format!("{order}f{}", self.size().unwrap_or(0)),
            Complex64 | Complex128 => format!("{order}c{}", self.size().unwrap_or(0)),
            DateTime64 { unit, scale } => format!("{order}M8[{}]", time_unit(unit, *scale)),
            TimeDelta64 { unit, scale } => format!("{order}m8[{}]", time_unit(unit, *scale)),
            FixedBytes(n) => format!("|S{n}"),
            RawBytes(n) => format!("|V{n}"),
            FixedUtf32(n) => format!("{order}U{n}"),
            String | Bytes => "|O".into(),
            Int4 => "int4".into(),
            BFloat16 => "bfloat16".into(),
            Float8(f) => f.name().into(),
            Structured(_) => "|V".to_string() + &self.size().unwrap_or(0).to_string(),
        }
    }

    /// The dtype as a v2 `.zarray` `dtype` value (a string, or a field list).
    pub fn to_v2_json(&self, endian: Endian) -> Value {
        match self {
            DataType::Structured(fields) => Value::Array(
                fields
                    .iter()
                    .map(|f| {
                        let mut entry = vec![json!(f.name), f.dtype.to_v2_json(f.endian)];
                        if !f.shape.is_empty() {
                            entry.push(json!(f.shape));
                        }
                        Value::Array(entry)
                    })
                    .collect(),
            ),
            _ => json!(self.numpy_typestr(endian)),
        }
    }

    /// The dtype as a Python literal for an `.npy` header, in little-endian order.
    /// Extension types numpy lacks are given as their raw storage (`|V1`, `<u2`)
    /// so the file still loads.
    pub fn npy_descr(&self) -> String {
        use DataType::*;
        match self {
            Structured(fields) => {
                let parts: Vec<std::string::String> = fields
                    .iter()
                    .map(|f| {
                        let shape = match f.shape.len() {
                            0 => std::string::String::new(),
                            1 => format!(", ({},)", f.shape[0]),
                            _ => format!(
                                ", ({})",
                                f.shape
                                    .iter()
                                    .map(|d| d.to_string())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        };
                        format!(
                            "('{}', {}{})",
                            py_escape(&f.name),
                            f.dtype.npy_descr(),
                            shape
                        )
                    })
                    .collect();
                format!("[{}]", parts.join(", "))
            }
            Int4 => "'|i1'".into(),
            BFloat16 => "'<u2'".into(),
            Float8(_) => "'|u1'".into(),
            _ => format!("'{}'", self.numpy_typestr(Endian::Little)),
        }
    }

    /// Parse a v2 `dtype` value; returns the type and its declared byte order.
    /// `|O` parses as [`DataType::String`]; the object codec decides the rest.
    pub fn from_v2_json(value: &Value) -> Result<(DataType, Endian)> {
        match value {
            Value::String(s) => parse_typestr(s),
            Value::Array(entries) => {
                let mut fields = Vec::with_capacity(entries.len());
                let mut offset = 0;
                for entry in entries {
                    let Some(parts) = entry.as_array().filter(|p| p.len() == 2 || p.len() == 3)
                    else {
                        return Err(type_err(format!(
                            "structured field {entry} is not [name, dtype] or [name, dtype, shape]"
                        )));
                    };
                    let name = parts[0].as_str().ok_or_else(|| {
                        type_err(format!("field name {} is not a string", parts[0]))
                    })?;
                    let (dtype, endian) = DataType::from_v2_json(&parts[1])?;
                    if dtype.is_variable() {
                        return Err(type_err(format!(
                            "field '{name}' has a variable-length type"
                        )));
                    }
                    let shape = match parts.get(2) {
                        None => vec![],
                        Some(Value::Number(n)) => {
                            vec![n.as_u64().ok_or_else(|| type_err("bad field shape"))? as usize]
                        }
                        Some(Value::Array(dims)) => dims
                            .iter()
                            .map(|d| d.as_u64().map(|d| d as usize))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| type_err(format!("field '{name}' has a bad shape")))?,
                        Some(other) => {
                            return Err(type_err(format!("field '{name}' shape {other}")))
                        }
                    };
                    let size = field_size(&dtype, &shape, name)?;
                    let field = Field {
                        name: name.to_string(),
                        dtype,
                        endian,
                        shape,
                        offset,
                    };
                    offset = bounded(offset.checked_add(size), "the structured record")?;
                    fields.push(field);
                }
                if fields.is_empty() {
                    return Err(type_err("structured dtype with no fields"));
                }
                Ok((DataType::Structured(fields), Endian::NotApplicable))
            }
            other => Err(type_err(format!(
                "{other} is neither a typestr nor a field list"
            ))),
        }
    }

    // ---- v3 names ----

    /// Parse a v3 `data_type` value (a name, or `{name, configuration}`).
    pub fn from_v3_json(value: &Value) -> Result<DataType> {
        let (name, config) = match value {
            Value::String(s) => (s.as_str(), None),
            Value::Object(o) => (
                o.get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| type_err(format!("{value} has no name")))?,
                o.get("configuration"),
            ),
            other => return Err(type_err(format!("{other} is not a data type"))),
        };
        let config_usize = |field: &str| -> Result<usize> {
            let n = config
                .and_then(|c| c.get(field))
                .and_then(Value::as_u64)
                .ok_or_else(|| type_err(format!("'{name}' needs configuration.{field}")))?;
            bounded(usize::try_from(n).ok(), &format!("'{name}'"))
        };
        use DataType::*;
        Ok(match name {
            "bool" => Bool,
            "int8" => Int8,
            "int16" => Int16,
            "int32" => Int32,
            "int64" => Int64,
            "uint8" => UInt8,
            "uint16" => UInt16,
            "uint32" => UInt32,
            "uint64" => UInt64,
            "int4" => Int4,
            "float16" => Float16,
            "bfloat16" => BFloat16,
            "float32" => Float32,
            "float64" => Float64,
            "complex64" => Complex64,
            "complex128" => Complex128,
            "string" => String,
            "bytes" | "variable_length_bytes" => Bytes,
            "fixed_length_utf32" => {
                let n = config_usize("length_bytes")?;
                if n % 4 != 0 {
                    return Err(type_err(format!(
                        "fixed_length_utf32 length_bytes {n} is not a multiple of 4"
                    )));
                }
                FixedUtf32(n / 4)
            }
            "null_terminated_bytes" => FixedBytes(config_usize("length_bytes")?),
            "raw_bytes" => RawBytes(config_usize("length_bytes")?),
            "numpy.datetime64" | "numpy.timedelta64" => {
                let unit = config
                    .and_then(|c| c.get("unit"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| type_err(format!("'{name}' needs configuration.unit")))?;
                check_unit(unit)?;
                let scale = config
                    .and_then(|c| c.get("scale_factor"))
                    .map(|v| v.as_u64().filter(|s| *s >= 1 && *s <= u32::MAX as u64))
                    .unwrap_or(Some(1))
                    .ok_or_else(|| {
                        type_err(format!("'{name}' scale_factor must be a positive integer"))
                    })? as u32;
                if name == "numpy.datetime64" {
                    DateTime64 {
                        unit: unit.to_string(),
                        scale,
                    }
                } else {
                    TimeDelta64 {
                        unit: unit.to_string(),
                        scale,
                    }
                }
            }
            "structured" => {
                let list = config
                    .and_then(|c| c.get("fields"))
                    .and_then(Value::as_array)
                    .ok_or_else(|| type_err("'structured' needs configuration.fields"))?;
                let mut fields = Vec::new();
                let mut offset = 0;
                for entry in list {
                    let (fname, ftype) = match entry {
                        Value::Array(p) if p.len() == 2 => (p[0].as_str(), &p[1]),
                        Value::Object(o) => (
                            o.get("name").and_then(Value::as_str),
                            o.get("data_type").unwrap_or(&Value::Null),
                        ),
                        _ => (None, &Value::Null),
                    };
                    let fname = fname
                        .ok_or_else(|| type_err(format!("structured field {entry} has no name")))?;
                    let dtype = DataType::from_v3_json(ftype)?;
                    if dtype.is_variable() {
                        return Err(type_err(format!(
                            "field '{fname}' has a variable-length type"
                        )));
                    }
                    let field = Field {
                        name: fname.to_string(),
                        dtype,
                        endian: Endian::Little,
                        shape: vec![],
                        offset,
                    };
                    offset = bounded(offset.checked_add(field.size()), "the structured record")?;
                    fields.push(field);
                }
                if fields.is_empty() {
                    return Err(type_err("structured dtype with no fields"));
                }
                Structured(fields)
            }
            raw if raw.starts_with('r') && raw[1..].parse::<usize>().is_ok() => {
                let bits: usize = raw[1..].parse().unwrap_or(0);
                if bits == 0 || !bits.is_multiple_of(8) {
                    return Err(type_err(format!(
                        "raw type '{raw}' must have a positive multiple of 8 bits"
                    )));
                }
                RawBytes(bounded(Some(bits / 8), raw)?)
            }
            other => match self::Float8::from_name(other) {
                Some(f) => Float8(f),
                None => return Err(type_err(format!("'{other}' is not a supported data type"))),
            },
        })
    }

    /// The v3 `data_type` value for this type.
    pub fn to_v3_json(&self) -> Value {
        use DataType::*;
        match self {
            Bool => json!("bool"),
            Int8 => json!("int8"),
            Int16 => json!("int16"),
            Int32 => json!("int32"),
            Int64 => json!("int64"),
            UInt8 => json!("uint8"),
            UInt16 => json!("uint16"),
            UInt32 => json!("uint32"),
            UInt64 => json!("uint64"),
            Int4 => json!("int4"),
            Float16 => json!("float16"),
            BFloat16 => json!("bfloat16"),
            Float32 => json!("float32"),
            Float64 => json!("float64"),
            Complex64 => json!("complex64"),
            Complex128 => json!("complex128"),
            Float8(f) => json!(f.name()),
            String => json!("string"),
            Bytes => json!("variable_length_bytes"),
            RawBytes(n) => json!(format!("r{}", n * 8)),
            FixedBytes(n) => {
                json!({"name": "null_terminated_bytes", "configuration": {"length_bytes": n}})
            }
            FixedUtf32(n) => {
                json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": n * 4}})
            }
            DateTime64 { unit, scale } => {
                json!({"name": "numpy.datetime64", "configuration": {"unit": unit, "scale_factor": scale}})
            }
            TimeDelta64 { unit, scale } => {
                json!({"name": "numpy.timedelta64", "configuration": {"unit": unit, "scale_factor": scale}})
            }
            Structured(fields) => json!({"name": "structured", "configuration": {"fields":
                fields.iter().map(|f| json!([f.name, f.dtype.to_v3_json()])).collect::<Vec<_>>()}}),
        }
    }

    /// A short name for APIs: the v3 name (or `structured`, etc.).
    pub fn name(&self) -> std::string::String {
        match self.to_v3_json() {
            Value::String(s) => s,
            Value::Object(o) => o
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            _ => "?".into(),
        }
    }

    /// The name with the parameters that make the type (`|S7` is
    /// `null_terminated_bytes(length=7)`, `<M8[10ms]` is
    /// `numpy.datetime64[10ms]`), for listings that show a type in a word.
    pub fn label(&self) -> std::string::String {
        use DataType::*;
        match self {
            FixedBytes(n) => format!("null_terminated_bytes(length={n})"),
            FixedUtf32(n) => format!("fixed_length_utf32(length={n})"),
            DateTime64 { unit, scale } | TimeDelta64 { unit, scale } => {
                let kind = if matches!(self, DateTime64 { .. }) {
                    "datetime64"
                } else {
                    "timedelta64"
                };
                format!("numpy.{kind}[{}]", time_unit(unit, *scale))
            }
            Structured(fields) => format!(
                "structured({})",
                fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name, f.dtype.label()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => self.name(),
        }
    }

    /// The field of a structured type with this name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        match self {
            DataType::Structured(fields) => fields.iter().find(|f| f.name == name),
            _ => None,
        }
    }

    /// Field `name`, or an error naming the fields there are.
    pub fn select_field(&self, name: &str) -> Result<&Field, ZarrError> {
        self.field(name).ok_or_else(|| {
            ZarrError::NoField(match self {
                DataType::Structured(f) => format!(
                    "no field '{name}'; fields are {}",
                    f.iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => format!(
                    "field '{name}' was asked for but the dtype {} has no fields",
                    self.name()
                ),
            })
        })
    }
}

fn py_escape(s: &str) -> std::string::String {
    s.replace('\\', "\\\\").replace('\'', "\\'")
}

fn time_unit(unit: &str, scale: u32) -> std::string::String {
    if unit == "generic" {
        return "generic".into();
    }
    if scale == 1 {
        unit.to_string()
    } else {
        format!("{scale}{unit}")
    }
}

fn check_unit(unit: &str) -> Result<()> {
    if unit == "generic" || TIME_UNITS.contains(&unit) {
        Ok(())
    } else {
        Err(type_err(format!("unknown time unit '{unit}'")))
    }
}

/// Parse `[10s]`-style datetime unit suffixes.
fn parse_time_unit(spec: &str) -> Result<(std::string::String, u32)> {
    if spec.is_empty() {
        return Ok(("generic".into(), 1));
    }
    let inner = spec
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .ok_or_else(|| type_err(format!("bad datetime unit '{spec}'")))?;
    let digits: std::string::String = inner.chars().take_while(|c| c.is_ascii_digit()).collect();
    let unit = &inner[digits.len()..];
    check_unit(unit)?;
    let scale = if digits.is_empty() {
        1
    } else {
        digits
            .parse()
            .map_err(|_| type_err(format!("bad datetime scale in '{spec}'")))?
    };
    if scale == 0 {
        return Err(type_err(format!("datetime scale 0 in '{spec}'")));
    }
    Ok((unit.to_string(), scale))
}

fn parse_typestr(s: &str) -> Result<(DataType, Endian)> {
    use DataType::*;
    match s {
        "bfloat16" => return Ok((BFloat16, Endian::Little)),
        "int4" => return Ok((Int4, Endian::NotApplicable)),
        _ => {}
    }
    if let Some(f) = self::Float8::from_name(s) {
        return Ok((Float8(f), Endian::NotApplicable));
    }
    let bad = || type_err(format!("'{s}' is not a numpy typestr"));
    let mut chars = s.chars();
    let first = chars.next().ok_or_else(bad)?;
    let (endian, rest) = match first {
        '<' => (Endian::Little, &s[1..]),
        '>' => (Endian::Big, &s[1..]),
        '|' => (Endian::NotApplicable, &s[1..]),
        '=' => (Endian::Little, &s[1..]),
        _ => (Endian::Little, s),
    };
    let kind = rest.chars().next().ok_or_else(bad)?;
    // Typestrs are ASCII; slicing past a multi-byte character would panic.
    if !kind.is_ascii() {
        return Err(bad());
    }
    let tail = &rest[1..];
    let digits: std::string::String = tail.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffix = &tail[digits.len()..];
    let size: usize = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    let dtype = match (kind, size) {
        ('b', 1) => Bool,
        ('i', 1) => Int8,
        ('i', 2) => Int16,
        ('i', 4) => Int32,
        ('i', 8) => Int64,
        ('u', 1) => UInt8,
        ('u', 2) => UInt16,
        ('u', 4) => UInt32,
        ('u', 8) => UInt64,
        ('f', 2) => Float16,
        ('f', 4) => Float32,
        ('f', 8) => Float64,
        ('c', 8) => Complex64,
        ('c', 16) => Complex128,
        ('M', 8) => {
            let (unit, scale) = parse_time_unit(suffix)?;
            return Ok((DateTime64 { unit, scale }, endian));
        }
        ('m', 8) => {
            let (unit, scale) = parse_time_unit(suffix)?;
            return Ok((TimeDelta64 { unit, scale }, endian));
        }
        ('S', n) => FixedBytes(bounded(Some(n), s)?),
        ('V', n) => RawBytes(bounded(Some(n), s)?),
        ('U', n) => FixedUtf32(bounded(n.checked_mul(4), s)? / 4),
        ('O', _) => String,
        _ => return Err(bad()),
    };
    if !suffix.is_empty() {
        return Err(bad());
    }
    let endian = if dtype.has_byte_order() {
        endian
    } else {
        Endian::NotApplicable
    };
    Ok((dtype, endian))
}

/// Reverse each `unit`-byte group of `buf` in place.
pub fn swap_units(buf: &mut [u8], unit: usize) {
    if unit > 1 {
        for chunk in buf.chunks_exact_mut(unit) {
            chunk.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typestrs_round_trip() {
        for s in [
            "|b1",
            "|i1",
            "<i2",
            ">i4",
            "<i8",
            "|u1",
            ">u2",
            "<u4",
            "<u8",
            "<f2",
            ">f4",
            "<f8",
            "<c8",
            ">c16",
            "<M8[ns]",
            ">m8[10s]",
            "|S7",
            "|V3",
            "<U5",
            ">U2",
            "<M8[generic]",
        ] {
            let (dt, e) = parse_typestr(s).unwrap();
            assert_eq!(dt.numpy_typestr(e), s, "{s}");
        }
        assert_eq!(
            parse_typestr("<M8")
                .unwrap()
                .0
                .numpy_typestr(Endian::Little),
            "<M8[generic]"
        );
    }

    #[test]
    fn bad_typestrs_are_errors() {
        for s in [
            "",
            "<",
            "<i3",
            "<f16",
            "x8",
            "<M8[parsec]",
            "<M8[0s]",
            "<i4x",
        ] {
            assert!(parse_typestr(s).is_err(), "{s}");
        }
    }

    #[test]
    fn subarray_fields_are_bounded_by_their_bytes() {
        let parse = |text: &str| DataType::from_v2_json(&serde_json::from_str(text).unwrap());
        assert!(parse(r#"[["a","|u1",[0]]]"#).is_ok());
        assert!(
            parse(r#"[["a","|u1",[5,0]]]"#).is_err(),
            "lists without elements"
        );
        assert!(
            parse(r#"[["a","|V0",[4000000000]]]"#).is_err(),
            "zero-size elements"
        );
        let (nested, _) = parse(r#"[["a",[["b","|u1",[1,1]]],[1,1,1]]]"#).unwrap();
        assert_eq!(nested.field_dimensions(), 5);
    }

    #[test]
    fn structured_offsets_and_swaps() {
        let v: Value =
            serde_json::from_str(r#"[["a","<i4"],["b",">f8",[2]],["c",[["x","|u1"]]]]"#).unwrap();
        let (dt, _) = DataType::from_v2_json(&v).unwrap();
        assert_eq!(dt.size(), Some(21));
        assert_eq!(dt.field("c").unwrap().offset, 20);
        let mut rec: Vec<u8> = (0..21).collect();
        dt.swap_declared(&mut rec, Endian::NotApplicable);
        assert_eq!(&rec[..4], &[0, 1, 2, 3]);
        assert_eq!(&rec[4..12], &[11, 10, 9, 8, 7, 6, 5, 4]);
        assert_eq!(
            dt.npy_descr(),
            "[('a', '<i4'), ('b', '<f8', (2,)), ('c', [('x', '|u1')])]"
        );
        assert_eq!(dt.to_v2_json(Endian::NotApplicable), v);
    }

    #[test]
    fn v3_names_round_trip() {
        for v in [
            json!("float16"),
            json!("bfloat16"),
            json!("r24"),
            json!("string"),
            json!("complex128"),
            json!({"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}),
            json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}),
            json!({"name": "structured", "configuration": {"fields": [["a", "int32"], ["b", "float64"]]}}),
        ] {
            assert_eq!(DataType::from_v3_json(&v).unwrap().to_v3_json(), v);
        }
        assert!(DataType::from_v3_json(&json!("float128")).is_err());
        assert!(DataType::from_v3_json(&json!("r7")).is_err());
    }

    #[test]
    fn non_ascii_typestrs_are_errors() {
        for t in ["é", "<é4", "|ü", "\u{10000}i4"] {
            assert!(
                DataType::from_v2_json(&serde_json::json!(t)).is_err(),
                "{t}"
            );
        }
    }
}
