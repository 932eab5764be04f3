//! Which responses are compressed: text, never array data or stored values.

use axum::http::{header, StatusCode};

use super::NoCompression;

/// Whether a response is compressed (as a type, so the stack can be named).
pub type Compressible =
    fn(StatusCode, axum::http::Version, &axum::http::HeaderMap, &axum::http::Extensions) -> bool;

/// Only text (JSON, HTML, scripts, YAML, SVG) is compressed; array data and stored values never
/// are (compressing binary data costs more than it saves, and ranges must stay exact).
pub fn compressible(
    _: StatusCode,
    _: axum::http::Version,
    headers: &axum::http::HeaderMap,
    extensions: &axum::http::Extensions,
) -> bool {
    if extensions.get::<NoCompression>().is_some() || headers.contains_key(header::CONTENT_RANGE) {
        return false;
    }
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with("application/json")
                || t.starts_with("text/")
                || t.starts_with("application/yaml")
                || t.starts_with("image/svg+xml")
        })
}
