//! `.npy`: numpy's own format, streamed slab by slab for fixed-size data;
//! variable-length data as a fixed-width numpy type (`<U`/`|S` of the
//! longest element), checked against the in-memory limit once padded.

use axum::body::Body;
use axum::response::Response;

use super::{binary, slab_body, Encode, Output, Params};
use crate::config::Config;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data};
use crate::zarr::{ArrayBytes, DataType};

pub struct Npy;

impl Output for Npy {
    fn name(&self) -> &'static str {
        "npy"
    }
    fn content_type(&self) -> &'static str {
        "application/x-npy"
    }
    fn encoder(&self, _: &Params, _: &Config) -> ApiResult<Box<dyn Encode>> {
        Ok(Box::new(encode))
    }
}

fn encode(data: Data) -> ApiResult<Response> {
    let header = crate::npy::header(&data.dtype.npy_descr(), &data.shape);
    match data.content {
        Content::Slabs { bytes, first, rest } => {
            let length = header.len() as u64 + bytes;
            let body = slab_body(header, first, rest);
            Ok(binary(
                body,
                Npy.content_type(),
                (&data.dtype, &data.shape),
                Some(length),
            ))
        }
        Content::Whole(ArrayBytes::Fixed(bytes)) => {
            let mut body = header;
            body.extend(bytes);
            let length = body.len() as u64;
            Ok(binary(
                Body::from(body),
                Npy.content_type(),
                (&data.dtype, &data.shape),
                Some(length),
            ))
        }
        Content::Whole(ArrayBytes::Variable(ref items)) => {
            let text = data.dtype == DataType::String;
            // Every element is padded to the longest: check that size first.
            let width = items
                .iter()
                .map(|i| {
                    if text {
                        String::from_utf8_lossy(i).chars().count() * 4
                    } else {
                        i.len()
                    }
                })
                .max()
                .unwrap_or(0)
                .max(1) as u64;
            let padded = width.saturating_mul(items.len() as u64);
            if padded > data.limit {
                return Err(ApiError::new(
                    axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!(
                        "the selection's {} elements padded to the longest ({width} bytes) make {padded} bytes as .npy, over the {}-byte limit for variable-length data; select fewer elements or use format=json",
                        items.len(),
                        data.limit
                    ),
                ));
            }
            let (descr, bytes) = fixed_width(items, text);
            let mut body = crate::npy::header(&descr, &data.shape);
            body.extend(bytes);
            Ok(binary(
                Body::from(body),
                Npy.content_type(),
                (&data.dtype, &data.shape),
                None,
            ))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_length_as_fixed_width() {
        let (descr, bytes) = fixed_width(&[b"ab".to_vec(), b"c".to_vec()], false);
        assert_eq!((descr.as_str(), bytes.as_slice()), ("'|S2'", &b"abc\0"[..]));
    }
}
