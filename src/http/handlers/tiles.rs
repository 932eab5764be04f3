//! OGC API – Tiles and XYZ tiles of georeferenced arrays:
//! `/tiles/{array}/{tileMatrixSet}/{z}/{x}/{y}.png` (also `.jpg`,
//! `.webp`), the tileset's metadata (`/tiles/{array}/{tileMatrixSet}`),
//! its TileJSON (`.../tilejson.json`), the tilesets of an array
//! (`/tiles/{array}`), its legend (`/tiles/{array}/legend.png`), and the
//! tile matrix sets themselves (`/tiles/tileMatrixSets[/{id}]`).

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};

use super::maps;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::ApiPath;
use crate::http::output::map::{self as drawing, Picture};
use crate::http::state::AppState;
use crate::service::tms::{TileMatrixSet, MAX_ZOOM, TILE_MATRIX_SETS, TILE_SIZE};
use crate::service::MapLayer;
use crate::service::Target;

fn pairs(query: Option<String>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn unknown_tms(id: &str) -> ApiError {
    let ids: Vec<&str> = TILE_MATRIX_SETS.iter().map(|t| t.id).collect();
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "unknown_tile_matrix_set",
        format!(
            "'{id}' is not a tile matrix set zarrd serves (it serves {})",
            ids.join(", ")
        ),
    )
}

/// `GET /tiles/tileMatrixSets`.
pub async fn matrix_sets(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let base = maps::base_url(&state, &headers);
    maps::linked(json!({
        "tileMatrixSets": TILE_MATRIX_SETS.iter().map(|t| json!({
            "id": t.id,
            "title": t.title,
            "uri": t.uri,
            "links": [{
                "rel": "self",
                "type": "application/json",
                "href": format!("{base}/tiles/tileMatrixSets/{}", t.id),
            }],
        })).collect::<Vec<_>>()
    }))
}

/// `GET /tiles/tileMatrixSets/{id}`: the set as OGC's 2D Tile Matrix Set
/// standard (2.0) writes it.
pub async fn matrix_set(Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let tms = TileMatrixSet::by_id(&id).ok_or_else(|| unknown_tms(&id))?;
    let matrices: Vec<Value> = (0..=MAX_ZOOM)
        .filter_map(|z| tms.matrix(z))
        .map(|m| {
            json!({
                "id": m.zoom.to_string(),
                "scaleDenominator": m.scale_denominator,
                "cellSize": m.cell_size,
                "cornerOfOrigin": "topLeft",
                "pointOfOrigin": [m.origin.0, m.origin.1],
                "tileWidth": TILE_SIZE,
                "tileHeight": TILE_SIZE,
                "matrixWidth": m.columns,
                "matrixHeight": m.rows,
            })
        })
        .collect();
    let axes = if tms.crs().is_degrees() {
        ["Lon", "Lat"]
    } else {
        ["X", "Y"]
    };
    Ok(Json(json!({
        "id": tms.id,
        "title": tms.title,
        "uri": tms.uri,
        "crs": tms.crs_uri,
        "orderedAxes": axes,
        "tileMatrices": matrices,
    })))
}

/// What a `/tiles/{path}` request names.
#[derive(Debug, PartialEq)]
enum Asked<'a> {
    Tile {
        array: &'a str,
        tms: TileMatrixSet,
        z: u32,
        x: u64,
        y: u64,
        picture: Picture,
    },
    TileJson(&'a str, TileMatrixSet),
    Tileset(&'a str, TileMatrixSet),
    Legend(&'a str),
    Tilesets(&'a str),
}

fn bad_tile(message: String) -> ApiError {
    ApiError::bad_request("bad_tile", message)
}

/// Reads a request's path from its end: the array's path may hold any
/// number of segments before the tile's.
fn asked(path: &str) -> ApiResult<Asked<'_>> {
    let path = path.trim_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let n = segments.len();
    let prefix = |k: usize| -> &str {
        let len: usize = segments[..n - k].iter().map(|s| s.len() + 1).sum();
        &path[..len.saturating_sub(1)]
    };
    let last = segments[n - 1];
    if last == "legend.png" && n >= 2 {
        return Ok(Asked::Legend(prefix(1)));
    }
    if last == "tilejson.json" && n >= 3 {
        let tms =
            TileMatrixSet::by_id(segments[n - 2]).ok_or_else(|| unknown_tms(segments[n - 2]))?;
        return Ok(Asked::TileJson(prefix(2), tms));
    }
    if let Some((y, ext)) = last.rsplit_once('.') {
        if n >= 5 && y.bytes().all(|b| b.is_ascii_digit()) && !y.is_empty() {
            let picture = Picture::by_extension(ext).ok_or_else(|| {
                bad_tile(format!("tiles come as .png, .jpg or .webp, not .{ext}"))
            })?;
            let tms = TileMatrixSet::by_id(segments[n - 4])
                .ok_or_else(|| unknown_tms(segments[n - 4]))?;
            let int = |name: &str, s: &str| -> ApiResult<u64> {
                s.parse::<u64>()
                    .map_err(|_| bad_tile(format!("{name} '{s}' is not a tile index")))
            };
            let z = int("zoom", segments[n - 3])?;
            let z = u32::try_from(z)
                .ok()
                .filter(|z| *z <= MAX_ZOOM)
                .ok_or_else(|| bad_tile(format!("zoom {z} is past the deepest, {MAX_ZOOM}")))?;
            return Ok(Asked::Tile {
                array: prefix(4),
                tms,
                z,
                x: int("x", segments[n - 2])?,
                y: int("y", y)?,
                picture,
            });
        }
    }
    if n >= 2 {
        if let Some(tms) = TileMatrixSet::by_id(last) {
            return Ok(Asked::Tileset(prefix(1), tms));
        }
    }
    Ok(Asked::Tilesets(path))
}

/// `GET /tiles/{path}`.
pub async fn tiles(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    caller: Option<axum::Extension<Caller>>,
) -> ApiResult<Response> {
    let asked = asked(&path)?;
    let array = match &asked {
        Asked::Tile { array, .. }
        | Asked::TileJson(array, _)
        | Asked::Tileset(array, _)
        | Asked::Legend(array)
        | Asked::Tilesets(array) => *array,
    };
    maps::may_place(array, caller.clone())?;
    match asked {
        Asked::Tile {
            array,
            tms,
            z,
            x,
            y,
            picture,
        } => {
            let (q, _) = maps::parse(pairs(query), &[], array, caller)?;
            let layer = maps::layer(&state, array).await?;
            let bounds = tms
                .tile_bounds(z, x, y)
                .map_err(|e| ApiError::new(axum::http::StatusCode::NOT_FOUND, "no_such_tile", e))?;
            let target = Target {
                crs: tms.crs(),
                bounds,
                width: TILE_SIZE,
                height: TILE_SIZE,
            };
            let bytes = maps::draw(&state, &layer, &q, &target, picture).await?;
            let cache = maps::cache_control(&state, &layer);
            Ok(drawing::answer(
                bytes,
                picture.media_type(),
                &headers,
                cache,
            ))
        }
        Asked::Legend(array) => {
            let (q, rest) = maps::parse(pairs(query), &["width", "height"], array, caller)?;
            let size = |name: &str, default: u32| -> ApiResult<u32> {
                rest.iter()
                    .find(|(k, _)| k == name)
                    .map_or(Ok(default), |(_, v)| {
                        v.parse().map_err(|_| {
                            ApiError::bad_request(
                                "bad_size",
                                format!("{name}: '{v}' is not a size in pixels"),
                            )
                        })
                    })
            };
            let (width, height) = (size("width", 256)?, size("height", 48)?);
            let layer = maps::layer(&state, array).await?;
            let bytes = maps::legend(&state, &layer, &q, width, height).await?;
            let cache = maps::cache_control(&state, &layer);
            Ok(drawing::answer(bytes, "image/png", &headers, cache))
        }
        Asked::TileJson(array, tms) => {
            // The query is carried onto the tiles: refused here if they would refuse it.
            let (q, _) = maps::parse(pairs(query.clone()), &[], array, caller)?;
            let layer = maps::layer(&state, array).await?;
            state.service.check_map_query(&layer, &q.query).await?;
            q.drawing.style((0.0, 1.0))?;
            let base = maps::base_url(&state, &headers);
            Ok(maps::linked(tilejson(&layer, tms, &base, query.as_deref())))
        }
        Asked::Tileset(array, tms) => {
            let layer = maps::layer(&state, array).await?;
            let base = maps::base_url(&state, &headers);
            Ok(maps::linked(tileset(&layer, tms, &base)))
        }
        Asked::Tilesets(array) => {
            let layer = maps::layer(&state, array).await?;
            let base = maps::base_url(&state, &headers);
            let sets: Vec<Value> = TILE_MATRIX_SETS
                .iter()
                .map(|t| tileset(&layer, *t, &base))
                .collect();
            Ok(maps::linked(json!({ "tilesets": sets })))
        }
    }
}

/// The zooms a layer is drawn at: from 0 to the first whose pixels are
/// no larger than its finest cells.
fn max_zoom(layer: &MapLayer, tms: TileMatrixSet) -> u32 {
    layer
        .grid()
        .cell_size_in(&tms.crs())
        .map_or(0, |cell| tms.zoom_for(cell))
}

fn tile_template(layer: &MapLayer, tms: TileMatrixSet, base: &str) -> String {
    format!(
        "{base}/tiles/{}/{}",
        maps::url_path(layer.path.as_str()),
        tms.id
    )
}

/// TileJSON 3.0.0, for MapLibre, Leaflet and QGIS's XYZ layers; the
/// request's query (selection and drawing) carried onto the tiles.
fn tilejson(layer: &MapLayer, tms: TileMatrixSet, base: &str, query: Option<&str>) -> Value {
    let suffix = query
        .filter(|q| !q.is_empty())
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let [w, s, e, n] = maps::bounds_degrees(layer);
    let maxzoom = max_zoom(layer, tms);
    json!({
        "tilejson": "3.0.0",
        "name": layer.path.as_str(),
        "description": layer.attributes.get("long_name").cloned().unwrap_or(Value::Null),
        "scheme": "xyz",
        "tiles": [format!("{}/{{z}}/{{x}}/{{y}}.png{suffix}", tile_template(layer, tms, base))],
        "minzoom": 0,
        "maxzoom": maxzoom,
        "bounds": [w, s, e, n],
        "center": [(w + e) / 2.0, (s + n) / 2.0, maxzoom.min(2)],
        "legend": format!("{base}/tiles/{}/legend.png{suffix}", maps::url_path(layer.path.as_str())),
    })
}

/// The tileset's metadata, as OGC API – Tiles describes one.
fn tileset(layer: &MapLayer, tms: TileMatrixSet, base: &str) -> Value {
    let [w, s, e, n] = maps::bounds_degrees(layer);
    let maxzoom = max_zoom(layer, tms);
    let root = tile_template(layer, tms, base);
    json!({
        "title": format!("{} ({})", layer.path, tms.id),
        "dataType": "map",
        "crs": tms.crs_uri,
        "tileMatrixSetURI": tms.uri,
        "boundingBox": {
            "lowerLeft": [w, s],
            "upperRight": [e, n],
            "crs": "http://www.opengis.net/def/crs/OGC/1.3/CRS84",
        },
        "tileMatrixSetLimits": (0..=maxzoom).filter_map(|z| tms.matrix(z)).map(|m| json!({
            "tileMatrix": m.zoom.to_string(),
            "minTileRow": 0,
            "maxTileRow": m.rows - 1,
            "minTileCol": 0,
            "maxTileCol": m.columns - 1,
        })).collect::<Vec<_>>(),
        "links": [
            {"rel": "self", "type": "application/json", "href": root},
            {
                "rel": "http://www.opengis.net/def/rel/ogc/1.0/tiling-scheme",
                "type": "application/json",
                "href": format!("{base}/tiles/tileMatrixSets/{}", tms.id),
            },
            {
                "rel": "item",
                "type": "image/png",
                "templated": true,
                "href": format!("{root}/{{tileMatrix}}/{{tileCol}}/{{tileRow}}.png"),
            },
            {"rel": "describedby", "type": "application/json", "href": format!("{root}/tilejson.json")},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_from_their_end() {
        let t = asked("a/b/WebMercatorQuad/3/4/5.png").unwrap();
        assert!(matches!(
            t,
            Asked::Tile {
                array: "a/b",
                z: 3,
                x: 4,
                y: 5,
                picture: Picture::Png,
                ..
            }
        ));
        assert!(matches!(
            asked("t2m/WorldCRS84Quad/0/1/0.webp").unwrap(),
            Asked::Tile { array: "t2m", .. }
        ));
        assert!(matches!(
            asked("a/WebMercatorQuad/tilejson.json").unwrap(),
            Asked::TileJson("a", _)
        ));
        assert!(matches!(
            asked("g/a/WebMercatorQuad").unwrap(),
            Asked::Tileset("g/a", _)
        ));
        assert!(matches!(
            asked("g/a/legend.png").unwrap(),
            Asked::Legend("g/a")
        ));
        assert!(matches!(asked("g/a").unwrap(), Asked::Tilesets("g/a")));
        assert_eq!(
            asked("a/Nope/1/0/0.png").unwrap_err().code,
            "unknown_tile_matrix_set"
        );
        assert_eq!(
            asked("a/WebMercatorQuad/x/0/0.png").unwrap_err().code,
            "bad_tile"
        );
        assert_eq!(
            asked("a/WebMercatorQuad/1/0/0.gif").unwrap_err().code,
            "bad_tile"
        );
        assert_eq!(
            asked("a/WebMercatorQuad/99/0/0.png").unwrap_err().code,
            "bad_tile"
        );
    }
}
