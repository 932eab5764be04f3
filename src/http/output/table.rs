//! A selection as a table in long form, for the columnar formats (Arrow,
//! Parquet): a column per dimension holding its labels (times as
//! nanoseconds since 1970 where the calendar allows, ISO 8601 text in the
//! others; numbers; or the index where the dimension has no coordinate),
//! repeated as the rows run, and a column of the values.

use axum::http::StatusCode;

use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data};
use crate::zarr::{ArrayBytes, DataType};

/// A column's values.
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// Integers of `bits` (8 to 64), signed or not, widened.
    Int {
        bits: u8,
        signed: bool,
        values: Vec<i64>,
    },
    /// Nanoseconds since 1970-01-01.
    Time(Vec<i64>),
    Text(Vec<String>),
    Bool(Vec<bool>),
}

pub struct Column {
    pub name: String,
    pub values: Values,
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Int { values, .. } | Values::Time(values) => values.len(),
            Values::Text(v) => v.len(),
            Values::Bool(v) => v.len(),
        }
    }
}

/// The table of `data`, refused with 413 when building it would pass the
/// answer's limit.
pub fn columns(data: &Data) -> ApiResult<Vec<Column>> {
    let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "tables carry fixed-size numbers",
        ));
    };
    let n = data.shape.len();
    let rows: usize = data.shape.iter().map(|&s| s as usize).product();
    let cost = (rows as u64).saturating_mul(8 * (n as u64 + 1));
    if cost > data.limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "the table of {rows} rows takes about {cost} bytes, over the {}-byte limit for answers built in memory; select less",
                data.limit
            ),
        ));
    }
    let named = data.axes.len() == n;
    let mut columns = Vec::with_capacity(n + 1);
    let mut inner = rows;
    for d in 0..n {
        let len = data.shape[d] as usize;
        inner /= len.max(1);
        let position = |k: usize| (k / inner.max(1)) % len.max(1);
        let axis = named.then(|| &data.axes[d]);
        let name = axis.map_or_else(|| format!("dim_{d}"), |a| a.name.clone());
        let values = match axis.and_then(|a| a.coordinate.as_ref()) {
            Some(c) => match &c.time {
                Some(units) => {
                    let nanos: Option<Vec<i64>> =
                        c.values.iter().map(|&v| units.unix_nanos(v)).collect();
                    match nanos {
                        Some(ns) => Values::Time((0..rows).map(|k| ns[position(k)]).collect()),
                        None => {
                            let labels: Vec<String> = (0..len)
                                .map(|i| {
                                    units
                                        .to_datetime(c.values[i])
                                        .map_or_else(String::new, |t| t.to_string())
                                })
                                .collect();
                            Values::Text((0..rows).map(|k| labels[position(k)].clone()).collect())
                        }
                    }
                }
                None if c.single => {
                    Values::F32((0..rows).map(|k| c.values[position(k)] as f32).collect())
                }
                None => Values::F64((0..rows).map(|k| c.values[position(k)]).collect()),
            },
            None => Values::Int {
                bits: 64,
                signed: true,
                values: (0..rows).map(|k| position(k) as i64).collect(),
            },
        };
        columns.push(Column { name, values });
    }
    let size = data.dtype.size().unwrap_or(1).max(1);
    let each = bytes.chunks_exact(size);
    macro_rules! ints {
        ($t:ty, $bits:expr, $signed:expr) => {
            Values::Int {
                bits: $bits,
                signed: $signed,
                values: each
                    .map(|b| <$t>::from_le_bytes(b.try_into().unwrap_or_default()) as i64)
                    .collect(),
            }
        };
    }
    let values = match &data.dtype {
        DataType::Float32 => Values::F32(
            each.map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect(),
        ),
        DataType::Float64 => Values::F64(
            each.map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect(),
        ),
        DataType::Int8 => ints!(i8, 8, true),
        DataType::Int16 => ints!(i16, 16, true),
        DataType::Int32 => ints!(i32, 32, true),
        DataType::Int64 => ints!(i64, 64, true),
        DataType::UInt8 => ints!(u8, 8, false),
        DataType::UInt16 => ints!(u16, 16, false),
        DataType::UInt32 => ints!(u32, 32, false),
        DataType::UInt64 => ints!(u64, 64, false),
        DataType::Bool => Values::Bool(each.map(|b| b[0] != 0).collect()),
        other => {
            return Err(ApiError::new(
                StatusCode::NOT_ACCEPTABLE,
                "not_acceptable",
                format!(
                    "tables carry numbers; {} values cannot be written (use format=npy)",
                    other.name()
                ),
            ))
        }
    };
    let name = if data.name.is_empty() || columns.iter().any(|c| c.name == data.name) {
        "value".to_string()
    } else {
        data.name.clone()
    };
    columns.push(Column { name, values });
    Ok(columns)
}
