//! Output formats for array data: `.npy`, JSON and raw bytes, and the slabs
//! streamed responses are produced in.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::zarr::fill::{decode_utf32, element_to_json};
use crate::zarr::selection::{Indices, Resolved, ResolvedDim};
use crate::zarr::{ArrayBytes, DataType};

/// How data is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Npy,
    Json,
    Raw,
}

impl Format {
    /// From `format=` (which wins) or the `Accept` header; `.npy` by default.
    pub fn choose(param: Option<&str>, accept: Option<&str>) -> Result<Format, String> {
        match param {
            Some("npy") => return Ok(Format::Npy),
            Some("json") => return Ok(Format::Json),
            Some("raw") => return Ok(Format::Raw),
            Some(other) => return Err(format!("format '{other}' is not npy, json or raw")),
            None => {}
        }
        let accept = accept.unwrap_or("");
        Ok(if accept.contains("application/x-npy") {
            Format::Npy
        } else if accept.contains("application/json") {
            Format::Json
        } else if accept.contains("application/octet-stream") {
            Format::Raw
        } else {
            Format::Npy
        })
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Npy => "application/x-npy",
            Format::Json => "application/json",
            Format::Raw => "application/octet-stream",
        }
    }
}

/// One element as JSON: numbers (NaN and infinities as the spec's strings),
/// complex as `[re, im]`, records as objects, text as strings, bytes as base64.
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
        DataType::FixedBytes(_) => {
            let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            match std::str::from_utf8(&b[..end]) {
                Ok(s) => json!(s),
                Err(_) => json!(base64::engine::general_purpose::STANDARD.encode(&b[..end])),
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

/// Variable-length elements as a fixed-width numpy type: `<U{n}` for text
/// (UTF-32), `|S{n}` for bytes, n the longest element.
pub fn fixed_width(items: &[Vec<u8>], text: bool) -> (String, Vec<u8>) {
    if text {
        let strings: Vec<Vec<u32>> = items
            .iter()
            .map(|i| {
                String::from_utf8_lossy(i)
                    .chars()
                    .map(|c| c as u32)
                    .collect()
            })
            .collect();
        let width = strings.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut out = Vec::with_capacity(width * 4 * items.len());
        for s in strings {
            for i in 0..width {
                out.extend_from_slice(&s.get(i).copied().unwrap_or(0).to_le_bytes());
            }
        }
        (format!("'<U{width}'"), out)
    } else {
        let width = items.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut out = Vec::with_capacity(width * items.len());
        for item in items {
            out.extend_from_slice(item);
            out.resize(out.len() + width - item.len(), 0);
        }
        (format!("'|S{width}'"), out)
    }
}

/// Split a selection into slabs along its first dimension of length > 1,
/// each within one chunk row and at most `max_bytes` (when `row_bytes`, the
/// bytes of one step along that dimension, allows). Concatenating the slabs'
/// C-order results gives the whole selection's C-order result.
pub fn slabs(
    selection: &Resolved,
    chunk_shape: &[u64],
    elem: u64,
    max_bytes: u64,
) -> Vec<Resolved> {
    match selection {
        Resolved::Points { coords } => {
            let per = (max_bytes / elem.max(1)).max(1) as usize;
            coords
                .chunks(per)
                .map(|c| Resolved::Points { coords: c.to_vec() })
                .collect()
        }
        Resolved::Orthogonal(dims) => {
            let Some(d) = dims.iter().position(|dim| dim.indices.len() > 1) else {
                return vec![selection.clone()];
            };
            let row_bytes: u64 = dims[d + 1..]
                .iter()
                .map(|x| x.indices.len())
                .product::<u64>()
                * elem;
            let max_rows = (max_bytes / row_bytes.max(1)).max(1);
            let mut out = Vec::new();
            let n = dims[d].indices.len();
            let mut start = 0;
            while start < n {
                let chunk = dims[d].indices.get(start) / chunk_shape[d];
                let mut end = start + 1;
                while end < n
                    && end - start < max_rows
                    && dims[d].indices.get(end) / chunk_shape[d] == chunk
                {
                    end += 1;
                }
                let mut slab = dims.clone();
                slab[d] = ResolvedDim {
                    indices: sub_indices(&dims[d].indices, start, end),
                    keep: dims[d].keep,
                };
                out.push(Resolved::Orthogonal(slab));
                start = end;
            }
            out
        }
    }
}

fn sub_indices(indices: &Indices, start: u64, end: u64) -> Indices {
    match indices {
        Indices::Range { start: s, step, .. } => Indices::Range {
            start: s + start * step,
            step: *step,
            len: end - start,
        },
        Indices::List(l) => Indices::List(l[start as usize..end as usize].to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::Selection;

    #[test]
    fn slabs_cover_the_selection_in_order() {
        let sel = Selection::parse("3:20:2,1:4")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        let parts = slabs(&sel, &[8, 5], 4, 1 << 20);
        let rows: Vec<u64> = parts
            .iter()
            .flat_map(|p| match p {
                Resolved::Orthogonal(d) => (0..d[0].indices.len())
                    .map(|i| d[0].indices.get(i))
                    .collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect();
        assert_eq!(rows, vec![3, 5, 7, 9, 11, 13, 15, 17, 19]);
        assert_eq!(parts.len(), 3, "one slab per chunk row");
        assert_eq!(
            slabs(&sel, &[100, 5], 4, 24).len(),
            5,
            "byte cap splits rows"
        );
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
            json_data(&data, &DataType::Float32, &[2, 2]),
            json!([[1.5, "NaN"], ["Infinity", -0.0]])
        );
        assert_eq!(
            Format::choose(None, Some("application/json")).unwrap(),
            Format::Json
        );
        assert_eq!(
            Format::choose(Some("raw"), Some("application/json")).unwrap(),
            Format::Raw
        );
        assert!(Format::choose(Some("csv"), None).is_err());
        let (descr, bytes) = fixed_width(&[b"ab".to_vec(), b"c".to_vec()], false);
        assert_eq!((descr.as_str(), bytes.as_slice()), ("'|S2'", &b"abc\0"[..]));
    }
}
