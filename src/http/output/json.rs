//! JSON: `{"shape", "dtype", "data"}` with nested lists; built whole in
//! memory, so held to the in-memory limit.

use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Map, Value};

use super::Output;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data, Residence};
use crate::zarr::fill::{decode_utf32, element_to_json};
use crate::zarr::{ArrayBytes, DataType};

pub struct Json;

impl Output for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn content_type(&self) -> &'static str {
        "application/json"
    }
    fn residence(&self) -> Residence {
        // Text of numbers is several times their bytes.
        Residence::InMemory { expansion: 4 }
    }
    fn encode(&self, data: Data, _: &super::Render) -> ApiResult<Response> {
        let Content::Whole(values) = &data.content else {
            return Err(ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "JSON output was handed streamed data",
            ));
        };
        let body = json!({"shape": data.shape, "dtype": data.dtype.name(), "data": json_data(values, &data.dtype, &data.shape)});
        Ok(axum::Json(body).into_response())
    }
}

/// One element as JSON: numbers (NaN and infinities as the spec's strings),
/// complex as `[re, im]`, records as objects, text as strings, fixed-width
/// bytes as text when UTF-8 (else byte values), variable-length bytes as base64.
pub fn element_json(dtype: &DataType, b: &[u8]) -> Value {
    match dtype {
        DataType::Structured(fields) => {
            let mut obj = Map::new();
            for f in fields {
                let bytes = &b[f.offset..f.offset + f.size()];
                let value = if f.shape.is_empty() {
                    element_json(&f.dtype, bytes)
                } else {
                    nested(
                        &f.dtype,
                        bytes,
                        &f.shape.iter().map(|&d| d as u64).collect::<Vec<_>>(),
                    )
                };
                obj.insert(f.name.clone(), value);
            }
            Value::Object(obj)
        }
        // Text when the bytes are UTF-8 (NetCDF and HDF5 keep names in
        // them), else the byte values: a string is always the bytes' text,
        // as a write reads it, so the two cannot be confused.
        DataType::FixedBytes(_) => {
            let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            match std::str::from_utf8(&b[..end]) {
                Ok(s) => json!(s),
                Err(_) => json!(&b[..end]),
            }
        }
        DataType::FixedUtf32(_) => json!(decode_utf32(b)),
        DataType::Complex64 | DataType::Complex128 => {
            let part = if *dtype == DataType::Complex64 {
                DataType::Float32
            } else {
                DataType::Float64
            };
            let half = b.len() / 2;
            json!([
                element_json(&part, &b[..half]),
                element_json(&part, &b[half..])
            ])
        }
        DataType::Float16 | DataType::BFloat16 | DataType::Float32 | DataType::Float64 => {
            // Fill values keep a NaN's payload as hex so metadata round-trips;
            // data is numbers, and every NaN is "NaN".
            match element_to_json(dtype, b) {
                Value::String(s) if s.starts_with("0x") => json!("NaN"),
                other => other,
            }
        }
        _ => element_to_json(dtype, b),
    }
}

fn nested(dtype: &DataType, bytes: &[u8], shape: &[u64]) -> Value {
    let size = dtype.size().unwrap_or(0);
    build(shape, &mut |i| {
        element_json(dtype, &bytes[i * size..(i + 1) * size])
    })
}

/// Nested lists of `shape` whose leaves are `leaf(linear index)`.
fn build(shape: &[u64], leaf: &mut dyn FnMut(usize) -> Value) -> Value {
    fn rec(shape: &[u64], offset: &mut usize, leaf: &mut dyn FnMut(usize) -> Value) -> Value {
        match shape.split_first() {
            None => {
                let v = leaf(*offset);
                *offset += 1;
                v
            }
            Some((&n, rest)) => Value::Array((0..n).map(|_| rec(rest, offset, leaf)).collect()),
        }
    }
    rec(shape, &mut 0, leaf)
}

/// The whole selection as nested JSON lists.
pub fn json_data(data: &ArrayBytes, dtype: &DataType, shape: &[u64]) -> Value {
    match data {
        ArrayBytes::Fixed(bytes) => nested(dtype, bytes, shape),
        ArrayBytes::Variable(items) => build(shape, &mut |i| match dtype {
            DataType::String => json!(String::from_utf8_lossy(&items[i])),
            _ => json!(base64::engine::general_purpose::STANDARD.encode(&items[i])),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shapes_and_specials() {
        let data = ArrayBytes::Fixed(
            [1.5f32, f32::NAN, f32::INFINITY, -0.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        assert_eq!(
            json_data(&data, &DataType::Float32, &[2, 2]),
            json!([[1.5, "NaN"], ["Infinity", -0.0]])
        );
        let payload = 0x7fc0_0001u32.to_le_bytes();
        assert_eq!(element_json(&DataType::Float32, &payload), json!("NaN"));
    }
}
