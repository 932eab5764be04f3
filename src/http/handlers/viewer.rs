//! The web viewer: one page (`/`, and `/view/{path}` for deep links) and its
//! files, built into the binary so the server needs nothing beside it. The
//! page holds no data: it reads the hierarchy through `/api/v1/` with the
//! caller's token, so it is public, like the API's description.
//!
//! Adding a file to the page is one line in [`ASSETS`]; a unit test checks
//! that the table and the `viewer/` directory list the same files.

use std::path::Path;
use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::extract::ApiPath;
use crate::http::state::AppState;

struct Asset {
    name: &'static str,
    bytes: &'static [u8],
}

macro_rules! assets {
    ($($name:literal),* $(,)?) => {
        &[$(Asset { name: $name, bytes: include_bytes!(concat!("viewer/", $name)) }),*]
    };
}

/// Every file of the page.
static ASSETS: &[Asset] = assets![
    "index.html",
    "api.js",
    "app.js",
    "dims.js",
    "favicon.svg",
    "format.js",
    "heatmap.js",
    "hover.js",
    "lineplot.js",
    "map.js",
    "meta.js",
    "ol-map.js",
    "ol.css",
    "provider.js",
    "snippets.js",
    "state.js",
    "table.js",
    "tree.css",
    "tree.js",
    "viewer.css",
    "views.css",
];

/// The page may run only its own scripts and talk only to this server;
/// images also come from blob URLs (data fetched with the token).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; connect-src 'self'; \
     object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

/// Strong validators of the built-in files, computed once.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", &hex::encode(Sha256::digest(a.bytes))[..32]))
            .collect()
    })
}

/// A plain file name of the directory: no folders, nothing hidden.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("the viewer has no file '{name}'"))
}

/// The file `name`: from `--viewer-dir` when given (read now, never cached,
/// so edits show on reload), else the built-in copy with its validator.
async fn asset(state: &AppState, name: &str, headers: &HeaderMap) -> ApiResult<Response> {
    if !plain_name(name) {
        return Err(not_found(name));
    }
    let mut response = if let Some(dir) = &state.config.viewer_dir {
        let bytes = tokio::fs::read(Path::new(dir).join(name))
            .await
            .map_err(|_| not_found(name))?;
        let mut r = Response::new(Body::from(bytes));
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    } else {
        let i = ASSETS
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| not_found(name))?;
        let etag = &etags()[i];
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
        let mut r = if fresh {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            Response::new(Body::from(ASSETS[i].bytes))
        };
        if let Ok(v) = HeaderValue::from_str(etag) {
            r.headers_mut().insert(header::ETAG, v);
        }
        // Revalidated on every load, so a new server version shows at once.
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if name.ends_with(".html") {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
    }
    Ok(response)
}

/// `GET /`: the page.
pub async fn page(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    asset(&state, "index.html", &headers).await
}

/// `GET /view/{path}`: the page, which opens the node the path names.
pub async fn view(
    State(state): State<AppState>,
    ApiPath(_path): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    asset(&state, "index.html", &headers).await
}

/// `GET /viewer/{file}`: one of the page's files.
pub async fn file(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    asset(&state, &name, &headers).await
}

/// Stops per colormap in `settings.json`: enough for a smooth colorbar.
const STOPS: usize = 64;

/// `GET /viewer/settings.json`: what the page needs to know of this server:
/// the colormaps images are drawn with (as the server draws them) and the
/// largest image it draws.
pub async fn settings(State(state): State<AppState>) -> Response {
    let colormaps: serde_json::Map<String, serde_json::Value> =
        crate::http::output::image::colormaps()
            .map(|(name, colormap)| {
                let stops: Vec<String> = (0..STOPS)
                    .map(|i| {
                        let [r, g, b] = colormap.at(i as f64 / (STOPS - 1) as f64);
                        format!("#{r:02x}{g:02x}{b:02x}")
                    })
                    .collect();
                (name.to_string(), json!(stops))
            })
            .collect();
    axum::Json(json!({
        "colormaps": colormaps,
        "max_pixels": state.config.max_image_pixels,
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_file_of_the_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/handlers/viewer");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for name in &listed {
            assert!(plain_name(name), "{name}");
            assert_ne!(content_type(name), "application/octet-stream", "{name}");
        }
    }

    #[test]
    fn only_plain_names_are_files() {
        for bad in ["", ".env", "../Cargo.toml", "a/b.js", "a\\b", "%2e%2e"] {
            assert!(!plain_name(bad), "{bad}");
        }
        assert!(plain_name("app.js"));
    }
}
