//! What xarray and the CF conventions write beside the numbers: dimension
//! names (`dimension_names` in v3, `_ARRAY_DIMENSIONS` in v2), packing
//! (`scale_factor`, `add_offset`), missing values (`_FillValue`,
//! `missing_value`) and time units. Decoding follows what
//! `xarray.open_zarr(decode_cf=True)` gives, dtype included.

pub mod coords;
pub mod time;

use base64::Engine;
use serde_json::{Map, Value};

use super::dtype::DataType;
use super::fill::element_as_f64;
use super::fill::FillValue;
use super::metadata::ArrayMetadata;
pub use time::{Calendar, DateTime, Period, Precision, TimeUnits};

/// The names of an array's dimensions, when every one has a name.
pub fn dimension_names(meta: &ArrayMetadata) -> Option<Vec<String>> {
    let names: Vec<String> = match &meta.dimension_names {
        Some(names) => names.iter().cloned().collect::<Option<Vec<_>>>()?,
        None => meta
            .attributes
            .get("_ARRAY_DIMENSIONS")?
            .as_array()?
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?,
    };
    (names.len() == meta.shape.len()).then_some(names)
}

/// How a variable's stored numbers become the values it means.
#[derive(Debug, Clone, Default)]
pub struct Packing {
    pub scale_factor: Option<f64>,
    pub add_offset: Option<f64>,
    /// Stored values that mean "missing" (`_FillValue`, `missing_value`).
    pub missing: Vec<f64>,
    /// Time units, when the values are times.
    pub time: Option<TimeUnits>,
}

impl Packing {
    /// The packing `attributes` declare for an array of `meta`. xarray
    /// masks a v2 array's `fill_value` too, and a v3 array's `_FillValue`
    /// attribute (which it writes base64-encoded for floats).
    pub fn of(meta: &ArrayMetadata) -> Result<Packing, String> {
        let attrs = &meta.attributes;
        let number = |name: &str| -> Result<Option<f64>, String> {
            match attrs.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => attr_number(v)
                    .map(Some)
                    .ok_or_else(|| format!("attribute {name} = {v} is not a number")),
            }
        };
        let mut missing = Vec::new();
        match attrs.get("_FillValue") {
            Some(Value::Null) => {}
            Some(v) => missing.push(
                attr_number(v)
                    .ok_or_else(|| format!("attribute _FillValue = {v} is not a number"))?,
            ),
            None if meta.zarr_format == 2 => {
                if let Some(v) = fill_as_f64(meta) {
                    missing.push(v);
                }
            }
            None => {}
        }
        match attrs.get("missing_value") {
            Some(Value::Array(list)) => {
                for v in list {
                    missing.push(attr_number(v).ok_or("attribute missing_value is not numbers")?);
                }
            }
            Some(Value::Null) | None => {}
            Some(v) => missing.push(
                attr_number(v)
                    .ok_or_else(|| format!("attribute missing_value = {v} is not a number"))?,
            ),
        }
        let time = match attrs.get("units").and_then(Value::as_str) {
            Some(units) => TimeUnits::parse(units, attrs.get("calendar").and_then(Value::as_str))
                .transpose()?,
            None => None,
        };
        let time = match (&meta.dtype, time) {
            // numpy datetimes count their unit from the Unix epoch.
            (DataType::DateTime64 { unit, scale }, None) => TimeUnits::parse(
                &format!("{} since 1970-01-01", numpy_unit(unit, *scale)),
                None,
            )
            .transpose()
            .ok()
            .flatten(),
            (_, time) => time,
        };
        Ok(Packing {
            scale_factor: number("scale_factor")?,
            add_offset: number("add_offset")?,
            missing,
            time,
        })
    }

    /// The dtype `decode_cf` gives values stored as `stored` (xarray's
    /// `_choose_float_dtype`; attributes read from JSON are Python floats,
    /// so packed values are float64).
    pub fn decoded_dtype(&self, stored: &DataType) -> DataType {
        use DataType::*;
        if self.scale_factor.is_some() || self.add_offset.is_some() {
            return Float64;
        }
        match stored {
            Float16 | BFloat16 | Float32 => Float32,
            Int8 | UInt8 | Int16 | UInt16 | Bool if !self.missing.is_empty() => Float32,
            _ if self.missing.is_empty() && !matches!(stored, Float64) => stored.clone(),
            _ => Float64,
        }
    }

    /// Whether decoding changes anything.
    pub fn is_identity(&self) -> bool {
        self.scale_factor.is_none() && self.add_offset.is_none() && self.missing.is_empty()
    }

    /// One stored number as the value it means: NaN when it is missing.
    #[inline]
    pub fn decode(&self, stored: f64) -> f64 {
        if self
            .missing
            .iter()
            .any(|&m| m == stored || (m.is_nan() && stored.is_nan()))
        {
            return f64::NAN;
        }
        let scaled = match self.scale_factor {
            Some(s) => stored * s,
            None => stored,
        };
        match self.add_offset {
            Some(o) => scaled + o,
            None => scaled,
        }
    }
}

/// A numeric attribute: a number, one of the strings v3 metadata writes
/// for special floats, or the base64 of a little-endian float64 (xarray's
/// v3 `_FillValue`).
pub fn attr_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Some(f64::NAN),
            "Infinity" | "inf" => Some(f64::INFINITY),
            "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
            _ => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
                Some(f64::from_le_bytes(bytes.try_into().ok()?))
            }
        },
        Value::Array(list) if list.len() == 1 => attr_number(&list[0]),
        _ => None,
    }
}

/// A v2 array's `fill_value` as a number (xarray's `_FillValue` of it).
pub fn fill_as_f64(meta: &ArrayMetadata) -> Option<f64> {
    match &meta.fill_value {
        FillValue(bytes) if meta.fill_value_json.is_null() || bytes.is_empty() => None,
        FillValue(bytes) => element_as_f64(&meta.dtype, bytes),
    }
}

/// A numpy datetime unit as CF names it (`h` is `hours`).
pub fn numpy_unit(unit: &str, scale: u32) -> String {
    let name = match unit {
        "D" => "days",
        "h" => "hours",
        "m" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "W" => "weeks",
        other => other,
    };
    if scale == 1 {
        name.to_string()
    } else {
        // A scaled unit is not one CF names; counted in the base unit by
        // whoever reads it (a rare numpy form).
        format!("{scale} {name}")
    }
}

/// Elements of a numeric type (little-endian) as numbers, into `out`.
/// `None` for types that are not numbers.
pub fn numbers(dtype: &DataType, bytes: &[u8], out: &mut Vec<f64>) -> Option<()> {
    let size = dtype.size()?;
    macro_rules! each {
        ($t:ty) => {
            out.extend(
                bytes
                    .chunks_exact(size)
                    .map(|b| <$t>::from_le_bytes(b.try_into().unwrap_or_default()) as f64),
            )
        };
    }
    match dtype {
        DataType::Float32 => each!(f32),
        DataType::Float64 => each!(f64),
        DataType::Int16 => each!(i16),
        DataType::Int32 => each!(i32),
        DataType::Int64 => each!(i64),
        DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. } => {
            out.extend(bytes.chunks_exact(8).map(|b| {
                let v = i64::from_le_bytes(b.try_into().unwrap_or_default());
                // NaT
                if v == i64::MIN {
                    f64::NAN
                } else {
                    v as f64
                }
            }))
        }
        DataType::UInt8 => out.extend(bytes.iter().map(|&b| f64::from(b))),
        DataType::Int8 => out.extend(bytes.iter().map(|&b| f64::from(b as i8))),
        DataType::UInt16 => each!(u16),
        DataType::UInt32 => each!(u32),
        DataType::UInt64 => each!(u64),
        _ => {
            for b in bytes.chunks_exact(size) {
                out.push(element_as_f64(dtype, b)?);
            }
        }
    }
    Some(())
}

/// Numbers as elements of `dtype` (little-endian), cast as numpy's
/// `astype` does; `dtype` is a numeric type of [`numbers`].
pub fn to_bytes(dtype: &DataType, values: &[f64]) -> Vec<u8> {
    macro_rules! each {
        ($t:ty) => {
            values
                .iter()
                .flat_map(|&v| (v as $t).to_le_bytes())
                .collect()
        };
    }
    match dtype {
        DataType::Float32 => each!(f32),
        DataType::Int8 => each!(i8),
        DataType::Int16 => each!(i16),
        DataType::Int32 => each!(i32),
        DataType::Int64 => each!(i64),
        DataType::UInt8 => each!(u8),
        DataType::UInt16 => each!(u16),
        DataType::UInt32 => each!(u32),
        DataType::UInt64 => each!(u64),
        DataType::Bool => values.iter().map(|&v| u8::from(v != 0.0)).collect(),
        // NaN is NaT.
        DataType::DateTime64 { .. } | DataType::TimeDelta64 { .. } => values
            .iter()
            .flat_map(|&v| if v.is_nan() { i64::MIN } else { v as i64 }.to_le_bytes())
            .collect(),
        _ => each!(f64),
    }
}

/// The attributes a variable's description carries (units, names, CF
/// roles), the rest being the writer's.
pub fn described_attributes(attrs: &Map<String, Value>) -> Map<String, Value> {
    const NAMES: &[&str] = &[
        "units",
        "calendar",
        "long_name",
        "standard_name",
        "axis",
        "positive",
        "grid_mapping",
        "coordinates",
        "scale_factor",
        "add_offset",
        "_FillValue",
        "missing_value",
        "valid_min",
        "valid_max",
        "valid_range",
        "cell_methods",
        "bounds",
    ];
    attrs
        .iter()
        .filter(|(k, _)| NAMES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_masks_then_scales() {
        let p = Packing {
            scale_factor: Some(0.01),
            add_offset: Some(273.15),
            missing: vec![-32768.0],
            time: None,
        };
        assert!(p.decode(-32768.0).is_nan());
        assert!((p.decode(100.0) - 274.15).abs() < 1e-9);
        assert_eq!(p.decoded_dtype(&DataType::Int16), DataType::Float64);
        let masked = Packing {
            missing: vec![0.0],
            ..Default::default()
        };
        assert_eq!(masked.decoded_dtype(&DataType::Int16), DataType::Float32);
        assert_eq!(masked.decoded_dtype(&DataType::Int32), DataType::Float64);
        assert_eq!(
            Packing::default().decoded_dtype(&DataType::Int32),
            DataType::Int32
        );
    }

    #[test]
    fn fill_values_as_xarray_writes_them() {
        // struct.pack("<d", -9999.0), base64
        let b64 = base64::engine::general_purpose::STANDARD.encode((-9999.0f64).to_le_bytes());
        assert_eq!(attr_number(&Value::String(b64)), Some(-9999.0));
        assert!(attr_number(&Value::String("NaN".into())).unwrap().is_nan());
        assert_eq!(attr_number(&serde_json::json!(3)), Some(3.0));
        assert_eq!(attr_number(&serde_json::json!("word")), None);
    }
}
