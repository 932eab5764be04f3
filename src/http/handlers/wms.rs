//! `GET /wms`: OGC Web Map Service 1.3.0 (and 1.1.1's axis order and
//! parameter names) over every georeferenced array: GetCapabilities,
//! GetMap, GetFeatureInfo and GetLegendGraphic, with errors as WMS
//! service exception reports. Parameter names are case-insensitive, as the
//! standard says; the drawing parameters of the tiles (`vmin`, `vmax`,
//! `colorscalerange`, `logscale`, `resampling`) are accepted as vendor
//! parameters, and `STYLES` names colormaps.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::maps::{self, MapQuery};
use crate::http::error::ApiError;
use crate::http::input::credentials::Caller;
use crate::http::output::map::{self as drawing, colormap_names, Picture};
use crate::http::output::xml::escape;
use crate::http::state::AppState;
use crate::service::{number_json, Axis, MapLayer, OtherDim, MAX_PICTURE_PIXELS};
use crate::service::{Crs, Target};
use crate::store::StoreKey;

/// The CRSs every layer is offered in.
const CRSS: &[&str] = &["CRS:84", "EPSG:4326", "EPSG:3857"];
/// The most values a dimension lists in the capabilities.
const MAX_LISTED: usize = 2000;
/// The largest side of a map.
const MAX_SIDE: u32 = 4096;

/// A WMS error: its exception code and message, and the HTTP status.
struct WmsError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl WmsError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        WmsError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
        }
    }
}

impl From<ApiError> for WmsError {
    fn from(e: ApiError) -> Self {
        let code = match e.code {
            "not_georeferenced" | "not_found" => "LayerNotDefined",
            "bad_label" | "bad_selection" => "InvalidDimensionValue",
            "bad_cmap" => "StyleNotDefined",
            _ if e.status.is_client_error() => "InvalidParameterValue",
            _ => "NoApplicableCode",
        };
        // WMS clients (OWSLib among them) read an exception report from a
        // 400; what the client may retry (503) or must authorize keeps
        // its own status.
        let status = match e.status.as_u16() {
            401 | 403 | 429 => e.status,
            400..=499 => StatusCode::BAD_REQUEST,
            _ => e.status,
        };
        WmsError {
            status,
            code,
            message: e.message,
        }
    }
}

impl From<crate::service::ServiceError> for WmsError {
    fn from(e: crate::service::ServiceError) -> Self {
        ApiError::from(e).into()
    }
}

fn report(e: WmsError) -> Response {
    xml(e.status, report_text(e.code, &e.message))
}

fn report_text(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ServiceExceptionReport version=\"1.3.0\" xmlns=\"http://www.opengis.net/ogc\"><ServiceException code=\"{code}\">{}</ServiceException></ServiceExceptionReport>\n",
        escape(message)
    )
}

/// What the checks before the handler refuse on `/wms` (a shed request,
/// a timeout, a token refused, a method other than GET) as exception
/// reports too, with their status and headers (`Retry-After`).
pub async fn exception_reports<Fut>(
    request: axum::extract::Request,
    next: impl FnOnce(axum::extract::Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    if request.uri().path() != "/wms" {
        return next(request).await;
    }
    let response = next(request).await;
    let status = response.status();
    let xml_already = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/xml"));
    if !(status.is_client_error() || status.is_server_error()) || xml_already {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Error bodies are a few hundred bytes; the router's own (405) have none.
    let bytes = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let fallback = status.canonical_reason().unwrap_or("error").to_string();
    let message = error["error"]["message"].as_str().unwrap_or(&fallback);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/xml; charset=utf-8"),
    );
    Response::from_parts(parts, Body::from(report_text("NoApplicableCode", message)))
}

fn xml(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/xml; charset=utf-8"),
    );
    r
}

/// A request's parameters, names lower-cased.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn need(&self, name: &str) -> Result<&str, WmsError> {
        self.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            WmsError::new(
                "MissingParameterValue",
                format!("{} is missing", name.to_ascii_uppercase()),
            )
        })
    }
}

pub async fn wms(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    caller: Option<axum::Extension<Caller>>,
) -> Response {
    let params = Params(
        url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.to_ascii_lowercase(), v.into_owned()))
            .collect(),
    );
    match answer(&state, &params, &headers, caller).await {
        Ok(r) => r,
        Err(e) => report(e),
    }
}

async fn answer(
    state: &AppState,
    p: &Params,
    headers: &HeaderMap,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Response, WmsError> {
    if let Some(service) = p.get("service") {
        if !service.eq_ignore_ascii_case("WMS") {
            return Err(WmsError::new(
                "InvalidParameterValue",
                format!("SERVICE={service}: this is a WMS"),
            ));
        }
    }
    let request = p.need("request")?;
    match request.to_ascii_lowercase().as_str() {
        "getcapabilities" => capabilities(state, headers, caller.as_deref()).await,
        "getmap" => get_map(state, p, headers, caller).await,
        "getfeatureinfo" => feature_info(state, p, caller).await,
        "getlegendgraphic" => legend(state, p, headers, caller).await,
        other => Err(WmsError::new(
            "OperationNotSupported",
            format!("REQUEST={other}: the requests are GetCapabilities, GetMap, GetFeatureInfo and GetLegendGraphic"),
        )),
    }
}

/// A dimension as WMS names it: `time`, `elevation`, or its own name.
fn wms_name(d: &OtherDim) -> String {
    if d.is_time() {
        "time".into()
    } else if d.is_vertical() {
        "elevation".into()
    } else {
        d.name.to_ascii_lowercase()
    }
}

fn labels(d: &OtherDim) -> Vec<String> {
    let axis = Axis {
        name: d.name.clone(),
        coordinate: d.coordinate.clone(),
    };
    (0..(d.len as usize).min(MAX_LISTED))
        .map(|i| match axis.label(i) {
            Some(Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => i.to_string(),
        })
        .collect()
}

fn layer_xml(layer: &MapLayer, base: &str) -> String {
    let [w, s, e, n] = layer.grid().bounds_degrees();
    let (w, e) = if e - w >= 359.999 || e > 180.0 {
        (-180.0f64.max(w.min(e - 360.0)), 180.0f64.min(e))
    } else {
        (w, e)
    };
    let (w, e) = if w >= 180.0 {
        (w - 360.0, e - 360.0)
    } else {
        (w, e)
    };
    let [w, s, e, n] = [w.max(-180.0), s.max(-90.0), e.min(180.0), n.min(90.0)];
    // Web Mercator's square world ends at 85.0511 degrees.
    let mut merc = [(w, s.max(-85.051_128_78)), (e, n.min(85.051_128_78))];
    Crs::web_mercator().from_degrees(&mut merc);
    let name = escape(layer.path.as_str());
    let text = |k: &str| layer.attributes.get(k).and_then(Value::as_str);
    let title = escape(text("long_name").unwrap_or(layer.path.as_str()));
    let mut out = format!("<Layer queryable=\"1\"><Name>{name}</Name><Title>{title}</Title>");
    if let Some(units) = text("units") {
        out += &format!("<Abstract>units: {}</Abstract>", escape(units));
    }
    for crs in CRSS {
        out += &format!("<CRS>{crs}</CRS>");
    }
    out += &format!(
        "<EX_GeographicBoundingBox><westBoundLongitude>{w}</westBoundLongitude><eastBoundLongitude>{e}</eastBoundLongitude><southBoundLatitude>{s}</southBoundLatitude><northBoundLatitude>{n}</northBoundLatitude></EX_GeographicBoundingBox>"
    );
    out += &format!(
        "<BoundingBox CRS=\"CRS:84\" minx=\"{w}\" miny=\"{s}\" maxx=\"{e}\" maxy=\"{n}\"/>"
    );
    out += &format!(
        "<BoundingBox CRS=\"EPSG:4326\" minx=\"{s}\" miny=\"{w}\" maxx=\"{n}\" maxy=\"{e}\"/>"
    );
    out += &format!(
        "<BoundingBox CRS=\"EPSG:3857\" minx=\"{}\" miny=\"{}\" maxx=\"{}\" maxy=\"{}\"/>",
        merc[0].0, merc[0].1, merc[1].0, merc[1].1
    );
    for d in &layer.others {
        let values = labels(d);
        let units = if d.is_time() {
            "ISO8601".to_string()
        } else {
            d.coordinate
                .as_ref()
                .and_then(|c| c.attributes.get("units"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        out += &format!(
            "<Dimension name=\"{}\" units=\"{}\" default=\"{}\">{}</Dimension>",
            escape(&wms_name(d)),
            escape(&units),
            escape(values.first().map(String::as_str).unwrap_or("")),
            escape(&values.join(","))
        );
    }
    let legend = |style: &str| {
        escape(&format!(
            "{base}/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetLegendGraphic&FORMAT=image/png&LAYER={}&STYLE={style}",
            maps::url_path(layer.path.as_str())
        ))
    };
    for style in colormap_names() {
        out += &format!(
            "<Style><Name>{style}</Name><Title>{style}</Title><LegendURL width=\"256\" height=\"48\"><Format>image/png</Format><OnlineResource xmlns:xlink=\"http://www.w3.org/1999/xlink\" xlink:type=\"simple\" xlink:href=\"{}\"/></LegendURL></Style>",
            legend(style)
        );
    }
    out + "</Layer>"
}

/// A layer the caller may not read, with all of the group whose
/// coordinates place it, is no layer of theirs: answered as a layer that
/// is not there.
fn readable(name: &str, caller: Option<&Caller>) -> Result<(), WmsError> {
    let path = name.trim_matches('/');
    let group = path.rsplit_once('/').map_or("", |(g, _)| g);
    if Caller::reads(caller, path) && Caller::reads_whole(caller, group) {
        return Ok(());
    }
    Err(WmsError::new(
        "LayerNotDefined",
        format!("no layer '{name}'"),
    ))
}

async fn capabilities(
    state: &AppState,
    headers: &HeaderMap,
    caller: Option<&Caller>,
) -> Result<Response, WmsError> {
    let base = maps::base_url(state, headers);
    let mut layers = state.service.map_layers(&StoreKey::root()).await?;
    if caller.is_some_and(|c| Caller::filters(Some(c), "")) {
        layers = std::sync::Arc::new(
            layers
                .iter()
                .filter(|l| readable(l.path.as_str(), caller).is_ok())
                .cloned()
                .collect(),
        );
    }
    let online = escape(&format!("{base}/wms"));
    let op = |formats: &[&str]| {
        let f: String = formats
            .iter()
            .map(|f| format!("<Format>{f}</Format>"))
            .collect();
        format!(
            "{f}<DCPType><HTTP><Get><OnlineResource xmlns:xlink=\"http://www.w3.org/1999/xlink\" xlink:type=\"simple\" xlink:href=\"{online}?\"/></Get></HTTP></DCPType>"
        )
    };
    let mut body = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<WMS_Capabilities version=\"1.3.0\" xmlns=\"http://www.opengis.net/wms\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">");
    body += &format!(
        "<Service><Name>WMS</Name><Title>zarrd</Title><Abstract>Zarr arrays as map layers</Abstract><OnlineResource xlink:type=\"simple\" xlink:href=\"{online}\"/><MaxWidth>{MAX_SIDE}</MaxWidth><MaxHeight>{MAX_SIDE}</MaxHeight></Service>"
    );
    body += "<Capability><Request>";
    body += &format!("<GetCapabilities>{}</GetCapabilities>", op(&["text/xml"]));
    body += &format!(
        "<GetMap>{}</GetMap>",
        op(&["image/png", "image/jpeg", "image/webp"])
    );
    body += &format!(
        "<GetFeatureInfo>{}</GetFeatureInfo>",
        op(&["application/json", "text/plain"])
    );
    body += "</Request><Exception><Format>XML</Format></Exception>";
    body += "<Layer><Title>zarrd</Title>";
    for crs in CRSS {
        body += &format!("<CRS>{crs}</CRS>");
    }
    for layer in layers.iter() {
        body += &layer_xml(layer, &base);
    }
    body += "</Layer></Capability></WMS_Capabilities>\n";
    let mut r = xml(StatusCode::OK, body);
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static(maps::VARY));
    Ok(r)
}

/// The parameters of a map: layers, CRS, bounds, size (GetMap's, which
/// GetFeatureInfo repeats).
struct MapFrame {
    layers: Vec<Arc<MapLayer>>,
    styles: Vec<String>,
    target: Target,
}

fn number(name: &str, v: &str) -> Result<f64, WmsError> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| {
            WmsError::new(
                "InvalidParameterValue",
                format!("{}: '{v}' is not a number", name.to_ascii_uppercase()),
            )
        })
}

fn size(p: &Params, name: &str) -> Result<u32, WmsError> {
    let v = p.need(name)?;
    v.parse::<u32>()
        .ok()
        .filter(|s| (1..=MAX_SIDE).contains(s))
        .ok_or_else(|| {
            WmsError::new(
                "InvalidParameterValue",
                format!(
                    "{}={v}: give 1 to {MAX_SIDE} pixels",
                    name.to_ascii_uppercase()
                ),
            )
        })
}

async fn frame(
    state: &AppState,
    p: &Params,
    layers_param: &str,
    caller: Option<&Caller>,
) -> Result<MapFrame, WmsError> {
    let version = p.get("version").unwrap_or("1.3.0");
    let crs_name = match version {
        "1.1.1" | "1.1.0" => p.get("srs").or(p.get("crs")),
        _ => p.get("crs").or(p.get("srs")),
    }
    .ok_or_else(|| WmsError::new("MissingParameterValue", "CRS is missing"))?;
    let crs = Crs::named(crs_name).map_err(|e| WmsError::new("InvalidCRS", e))?;
    let bbox: Vec<f64> = p
        .need("bbox")?
        .split(',')
        .map(|v| number("bbox", v))
        .collect::<Result<_, _>>()?;
    let [a, b, c, d] = bbox[..] else {
        return Err(WmsError::new(
            "InvalidParameterValue",
            "BBOX is four numbers: minx,miny,maxx,maxy",
        ));
    };
    // WMS 1.3.0 writes EPSG:4326 latitude first.
    let lat_first = version.starts_with("1.3")
        && crs.is_degrees()
        && crs_name.to_ascii_uppercase().starts_with("EPSG:");
    let bounds = if lat_first {
        [b, a, d, c]
    } else {
        [a, b, c, d]
    };
    if !(bounds[0] < bounds[2] && bounds[1] < bounds[3]) {
        return Err(WmsError::new(
            "InvalidParameterValue",
            "BBOX: the minima must be below the maxima",
        ));
    }
    let (width, height) = (size(p, "width")?, size(p, "height")?);
    if width as u64 * height as u64 > MAX_PICTURE_PIXELS {
        return Err(WmsError::new(
            "InvalidParameterValue",
            "WIDTH x HEIGHT is too many pixels",
        ));
    }
    let names: Vec<&str> = layers_param.split(',').filter(|s| !s.is_empty()).collect();
    if names.is_empty() || names.len() > 16 {
        return Err(WmsError::new("LayerNotDefined", "name 1 to 16 layers"));
    }
    let mut layers = Vec::new();
    for name in &names {
        readable(name, caller)?;
        let layer = maps::layer(state, name).await.map_err(|e| WmsError {
            code: "LayerNotDefined",
            ..e.into()
        })?;
        layers.push(layer);
    }
    let styles: Vec<String> = p
        .get("styles")
        .or(p.get("style"))
        .unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    Ok(MapFrame {
        layers,
        styles,
        target: Target {
            crs,
            bounds,
            width,
            height,
        },
    })
}

/// The map query of one layer: TIME, ELEVATION and DIM_ values as labels
/// of its dimensions (ignored where it has none), the vendor drawing
/// parameters, and its style as the colormap.
fn layer_query(
    layer: &MapLayer,
    p: &Params,
    style: Option<&str>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<MapQuery, WmsError> {
    let mut pairs = Vec::new();
    for d in &layer.others {
        let name = wms_name(d);
        let key = match name.as_str() {
            "time" | "elevation" => name.clone(),
            other => format!("dim_{other}"),
        };
        if let Some(v) = p.get(&key) {
            pairs.push((format!("sel.{}", d.name), v.to_string()));
        }
    }
    for (k, v) in &p.0 {
        if ["vmin", "vmax", "colorscalerange", "logscale", "resampling"].contains(&k.as_str())
            || k.starts_with("sel.")
            || k.starts_with("isel.")
        {
            pairs.push((k.clone(), v.clone()));
        }
    }
    if let Some(style) = style.filter(|s| !s.is_empty() && *s != "default") {
        pairs.push(("cmap".into(), style.to_string()));
    }
    let (q, _) = maps::parse(pairs, &[], layer.path.as_str(), caller).map_err(|e| {
        let mut w = WmsError::from(e);
        if w.code == "NoApplicableCode" {
            w.code = "InvalidParameterValue";
        }
        w
    })?;
    Ok(q)
}

async fn get_map(
    state: &AppState,
    p: &Params,
    headers: &HeaderMap,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Response, WmsError> {
    let format = p.need("format")?;
    let picture = Picture::by_media_type(format).ok_or_else(|| {
        WmsError::new(
            "InvalidFormat",
            format!("FORMAT={format}: maps come as image/png, image/jpeg or image/webp"),
        )
    })?;
    let frame = frame(state, p, p.need("layers")?, caller.as_deref()).await?;
    let transparent = p
        .get("transparent")
        .is_some_and(|t| t.eq_ignore_ascii_case("true"));
    let background = match p.get("bgcolor") {
        None => [255, 255, 255],
        Some(c) => {
            let hex = c
                .trim_start_matches("0x")
                .trim_start_matches("0X")
                .trim_start_matches('#');
            let v = u32::from_str_radix(hex, 16)
                .ok()
                .filter(|_| hex.len() == 6)
                .ok_or_else(|| {
                    WmsError::new(
                        "InvalidParameterValue",
                        format!("BGCOLOR={c} is not 0xRRGGBB"),
                    )
                })?;
            [(v >> 16) as u8, (v >> 8) as u8, v as u8]
        }
    };
    let pixels = frame.target.pixels();
    let mut held = Vec::new();
    let mut canvas = vec![0u8; pixels * 4];
    if !transparent {
        for px in canvas.chunks_exact_mut(4) {
            px.copy_from_slice(&[background[0], background[1], background[2], 255]);
        }
    }
    for (i, layer) in frame.layers.iter().enumerate() {
        let q = layer_query(
            layer,
            p,
            frame.styles.get(i).map(String::as_str),
            caller.clone(),
        )?;
        let (rgba, reservation) = maps::paint(state, layer, &q, &frame.target).await?;
        held.push(reservation);
        // Layers drawn in order, each over those before (its colours are opaque).
        for (dst, src) in canvas.chunks_exact_mut(4).zip(rgba.chunks_exact(4)) {
            if src[3] != 0 {
                dst.copy_from_slice(src);
            }
        }
    }
    let bytes = drawing::encode(picture, frame.target.width, frame.target.height, &canvas)?;
    drop(held);
    let cache = maps::cache_control(state, &frame.layers[0]);
    Ok(drawing::answer(bytes, picture.media_type(), headers, cache))
}

fn pixel(p: &Params, names: [&str; 2], limit: u32) -> Result<u32, WmsError> {
    let (name, v) = names
        .iter()
        .find_map(|n| p.get(n).map(|v| (*n, v)))
        .ok_or_else(|| {
            WmsError::new(
                "MissingParameterValue",
                format!("{} is missing", names[0].to_ascii_uppercase()),
            )
        })?;
    v.parse::<u32>().ok().filter(|x| *x < limit).ok_or_else(|| {
        WmsError::new(
            "InvalidPoint",
            format!(
                "{}={v} is not a pixel of the map (0 to {})",
                name.to_ascii_uppercase(),
                limit - 1
            ),
        )
    })
}

async fn feature_info(
    state: &AppState,
    p: &Params,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Response, WmsError> {
    let frame = frame(state, p, p.need("query_layers")?, caller.as_deref()).await?;
    let t = &frame.target;
    let i = pixel(p, ["i", "x"], t.width)?;
    let j = pixel(p, ["j", "y"], t.height)?;
    let point = t.centre(i as f64, j as f64);
    let mut features = Vec::new();
    for layer in &frame.layers {
        let q = layer_query(layer, p, None, caller.clone())?;
        let Some(found) = state
            .service
            .map_value(layer, &q.query, &t.crs, point)
            .await?
        else {
            continue;
        };
        let mut lonlat = [point];
        t.crs.to_degrees(&mut lonlat);
        let mut properties = serde_json::Map::new();
        properties.insert("layer".into(), json!(layer.path.as_str()));
        properties.insert(
            "value".into(),
            if found.value.is_finite() {
                number_json(found.value, layer.single)
            } else {
                Value::Null
            },
        );
        if let Some(units) = layer.attributes.get("units") {
            properties.insert("units".into(), units.clone());
        }
        let index: serde_json::Map<String, Value> = layer
            .dims
            .iter()
            .zip(&found.index)
            .map(|(d, i)| (d.clone(), json!(i)))
            .collect();
        properties.insert("index".into(), Value::Object(index));
        properties.insert("x".into(), json!(found.x));
        properties.insert("y".into(), json!(found.y));
        features.push(json!({
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [lonlat[0].0, lonlat[0].1]},
            "properties": properties,
        }));
    }
    let format = p.get("info_format").unwrap_or("application/json");
    let (body, media) = match format {
        "text/plain" => {
            let lines: Vec<String> = features
                .iter()
                .map(|f| {
                    let pr = &f["properties"];
                    let value = match &pr["value"] {
                        Value::Null => "missing".to_string(),
                        v => v.to_string(),
                    };
                    let units = pr["units"]
                        .as_str()
                        .map(|u| format!(" {u}"))
                        .unwrap_or_default();
                    format!("{} = {value}{units}", pr["layer"].as_str().unwrap_or(""))
                })
                .collect();
            (lines.join("\n") + "\n", "text/plain; charset=utf-8")
        }
        "application/json" | "application/geo+json" => (
            json!({"type": "FeatureCollection", "features": features}).to_string(),
            "application/json",
        ),
        other => {
            return Err(WmsError::new(
                "InvalidFormat",
                format!("INFO_FORMAT={other}: the formats are application/json and text/plain"),
            ))
        }
    };
    let mut r = Response::new(Body::from(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    Ok(r)
}

async fn legend(
    state: &AppState,
    p: &Params,
    headers: &HeaderMap,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Response, WmsError> {
    if let Some(format) = p.get("format") {
        if Picture::by_media_type(format) != Some(Picture::Png) {
            return Err(WmsError::new(
                "InvalidFormat",
                format!("FORMAT={format}: legends come as image/png"),
            ));
        }
    }
    readable(p.need("layer")?, caller.as_deref())?;
    let layer = maps::layer(state, p.need("layer")?)
        .await
        .map_err(|e| WmsError {
            code: "LayerNotDefined",
            ..e.into()
        })?;
    let q = layer_query(&layer, p, p.get("style"), caller)?;
    let dim = |name: &str, default: u32| -> Result<u32, WmsError> {
        p.get(name).map_or(Ok(default), |v| {
            v.parse().map_err(|_| {
                WmsError::new(
                    "InvalidParameterValue",
                    format!("{}={v} is not a size in pixels", name.to_ascii_uppercase()),
                )
            })
        })
    };
    let bytes = maps::legend(state, &layer, &q, dim("width", 256)?, dim("height", 48)?).await?;
    let cache = maps::cache_control(state, &layer);
    Ok(drawing::answer(bytes, "image/png", headers, cache))
}
