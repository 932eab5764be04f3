//! `/api/v1`: the hierarchy as JSON (`tree`, `meta`) and server-side slicing
//! (`data`) answered as `.npy`, JSON or raw bytes.

use axum::body::{Body, Bytes};
use axum::extract::State;

use super::extract::{ApiPath, ApiQuery};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::formats::{fixed_width, json_data, slabs, Format};
use super::AppState;
use crate::store::{node_path, StoreKey};
use crate::zarr::array::{extract_field, metadata_key};
use crate::zarr::fill::fill_to_v3_json;
use crate::zarr::metadata::{CodecSpec, Order};
use crate::zarr::{
    Array, ArrayBytes, ArrayMetadata, DataType, Endian, NodeMetadata, Resolved, Selection,
};

/// Bytes per streamed slab of `.npy` / raw output.
const SLAB_BYTES: u64 = 16 << 20;

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
        "dtype": meta.dtype.name(),
    })
}

fn node_summary(path: &str, node: &NodeMetadata) -> Value {
    match node {
        NodeMetadata::Array(meta) => array_summary(path, meta, None),
        NodeMetadata::Group(g) => {
            json!({"path": path, "node_type": "group", "zarr_format": g.zarr_format})
        }
    }
}

/// A node whose metadata cannot be read: listed with the reason, so the
/// rest of the tree stays visible.
fn broken(path: &str, error: &crate::zarr::ZarrError) -> Value {
    let e = ApiError::from(error.shared_copy());
    json!({"path": path, "node_type": "unknown", "error": {"status": e.status.as_u16(), "code": e.code, "message": e.message}})
}

/// `GET /api/v1/tree`: every node in the store.
pub async fn tree_root(state: State<AppState>) -> ApiResult<Json<Value>> {
    tree(state, ApiPath(String::new())).await
}

/// `GET /api/v1/tree/{path}`: every node at and below `path`.
pub async fn tree(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let nodes = state.hierarchy.walk(&key).await?;
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(p, node)| match node {
            Err(e) => broken(p, e),
            Ok(NodeMetadata::Array(meta)) => {
                let array = state
                    .hierarchy
                    .bind(
                        &StoreKey::new(p).unwrap_or_else(|_| StoreKey::root()),
                        (**meta).clone(),
                    )
                    .ok();
                array_summary(p, meta, array.as_ref())
            }
            Ok(node) => node_summary(p, node),
        })
        .collect();
    Ok(Json(json!({"path": key.as_str(), "nodes": nodes})))
}

/// `GET /api/v1/meta`: the root node.
pub async fn meta_root(state: State<AppState>) -> ApiResult<Json<Value>> {
    meta(state, ApiPath(String::new())).await
}

/// `GET /api/v1/meta/{path}`: one node, normalized across versions.
pub async fn meta(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let node = state.cache.node(&state.hierarchy, &key).await?;
    let mut out = Map::new();
    out.insert("path".into(), json!(key.as_str()));
    out.insert("zarr_format".into(), json!(node.zarr_format()));
    out.insert("node_type".into(), json!(node.node_type()));
    out.insert(
        "attributes".into(),
        Value::Object(node.attributes().clone()),
    );
    match node.as_ref() {
        NodeMetadata::Group(group) => {
            let members: Vec<Value> = state
                .hierarchy
                .children(&key)
                .await?
                .iter()
                .map(|(name, n)| match n {
                    Ok(n) => json!({"name": name, "node_type": n.node_type()}),
                    Err(e) => broken(name, e),
                })
                .collect();
            out.insert("members".into(), json!(members));
            if group.implicit {
                out.insert("implicit".into(), json!(true));
            }
        }
        NodeMetadata::Array(meta) => {
            let array = state.hierarchy.bind(&key, (**meta).clone())?;
            array_details(&state, &array, &mut out).await?;
        }
    }
    Ok(Json(Value::Object(out)))
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
    // Storage: stored chunk-grid keys (shards when sharded) and their bytes.
    let prefix_len = if array.path().is_root() {
        0
    } else {
        array.path().as_str().len() + 1
    };
    let (mut stored, mut initialized) = (0u64, 0u64);
    for (k, size) in state.store.list_sizes(array.path()).await? {
        if meta
            .chunk_key_encoding
            .decode(&k.as_str()[prefix_len..], meta.ndim())
            .is_some()
        {
            stored += size;
            initialized += 1;
        }
    }
    out.insert("stored_bytes".into(), json!(stored));
    out.insert("chunks_initialized".into(), json!(initialized));
    out.insert(
        "chunks_total".into(),
        json!(meta.grid_shape().iter().product::<u64>()),
    );
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
    points: Option<PointsParam>,
    field: Option<String>,
    format: Option<String>,
}

/// Points as a JSON string (query) or a list (body).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PointsParam {
    Text(String),
    List(Vec<Vec<i64>>),
}

pub async fn data_get(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<DataParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    data(state, &path, params, &headers).await
}

pub async fn data_post(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let params: DataParams = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            format!("the body must be a JSON object with select, points, field, format: {e}"),
        )
    })?;
    data(state, &path, params, &headers).await
}

/// The array at `path`, through the metadata cache.
pub async fn open_array(state: &AppState, key: &StoreKey) -> ApiResult<Array> {
    match state.cache.node(&state.hierarchy, key).await?.as_ref() {
        NodeMetadata::Array(meta) => Ok(state.hierarchy.bind(key, (**meta).clone())?),
        NodeMetadata::Group(_) => Err(ApiError::bad_request(
            "not_an_array",
            format!("'{key}' is a group; data can only be read from arrays"),
        )),
    }
}

/// A `select=` parameter, with parse errors as 400s.
pub(super) fn parse_select(s: &str) -> ApiResult<Selection> {
    Selection::parse(s).map_err(|e| ApiError::bad_request("bad_selection", format!("select: {e}")))
}

fn selection(params: &DataParams) -> ApiResult<Selection> {
    match (&params.select, &params.points) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "bad_selection",
            "give either select or points, not both",
        )),
        (_, Some(PointsParam::Text(t))) => Selection::parse_points(t)
            .map_err(|e| ApiError::bad_request("bad_selection", format!("points: {e}"))),
        (_, Some(PointsParam::List(l))) => Ok(Selection::Points(l.clone())),
        (Some(s), None) => parse_select(s),
        (None, None) => Ok(Selection::all()),
    }
}

/// The element type and shape a data response has.
struct Output {
    dtype: DataType,
    shape: Vec<u64>,
    field: Option<String>,
}

impl Output {
    fn convert(&self, array_dtype: &DataType, data: ArrayBytes) -> ApiResult<ArrayBytes> {
        match &self.field {
            Some(name) => Ok(extract_field(&data, array_dtype, name)?.data),
            None => Ok(data),
        }
    }
}

async fn data(
    state: AppState,
    path: &str,
    params: DataParams,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let key = path_key(path)?;
    let format = Format::choose(
        params.format.as_deref(),
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
    )
    .map_err(|e| ApiError::bad_request("bad_format", e))?;
    let array = open_array(&state, &key).await?;
    let resolved = selection(&params)?.resolve(array.shape())?;
    let array_dtype = array.metadata().dtype.clone();
    let mut output = Output {
        dtype: array_dtype.clone(),
        shape: resolved.shape(),
        field: params.field.clone(),
    };
    if let Some(name) = &params.field {
        let field = array_dtype.field(name).ok_or_else(|| {
            ApiError::bad_request(
                "bad_field",
                match &array_dtype {
                    DataType::Structured(f) => format!(
                        "no field '{name}'; fields are {}",
                        f.iter()
                            .map(|f| f.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    _ => format!(
                        "field '{name}' was asked for but the array's dtype {} has no fields",
                        array_dtype.name()
                    ),
                },
            )
        })?;
        output.dtype = field.dtype.clone();
        output.shape.extend(field.shape.iter().map(|&d| d as u64));
    }
    // A subarray field multiplies the count; saturate so the limit check refuses it.
    let count = crate::zarr::metadata::element_count(&output.shape).unwrap_or(u64::MAX);
    let elem = output.dtype.size().map(|s| s as u64);
    // JSON and variable-length data are built in memory: the smaller limit.
    let limit = if format == Format::Json || elem.is_none() {
        state.config.json_limit
    } else {
        state.config.response_limit
    };
    // A variable-length element costs at least its 24-byte handle in memory.
    let estimate = count
        .saturating_mul(elem.unwrap_or(24))
        .saturating_mul(if format == Format::Json { 4 } else { 1 });
    if estimate > limit {
        return Err(too_large(format!(
                "the selection has {count} elements (about {estimate} bytes as {format:?}), over the {limit}-byte limit; select a smaller region, fewer points, one field, or use format=npy"
            )));
    }
    match (format, elem) {
        (Format::Json, None) | (Format::Npy, None) => {
            let limit = state.config.json_limit;
            let items = read_variable(&array, &resolved, &output, limit).await?;
            if format == Format::Json {
                let data = ArrayBytes::Variable(items);
                let body = json!({"shape": output.shape, "dtype": output.dtype.name(), "data": json_data(&data, &output.dtype, &output.shape)});
                return Ok(Json(body).into_response());
            }
            let text = output.dtype == DataType::String;
            // Every element is padded to the longest: check that size first.
            let width = items
                .iter()
                .map(|i| {
                    if text {
                        String::from_utf8_lossy(i).chars().count() * 4
                    } else {
                        i.len()
                    }
                })
                .max()
                .unwrap_or(0)
                .max(1) as u64;
            let padded = width.saturating_mul(items.len() as u64);
            if padded > limit {
                return Err(too_large(format!(
                    "the selection's {} elements padded to the longest ({width} bytes) make {padded} bytes as .npy, over the {limit}-byte limit for variable-length data; select fewer elements or use format=json",
                    items.len()
                )));
            }
            let (descr, bytes) = fixed_width(&items, text);
            let mut body = crate::npy::header(&descr, &output.shape);
            body.extend(bytes);
            Ok(binary_response(Body::from(body), format, &output, None))
        }
        (Format::Json, _) => {
            let data = output.convert(&array_dtype, array.read(&resolved).await?)?;
            let body = json!({"shape": output.shape, "dtype": output.dtype.name(), "data": json_data(&data, &output.dtype, &output.shape)});
            Ok(Json(body).into_response())
        }
        (Format::Raw, None) => Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            format!(
                "raw output needs a fixed-size dtype, not {}; use format=json or format=npy",
                output.dtype.name()
            ),
        )),
        (_, Some(elem)) => stream(array, resolved, output, format, elem).await,
    }
}

fn too_large(message: String) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
}

/// Elements of variable-length data read at a time.
const VARIABLE_SLAB: u64 = 1 << 16;

/// Variable-length data is assembled in memory, and its size is only known
/// once read: read it slab by slab and stop as soon as what was read passes
/// `limit` (per element, its bytes plus what holding it costs).
async fn read_variable(
    array: &Array,
    resolved: &Resolved,
    output: &Output,
    limit: u64,
) -> ApiResult<Vec<Vec<u8>>> {
    let dtype = array.metadata().dtype.clone();
    let mut items: Vec<Vec<u8>> = Vec::new();
    let mut held = 0u64;
    for slab in slabs(resolved, &array.read_chunk_shape(), 1, VARIABLE_SLAB) {
        let data = output
            .convert(&dtype, array.read(&slab).await?)?
            .into_variable()?;
        held += data.iter().map(|i| i.len() as u64 + 24).sum::<u64>();
        if held > limit {
            return Err(too_large(format!(
                "the selection's variable-length elements hold more than {limit} bytes, the limit for variable-length data (--json-limit); select fewer elements"
            )));
        }
        items.extend(data);
    }
    Ok(items)
}

fn binary_response(body: Body, format: Format, output: &Output, length: Option<u64>) -> Response {
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if let Some(len) = length {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    let shape = output
        .shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    if let Ok(v) = HeaderValue::from_str(&shape) {
        h.insert("x-zarr-shape", v);
    }
    let dtype = output.dtype.npy_descr().trim_matches('\'').to_string();
    if let Ok(v) = HeaderValue::from_str(&dtype) {
        h.insert("x-zarr-dtype", v);
    }
    response.extensions_mut().insert(super::NoCompression);
    response
}

/// Stream `.npy` or raw output slab by slab: memory stays bounded by a few
/// slabs, and the first bytes leave before the last chunk is decoded. The
/// first slab is read before the response starts, so most errors still get
/// a proper status.
async fn stream(
    array: Array,
    resolved: Resolved,
    output: Output,
    format: Format,
    elem: u64,
) -> ApiResult<Response> {
    let row_elem = array.elem_size() as u64;
    let parts = slabs(
        &resolved,
        &array.read_chunk_shape(),
        row_elem.max(1),
        SLAB_BYTES,
    );
    let header = match format {
        Format::Npy => crate::npy::header(&output.dtype.npy_descr(), &output.shape),
        _ => Vec::new(),
    };
    let total = header.len() as u64 + output.shape.iter().product::<u64>() * elem;
    let dtype = array.metadata().dtype.clone();
    let field = output.field.clone();
    let convert = move |data: ArrayBytes| -> Result<Bytes, std::io::Error> {
        let data = match &field {
            Some(name) => extract_field(&data, &dtype, name).map(|v| v.data),
            None => Ok(data),
        };
        data.and_then(ArrayBytes::into_fixed)
            .map(Bytes::from)
            .map_err(std::io::Error::other)
    };
    let mut parts = parts.into_iter();
    let first = match parts.next() {
        Some(slab) => convert(array.read(&slab).await?).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })?,
        None => Bytes::new(),
    };
    let rest = futures::stream::iter(parts)
        .map(move |slab| {
            let array = array.clone();
            async move { array.read(&slab).await }
        })
        .buffered(2)
        .map(move |r| r.map_err(std::io::Error::other).and_then(&convert));
    let head = futures::stream::iter([Ok::<Bytes, std::io::Error>(Bytes::from(header)), Ok(first)]);
    Ok(binary_response(
        Body::from_stream(head.chain(rest)),
        format,
        &output,
        Some(total),
    ))
}

/// `GET /api/v1/stats`: cache counters.
pub async fn stats(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"cache": state.cache.stats()}))
}
