//! `/api/v1`: the hierarchy as JSON (`tree`, `meta`) and the cache's counters
//! (`stats`); slicing is `data.rs`.

use axum::extract::State;
use axum::Extension;

use crate::http::input::extract::{ApiPath, ApiQuery};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::state::AppState;
use crate::service::{DatasetView, ServiceError, VariableView};
use crate::store::{node_path, StoreKey};
use crate::zarr::array::metadata_key;
use crate::zarr::cf::dimension_names;
use crate::zarr::fill::fill_to_v3_json;
use crate::zarr::metadata::{CodecSpec, Order};
use crate::zarr::{Array, ArrayMetadata, DataType, Endian, NodeMetadata};

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
    caller: Option<Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    tree(state, ApiPath(String::new()), query, caller).await
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
    caller: Option<Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let caller = caller.as_deref();
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
    let page = visible_page(&state, &key, params.after, limit, caller).await?;
    let nodes: Vec<Value> = page
        .nodes
        .iter()
        .map(|t| match &t.node {
            // The way to what the caller may read, and no more.
            _ if !Caller::reads(caller, &t.path) => json!({"path": t.path, "node_type": "group"}),
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

/// A page of the tree of the nodes the caller sees: pages are read on
/// past hidden ones, so the page holds `limit` nodes unless the walk ends,
/// and `next` names a node the caller sees (never a hidden one).
async fn visible_page(
    state: &AppState,
    key: &StoreKey,
    after: Option<String>,
    limit: usize,
    caller: Option<&Caller>,
) -> ApiResult<crate::service::TreePage> {
    if !Caller::filters(caller, key.as_str()) {
        return Ok(state
            .service
            .tree_page(key, after.as_deref(), limit)
            .await?);
    }
    let mut shown = Vec::new();
    let mut after = after;
    loop {
        let page = state
            .service
            .tree_page(key, after.as_deref(), limit)
            .await?;
        let mut nodes = page.nodes.into_iter();
        for node in nodes.by_ref() {
            if Caller::sees(caller, &node.path) {
                shown.push(node);
                if shown.len() == limit {
                    break;
                }
            }
        }
        let more = nodes.next().is_some() || page.next.is_some();
        if shown.len() == limit || !more {
            let next = if more {
                shown.last().map(|n| n.path.clone())
            } else {
                None
            };
            return Ok(crate::service::TreePage { nodes: shown, next });
        }
        after = page.next;
    }
}

/// `GET /api/v1/meta`: the root node.
pub async fn meta_root(
    state: State<AppState>,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    meta(state, ApiPath(String::new()), caller).await
}

/// `GET /api/v1/meta/{path}`: one node, normalized across versions.
pub async fn meta(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    let key = path_key(&path)?;
    let cached = state.service.node(&key).await?;
    let node = &cached.meta;
    let mut out = Map::new();
    out.insert("path".into(), json!(key.as_str()));
    out.insert("zarr_format".into(), json!(node.zarr_format()));
    out.insert("node_type".into(), json!(node.node_type()));
    // A group on the way to what the caller may read: its name and the
    // members they may see, no more.
    let readable = Caller::reads(caller.as_deref(), key.as_str());
    if !readable && node.node_type() != "group" {
        return Err(ApiError::from(ServiceError::from(
            crate::store::StoreError::NotFound {
                key: key.as_str().to_string(),
            },
        )));
    }
    out.insert(
        "attributes".into(),
        match readable {
            true => Value::Object(node.attributes().clone()),
            false => json!({}),
        },
    );
    match node {
        NodeMetadata::Group(group) => {
            let base = if key.is_root() {
                String::new()
            } else {
                format!("{key}/")
            };
            let filtered = Caller::filters(caller.as_deref(), key.as_str());
            let members: Vec<Value> = state
                .service
                .members(&key)
                .await?
                .iter()
                .filter(|(name, _)| Caller::sees(caller.as_deref(), &format!("{base}{name}")))
                .map(|(name, n)| match n {
                    _ if !Caller::reads(caller.as_deref(), &format!("{base}{name}")) => {
                        json!({"name": name, "node_type": "group"})
                    }
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
            // Both tell of the group's arrays: only to callers who may read them all.
            if !filtered {
                if let Some(image) = state.service.multiscale(&key).await? {
                    out.insert("multiscales".into(), json!([image_json(&image)]));
                }
                if let Some(view) = state.service.dataset(&key).await? {
                    out.insert("dataset".into(), dataset_json(&view));
                }
            }
        }
        NodeMetadata::Array(meta) => {
            if let Some(array) = &cached.array {
                array_details(&state, array, &mut out).await?;
            }
            if let (Some(dims), Some(parent)) = (dimension_names(meta), key.parent()) {
                out.insert("dimensions".into(), json!(dims));
                // Coordinates are the parent group's members: described
                // only to callers that may read it.
                if Caller::reads_whole(caller.as_deref(), parent.as_str()) {
                    if let Some(view) = state.service.dataset(&parent).await? {
                        let (coords, shares) = coordinates_of(&view, key.name(), &dims);
                        out.insert("coordinates".into(), coords);
                        out.insert("shares_dimensions_with".into(), json!(shares));
                    }
                }
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
            let may_read_parent = key
                .parent()
                .is_some_and(|parent| Caller::reads_whole(caller.as_deref(), parent.as_str()));
            // Whether it is a map is read from the coordinates beside it.
            if may_read_parent {
                out.insert("map".into(), super::maps::map_json(&state, &key).await);
            }
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

fn variable_json(v: &VariableView) -> Value {
    let mut out = json!({
        "dimensions": v.dimensions,
        "shape": v.shape,
        "dtype": v.dtype,
        "attributes": v.attributes,
    });
    if let Some((first, last)) = &v.extent {
        out["first"] = first.clone();
        out["last"] = last.clone();
    }
    if let Some(calendar) = v.calendar {
        out["calendar"] = json!(calendar);
    }
    out
}

/// A group as a dataset: its dimensions, coordinates (with their extent,
/// times in ISO 8601) and data variables, and which variables use each
/// dimension.
fn dataset_json(view: &DatasetView) -> Value {
    let all = view.coordinates.iter().chain(&view.data_variables);
    let dimensions: Map<String, Value> = view
        .dimensions
        .iter()
        .map(|(name, len)| {
            let users: Vec<&str> = all
                .clone()
                .filter(|v| v.dimensions.contains(name) && &v.name != name)
                .map(|v| v.name.as_str())
                .collect();
            (name.clone(), json!({"size": len, "used_by": users}))
        })
        .collect();
    let named = |list: &[VariableView]| -> Map<String, Value> {
        list.iter()
            .map(|v| (v.name.clone(), variable_json(v)))
            .collect()
    };
    json!({
        "dimensions": dimensions,
        "coordinates": named(&view.coordinates),
        "data_variables": named(&view.data_variables),
    })
}

/// The coordinates of an array's dimensions, and the other variables of
/// its group that share a dimension with it.
fn coordinates_of(view: &DatasetView, name: &str, dims: &[String]) -> (Value, Vec<String>) {
    let coords: Map<String, Value> = view
        .coordinates
        .iter()
        .filter(|c| c.dimensions.len() == 1 && dims.contains(&c.name))
        .map(|c| (c.name.clone(), variable_json(c)))
        .collect();
    let shares = view
        .data_variables
        .iter()
        .filter(|v| v.name != name && v.dimensions.iter().any(|d| dims.contains(d)))
        .map(|v| v.name.clone())
        .collect();
    (Value::Object(coords), shares)
}

/// `GET /api/v1/stats`: cache counters.
pub async fn stats(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"cache": state.service.cache().stats()}))
}
