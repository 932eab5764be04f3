//! `GET /api/v1/versions/{mount}`: the branches, tags and recent snapshots
//! of a versioned mount (an Icechunk repository), each of which can be read
//! as `{mount}@{branch, tag or snapshot id}` in `/zarr/` and `/api/v1/`.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiResult;
use crate::http::input::extract::{ApiPath, ApiQuery};
use crate::http::state::AppState;
use crate::store::node_path;

/// Snapshots listed when the request names no `limit`, and at most.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionsParams {
    limit: Option<usize>,
}

pub async fn versions(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<VersionsParams>,
) -> ApiResult<Json<Value>> {
    let key = node_path(&path)?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let v = state.service.versions(&key, limit).await?;
    let named = |list: &[(String, String)]| -> Vec<Value> {
        list.iter()
            .map(|(name, id)| json!({"name": name, "snapshot": id}))
            .collect()
    };
    Ok(Json(json!({
        "path": key.as_str(),
        "branches": named(&v.branches),
        "tags": named(&v.tags),
        "snapshots": v.snapshots,
    })))
}
