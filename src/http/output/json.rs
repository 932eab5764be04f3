//! JSON: `{"shape", "dtype", "data"}` with nested lists; built whole in
//! memory, so held to the in-memory limit: on an estimate before the read,
//! and on the text itself as it is written (`false,` is six bytes of one).
//! The text is written straight from the values; a tree of `Value`s first
//! cost some 170 bytes an element.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::{json, Map, Value};

use super::{Encode, Output, Params};
use crate::config::Config;
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
    fn wants_axes(&self) -> bool {
        true
    }
    fn encoder(&self, _: &Params, _: &Config) -> ApiResult<Box<dyn Encode>> {
        Ok(Box::new(encode))
    }
}

fn encode(data: Data) -> ApiResult<Response> {
    let Content::Whole(values) = &data.content else {
        return Err(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "JSON output was handed streamed data",
        ));
    };
    let mut text = Text {
        out: Vec::new(),
        limit: data.limit,
    };
    text.out.extend_from_slice(b"{\"shape\":");
    text.put(&json!(data.shape))?;
    text.out.extend_from_slice(b",\"dtype\":");
    text.put(&json!(data.dtype.name()))?;
    if !data.axes.is_empty() && data.axes.len() == data.shape.len() {
        // As xarray's `DataArray.to_dict()` writes them, so
        // `DataArray.from_dict` reads the answer back; before the data, which
        // stays last (the viewer reads an element's text after `"data":`).
        text.out.extend_from_slice(b",\"name\":");
        text.put(&json!(data.name))?;
        text.out.extend_from_slice(b",\"dims\":");
        text.put(&json!(data
            .axes
            .iter()
            .map(|a| &a.name)
            .collect::<Vec<_>>()))?;
        text.out.extend_from_slice(b",\"attrs\":");
        text.put(&Value::Object(data.attributes.clone()))?;
        text.out.extend_from_slice(b",\"coords\":{");
        let mut first = true;
        for axis in data.axes.iter().filter(|a| a.coordinate.is_some()) {
            if !std::mem::take(&mut first) {
                text.out.push(b',');
            }
            let c = axis.coordinate.as_ref().map(|c| &c.attributes);
            let labels: Vec<Value> = (0..axis.coordinate.as_ref().map_or(0, |c| c.values.len()))
                .map(|i| axis.label(i).unwrap_or(Value::Null))
                .collect();
            text.put(&json!(axis.name))?;
            text.out.push(b':');
            text.put(&json!({"dims": [axis.name], "attrs": c, "data": labels}))?;
        }
        text.out.push(b'}');
    }
    text.out.extend_from_slice(b",\"data\":");
    write_data(&mut text, values, &data.dtype, &data.shape)?;
    text.out.push(b'}');
    let mut response = Response::new(Body::from(text.out));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A JSON answer being written, and the most bytes it may take.
struct Text {
    out: Vec<u8>,
    limit: u64,
}

impl Text {
    fn put(&mut self, value: &Value) -> ApiResult<()> {
        serde_json::to_writer(&mut self.out, value).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("writing JSON: {e}"),
            )
        })?;
        self.check()
    }

    fn check(&self) -> ApiResult<()> {
        if self.out.len() as u64 > self.limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the JSON answer is over the {}-byte limit; select a smaller region, \
                     fewer points or one field, or use format=npy",
                    self.limit
                ),
            ));
        }
        Ok(())
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

/// Nested lists of `shape` written into `text`, whose leaves are
/// `leaf(linear index)`. Recurses once per dimension, which metadata bounds.
fn write_nested(
    text: &mut Text,
    shape: &[u64],
    leaf: &mut dyn FnMut(usize) -> Value,
) -> ApiResult<()> {
    fn rec(
        text: &mut Text,
        shape: &[u64],
        offset: &mut usize,
        leaf: &mut dyn FnMut(usize) -> Value,
    ) -> ApiResult<()> {
        let Some((&n, rest)) = shape.split_first() else {
            let value = leaf(*offset);
            *offset += 1;
            return text.put(&value);
        };
        text.out.push(b'[');
        for i in 0..n {
            if i > 0 {
                text.out.push(b',');
            }
            rec(text, rest, offset, leaf)?;
        }
        text.out.push(b']');
        // Lists of no elements are text too: `[[],[],...]`.
        text.check()
    }
    rec(text, shape, &mut 0, leaf)
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

/// The whole selection as nested JSON lists, written into `text`.
fn write_data(
    text: &mut Text,
    data: &ArrayBytes,
    dtype: &DataType,
    shape: &[u64],
) -> ApiResult<()> {
    match data {
        ArrayBytes::Fixed(bytes) => {
            let size = dtype.size().unwrap_or(0);
            write_nested(text, shape, &mut |i| {
                element_json(dtype, &bytes[i * size..(i + 1) * size])
            })
        }
        ArrayBytes::Variable(items) => write_nested(text, shape, &mut |i| match dtype {
            DataType::String => json!(String::from_utf8_lossy(&items[i])),
            _ => json!(base64::engine::general_purpose::STANDARD.encode(&items[i])),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(data: &ArrayBytes, dtype: &DataType, shape: &[u64], limit: u64) -> ApiResult<Value> {
        let mut text = Text {
            out: Vec::new(),
            limit,
        };
        write_data(&mut text, data, dtype, shape)?;
        Ok(serde_json::from_slice(&text.out).unwrap())
    }

    #[test]
    fn json_shapes_and_specials() {
        let data = ArrayBytes::Fixed(
            [1.5f32, f32::NAN, f32::INFINITY, -0.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        assert_eq!(
            written(&data, &DataType::Float32, &[2, 2], 1 << 20).unwrap(),
            json!([[1.5, "NaN"], ["Infinity", -0.0]])
        );
        assert_eq!(
            written(&data, &DataType::Float32, &[0, 4], 1 << 20).unwrap(),
            json!([])
        );
        let flags = ArrayBytes::Fixed(vec![0; 100]);
        assert_eq!(
            written(&flags, &DataType::Bool, &[100], 1 << 20).unwrap(),
            json!(vec![false; 100])
        );
        // Lists of no elements are held to the limit too.
        let none = ArrayBytes::Fixed(vec![]);
        let err = written(&none, &DataType::Float32, &[1 << 40, 0], 1000).unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        // The text of 100 one-byte booleans is 601 bytes.
        let err = written(&flags, &DataType::Bool, &[100], 500).unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        let payload = 0x7fc0_0001u32.to_le_bytes();
        assert_eq!(element_json(&DataType::Float32, &payload), json!("NaN"));
    }
}
