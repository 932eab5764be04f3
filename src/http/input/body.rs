//! Request bodies that carry array data: `.npy`, raw little-endian bytes, or
//! JSON `{"data": ...}`, turned into elements of the array's data type.

use axum::http::{header, HeaderMap, StatusCode};
use serde_json::Value;

use crate::http::error::{ApiError, ApiResult};
use crate::zarr::codec::{ArrayToArrayCodec, ChunkRepr};
use crate::zarr::fill::FillValue;
use crate::zarr::metadata::{element_count, ArrayMetadata};
use crate::zarr::{ArrayBytes, DataType};

pub use crate::service::Incoming;

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_data", message)
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
}

/// Decode a data body for the array `meta` describes.
pub fn decode(headers: &HeaderMap, body: &[u8], meta: &ArrayMetadata) -> ApiResult<Incoming> {
    let dtype = &meta.dtype;
    match content_type(headers) {
        "application/x-npy" => npy(body, dtype),
        "application/octet-stream" => raw(body, dtype),
        "application/json" => super::json_body::parse(body, dtype, meta.shape.len()),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("Content-Type '{other}' is not application/x-npy, application/octet-stream or application/json"),
        )),
    }
}

fn raw(body: &[u8], dtype: &DataType) -> ApiResult<Incoming> {
    let size = dtype.size().ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "raw bodies need a fixed-size dtype, not {}; send JSON or .npy",
                dtype.name()
            ),
        )
    })?;
    if size == 0 || !body.len().is_multiple_of(size) {
        return Err(unprocessable(format!(
            "a raw body of {} bytes is not a whole number of {size}-byte {} elements",
            body.len(),
            dtype.name()
        )));
    }
    Ok(Incoming {
        data: ArrayBytes::Fixed(body.to_vec()),
        shape: None,
    })
}

/// numpy's descr literal (`[('a', '<i4'), ('b', '<f8', (2,))]`) as the JSON form v2 metadata uses.
fn descr_json(descr: &str) -> Option<Value> {
    let text = descr
        .replace(",)", ")")
        .replace('(', "[")
        .replace(')', "]")
        .replace('\'', "\"");
    serde_json::from_str(&text).ok()
}

fn npy(body: &[u8], dtype: &DataType) -> ApiResult<Incoming> {
    let header = crate::npy::parse_header(body).map_err(|e| unprocessable(e.to_string()))?;
    let descr = descr_json(&header.descr)
        .ok_or_else(|| unprocessable(format!("cannot read the .npy dtype {}", header.descr)))?;
    let (given, endian) =
        DataType::from_v2_json(&descr).map_err(|e| unprocessable(format!(".npy dtype: {e}")))?;
    if given.is_variable() {
        return Err(unprocessable(format!(
            "the .npy dtype {} holds pickled Python objects, which are not read; \
             send text as fixed width ('<U') or bytes as ('|S')",
            header.descr
        )));
    }
    let count = element_count(&header.shape)
        .filter(|&n| n <= body.len() as u64)
        .ok_or_else(|| {
            unprocessable(format!(
                "the .npy shape {:?} holds more elements than the body has bytes",
                header.shape
            ))
        })?;
    let payload = &body[header.data_offset.min(body.len())..];
    let data = match (dtype, &given) {
        (DataType::String, DataType::FixedUtf32(n))
        | (DataType::Bytes, DataType::FixedBytes(n)) => {
            let width = if matches!(given, DataType::FixedUtf32(_)) {
                n * 4
            } else {
                *n
            };
            if width == 0 {
                return Err(unprocessable(format!(
                    "the .npy dtype {} has elements of no bytes",
                    header.descr
                )));
            }
            if payload.len() as u64 != count * width as u64 {
                return Err(unprocessable(format!(
                    "the .npy body holds {} data bytes, its header promises {}",
                    payload.len(),
                    count * width as u64
                )));
            }
            let mut buf = payload.to_vec();
            given.swap_declared(&mut buf, endian);
            ArrayBytes::Variable(
                buf.chunks(width)
                    .take(count as usize)
                    .enumerate()
                    .map(|(i, e)| text_element(&given, e, i))
                    .collect::<ApiResult<_>>()?,
            )
        }
        _ => {
            if !same_type(&given, dtype) {
                return Err(unprocessable(format!(
                    "the .npy dtype {} does not match the array's {}",
                    header.descr,
                    dtype.npy_descr()
                )));
            }
            let size = dtype.size().unwrap_or(0) as u64;
            if payload.len() as u64 != count * size {
                return Err(unprocessable(format!(
                    "the .npy body holds {} data bytes, its header promises {}",
                    payload.len(),
                    count * size
                )));
            }
            let mut buf = payload.to_vec();
            given.swap_declared(&mut buf, endian);
            ArrayBytes::Fixed(buf)
        }
    };
    let data = if header.fortran_order && header.shape.len() > 1 {
        fortran_to_c(data, dtype, &header.shape)?
    } else {
        data
    };
    Ok(Incoming {
        data,
        shape: Some(header.shape),
    })
}

/// Types equal up to byte order (which `swap_declared` removes).
fn same_type(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::Structured(x), DataType::Structured(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|(f, g)| {
                    f.name == g.name && f.shape == g.shape && same_type(&f.dtype, &g.dtype)
                })
        }
        _ => a == b,
    }
}

/// One fixed-width text element of an `.npy` body as the bytes a
/// variable-length element stores. UTF-32 that is not Unicode (surrogates,
/// values past U+10FFFF) is refused rather than stored as U+FFFD.
fn text_element(dtype: &DataType, bytes: &[u8], index: usize) -> ApiResult<Vec<u8>> {
    match dtype {
        DataType::FixedUtf32(_) => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .take_while(|&c| c != 0)
            .map(|c| {
                char::from_u32(c).ok_or_else(|| {
                    unprocessable(format!(
                        "element {index} of the .npy body holds 0x{c:x}, which is not a Unicode code point"
                    ))
                })
            })
            .collect::<ApiResult<String>>()
            .map(String::into_bytes),
        _ => {
            let end = bytes.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            Ok(bytes[..end].to_vec())
        }
    }
}

fn fortran_to_c(data: ArrayBytes, dtype: &DataType, shape: &[u64]) -> ApiResult<ArrayBytes> {
    // F-order data of `shape` is C-order data of the reversed shape; transposing it back gives C order.
    let c_shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let repr = ChunkRepr {
        shape: c_shape.clone(),
        dtype: dtype.clone(),
        fill: FillValue::zero(dtype),
    };
    let codec = crate::zarr::codec::transpose_fortran(c_shape.len());
    codec
        .decode(data, &repr)
        .map_err(|e| unprocessable(e.to_string()))
}
