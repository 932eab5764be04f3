//! `/api/v1`: the hierarchy as JSON (`tree`, `meta`) and server-side slicing
//! (`data`) answered as `.npy`, JSON or raw bytes.

use axum::extract::State;

use super::extract::{ApiPath, ApiQuery};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::AppState;
use crate::service::{Content, ReadRequest, ServiceError};
use crate::store::{node_path, StoreKey};
use crate::zarr::array::metadata_key;
use crate::zarr::fill::fill_to_v3_json;
use crate::zarr::metadata::{CodecSpec, Order};
use crate::zarr::selection::MAX_LISTED;
use crate::zarr::{Array, ArrayMetadata, DataType, Endian, NodeMetadata, Selection};

fn path_key(path: &str) -> ApiResult<StoreKey> {
    Ok(node_path(path)?)
}

fn dtype_json(dtype: &DataType, endian: Endian) -> Value {
    json!({"numpy": dtype.to_v2_json(if endian == Endian::NotApplicable { Endian::Little } else { endian }), "zarr": dtype.to_v3_json(), "itemsize": dtype.size()})
}

fn array_summary(path: &str, meta: &ArrayMetadata, array: Option<&Array>) -> Value {
    let chunks = array
        .map(Array::read_chunk_shape)
        .unwrap_or_else(|| meta.chunk_shape.clone());
    json!({
        "path": path,
        "node_type": "array",
        "zarr_format": meta.zarr_format,
        "shape": meta.shape,
        "chunks": chunks,
        "dtype": meta.dtype.label(),
    })
}

fn node_summary(path: &str, node: &NodeMetadata) -> Value {
    match node {
        NodeMetadata::Array(meta) => array_summary(path, meta, None),
        NodeMetadata::Group(g) => {
            let mut summary =
                json!({"path": path, "node_type": "group", "zarr_format": g.zarr_format});
            // OME-Zarr images show as such in the tree, without opening their levels.
            if let Some(m) = crate::zarr::ome::multiscales(&g.attributes).first() {
                summary["multiscale"] = json!({"name": m.name, "levels": m.datasets.len()});
            }
            summary
        }
    }
}

/// A node whose metadata cannot be read: listed with the reason, so the
/// rest of the tree stays visible.
fn broken(path: &str, error: &ServiceError) -> Value {
    let e = ApiError::from(error.clone());
    json!({"path": path, "node_type": "unknown", "error": {"status": e.status.as_u16(), "code": e.code, "message": e.message}})
}

/// `GET /api/v1/tree`: every node in the store.
pub async fn tree_root(
    state: State<AppState>,
    query: ApiQuery<TreeParams>,
) -> ApiResult<Json<Value>> {
    tree(state, ApiPath(String::new()), query).await
}

/// A page of a tree: how many nodes, after which.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeParams {
    limit: Option<usize>,
    after: Option<String>,
}

/// `GET /api/v1/tree/{path}`: the nodes at and below `path`, a page at a
/// time (`next` names where the following page starts).
pub async fn tree(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<TreeParams>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let limit = params.limit.unwrap_or(crate::service::TREE_PAGE);
    if limit == 0 || limit > crate::service::MAX_TREE_PAGE {
        return Err(ApiError::bad_request(
            "bad_limit",
            format!(
                "limit={limit} is not between 1 and {}",
                crate::service::MAX_TREE_PAGE
            ),
        ));
    }
    let page = state
        .service
        .tree_page(&key, params.after.as_deref(), limit)
        .await?;
    let nodes: Vec<Value> = page
        .nodes
        .iter()
        .map(|t| match &t.node {
            Err(e) => broken(&t.path, e),
            Ok(node) => match &node.meta {
                NodeMetadata::Array(meta) => array_summary(&t.path, meta, node.array.as_ref()),
                group => node_summary(&t.path, group),
            },
        })
        .collect();
    Ok(Json(
        json!({"path": key.as_str(), "nodes": nodes, "next": page.next}),
    ))
}

/// `GET /api/v1/meta`: the root node.
pub async fn meta_root(
    state: State<AppState>,
    caller: Option<axum::Extension<super::auth::Caller>>,
) -> ApiResult<Json<Value>> {
    meta(state, ApiPath(String::new()), caller).await
}

/// `GET /api/v1/meta/{path}`: one node, normalized across versions.
pub async fn meta(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    caller: Option<axum::Extension<super::auth::Caller>>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let cached = state.service.node(&key).await?;
    let node = &cached.meta;
    let mut out = Map::new();
    out.insert("path".into(), json!(key.as_str()));
    out.insert("zarr_format".into(), json!(node.zarr_format()));
    out.insert("node_type".into(), json!(node.node_type()));
    out.insert(
        "attributes".into(),
        Value::Object(node.attributes().clone()),
    );
    match node {
        NodeMetadata::Group(group) => {
            let members: Vec<Value> = state
                .service
                .members(&key)
                .await?
                .iter()
                .map(|(name, n)| match n {
                    Ok(n) => json!({"name": name, "node_type": n.node_type()}),
                    Err(e) => {
                        let mut b = broken(name, e);
                        b["name"] = json!(name);
                        b
                    }
                })
                .collect();
            out.insert("members".into(), json!(members));
            if group.implicit {
                out.insert("implicit".into(), json!(true));
            }
            if let Some(image) = state.service.multiscale(&key).await? {
                out.insert("multiscales".into(), json!([image_json(&image)]));
            }
        }
        NodeMetadata::Array(meta) => {
            if let Some(array) = &cached.array {
                array_details(&state, array, &mut out).await?;
            }
            // What the document says of an array whose data zarrd cannot
            // decode, and why.
            if let Some(why) = &cached.undecodable {
                out.insert("shape".into(), json!(meta.shape));
                out.insert("chunks".into(), json!(meta.chunk_shape));
                out.insert("dtype".into(), json!(meta.dtype.label()));
                out.insert("undecodable".into(), json!(why.to_string()));
            }
            // The image is its parent group's: described only to callers
            // that may read it (a token limited to this level may not).
            let within = caller.and_then(|c| c.0.within);
            let may_read_parent = key.parent().is_some_and(|parent| {
                within.is_none_or(|prefix| {
                    StoreKey::new(&prefix).is_ok_and(|p| parent.is_at_or_below(&p))
                })
            });
            let image = match may_read_parent {
                true => state.service.level_of(&key).await?,
                false => None,
            };
            if let Some((image, level)) = image {
                let mut of = image_json(&image);
                of["group"] = json!(image.group.as_str());
                of["level"] = json!(level);
                out.insert("multiscale".into(), of);
            }
        }
    }
    Ok(Json(Value::Object(out)))
}

/// A multiscale image: its name, axes and levels (finest first) with
/// their arrays' paths, shapes and transformations.
fn image_json(image: &crate::service::Image) -> Value {
    let m = &image.multiscale;
    let levels: Vec<Value> = image
        .levels
        .iter()
        .zip(&m.datasets)
        .map(|(level, dataset)| {
            json!({
                "path": level.path.as_str(),
                "shape": level.shape,
                "scale": dataset.scale,
                "translation": dataset.translation,
            })
        })
        .collect();
    json!({"version": m.version, "name": m.name, "axes": m.axes, "levels": levels})
}

async fn array_details(
    state: &AppState,
    array: &Array,
    out: &mut Map<String, Value>,
) -> ApiResult<()> {
    let meta = array.metadata();
    let endian = match &meta.codecs {
        CodecSpec::V2 { endian, .. } => *endian,
        CodecSpec::V3(_) => Endian::Little,
    };
    let sharded = array.codecs().sharding().is_some();
    out.insert("shape".into(), json!(meta.shape));
    out.insert("chunks".into(), json!(array.read_chunk_shape()));
    out.insert(
        "shard_shape".into(),
        if sharded {
            json!(meta.chunk_shape)
        } else {
            Value::Null
        },
    );
    out.insert("dtype".into(), dtype_json(&meta.dtype, endian));
    out.insert(
        "fill_value".into(),
        fill_to_v3_json(&meta.dtype, &meta.fill_value),
    );
    out.insert(
        "order".into(),
        json!(if meta.order == Order::F { "F" } else { "C" }),
    );
    out.insert(
        "codecs".into(),
        match &meta.codecs {
            CodecSpec::V3(c) => c.clone(),
            CodecSpec::V2 {
                filters,
                compressor,
                ..
            } => json!({"filters": filters, "compressor": compressor}),
        },
    );
    out.insert("dimension_names".into(), json!(meta.dimension_names));
    let count: u64 = meta.shape.iter().product();
    out.insert(
        "nbytes".into(),
        json!(meta.dtype.size().and_then(|s| count.checked_mul(s as u64))),
    );
    let storage = state.service.storage(array).await?;
    out.insert("stored_bytes".into(), json!(storage.stored_bytes));
    out.insert(
        "chunks_initialized".into(),
        json!(storage.chunks_initialized),
    );
    out.insert(
        "chunks_total".into(),
        json!(meta.grid_shape().iter().product::<u64>()),
    );
    out.insert("chunk_grid".into(), json!(meta.grid_shape()));
    out.insert("chunks_present".into(), json!(storage.present));
    out.insert("storage_complete".into(), json!(storage.complete));
    out.insert(
        "metadata_key".into(),
        json!(metadata_key(array.path(), meta.zarr_format)),
    );
    Ok(())
}

/// Parameters of `GET /api/v1/data` (query) and `POST` (JSON body).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataParams {
    select: Option<String>,
    /// Points as a JSON string (query) or a list (body).
    points: Option<Points>,
    field: Option<String>,
    format: Option<String>,
    /// Images: colormap, value range and scale.
    cmap: Option<String>,
    vmin: Option<f64>,
    vmax: Option<f64>,
    scale: Option<String>,
    /// A level of an OME-Zarr multiscale image, when the path is its group.
    level: Option<i64>,
}

pub async fn data_get(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<DataParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    data(state, &path, params, &headers).await
}

/// `points`: JSON text in a query, a list in a body. Read straight into
/// coordinates: as a `Value` (and a copy of it) a point cost some 300 bytes.
#[derive(Debug)]
enum Points {
    Text(String),
    List(Vec<Vec<i64>>),
    /// Why a list is not one of coordinates, for a 400 that says so.
    Bad(String),
}

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Points;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of coordinate lists of integers, as [[0, 1], [5, 2]]")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Points, E> {
                Ok(Points::Text(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Points, A::Error> {
                let mut points = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                let mut bad = None;
                loop {
                    // After a bad point, or one more than a selection may
                    // list (refused when it is resolved), the rest is only
                    // read past.
                    if bad.is_some() || points.len() > MAX_LISTED {
                        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                        break;
                    }
                    // One point at a time as a `Value`, so a point that is
                    // not integers is a bad selection, not a bad body.
                    let Some(point) = seq.next_element::<Value>()? else {
                        break;
                    };
                    match serde_json::from_value::<Vec<i64>>(point) {
                        Ok(point) => points.push(point),
                        Err(e) => bad = Some(e.to_string()),
                    }
                }
                Ok(bad.map_or(Points::List(points), Points::Bad))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The largest body of parameters `POST /api/v1/data` takes.
const MAX_PARAMS_BODY: u64 = 16 << 20;

pub async fn data_post(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let headers = request.headers().clone();
    // Parameters, not data: a points list this size is already a million
    // points, and parsing JSON costs many times its bytes.
    let super::extract::ApiBody(body, _held) =
        super::extract::read_body(request, &state, MAX_PARAMS_BODY)
            .await
            .map_err(|e| match e.code {
                "body_too_large" => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!(
                        "the parameters are longer than {MAX_PARAMS_BODY} bytes (read a large point set in several requests)"
                    ),
                ),
                _ => e,
            })?;
    let params: DataParams = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            format!(
                "the body must be a JSON object with select, points, field, format, level: {e}"
            ),
        )
    })?;
    data(state, &path, params, &headers).await
}

/// The array at `path`, from the service's node cache.
pub async fn open_array(state: &AppState, key: &StoreKey) -> ApiResult<Array> {
    Ok(state.service.array(key).await?)
}

/// A `select=` parameter, with parse errors as 400s.
pub(super) fn parse_select(s: &str) -> ApiResult<Selection> {
    Selection::parse(s).map_err(|e| ApiError::bad_request("bad_selection", format!("select: {e}")))
}

fn selection(select: Option<&str>, points: Option<Points>) -> ApiResult<Selection> {
    match (select, points) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "bad_selection",
            "give either select or points, not both",
        )),
        (_, Some(Points::Text(t))) => Selection::parse_points(&t)
            .map_err(|e| ApiError::bad_request("bad_selection", format!("points: {e}"))),
        (_, Some(Points::List(list))) => Ok(Selection::Points(list)),
        (_, Some(Points::Bad(e))) => Err(ApiError::bad_request(
            "bad_selection",
            format!("points: a list of coordinate lists of integers, as [[0, 1], [5, 2]]: {e}"),
        )),
        (Some(s), None) => parse_select(s),
        (None, None) => Ok(Selection::all()),
    }
}

async fn data(
    state: AppState,
    path: &str,
    mut params: DataParams,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let mut key = path_key(path)?;
    if let Some(level) = params.level {
        key = state.service.level_path(&key, level).await?;
    }
    let format = super::output::choose(
        params.format.as_deref(),
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
    )
    .map_err(|e| ApiError::bad_request("bad_format", e))?;
    let render = super::output::Render {
        cmap: params.cmap.clone(),
        vmin: params.vmin,
        vmax: params.vmax,
        scale: params.scale.clone(),
        max_pixels: state.config.max_image_pixels,
    };
    let request = ReadRequest {
        selection: selection(params.select.as_deref(), params.points.take())?,
        field: params.field,
        fixed_size_only: format.fixed_size_only(),
        encoding_per_element: format.encoding_per_element(),
    };
    let mut data = state
        .service
        .read(&key, request, format.residence())
        .await
        .map_err(|e| format.explain(e.into()))?;
    // The memory the read reserved for the data and its encoding, held
    // until the answer has been sent.
    let mut held = std::mem::take(&mut data.reservation);
    let response = if matches!(data.content, Content::Whole(_)) && held.bytes() > 0 {
        // Building a large answer whole (drawing, JSON) is CPU work the
        // size of the answer: on the decoding pool, off the threads that
        // answer requests. The reservation goes with the work, so a client
        // that leaves does not free memory the work still holds.
        let (response, kept) = crate::zarr::array::run_blocking(move || {
            let response = format.encode(data, &render);
            // What drawing or building took is given back; the answer's
            // bytes stay reserved until they are sent.
            if let Ok(r) = &response {
                held.shrink_to(
                    http_body::Body::size_hint(r.body())
                        .upper()
                        .unwrap_or(u64::MAX),
                );
            }
            Ok((response, held))
        })
        .await?;
        held = kept;
        response?
    } else {
        format.encode(data, &render)?
    };
    Ok(response.map(|body| axum::body::Body::new(super::idle::Keeping::new(body, held))))
}

/// `GET /api/v1/stats`: cache counters.
pub async fn stats(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"cache": state.service.cache().stats()}))
}
