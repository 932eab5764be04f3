//! What the map endpoints (tiles, WMS) share: their query (the labelled
//! selection of the other dimensions and how to draw), a layer drawn as a
//! picture, its legend, the Cache-Control of its pictures, and the
//! server's own address for the links their documents carry.

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::labels;
use crate::http::output::map::{self, Drawing, Picture};
use crate::http::state::AppState;
use crate::service::{MapLayer, Query, Reservation};
use crate::service::{Resampling, Target};
use crate::store::node_path;

/// A map request's parameters: the other dimensions' selection and the
/// drawing; `extra` are the endpoint's own.
pub struct MapQuery {
    pub query: Query,
    pub drawing: Drawing,
}

/// The labelled selection and drawing parameters of `pairs`; any other
/// parameter is refused unless `extra` names it (then returned).
pub fn parse(
    pairs: Vec<(String, String)>,
    extra: &[&str],
    path: &str,
    caller: Option<axum::Extension<Caller>>,
) -> ApiResult<(MapQuery, Vec<(String, String)>)> {
    let mut drawing = Drawing::default();
    let mut labelled = Vec::new();
    let mut rest = Vec::new();
    for (k, v) in pairs {
        if drawing.take(&k, &v)? {
            continue;
        }
        if ["sel.", "isel.", "tolerance."]
            .iter()
            .any(|p| k.starts_with(p))
            && labels::is_label_param(&k)
        {
            labelled.push((k, v));
        } else if extra.contains(&k.as_str()) {
            rest.push((k, v));
        } else {
            let mut known: Vec<&str> = map::DRAWING_PARAMS.to_vec();
            known.extend(["sel.{dim}", "isel.{dim}", "tolerance.{dim}"]);
            known.extend(extra);
            return Err(ApiError::bad_request(
                "bad_query",
                format!(
                    "unknown parameter '{k}' (the parameters are {})",
                    known.join(", ")
                ),
            ));
        }
    }
    let mut query = labels::parse(&labelled)?;
    query.without_coordinates = !super::data::may_read_group(path, caller);
    Ok((MapQuery { query, drawing }, rest))
}

/// Refuses a caller who may not read the group beside the array at
/// `path`: a map places the array by the coordinates there, and its
/// pictures, bounds and values would tell them.
pub fn may_place(path: &str, caller: Option<axum::Extension<Caller>>) -> ApiResult<()> {
    if super::data::may_read_group(path, caller) {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::FORBIDDEN,
        "forbidden",
        format!("a map of '{path}' is placed by the coordinates beside it, in a group this token may not read"),
    ))
}

pub async fn layer(state: &AppState, path: &str) -> ApiResult<Arc<MapLayer>> {
    let key = node_path(path)?;
    Ok(state.service.map_layer(&key).await?)
}

/// The layer drawn over `target` as `picture`.
pub async fn draw(
    state: &AppState,
    layer: &MapLayer,
    q: &MapQuery,
    target: &Target,
    picture: Picture,
) -> ApiResult<Vec<u8>> {
    let (rgba, _held) = paint(state, layer, q, target).await?;
    map::encode(picture, target.width, target.height, &rgba)
}

/// The layer drawn over `target`, as RGBA, with the memory it holds.
pub async fn paint(
    state: &AppState,
    layer: &MapLayer,
    q: &MapQuery,
    target: &Target,
) -> ApiResult<(Vec<u8>, Reservation)> {
    let style = style(state, layer, q).await?;
    let resampling = q.drawing.resampling.unwrap_or(Resampling::Nearest);
    let raster = state
        .service
        .render_map(layer, &q.query, target, resampling)
        .await?;
    // The raster's reservation covers the colours and the file too.
    let rgba = map::paint(&raster.values, &style);
    Ok((rgba, raster.reservation))
}

/// The drawing's style, its range found where the request gives none.
pub async fn style(
    state: &AppState,
    layer: &MapLayer,
    q: &MapQuery,
) -> ApiResult<crate::http::output::image::Style> {
    let range = if q.drawing.has_range() {
        (0.0, 1.0)
    } else {
        state
            .service
            .map_range(layer, &q.query, q.drawing.is_log())
            .await?
    };
    q.drawing.style(range)
}

/// The layer's legend as a PNG.
pub async fn legend(
    state: &AppState,
    layer: &MapLayer,
    q: &MapQuery,
    width: u32,
    height: u32,
) -> ApiResult<Vec<u8>> {
    if !(32..=2048).contains(&width) || !(24..=512).contains(&height) {
        return Err(ApiError::bad_request(
            "bad_size",
            format!("a legend of {width} x {height}: give a width of 32 to 2048 and a height of 24 to 512"),
        ));
    }
    let style = style(state, layer, q).await?;
    let text = |k: &str| layer.attributes.get(k).and_then(|v| v.as_str());
    let name = text("long_name")
        .or(text("standard_name"))
        .unwrap_or(layer.path.name());
    let title = match text("units") {
        Some(u) => format!("{name} ({u})"),
        None => name.to_string(),
    };
    let rgba = map::legend(&style, &title, width, height);
    map::encode(Picture::Png, width, height, &rgba)
}

/// The Cache-Control of pictures of `layer`: immutable when it is read at
/// an Icechunk snapshot, else the policy of its mount.
pub fn cache_control(state: &AppState, layer: &MapLayer) -> HeaderValue {
    if layer.immutable {
        return HeaderValue::from_static("public, max-age=31536000, immutable");
    }
    state.cache_control.of(layer.path.as_str()).clone()
}

/// The server's address as the client reached it, for absolute links:
/// `X-Forwarded-Proto` and `X-Forwarded-Host` (as a proxy in front sets
/// them), else the scheme served and `Host`. Only an `http`/`https`
/// scheme and a host of name characters and a port are taken, so a link
/// cannot be made to point at script; answers built from them say so in
/// `Vary` ([`VARY`]).
pub fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').next().unwrap_or("").trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let host_like = |h: &String| {
        h.len() <= 255
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
    };
    let scheme = get("x-forwarded-proto")
        .filter(|p| p == "http" || p == "https")
        .unwrap_or_else(|| {
            if state.config.tls_cert.is_some() {
                "https".into()
            } else {
                "http".into()
            }
        });
    let host = get("x-forwarded-host")
        .filter(host_like)
        .or_else(|| get(header::HOST.as_str()).filter(host_like))
        .unwrap_or_else(|| "localhost".into());
    format!("{scheme}://{host}")
}

/// The request headers a document with absolute links was built from.
pub const VARY: &str = "Host, X-Forwarded-Host, X-Forwarded-Proto";

/// What a path segment keeps unescaped in a URL (RFC 3986's unreserved).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a path's segments for a URL.
pub fn url_path(path: &str) -> String {
    path.split('/')
        .map(|s| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Longitudes as web maps want bounds: within -180 to 180.
pub fn bounds_degrees(layer: &MapLayer) -> [f64; 4] {
    let [mut w, s, mut e, n] = layer.grid().bounds_degrees();
    if e - w >= 359.999 {
        (w, e) = (-180.0, 180.0);
    } else if w >= 180.0 {
        (w, e) = (w - 360.0, e - 360.0);
    } else if e > 180.0 {
        (w, e) = (-180.0, 180.0);
    }
    [w.max(-180.0), s.max(-90.0), e.min(180.0), n.min(90.0)]
}

/// What `/api/v1/meta` says of an array as a map: where it is and where
/// its tiles are, or why it is not one.
pub async fn map_json(state: &AppState, path: &crate::store::StoreKey) -> serde_json::Value {
    use serde_json::json;
    match state.service.map_layer(path).await {
        Ok(layer) => {
            let grid = layer.grid();
            let base = format!("/tiles/{}", url_path(path.as_str()));
            json!({
                "georeferenced": true,
                "crs": grid.crs.name,
                "x": layer.dims[grid.x_dim],
                "y": layer.dims[grid.y_dim],
                "bounds": bounds_degrees(&layer),
                "levels": layer.levels.iter().map(|l| l.path.as_str()).collect::<Vec<_>>(),
                "tiles": format!("{base}/WebMercatorQuad/{{z}}/{{x}}/{{y}}.png"),
                "tilejson": format!("{base}/WebMercatorQuad/tilejson.json"),
                "legend": format!("{base}/legend.png"),
            })
        }
        // Metadata describes the array whatever its map would say.
        Err(e) => json!({
            "georeferenced": false,
            "why": e.message,
        }),
    }
}

/// A JSON document with absolute links: it varies with [`VARY`].
pub fn linked(document: serde_json::Value) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut r = axum::Json(document).into_response();
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static(VARY));
    r
}
