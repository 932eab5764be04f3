//! Share links: `/api/v1/shares` makes, lists and revokes them, and
//! `/share/{link}/...` serves what one reads, the stored values below its
//! node as `/zarr/` serves them, so Neuroglancer, vizarr, zarrita.js or a
//! colleague without an account open it as a plain Zarr store. Making a
//! link to a node needs `admin` there.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::owned::{listed, owner, revoked, room_for, ListParams, Owned};
use crate::auth::credential::now;
use crate::auth::shares::{ShareRecord, DEFAULT_LIFE_SECONDS, MAX_LIFE_SECONDS};
use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::{Caller, SharedRoot};
use crate::http::input::extract::{ApiPath, ApiQuery};
use crate::http::state::AppState;
use crate::store::StoreKey;

impl Owned for ShareRecord {
    const WHAT: &'static str = "share link";
    const KIND: &'static str = crate::auth::shares::KIND;
    fn id(&self) -> &str {
        &self.id
    }
    fn owner(&self) -> &str {
        &self.owner
    }
    fn created(&self) -> u64 {
        self.created
    }
    fn expires(&self) -> u64 {
        self.expires
    }
    fn public(&self) -> Value {
        ShareRecord::public(self)
    }
}

/// What making a link asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Make {
    /// The node it reads.
    path: String,
    #[serde(default)]
    name: Option<String>,
    /// Seconds the link lives (default 7 days, at most 366).
    #[serde(default)]
    expires_in: Option<u64>,
}

fn internal(e: impl ToString) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

/// `POST /api/v1/shares`: a new link, its text shown this once.
pub async fn mint(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let (caller, name) = owner(caller.as_deref())?;
    let ask: Make = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "bad_body",
            format!("the body is {{\"path\", \"name\", \"expires_in\"}}: {e}"),
        )
    })?;
    let path = ask.path.trim_matches('/').to_string();
    let node = if path.is_empty() {
        StoreKey::root()
    } else {
        StoreKey::new(&path).map_err(|e| {
            ApiError::bad_request(
                "bad_body",
                format!("path: '{path}' is not a store path: {e}"),
            )
        })?
    };
    let label = ask.name.unwrap_or_else(|| format!("/{path}"));
    if label.is_empty() || label.len() > 200 {
        return Err(ApiError::bad_request(
            "bad_body",
            "name: 1 to 200 characters",
        ));
    }
    let missing = || ApiError::not_found(format!("no array or group at '{path}'"));
    if !caller.rights.sees(&path) {
        return Err(missing());
    }
    if !caller.rights.may(Scope::Admin, &path) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{name} may not share '{path}': that needs admin there"),
        ));
    }
    state.service.node(&node).await?;
    let life = ask.expires_in.unwrap_or(DEFAULT_LIFE_SECONDS);
    if life == 0 || life > MAX_LIFE_SECONDS {
        return Err(ApiError::bad_request(
            "bad_body",
            format!("expires_in: 1 to {MAX_LIFE_SECONDS} seconds"),
        ));
    }
    room_for::<ShareRecord>(&state.shares, name, "too_many_shares").await?;
    let (record, text) = ShareRecord::mint(name, caller.groups.clone(), label, path, now(), life)
        .map_err(internal)?;
    let stored = serde_json::to_vec(&record).map_err(internal)?;
    state
        .shares
        .put(&record.id, stored.into())
        .await
        .map_err(crate::service::ServiceError::from)?;
    tracing::info!(target: "zarrd::audit", who = name, share = record.id, path = record.path, outcome = "share link made");
    let mut answer = record.public();
    answer["url"] = json!(format!("/share/{text}/"));
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `GET /api/v1/shares`: the caller's links (everyone's with `all=true`,
/// for administrators).
pub async fn list(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Value>> {
    let shares = listed::<ShareRecord>(&state.shares, caller.as_deref(), &params).await?;
    Ok(Json(json!({ "shares": shares })))
}

/// `DELETE /api/v1/shares/{id}`: revokes a link of the caller's (anyone's,
/// for administrators); at once here, within `KEPT_FOR` on other replicas.
pub async fn revoke(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    revoked::<ShareRecord>(&state.shares, caller.as_deref(), &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The store key a path below a link names (a trailing `/`, a listing, kept).
fn below(root: &str, key: &str) -> String {
    if root.is_empty() {
        key.to_string()
    } else {
        format!("{root}/{key}")
    }
}

/// `GET /share/{link}/{key}`: as `GET /zarr/{key}` below the link's node.
pub async fn get_key(
    state: State<AppState>,
    ApiPath((_, key)): ApiPath<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
    Extension(SharedRoot(root)): Extension<SharedRoot>,
) -> ApiResult<Response> {
    super::raw::get_key(state, ApiPath(below(&root, &key)), uri, headers, caller).await
}

/// `HEAD /share/{link}/{key}`.
pub async fn head_key(
    state: State<AppState>,
    ApiPath((_, key)): ApiPath<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
    Extension(SharedRoot(root)): Extension<SharedRoot>,
) -> ApiResult<Response> {
    super::raw::head_key(state, ApiPath(below(&root, &key)), uri, headers, caller).await
}

/// `GET /share/{link}/`: the listing of the link's node.
pub async fn list_root(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
    Extension(SharedRoot(root)): Extension<SharedRoot>,
) -> ApiResult<Response> {
    super::listing::list(&state, &root, &headers, caller.as_deref()).await
}
