//! Output formats of array data. Each format is one file implementing
//! [`Output`], registered once in [`FORMATS`]; the data handler chooses one
//! from `format=` or `Accept` and hands it the data the service read.

mod json;
mod npy;
mod png;
mod raw;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;

use super::error::ApiResult;
use super::NoCompression;
use crate::service::{Data, Residence};

pub use json::element_json;
pub use npy::fixed_width;
pub use png::{colormaps, draw, drawable, encode as encode_png, image, Colormap};

/// One way of answering with array data.
pub trait Output: Send + Sync {
    /// Its `format=` name.
    fn name(&self) -> &'static str;
    fn content_type(&self) -> &'static str;
    /// Where the answer is built, which decides its size limit and whether
    /// the data arrives whole or slab by slab.
    fn residence(&self) -> Residence {
        Residence::Streamed
    }
    /// Whether only fixed-size data types can be carried (checked before
    /// anything is read).
    fn fixed_size_only(&self) -> bool {
        false
    }
    /// Memory `encode` needs per element beyond the data and the encoding
    /// `residence` declares (an image's drawing), reserved with the read
    /// before anything is read.
    fn encoding_per_element(&self) -> u64 {
        0
    }
    /// The response carrying `data`.
    fn encode(&self, data: Data, render: &Render) -> ApiResult<Response>;
    /// A read's error as this format words it (images say a type cannot
    /// be drawn where other formats say it cannot be carried).
    fn explain(&self, error: super::error::ApiError) -> super::error::ApiError {
        error
    }
}

/// How formats that draw (images) turn values into colours: the request's
/// `cmap`, `vmin`, `vmax` and `scale`, and the server's pixel limit.
#[derive(Debug, Clone, Default)]
pub struct Render {
    pub cmap: Option<String>,
    pub vmin: Option<f64>,
    pub vmax: Option<f64>,
    pub scale: Option<String>,
    pub max_pixels: u64,
}

/// Every format; the first is the default.
pub const FORMATS: &[&dyn Output] = &[&npy::Npy, &json::Json, &raw::Raw, &png::Png];

/// The format `format=` names (which wins), or the first whose content type
/// `Accept` lists; `.npy` when neither says.
pub fn choose(param: Option<&str>, accept: Option<&str>) -> Result<&'static dyn Output, String> {
    if let Some(name) = param {
        return FORMATS
            .iter()
            .find(|f| f.name() == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = FORMATS.iter().map(|f| f.name()).collect();
                format!("format '{name}' is not {}", names.join(", "))
            });
    }
    let accept = accept.unwrap_or("");
    Ok(FORMATS
        .iter()
        .find(|f| accept.contains(f.content_type()))
        .copied()
        .unwrap_or(FORMATS[0]))
}

/// A binary answer: its type, length when known, the shape and dtype as
/// headers, and never compressed.
fn binary(
    body: Body,
    content_type: &'static str,
    (dtype, shape): (&crate::zarr::DataType, &[u64]),
    length: Option<u64>,
) -> Response {
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(len) = length {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    let shape = shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    if let Ok(v) = HeaderValue::from_str(&shape) {
        h.insert("x-zarr-shape", v);
    }
    let dtype = dtype.npy_descr().trim_matches('\'').to_string();
    // A structured dtype of thousands of fields would make a header most
    // clients refuse; the `.npy` header carries it whatever its size.
    if dtype.len() <= MAX_DTYPE_HEADER {
        if let Ok(v) = HeaderValue::from_str(&dtype) {
            h.insert("x-zarr-dtype", v);
        }
    }
    response.extensions_mut().insert(NoCompression);
    response
}

/// The longest dtype sent as `X-Zarr-Dtype`.
const MAX_DTYPE_HEADER: usize = 4096;

/// Stream slabs after a head (an `.npy` header, or nothing).
fn slab_body(
    head: Vec<u8>,
    first: bytes::Bytes,
    rest: futures::stream::BoxStream<'static, crate::service::Result<bytes::Bytes>>,
) -> Body {
    use futures::StreamExt;
    let head = futures::stream::iter([
        Ok::<bytes::Bytes, std::io::Error>(bytes::Bytes::from(head)),
        Ok(first),
    ]);
    // The status is sent by now: the client sees a short body, the operator
    // sees why in the log.
    Body::from_stream(head.chain(rest.map(|r| {
        r.map_err(|e| {
            tracing::warn!(error = %e, "a streamed response ended early");
            std::io::Error::other(e)
        })
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_name_and_accept() {
        assert_eq!(
            choose(None, Some("application/json")).unwrap().name(),
            "json"
        );
        assert_eq!(
            choose(Some("raw"), Some("application/json"))
                .unwrap()
                .name(),
            "raw"
        );
        assert_eq!(choose(None, None).unwrap().name(), "npy");
        assert!(choose(Some("csv"), None).is_err());
    }
}
