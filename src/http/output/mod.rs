//! How answers are built. The output formats of array data: each format
//! is one file implementing [`Output`], registered once in [`FORMATS`],
//! that reads its own query parameters and builds its own [`Encode`]r; the
//! data handler chooses one from `format=` or `Accept` and hands the
//! encoder the data the service read. Beside them: drawing ([`image`]),
//! thumbnails, Cache-Control of stored values, and the marks responses
//! carry for the layers around the handlers.

mod arrow;
pub mod cache_control;
pub mod compression;
pub mod coverage;
mod csv;
pub mod dap;
mod geotiff;
pub mod image;
mod json;
pub mod map;
pub mod netcdf;
mod npy;
#[cfg(feature = "parquet")]
mod parquet;
mod png;
mod raw;
mod table;
pub mod thumbnail;
pub mod xml;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::Config;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Data, Residence};

pub use json::element_json;
pub use npy::fixed_width;

/// Marks a response that must not be compressed (array data, stored values).
#[derive(Debug, Clone, Copy)]
pub struct NoCompression;

/// Marks a response that streams for as long as its client stays (a
/// watch): it does not hold a place among requests in flight.
#[derive(Debug, Clone, Copy)]
pub struct LongLived;

/// One way of answering with array data.
pub trait Output: Send + Sync {
    /// Its `format=` name.
    fn name(&self) -> &'static str;
    fn content_type(&self) -> &'static str;
    /// The request parameters it reads, beyond those of the selection.
    fn params(&self) -> &'static [&'static str] {
        &[]
    }
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
    /// Memory the encoder needs per element beyond the data and the
    /// encoding `residence` declares (an image's drawing), reserved with
    /// the read before anything is read.
    fn encoding_per_element(&self) -> u64 {
        0
    }
    /// Whether it carries the answer's coordinates (read for it, from
    /// the coordinate arrays, when the array names its dimensions).
    fn wants_axes(&self) -> bool {
        false
    }
    /// The encoder of one request, its parameters read and checked before
    /// anything is read.
    fn encoder(&self, params: &Params, config: &Config) -> ApiResult<Box<dyn Encode>>;
    /// A read's error as this format words it (images say a type cannot
    /// be drawn where other formats say it cannot be carried).
    fn explain(&self, error: ApiError) -> ApiError {
        error
    }
}

/// Turns the data a request read into its answer.
pub trait Encode: Send {
    fn encode(self: Box<Self>, data: Data) -> ApiResult<Response>;
}

impl<F: FnOnce(Data) -> ApiResult<Response> + Send> Encode for F {
    fn encode(self: Box<Self>, data: Data) -> ApiResult<Response> {
        (*self)(data)
    }
}

/// The request parameters that are not the selection's, for formats to
/// read their own: from a query (every value text) or a JSON body.
#[derive(Debug, Default)]
pub struct Params {
    values: Map<String, Value>,
    from_body: bool,
}

impl Params {
    /// A query's pairs; a name given twice is refused, as every other
    /// query parameter is.
    pub fn from_query(pairs: impl IntoIterator<Item = (String, String)>) -> ApiResult<Self> {
        let mut values = Map::new();
        for (k, v) in pairs {
            if values.contains_key(&k) {
                return Err(ApiError::bad_request(
                    "bad_query",
                    format!("query parameters: '{k}' is given more than once"),
                ));
            }
            values.insert(k, Value::String(v));
        }
        Ok(Params {
            values,
            from_body: false,
        })
    }

    pub fn from_body(values: Map<String, Value>) -> Self {
        Params {
            values,
            from_body: true,
        }
    }

    /// Whether they came in a JSON body (whose errors are 422s).
    pub fn is_body(&self) -> bool {
        self.from_body
    }

    /// The names given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// The parameters `names` as `T` (whose fields are all optional):
    /// errors name the parameter, as 400s of the query or 422s of the body.
    pub fn read<T: DeserializeOwned>(&self, names: &[&str]) -> ApiResult<T> {
        let mine: Vec<(&String, &Value)> = self
            .values
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .collect();
        self.decode(&mine).map_err(|e| {
            // Which one: the first that cannot be read alone.
            let named = mine
                .iter()
                .find_map(|one| self.decode::<T>(&[*one]).err().map(|e| (one.0, e)));
            let message = match named {
                Some((name, e)) => format!("'{name}': {e}"),
                None => e,
            };
            if self.from_body {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "bad_body",
                    format!("the body's parameters: {message}"),
                )
            } else {
                ApiError::bad_request("bad_query", format!("query parameters: {message}"))
            }
        })
    }

    /// `pairs` as `T`: from JSON values, or, from a query, through the
    /// query's own decoder, so numbers parse as they do in every other
    /// query parameter.
    fn decode<T: DeserializeOwned>(&self, pairs: &[(&String, &Value)]) -> Result<T, String> {
        if self.from_body {
            let object: Map<String, Value> = pairs
                .iter()
                .map(|(k, v)| ((*k).clone(), (*v).clone()))
                .collect();
            serde_json::from_value(Value::Object(object)).map_err(|e| e.to_string())
        } else {
            let text = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(
                    pairs
                        .iter()
                        .map(|(k, v)| (k, v.as_str().unwrap_or_default())),
                )
                .finish();
            serde_urlencoded::from_str(&text).map_err(|e| e.to_string())
        }
    }
}

/// Every format; the first is the default.
pub const FORMATS: &[&dyn Output] = &[
    &npy::Npy,
    &json::Json,
    &raw::Raw,
    &png::Png,
    &csv::Csv,
    &netcdf::NETCDF,
    &geotiff::GEOTIFF,
    &arrow::ARROW,
    #[cfg(feature = "parquet")]
    &parquet::PARQUET,
];

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

/// A format whose answer is a file built whole from the data and its
/// coordinates (NetCDF, GeoTIFF, Arrow, Parquet): read whole, of fixed-size
/// types only, without parameters of its own. Such a format is one of
/// these and the function that builds its bytes.
pub struct File {
    pub name: &'static str,
    pub content_type: &'static str,
    /// Bytes held while building per byte of data (a table repeats every
    /// dimension's label beside each value).
    pub expansion: u64,
    pub build: fn(Data) -> ApiResult<Built>,
}

/// A file's bytes and, where it has one, the name to save it as.
pub struct Built {
    pub bytes: Vec<u8>,
    pub filename: Option<String>,
}

impl Output for File {
    fn name(&self) -> &'static str {
        self.name
    }
    fn content_type(&self) -> &'static str {
        self.content_type
    }
    fn residence(&self) -> Residence {
        Residence::InMemory {
            expansion: self.expansion,
        }
    }
    fn fixed_size_only(&self) -> bool {
        true
    }
    fn wants_axes(&self) -> bool {
        true
    }
    fn encoder(&self, _: &Params, _: &Config) -> ApiResult<Box<dyn Encode>> {
        let (build, content_type) = (self.build, self.content_type);
        Ok(Box::new(move |data| {
            let built = build(data)?;
            Ok(file(built.bytes, content_type, built.filename))
        }))
    }
}

/// A file built whole: its type, exact length and, when named, the name to
/// save it as; never compressed.
fn file(bytes: Vec<u8>, content_type: &'static str, filename: Option<String>) -> Response {
    let length = bytes.len() as u64;
    let mut response = Response::new(Body::from(bytes));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Some(v) =
        filename.and_then(|f| HeaderValue::from_str(&format!("attachment; filename=\"{f}\"")).ok())
    {
        h.insert(header::CONTENT_DISPOSITION, v);
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
    // sees why in the log (`error::request_id_in_errors` logs it).
    Body::from_stream(head.chain(rest.map(|r| r.map_err(std::io::Error::other))))
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
        assert!(choose(Some("tsv"), None).is_err());
        assert_eq!(choose(None, Some("text/csv")).unwrap().name(), "csv");
        assert_eq!(
            choose(None, Some("application/x-netcdf")).unwrap().name(),
            "netcdf"
        );
    }
}
