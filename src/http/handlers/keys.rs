//! `/api/v1/keys`: API keys a signed-in caller mints for scripts and
//! pipelines, lists and revokes (an administrator of the whole store may
//! list and revoke anyone's). The key's text is in the answer to its
//! minting and nowhere else.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::keys::{KeyRecord, DEFAULT_LIFE_SECONDS, MAX_LIFE_SECONDS};
use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::{ApiPath, ApiQuery};
use crate::http::state::AppState;

use super::owned::{listed, owner, revoked, room_for, ListParams, Owned};
use crate::auth::credential::now;

impl Owned for KeyRecord {
    const WHAT: &'static str = "key";
    const KIND: &'static str = "zk";
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
        KeyRecord::public(self)
    }
}

/// What minting a key asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mint {
    name: String,
    #[serde(default)]
    grant: Option<Scope>,
    #[serde(default)]
    prefixes: Option<Vec<String>>,
    /// Seconds the key lives (default 90 days, at most 366).
    #[serde(default)]
    expires_in: Option<u64>,
}

/// `POST /api/v1/keys`: a new key, its text shown this once.
pub async fn mint(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let (caller, name) = owner(caller.as_deref())?;
    let ask: Mint = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "bad_body",
            format!("the body is {{\"name\", \"grant\", \"prefixes\", \"expires_in\"}}: {e}"),
        )
    })?;
    if ask.name.is_empty() || ask.name.len() > 200 {
        return Err(ApiError::bad_request(
            "bad_body",
            "name: 1 to 200 characters",
        ));
    }
    let grant = ask.grant.unwrap_or(Scope::Read);
    if !caller.rights.has(grant) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{name} may not {grant:?} anywhere: a key cannot give more").to_lowercase(),
        ));
    }
    let prefixes: Vec<String> = ask
        .prefixes
        .unwrap_or_else(|| vec![String::new()])
        .into_iter()
        .map(|p| p.trim_matches('/').to_string())
        .collect();
    if prefixes.is_empty() || prefixes.len() > 64 {
        return Err(ApiError::bad_request("bad_body", "prefixes: 1 to 64 paths"));
    }
    if let Some(bad) = prefixes
        .iter()
        .find(|p| !p.is_empty() && crate::store::StoreKey::new(p).is_err())
    {
        return Err(ApiError::bad_request(
            "bad_body",
            format!("prefixes: '{bad}' is not a store path"),
        ));
    }
    room_for::<KeyRecord>(&state.keys, name, "too_many_keys").await?;
    let life = ask.expires_in.unwrap_or(DEFAULT_LIFE_SECONDS);
    if life == 0 || life > MAX_LIFE_SECONDS {
        return Err(ApiError::bad_request(
            "bad_body",
            format!("expires_in: 1 to {MAX_LIFE_SECONDS} seconds"),
        ));
    }
    let (record, text) = KeyRecord::mint(
        name,
        caller.groups.clone(),
        ask.name,
        grant,
        prefixes,
        now(),
        life,
    )
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
    let stored = serde_json::to_vec(&record)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    state
        .keys
        .put(&record.id, stored.into())
        .await
        .map_err(crate::service::ServiceError::from)?;
    tracing::info!(target: "zarrd::audit", who = name, key = record.id, grant = ?record.grant, outcome = "key minted");
    let mut answer = record.public();
    answer["key"] = json!(text);
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `GET /api/v1/keys`: the caller's keys (everyone's with `all=true`, for
/// administrators).
pub async fn list(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Value>> {
    let keys = listed::<KeyRecord>(&state.keys, caller.as_deref(), &params).await?;
    Ok(Json(json!({ "keys": keys })))
}

/// `DELETE /api/v1/keys/{id}`: revokes a key of the caller's (anyone's,
/// for administrators); at once here, within `KEPT_FOR` on other replicas.
pub async fn revoke(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    revoked::<KeyRecord>(&state.keys, caller.as_deref(), &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
