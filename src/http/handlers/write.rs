//! Writes: raw keys (`PUT`/`DELETE /zarr/{key}`, conditional with
//! `If-Match` / `If-None-Match: *`), nodes (`PUT`/`PATCH`/`DELETE
//! /api/v1/meta`), regions (`PUT /api/v1/data`) and appends
//! (`POST /api/v1/append`). Every change invalidates the cache entries it
//! makes stale. Chunk-level locking and compare-and-swap happen in the
//! store's updater, under every write path here. On a branch of an
//! Icechunk repository each node, region or append write is one commit
//! (named by the `X-Zarr-Snapshot` header of the answer).

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::raw::{
    etags_match, missing, precondition_failed, quote_etag, request_etags, strong_etags,
};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::body;
use crate::http::input::extract::{ApiBody, ApiPath, ApiQuery, CommitMessage};
use crate::http::state::AppState;
use crate::service::Preconditions;
use crate::service::{ErrorKind, NodeCreate};
use crate::store::{node_path, StoreKey};
use crate::zarr::metadata::Order;
use crate::zarr::{ArraySpec, DataType, Endian, Selection};

/// The header naming the snapshot a write committed.
pub const SNAPSHOT: &str = "x-zarr-snapshot";

/// A write's answer, naming the snapshot it committed, when it made one.
fn committed(snapshot: Option<String>, response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    if let Some(id) = snapshot.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(SNAPSHOT, id);
    }
    response
}

impl AppState {
    /// Refuse writes on a read-only server (who may write is checked by `auth::authorize`).
    pub fn check_writable(&self) -> ApiResult<()> {
        if self.store.is_read_only() && !self.store.takes_commits() {
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
}

fn writable_key(raw: &str) -> ApiResult<StoreKey> {
    let key = StoreKey::new(raw)?;
    if key.is_root() {
        return Err(ApiError::bad_request(
            "invalid_key",
            format!("'{raw}' cannot be written"),
        ));
    }
    Ok(key)
}

/// `PUT /zarr/{key}`: store a value atomically.
pub async fn put_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    caller: Option<axum::Extension<crate::http::input::credentials::Caller>>,
    headers: HeaderMap,
    ApiBody(value, _held): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = writable_key(&raw)?;
    // A precondition that cannot be read must not become no precondition.
    for name in [header::IF_MATCH, header::IF_NONE_MATCH] {
        if headers.get(&name).is_some_and(|v| v.to_str().is_err()) {
            return Err(ApiError::bad_request(
                "bad_header",
                format!("{name} must be entity tags in visible ASCII"),
            ));
        }
    }
    let preconditions = Preconditions {
        // Weak tags never match If-Match (RFC 9110 §13.1.1).
        if_match: strong_etags(&headers, header::IF_MATCH),
        if_none_match: request_etags(&headers, header::IF_NONE_MATCH),
        unmodified_since: super::raw::http_date(&headers, header::IF_UNMODIFIED_SINCE),
    };
    let put = state
        .service
        .put_key(&key, value, &preconditions, caller.is_some_and(|c| c.admin))
        .await
        .map_err(|e| match e.kind {
            ErrorKind::PreconditionFailed => ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                format!(
                    "key '{key}' does not satisfy If-Match / If-None-Match / If-Unmodified-Since"
                ),
            ),
            _ => e.into(),
        })?;
    let status = if put.created || preconditions.create_only() {
        StatusCode::CREATED
    } else {
        StatusCode::NO_CONTENT
    };
    let mut response = status.into_response();
    // The version this put stored (a later head could name another
    // writer's); a store that names none on a put is asked.
    let e_tag = match put.version.e_tag {
        Some(tag) => Some(tag),
        None => state.store.head(&key).await?.and_then(|m| m.version.e_tag),
    };
    if let Some(tag) = e_tag.and_then(|t| HeaderValue::from_str(&quote_etag(&t)).ok()) {
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
    state
        .service
        .delete_key(&key, expected.as_deref())
        .await
        .map_err(|e| match e.kind {
            ErrorKind::PreconditionFailed => precondition_failed(&key),
            _ => e.into(),
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
    caller: Option<axum::Extension<crate::http::input::credentials::Caller>>,
    CommitMessage(message): CommitMessage,
    ApiBody(body, _held): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = node_path(&path)?;
    // A token limited to a prefix creates no missing groups above it.
    let parents_from = match caller.as_ref().and_then(|c| c.0.within.clone()) {
        Some(prefix) => Some(node_path(&prefix)?),
        None => None,
    };
    let spec: NodeSpec = serde_json::from_slice(&body)
        .map_err(|e| spec_error(format!("the body is not a node description: {e}")))?;
    let node = match spec.node_type.as_str() {
        "group" => NodeCreate::Group {
            zarr_format: spec.zarr_format,
            attributes: spec.attributes.clone(),
        },
        "array" => NodeCreate::Array(Box::new(spec.array_spec()?)),
        other => {
            return Err(spec_error(format!(
                "node_type '{other}' is not group or array"
            )))
        }
    };
    let writing = state.service.writing(&key).await?;
    writing
        .create(&key, node, params.overwrite, parents_from)
        .await?;
    let snapshot = writing.finish(&message).await?;
    let meta = super::api::meta(state, ApiPath(path), caller).await?;
    Ok(committed(snapshot, (StatusCode::CREATED, meta)))
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
    caller: Option<axum::Extension<crate::http::input::credentials::Caller>>,
    CommitMessage(message): CommitMessage,
    ApiBody(body, _held): ApiBody,
) -> ApiResult<Response> {
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
    let may_delete = caller.as_ref().is_some_and(|c| c.admin);
    let writing = state.service.writing(&key).await?;
    writing
        .patch(&key, patch.attributes.as_ref(), patch.shape, may_delete)
        .await?;
    let snapshot = writing.finish(&message).await?;
    Ok(committed(
        snapshot,
        super::api::meta(state, ApiPath(path), caller).await?,
    ))
}

/// `DELETE /api/v1/meta/{path}`: a node and everything below it.
pub async fn delete_meta(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    CommitMessage(message): CommitMessage,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let writing = state.service.writing(&key).await?;
    writing.delete_node(&key).await?;
    let snapshot = writing.finish(&message).await?;
    Ok(committed(snapshot, StatusCode::NO_CONTENT))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    select: Option<String>,
}

/// `PUT /api/v1/data/{path}?select=SEL`: write a region.
pub async fn put_data(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<WriteParams>,
    headers: HeaderMap,
    CommitMessage(message): CommitMessage,
    ApiBody(body, _held): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let writing = state.service.writing(&key).await?;
    let array = writing.array(&key).await?;
    let selection = match &params.select {
        Some(s) => super::data::parse_select(s)?,
        None => Selection::all(),
    };
    let resolved = selection.resolve(array.shape())?;
    let incoming = body::decode(&headers, &body, array.metadata())?;
    let w = writing.write_region(&array, &resolved, incoming).await?;
    let snapshot = writing.finish(&message).await?;
    let mut answer = json!({"shape": w.shape, "elements": w.elements, "chunks_written": w.chunks_written, "chunks_deleted": w.chunks_deleted});
    if let Some(id) = &snapshot {
        answer["snapshot"] = json!(id);
    }
    Ok(committed(snapshot, Json(answer)))
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
    CommitMessage(message): CommitMessage,
    ApiBody(body, _held): ApiBody,
) -> ApiResult<Response> {
    state.check_writable()?;
    let key = node_path(&path)?;
    let writing = state.service.writing(&key).await?;
    let array = writing.array(&key).await?;
    let incoming = body::decode(&headers, &body, array.metadata())?;
    let new_shape = writing.append(&key, params.axis, incoming).await?;
    let snapshot = writing.finish(&message).await?;
    let mut answer = json!({"shape": new_shape});
    if let Some(id) = &snapshot {
        answer["snapshot"] = json!(id);
    }
    Ok(committed(snapshot, Json(answer)))
}
