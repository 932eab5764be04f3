//! OGC API – Environmental Data Retrieval under `/edr`: the landing page,
//! conformance, collections (a collection per group holding georeferenced
//! arrays, its parameters those arrays) and their `position`, `area`,
//! `cube`, `radius` and `trajectory` queries, answered as CoverageJSON,
//! GeoJSON, CSV or NetCDF. Places are read by `Service::sample`; the
//! other dimensions (`datetime`, `z`) by the labelled `Query` every
//! endpoint shares. Errors are EDR's `{"code", "description"}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::http::input::credentials::Caller;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use super::maps::{base_url, bounds_degrees, linked, url_path};
use crate::http::error::ApiError;
use crate::http::input::extract::ApiPath;
use crate::http::input::wkt;
use crate::http::output::{coverage, netcdf};
use crate::http::state::AppState;
use crate::service::{Axis, Crs, Interpolation, MapLayer, Place, Query, Sampled};
use crate::store::{node_path, StoreKey};
use crate::zarr::cf::coords::LabelSel;

/// The query types, as the path's last segment names them.
const QUERIES: &[&str] = &["position", "area", "cube", "radius", "trajectory"];
/// EDR's other query types and resources, which zarrd does not serve.
const NOT_SERVED: &[&str] = &["corridor", "items", "locations", "instances"];
const FORMATS: &[&str] = &["CoverageJSON", "GeoJSON", "CSV", "NetCDF"];
const CRS84_WKT: &str = "GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433],AXIS[\"Longitude\",EAST],AXIS[\"Latitude\",NORTH]]";
const CONFORMANCE: &[&str] = &[
    "http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-common-2/1.0/conf/collections",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/core",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/collections",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/json",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/geojson",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/covjson",
    "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/oas30",
];

/// An EDR error document, with the status.
fn edr_error(e: ApiError) -> Response {
    let mut r = (
        e.status,
        Json(json!({"code": e.code, "description": e.message})),
    )
        .into_response();
    if e.status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message)
}

/// The collection a path names (its id: the group's path, `root` for the
/// root), and the query type after it.
fn split(path: &str) -> (&str, Option<&str>) {
    let path = path.trim_matches('/');
    match path.rsplit_once('/') {
        Some((id, last)) if QUERIES.contains(&last) || NOT_SERVED.contains(&last) => {
            (id, Some(last))
        }
        _ => (path, None),
    }
}

/// The store path a request is about, for authorization.
pub fn collection_of(path: &str) -> &str {
    let id = split(path).0;
    if id == "root" {
        ""
    } else {
        id
    }
}

fn group_key(id: &str) -> Result<StoreKey, ApiError> {
    node_path(collection_of(id)).map_err(|e| bad("bad_path", e.to_string()))
}

fn id_of(group: &StoreKey) -> String {
    if group.is_root() {
        "root".into()
    } else {
        group.as_str().to_string()
    }
}

/// `GET /edr`.
pub async fn landing(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let base = base_url(&state, &headers);
    linked(json!({
        "title": "zarrd",
        "description": "OGC API - Environmental Data Retrieval over the georeferenced arrays of this store: a collection per group.",
        "links": [
            {"href": format!("{base}/edr"), "rel": "self", "type": "application/json", "title": "this document"},
            {"href": format!("{base}/openapi.yaml"), "rel": "service-desc", "type": "application/vnd.oai.openapi;version=3.0", "title": "the API description"},
            {"href": format!("{base}/edr/conformance"), "rel": "conformance", "type": "application/json", "title": "conformance classes"},
            {"href": format!("{base}/edr/collections"), "rel": "data", "type": "application/json", "title": "collections"},
        ],
    }))
}

/// `GET /edr/conformance`.
pub async fn conformance() -> Json<Value> {
    Json(json!({ "conformsTo": CONFORMANCE }))
}

/// The layers of each group that holds georeferenced arrays below `root`.
/// Groups the caller may not read whole are left out: a collection tells
/// of all its arrays.
async fn groups(
    state: &AppState,
    root: &StoreKey,
    caller: Option<&Caller>,
) -> Result<BTreeMap<String, Vec<Arc<MapLayer>>>, ApiError> {
    let layers = state.service.map_layers(root).await?;
    let mut by_group: BTreeMap<String, Vec<Arc<MapLayer>>> = BTreeMap::new();
    for layer in layers.iter() {
        let group = layer.path.parent().unwrap_or_else(StoreKey::root);
        let whole = caller.is_none_or(|c| c.rights.reads_all_below(group.as_str()));
        if group.is_at_or_below(root) && whole {
            by_group
                .entry(id_of(&group))
                .or_default()
                .push(layer.clone());
        }
    }
    Ok(by_group)
}

/// `GET /edr/collections`.
pub async fn collections(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
) -> Response {
    let base = base_url(&state, &headers);
    let run = async {
        let groups = groups(&state, &StoreKey::root(), caller.as_deref()).await?;
        let mut list = Vec::new();
        for (id, layers) in &groups {
            list.push(collection_json(&state, &base, id, layers).await?);
        }
        Ok::<_, ApiError>(linked(json!({
            "links": [{"href": format!("{base}/edr/collections"), "rel": "self", "type": "application/json"}],
            "collections": list,
        })))
    };
    run.await.unwrap_or_else(edr_error)
}

/// The first and last labels of an axis.
fn ends(name: &str, c: &crate::service::AxisValues) -> (Value, Value) {
    let axis = Axis {
        name: name.into(),
        coordinate: Some(c.clone()),
    };
    let n = c.values.len();
    (
        axis.label(0).unwrap_or(Value::Null),
        axis.label(n.saturating_sub(1)).unwrap_or(Value::Null),
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn collection_json(
    state: &AppState,
    base: &str,
    id: &str,
    layers: &[Arc<MapLayer>],
) -> Result<Value, ApiError> {
    let mut bbox = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    let mut extent = Map::new();
    let mut parameters = Map::new();
    let mut crs: Vec<String> = vec!["OGC:CRS84".into()];
    // Times (RFC 3339, so they compare as text) and levels of every parameter.
    let mut times: Option<(String, String)> = None;
    let mut levels: Vec<f64> = Vec::new();
    let mut vertical_name: Option<(String, &str)> = None;
    for layer in layers {
        let b = bounds_degrees(layer);
        bbox = [
            bbox[0].min(b[0]),
            bbox[1].min(b[1]),
            bbox[2].max(b[2]),
            bbox[3].max(b[3]),
        ];
        parameters.insert(
            layer.path.name().to_string(),
            coverage::parameter(layer.path.name(), &layer.attributes),
        );
        let native = &layer.grid().crs;
        if let Some(code) = native.epsg.filter(|_| !native.is_degrees()) {
            let name = format!("EPSG:{code}");
            if !crs.contains(&name) {
                crs.push(name);
            }
        }
        for other in &layer.others {
            let Some(c) = &other.coordinate else { continue };
            if other.is_time() {
                let (a, b) = ends(&other.name, c);
                let (a, b) = (coverage::instant(&text(&a)), coverage::instant(&text(&b)));
                times = match times.take() {
                    None => Some((a, b)),
                    Some((x, y)) => Some((x.min(a), y.max(b))),
                };
            } else if other.is_vertical() {
                levels.extend(c.values.iter().copied());
                if vertical_name.is_none() {
                    let down = c.attributes.get("positive").and_then(Value::as_str) == Some("down");
                    vertical_name = Some((other.name.clone(), if down { "down" } else { "up" }));
                }
            }
        }
    }
    if let Some((a, b)) = times {
        extent.insert(
            "temporal".into(),
            json!({
                "interval": [[a, b]],
                "values": [format!("{a}/{b}")],
                "trs": "TIMECRS[\"DateTime\",TDATUM[\"Gregorian Calendar\"],CS[TemporalDateTime,1],AXIS[\"Time (T)\",future]]",
            }),
        );
    }
    if let Some((name, direction)) = vertical_name {
        levels.sort_by(f64::total_cmp);
        levels.dedup();
        let lo = levels.first().copied().unwrap_or(0.0);
        let hi = levels.last().copied().unwrap_or(0.0);
        extent.insert(
            "vertical".into(),
            json!({
                "interval": [[lo.to_string(), hi.to_string()]],
                "values": levels.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                "vrs": format!("VERTCRS[\"{name}\",VDATUM[\"unknown\"],CS[vertical,1],AXIS[\"{name}\",{direction}]]"),
                "name": name,
            }),
        );
    }
    extent.insert(
        "spatial".into(),
        json!({"bbox": [bbox], "crs": CRS84_WKT, "name": "CRS84"}),
    );
    let href = format!("{base}/edr/collections/{}", url_path(id));
    let queries: Map<String, Value> = QUERIES
        .iter()
        .map(|q| {
            let mut variables = json!({
                "title": format!("{q} query"),
                "query_type": q,
                "output_formats": FORMATS,
                "default_output_format": "CoverageJSON",
                "crs_details": [{"crs": "OGC:CRS84", "wkt": CRS84_WKT}],
            });
            if *q == "radius" {
                variables["within_units"] = json!(["km", "m", "mi"]);
            }
            (
                q.to_string(),
                json!({"link": {"href": format!("{href}/{q}"), "rel": "data", "title": format!("{q} query"), "variables": variables}}),
            )
        })
        .collect();
    let mut links = vec![json!({"href": href, "rel": "self", "type": "application/json"})];
    for q in QUERIES {
        links.push(
            json!({"href": format!("{href}/{q}"), "rel": "data", "title": format!("{q} query")}),
        );
    }
    let group = group_key(id)?;
    let title = match state.service.node(&group).await {
        Ok(node) => match &node.meta {
            crate::zarr::metadata::NodeMetadata::Group(g) => g
                .attributes
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        },
        Err(_) => None,
    };
    Ok(json!({
        "id": id,
        "title": title.clone().unwrap_or_else(|| id.to_string()),
        "description": title.unwrap_or_else(|| format!("the georeferenced arrays of '{id}'")),
        "links": links,
        "extent": extent,
        "data_queries": queries,
        "crs": crs,
        "output_formats": FORMATS,
        "parameter_names": parameters,
    }))
}

/// `GET /edr/collections/{path}`: a collection, or one of its queries.
pub async fn collection(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let base = base_url(&state, &headers);
    let (id, asked) = split(&path);
    let run = async {
        let group = group_key(id)?;
        let groups = groups(&state, &group, None).await?;
        let layers = groups.get(&id_of(&group)).ok_or_else(|| {
            ApiError::not_found(format!(
                "no collection '{id}': a collection is a group holding georeferenced arrays"
            ))
        })?;
        match asked {
            None => Ok(linked(collection_json(&state, &base, id, layers).await?)),
            Some(q) => query_collection(&state, layers, q, query.as_deref().unwrap_or("")).await,
        }
    };
    run.await.unwrap_or_else(edr_error)
}

/// The parameters of a query, by name.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, names: &[&str]) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n)))
            .map(|(_, v)| v.as_str())
    }
}

async fn query_collection(
    state: &AppState,
    layers: &[Arc<MapLayer>],
    asked: &str,
    query: &str,
) -> Result<Response, ApiError> {
    if NOT_SERVED.contains(&asked) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_served",
            format!(
                "'{asked}' is an EDR query zarrd does not serve (it serves {})",
                QUERIES.join(", ")
            ),
        ));
    }
    let params = Params(
        url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    );
    let crs = match params.get(&["crs"]) {
        None => Crs::degrees(),
        Some(c) if c.eq_ignore_ascii_case("OGC:CRS84") || c.eq_ignore_ascii_case("CRS84") => {
            Crs::degrees()
        }
        Some(c) => Crs::named(c).map_err(|e| bad("bad_crs", format!("crs: {e}")))?,
    };
    let place = place(asked, &params)?;
    let interpolation = match params.get(&["method"]).unwrap_or("nearest") {
        m if m.eq_ignore_ascii_case("nearest") => Interpolation::Nearest,
        m if m.eq_ignore_ascii_case("linear") && asked == "position" => Interpolation::Linear,
        m => {
            return Err(bad(
                "bad_method",
                format!(
                    "method: '{m}' is not one of nearest, linear (linear for position queries)"
                ),
            ))
        }
    };
    let format = output_format(params.get(&["f"]))?;
    let mut chosen: Vec<&Arc<MapLayer>> =
        match params.get(&["parameter-name", "parameter_names", "parameter-names"]) {
            None => layers.iter().collect(),
            Some(list) if list.split(',').all(|n| n.trim().is_empty()) => {
                return Err(bad("bad_parameter", "parameter-name: names no parameter"))
            }
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| {
                    layers.iter().find(|l| l.path.name() == n).ok_or_else(|| {
                        let names: Vec<&str> = layers.iter().map(|l| l.path.name()).collect();
                        bad(
                            "bad_parameter",
                            format!(
                                "parameter-name: no parameter '{n}' (the collection has {})",
                                names.join(", ")
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
    // Each parameter once, however often it is named.
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|l| seen.insert(l.path.clone()));
    let datetime = params.get(&["datetime"]);
    let z = params.get(&["z"]);
    // What an answer holds per value, in the format it is written as.
    let per_value = match format {
        "GeoJSON" => 200,
        "CSV" => 64,
        "CoverageJSON" => 48,
        _ => 32,
    };
    let limit = state.service.limits().in_memory;
    let mut samples: Vec<Sampled> = Vec::with_capacity(chosen.len());
    let mut held = 0u64;
    for layer in &chosen {
        let q = layer_query(layer, datetime, z)?;
        let s = state
            .service
            .sample(layer, &place, &crs, interpolation, &q, per_value)
            .await?;
        // The parameters together, not each alone, are held to the limit.
        held = held.saturating_add((s.values.len() as u64).saturating_mul(per_value));
        if held > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("these parameters here would take more than the {limit} bytes one answer may hold: ask for fewer parameters, a smaller area or fewer times"),
            ));
        }
        samples.push(s);
    }
    let (x_name, y_name) = match (chosen.first(), &place) {
        (Some(l), p) if !matches!(p, Place::Trajectory(_)) => {
            let g = l.grid();
            (l.dims[g.x_dim].clone(), l.dims[g.y_dim].clone())
        }
        _ => ("x".to_string(), "y".to_string()),
    };
    Ok(match format {
        "CoverageJSON" => typed(
            coverage::coverage_json(&samples).into_bytes(),
            "application/prs.coverage+json",
        ),
        "GeoJSON" => typed(
            coverage::geojson(&samples).into_bytes(),
            "application/geo+json",
        ),
        "CSV" => typed(
            coverage::csv(&samples, &x_name, &y_name).into_bytes(),
            "text/csv; charset=utf-8",
        ),
        _ => {
            let extra = trajectory_coordinates(&samples, &x_name, &y_name);
            let mut vars: Vec<netcdf::Numbers> = samples
                .iter()
                .map(|s| netcdf::Numbers {
                    name: &s.name,
                    axes: &s.axes,
                    shape: &s.shape,
                    values: &s.values,
                    attributes: &s.attributes,
                    single: s.single,
                })
                .collect();
            for (name, axes, shape, values, attrs) in &extra {
                vars.push(netcdf::Numbers {
                    name,
                    axes,
                    shape,
                    values,
                    attributes: attrs,
                    single: false,
                });
            }
            let mut r = typed(
                netcdf::numbers_file(&vars, &Map::new()),
                "application/x-netcdf",
            );
            r.headers_mut().insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"edr.nc\""),
            );
            r
        }
    })
}

type Extra = (String, Vec<Axis>, Vec<u64>, Vec<f64>, Map<String, Value>);

/// A trajectory's x and y, as variables along its points (NetCDF).
fn trajectory_coordinates(samples: &[Sampled], x: &str, y: &str) -> Vec<Extra> {
    let Some(s) = samples.iter().find(|s| s.xy.is_none()) else {
        return Vec::new();
    };
    let axes = s.axes.clone();
    let n = vec![s.points.len() as u64];
    let (degrees, (xn, yn)) = (s.crs.is_degrees(), (x, y));
    let unit = |u: &str| {
        let mut m = Map::new();
        if degrees {
            m.insert("units".into(), json!(u));
        }
        m
    };
    vec![
        (
            if degrees {
                "lon".into()
            } else {
                xn.to_string()
            },
            axes.clone(),
            n.clone(),
            s.points.iter().map(|p| p.0).collect(),
            unit("degrees_east"),
        ),
        (
            if degrees {
                "lat".into()
            } else {
                yn.to_string()
            },
            axes,
            n,
            s.points.iter().map(|p| p.1).collect(),
            unit("degrees_north"),
        ),
    ]
}

fn typed(body: Vec<u8>, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn output_format(f: Option<&str>) -> Result<&'static str, ApiError> {
    let Some(f) = f else {
        return Ok("CoverageJSON");
    };
    let lower = f.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "coveragejson" | "covjson" | "json" | "application/prs.coverage+json" => "CoverageJSON",
        "geojson" | "application/geo+json" => "GeoJSON",
        "csv" | "text/csv" => "CSV",
        "netcdf" | "nc" | "application/x-netcdf" => "NetCDF",
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_format",
                format!("f: '{f}' is not one of {}", FORMATS.join(", ")),
            ))
        }
    })
}

/// The labelled query of a layer's time and vertical dimensions.
fn layer_query(
    layer: &MapLayer,
    datetime: Option<&str>,
    z: Option<&str>,
) -> Result<Query, ApiError> {
    let mut q = Query {
        decode: true,
        ..Query::default()
    };
    if let (Some(dt), Some(dim)) = (datetime, layer.others.iter().find(|o| o.is_time())) {
        q.sel.push((dim.name.clone(), interval(dt, "datetime")?));
    }
    if let (Some(z), Some(dim)) = (z, layer.others.iter().find(|o| o.is_vertical())) {
        q.sel.push((dim.name.clone(), interval(z, "z")?));
    }
    Ok(q)
}

/// EDR's `instant`, `start/end` (either `..`): the nearest label, or a
/// range of labels.
fn interval(text: &str, name: &str) -> Result<LabelSel, ApiError> {
    let clean = |s: &str| {
        let s = s.trim();
        let s = s.strip_suffix('Z').unwrap_or(s);
        (!s.is_empty() && s != "..").then(|| s.to_string())
    };
    if text.contains(',') || text.starts_with('R') {
        return Err(bad(
            "bad_interval",
            format!("{name}: '{text}' is a list or a recurrence; give one value or start/end"),
        ));
    }
    Ok(match text.split_once('/') {
        Some((a, b)) => LabelSel::Range(clean(a), clean(b)),
        None => LabelSel::Nearest(
            clean(text).ok_or_else(|| bad("bad_interval", format!("{name} is empty")))?,
        ),
    })
}

/// The place a query names.
fn place(asked: &str, params: &Params) -> Result<Place, ApiError> {
    if asked == "cube" {
        let bbox = params.get(&["bbox"]).ok_or_else(|| {
            bad(
                "missing_bbox",
                "bbox: a cube query needs bbox=minx,miny,maxx,maxy",
            )
        })?;
        let v: Vec<f64> = bbox
            .split(',')
            .map(|s| s.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("bad_bbox", format!("bbox: '{bbox}' is not four numbers")))?;
        let b = match v.as_slice() {
            [a, b, c, d] => [*a, *b, *c, *d],
            [a, b, _, c, d, _] => [*a, *b, *c, *d],
            _ => {
                return Err(bad(
                    "bad_bbox",
                    format!("bbox: '{bbox}' is not minx,miny,maxx,maxy"),
                ))
            }
        };
        // A west edge east of the east edge crosses the antimeridian.
        if b[1] > b[3] || b.iter().any(|x| !x.is_finite()) {
            return Err(bad(
                "bad_bbox",
                format!("bbox: '{bbox}' has its south edge north of its north edge, or a number that is not finite"),
            ));
        }
        return Ok(Place::Box(b));
    }
    let coords = params.get(&["coords"]).ok_or_else(|| {
        bad(
            "missing_coords",
            format!("coords: a {asked} query needs coords (WKT)"),
        )
    })?;
    let geometry = wkt::parse(coords).map_err(|e| bad("bad_coords", format!("coords: {e}")))?;
    let wrong = |want: &str| {
        bad(
            "bad_coords",
            format!("coords: a {asked} query takes {want}, not '{coords}'"),
        )
    };
    match (asked, geometry) {
        ("position", wkt::Geometry::Point(x, y)) => Ok(Place::Point(x, y)),
        ("position", _) => Err(wrong("a POINT")),
        ("radius", wkt::Geometry::Point(x, y)) => {
            let within = params.get(&["within"]).ok_or_else(|| {
                bad(
                    "missing_within",
                    "within: a radius query needs within (a distance)",
                )
            })?;
            let r: f64 = within
                .trim()
                .parse()
                .ok()
                .filter(|r: &f64| r.is_finite() && *r >= 0.0)
                .ok_or_else(|| {
                    bad(
                        "bad_within",
                        format!("within: '{within}' is not a distance"),
                    )
                })?;
            let km = match params
                .get(&["within-units", "within_units"])
                .unwrap_or("km")
            {
                u if u.eq_ignore_ascii_case("km") => r,
                u if u.eq_ignore_ascii_case("m") => r / 1000.0,
                u if u.eq_ignore_ascii_case("mi") => r * 1.609344,
                u => {
                    return Err(bad(
                        "bad_within_units",
                        format!("within-units: '{u}' is not one of km, m, mi"),
                    ))
                }
            };
            Ok(Place::Radius { x, y, km })
        }
        ("radius", _) => Err(wrong("a POINT")),
        ("area", wkt::Geometry::Polygons(rings)) => Ok(Place::Polygons(rings)),
        ("area", _) => Err(wrong("a POLYGON or MULTIPOLYGON")),
        ("trajectory", wkt::Geometry::Line(points)) => Ok(Place::Trajectory(points)),
        _ => Err(wrong("a LINESTRING")),
    }
}
