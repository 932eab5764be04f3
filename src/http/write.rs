//! Writes: raw keys (`PUT`/`DELETE /zarr/{key}`, conditional with
//! `If-Match` / `If-None-Match: *`), nodes (`PUT`/`PATCH`/`DELETE
//! /api/v1/meta`), regions (`PUT /api/v1/data`) and appends
//! (`POST /api/v1/append`). Every change invalidates the cache entries it
//! makes stale. Chunk-level locking and compare-and-swap happen in the
//! store's updater, under every write path here.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::body::{self, Incoming};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiBody, ApiPath, ApiQuery};
use super::raw::{etags_match, missing, precondition_failed, quote_etag, request_etags};
use super::AppState;
use crate::store::{node_path, Replacement, StoreError, StoreKey, Versioned, INTERNAL_PREFIX};
use crate::zarr::metadata::{Order, DOCUMENT_NAMES};
use crate::zarr::{ArrayBytes, ArraySpec, DataType, Endian, NodeMetadata, Selection, ZarrError};

impl AppState {
    /// Refuse writes on a read-only server (who may write is checked by `auth::authorize`).
    pub fn check_writable(&self) -> ApiResult<()> {
        if self.store.is_read_only() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "read_only",
                format!("the store {} is read-only", self.store.description()),
            ));
        }
        if self.config.read_only {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "read_only",
                "this server is read-only (--read-only); writes are refused",
            ));
        }
        Ok(())
    }

    /// Forget what a change of `key` makes stale: the value, and for a
    /// metadata document its node and every decoded chunk below it.
    async fn invalidate_for_key(&self, key: &StoreKey) {
        self.cache.invalidate_key(key.as_str());
        if DOCUMENT_NAMES.contains(&key.name()) {
            let node = key.parent().unwrap_or_else(StoreKey::root);
            self.cache.invalidate_node(node.as_str()).await;
        }
    }
}

fn writable_key(raw: &str) -> ApiResult<StoreKey> {
    let key = StoreKey::new(raw)?;
    if key.is_root() || key.as_str().split('/').next() == Some(INTERNAL_PREFIX) {
        return Err(ApiError::bad_request(
            "invalid_key",
            format!("'{raw}' cannot be written"),
        ));
    }
    Ok(key)
}

/// A metadata document must parse as what its name says before it is
/// stored, so a client cannot break the hierarchy with a bad document.
fn check_document(key: &StoreKey, value: &[u8]) -> ApiResult<()> {
    use crate::zarr::metadata::{parse_json, v1, v2, v3};
    let name = key.name();
    if !DOCUMENT_NAMES.contains(&name) {
        return Ok(());
    }
    let bad = |e: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_metadata", e);
    let doc = parse_json(key.as_str(), value).map_err(|e| bad(e.to_string()))?;
    let node = key.parent().unwrap_or_else(StoreKey::root);
    let array = |meta: crate::zarr::ArrayMetadata| crate::zarr::Array::check_metadata(&node, &meta);
    let checked = match name {
        "zarr.json" => v3::parse(key.as_str(), &doc).and_then(|n| match n {
            NodeMetadata::Array(meta) => array(*meta),
            NodeMetadata::Group(_) => Ok(()),
        }),
        ".zarray" => v2::parse_array(key.as_str(), &doc, None).and_then(array),
        ".zgroup" => v2::parse_group(key.as_str(), &doc, None).map(|_| ()),
        ".zmetadata" => v2::parse_consolidated(key.as_str(), &doc).map(|_| ()),
        "meta" => v1::parse(key.as_str(), &doc, None).and_then(array),
        _ => match doc {
            Value::Object(_) => Ok(()),
            _ => Err(ZarrError::metadata(
                key.as_str(),
                "attributes must be a JSON object",
            )),
        },
    };
    checked.map_err(|e| bad(e.to_string()))
}

/// `PUT /zarr/{key}`: store a value atomically.
pub async fn put_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    headers: HeaderMap,
    ApiBody(value): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = writable_key(&raw)?;
    check_document(&key, &value)?;
    let if_match = request_etags(&headers, header::IF_MATCH);
    let create_only =
        request_etags(&headers, header::IF_NONE_MATCH).is_some_and(|t| t.iter().any(|t| t == "*"));
    let conditional = if_match.is_some() || create_only;
    let result = state
        .store
        .update(&key, !conditional, |current: Option<Versioned>| {
            let stored = current
                .as_ref()
                .and_then(|v| v.meta.version.e_tag.as_deref());
            let refused = (create_only && current.is_some())
                || if_match
                    .as_ref()
                    .is_some_and(|tags| !etags_match(tags, stored));
            let check = if refused {
                Err(StoreError::Precondition {
                    key: key.to_string(),
                })
            } else {
                Ok(Replacement {
                    bytes: value.to_vec(),
                    removable: false,
                })
            };
            std::future::ready(check)
        })
        .await;
    state.invalidate_for_key(&key).await;
    result.map_err(|e: StoreError| match e {
        StoreError::Precondition { .. } => ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
            format!("key '{key}' does not satisfy If-Match / If-None-Match"),
        ),
        other => other.into(),
    })?;
    let meta = state.store.head(&key).await?;
    let status = if create_only {
        StatusCode::CREATED
    } else {
        StatusCode::NO_CONTENT
    };
    let mut response = status.into_response();
    if let Some(tag) = meta
        .and_then(|m| m.version.e_tag)
        .and_then(|t| HeaderValue::from_str(&quote_etag(&t)).ok())
    {
        response.headers_mut().insert(header::ETAG, tag);
    }
    Ok(response)
}

/// `DELETE /zarr/{key}`.
pub async fn delete_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    state.check_writable()?;
    let key = writable_key(&raw)?;
    let Some(meta) = state.store.head(&key).await? else {
        return Err(missing(&key));
    };
    let expected = match request_etags(&headers, header::IF_MATCH) {
        Some(tags) if !etags_match(&tags, meta.version.e_tag.as_deref()) => {
            return Err(precondition_failed(&key))
        }
        // Delete only the version the client saw, even if it changes meanwhile.
        Some(tags) if tags.iter().any(|t| t != "*") => meta.version.e_tag,
        _ => None,
    };
    let result = state.store.delete_if(&key, expected.as_deref()).await;
    state.invalidate_for_key(&key).await;
    result.map_err(|e| match e {
        StoreError::Precondition { .. } => precondition_failed(&key),
        other => other.into(),
    })?;
    Ok(StatusCode::NO_CONTENT)
}

/// The body of `PUT /api/v1/meta/{path}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    node_type: String,
    #[serde(default = "default_format")]
    zarr_format: u8,
    #[serde(default)]
    attributes: Map<String, Value>,
    shape: Option<Vec<u64>>,
    chunks: Option<Vec<u64>>,
    shards: Option<Vec<u64>>,
    dtype: Option<Value>,
    #[serde(default)]
    fill_value: Value,
    // Absent means "the default"; an explicit `null` means "none" (as
    // zarr-python's `compressor=None`), so the two must stay apart.
    #[serde(default, deserialize_with = "present")]
    codecs: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    compressor: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    filters: Option<Value>,
    order: Option<String>,
    dimension_names: Option<Vec<Option<String>>>,
    chunk_key_separator: Option<String>,
}

fn default_format() -> u8 {
    3
}

/// A field that is present, `null` included (serde reads `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn spec_error(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_spec", message)
}

/// A data type given as a v3 name or document, or a numpy typestr / field list.
fn parse_dtype(value: &Value) -> ApiResult<(DataType, Endian)> {
    if let Ok(dt) = DataType::from_v3_json(value) {
        return Ok((dt, Endian::Little));
    }
    DataType::from_v2_json(value).map_err(|e| spec_error(format!("dtype {value}: {e}")))
}

impl NodeSpec {
    fn array_spec(self) -> ApiResult<ArraySpec> {
        let shape = self
            .shape
            .ok_or_else(|| spec_error("an array needs \"shape\""))?;
        let (dtype, endian) = parse_dtype(
            self.dtype
                .as_ref()
                .ok_or_else(|| spec_error("an array needs \"dtype\""))?,
        )?;
        let mut spec = ArraySpec::new(self.zarr_format, shape, dtype);
        spec.endian = endian;
        spec.chunks = self.chunks;
        spec.shards = self.shards;
        spec.fill_value = self.fill_value;
        spec.codecs = self.codecs;
        spec.compressor = self.compressor;
        spec.filters = self.filters;
        spec.order = match self.order.as_deref() {
            None | Some("C") => Order::C,
            Some("F") => Order::F,
            Some(other) => return Err(spec_error(format!("order '{other}' is not C or F"))),
        };
        spec.dimension_names = self.dimension_names;
        spec.attributes = self.attributes;
        spec.separator = match self.chunk_key_separator.as_deref() {
            None => None,
            Some("/") => Some('/'),
            Some(".") => Some('.'),
            Some(other) => {
                return Err(spec_error(format!(
                    "chunk_key_separator '{other}' is not \"/\" or \".\""
                )))
            }
        };
        Ok(spec)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverwriteParam {
    #[serde(default)]
    overwrite: bool,
}

/// `PUT /api/v1/meta/{path}`: create a group or an array.
pub async fn put_meta(
    state: State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<OverwriteParam>,
    ApiBody(body): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let spec: NodeSpec = serde_json::from_slice(&body)
        .map_err(|e| spec_error(format!("the body is not a node description: {e}")))?;
    let result = match spec.node_type.as_str() {
        "group" => {
            state
                .hierarchy
                .create_group(
                    &key,
                    spec.zarr_format,
                    spec.attributes.clone(),
                    params.overwrite,
                )
                .await
        }
        "array" => {
            let spec = spec.array_spec()?;
            state
                .hierarchy
                .create_array(&key, &spec, params.overwrite)
                .await
                .map(|_| ())
        }
        other => {
            return Err(spec_error(format!(
                "node_type '{other}' is not group or array"
            )))
        }
    };
    state.cache.invalidate_node(key.as_str()).await;
    result.map_err(|e| match e {
        ZarrError::NodeExists { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "exists",
            format!("a node already exists at '{key}'; add ?overwrite=true to replace it"),
        ),
        ZarrError::Data(m) | ZarrError::DataType(m) | ZarrError::FillValue(m) => spec_error(m),
        ZarrError::Metadata { reason, .. } => spec_error(reason),
        other => other.into(),
    })?;
    let meta = super::api::meta(state, ApiPath(path)).await?;
    Ok((StatusCode::CREATED, meta).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    attributes: Option<Value>,
    shape: Option<Vec<u64>>,
}

/// `PATCH /api/v1/meta/{path}`: merge-patch attributes and/or resize.
pub async fn patch_meta(
    state: State<AppState>,
    ApiPath(path): ApiPath<String>,
    caller: Option<axum::Extension<super::auth::Caller>>,
    ApiBody(body): ApiBody,
) -> ApiResult<Json<Value>> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let patch: Patch = serde_json::from_slice(&body).map_err(|e| {
        spec_error(format!(
            "the body must be {{\"attributes\": {{...}}, \"shape\": [...]}}: {e}"
        ))
    })?;
    if patch.attributes.is_none() && patch.shape.is_none() {
        return Err(spec_error(
            "nothing to change: give \"attributes\" and/or \"shape\"",
        ));
    }
    if let Some(shape) = &patch.shape {
        // Shrinking deletes the chunks outside the new shape: more than the
        // request names, so it needs the admin scope.
        let current = super::api::open_array(&state, &key).await?;
        let shrinks = shape.len() == current.shape().len()
            && shape
                .iter()
                .zip(current.shape())
                .any(|(new, old)| new < old);
        if shrinks && !caller.is_some_and(|c| c.admin) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("shrinking '{key}' deletes the chunks outside the new shape; that needs the admin scope"),
            ));
        }
    }
    let outcome = async {
        if let Some(attrs) = &patch.attributes {
            state.hierarchy.patch_attributes(&key, attrs).await?;
        }
        if let Some(shape) = &patch.shape {
            state.hierarchy.resize(&key, shape.clone()).await?;
        }
        Ok::<_, ZarrError>(())
    }
    .await;
    state.cache.invalidate_node(key.as_str()).await;
    outcome.map_err(|e| match e {
        ZarrError::Data(m) => spec_error(m),
        other => other.into(),
    })?;
    super::api::meta(state, ApiPath(path)).await
}

/// `DELETE /api/v1/meta/{path}`: a node and everything below it.
pub async fn delete_meta(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
) -> ApiResult<StatusCode> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let result = state.hierarchy.delete(&key).await;
    state.cache.invalidate_node(key.as_str()).await;
    state.cache.invalidate_all_metadata();
    result?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    select: Option<String>,
}

/// What a region write got: one value per element, or one value for all.
enum Fitted {
    Exact(ArrayBytes),
    Broadcast(ArrayBytes),
}

/// Chunks one broadcast write may touch: a scalar body is a few bytes, so
/// the work is bounded here rather than by `--max-body-size`.
const MAX_BROADCAST_CHUNKS: u64 = 1 << 20;

/// Data for `selection_shape` elements: exact shape, or one value broadcast.
fn fit(incoming: Incoming, shape: &[u64], elem: usize) -> ApiResult<Fitted> {
    let want: u64 = shape.iter().product();
    let have = incoming.data.len(elem.max(1)) as u64;
    let exact = match &incoming.shape {
        Some(s) => {
            s.as_slice() == shape
                || (s.iter().product::<u64>() == want
                    && s.iter()
                        .filter(|&&d| d != 1)
                        .eq(shape.iter().filter(|&&d| d != 1)))
        }
        None => have == want,
    };
    if exact && have == want {
        return Ok(Fitted::Exact(incoming.data));
    }
    if have == 1 {
        // A scalar broadcasts over the selection, chunk by chunk.
        return Ok(Fitted::Broadcast(incoming.data));
    }
    let given = incoming
        .shape
        .map(|s| format!("{s:?}"))
        .unwrap_or_else(|| format!("{have} elements"));
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "shape_mismatch",
        format!("the data has shape {given}, the selection has shape {shape:?}"),
    ))
}

/// `PUT /api/v1/data/{path}?select=SEL`: write a region.
pub async fn put_data(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<WriteParams>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> ApiResult<Json<Value>> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let array = super::api::open_array(&state, &key).await?;
    let selection = match &params.select {
        Some(s) => super::api::parse_select(s)?,
        None => Selection::all(),
    };
    let resolved = selection.resolve(array.shape())?;
    let shape = resolved.shape();
    let incoming = body::decode(&headers, &body, &array.metadata().dtype)?;
    let stats = match fit(incoming, &shape, array.elem_size())? {
        Fitted::Exact(data) => array.write(&resolved, data).await?,
        Fitted::Broadcast(value) => {
            let chunks = resolved.chunk_count_bound(&array.read_chunk_shape());
            if chunks > MAX_BROADCAST_CHUNKS {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!("the selection touches up to {chunks} chunks; one broadcast write may touch at most {MAX_BROADCAST_CHUNKS}"),
                ));
            }
            array.write_broadcast(&resolved, value).await?
        }
    };
    Ok(Json(
        json!({"shape": shape, "elements": shape.iter().product::<u64>(), "chunks_written": stats.chunks_written, "chunks_deleted": stats.chunks_deleted}),
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendParams {
    #[serde(default)]
    axis: usize,
}

/// `POST /api/v1/append/{path}?axis=N`: append along an axis; returns the new shape.
pub async fn append(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<AppendParams>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> ApiResult<Json<Value>> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let array = super::api::open_array(&state, &key).await?;
    let current = array.shape().to_vec();
    if params.axis >= current.len() {
        return Err(ApiError::bad_request(
            "bad_axis",
            format!(
                "axis {} is out of range for an array of {} dimensions",
                params.axis,
                current.len()
            ),
        ));
    }
    let incoming = body::decode(&headers, &body, &array.metadata().dtype)?;
    // A raw body carries no shape: it is whole rows along the axis.
    let shape = match &incoming.shape {
        Some(s) => s.clone(),
        None => {
            let row: u64 = current
                .iter()
                .enumerate()
                .filter(|(d, _)| *d != params.axis)
                .map(|(_, &n)| n)
                .product();
            let n = incoming.data.len(array.elem_size().max(1)) as u64;
            if row == 0 || n % row != 0 {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "shape_mismatch",
                    format!(
                        "{n} elements are not whole slices of {row} along axis {}",
                        params.axis
                    ),
                ));
            }
            let mut s = current.clone();
            s[params.axis] = n / row;
            s
        }
    };
    let result = state
        .hierarchy
        .append(&key, incoming.data, &shape, params.axis)
        .await;
    state.cache.invalidate_node(key.as_str()).await;
    let new_shape = result.map_err(|e| match e {
        ZarrError::Data(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "shape_mismatch", m),
        other => other.into(),
    })?;
    Ok(Json(json!({"shape": new_shape})))
}
