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
use crate::service::records::Records;

use crate::auth::credential::now;

/// Keys (and share links) one owner may hold at once.
pub const MAX_KEYS: usize = 100;

/// A credential's record with an id and an expiry (API keys, share links).
pub(super) trait Expiring: serde::de::DeserializeOwned {
    fn id(&self) -> &str;
    fn expires(&self) -> u64;
}

impl Expiring for KeyRecord {
    fn id(&self) -> &str {
        &self.id
    }
    fn expires(&self) -> u64 {
        self.expires
    }
}

/// Every record in `records`; expired ones are deleted on the way.
pub(super) async fn live<T: Expiring>(records: &Records) -> ApiResult<Vec<T>> {
    let mut live = Vec::new();
    let stored = records
        .all()
        .await
        .map_err(crate::service::ServiceError::from)?;
    for record in stored
        .iter()
        .filter_map(|r| serde_json::from_slice::<T>(r).ok())
    {
        if record.expires() <= now() {
            records
                .delete(record.id())
                .await
                .map_err(crate::service::ServiceError::from)?;
        } else {
            live.push(record);
        }
    }
    Ok(live)
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

/// The caller who may manage keys and share links: signed in, and not
/// with a key or a link.
pub(super) fn owner(caller: Option<&Caller>) -> ApiResult<(&Caller, &str)> {
    match caller.and_then(|c| Some((c, c.name.as_deref()?))) {
        Some((_, name)) if name.starts_with("key:") || name.starts_with("share:") => {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "API keys and share links cannot manage keys or links: sign in, or use a token",
            ))
        }
        Some(found) => Ok(found),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "API keys belong to someone: sign in first (Authorization: Bearer ...)",
        )),
    }
}

pub(super) fn parse<T: Expiring>(record: &[u8]) -> Option<T> {
    serde_json::from_slice(record).ok()
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
    let held: Vec<KeyRecord> = live(&state.keys).await?;
    if held.iter().filter(|k| k.owner == name).count() >= MAX_KEYS {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "too_many_keys",
            format!("{name} holds {MAX_KEYS} keys: revoke one first"),
        ));
    }
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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Everyone's keys (administrators of the whole store only).
    #[serde(default)]
    all: bool,
}

pub(super) fn administers(caller: &Caller) -> bool {
    caller.rights.may(Scope::Admin, "")
}

/// `GET /api/v1/keys`: the caller's keys (everyone's with `all=true`, for
/// administrators).
pub async fn list(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Value>> {
    let (caller, name) = owner(caller.as_deref())?;
    if params.all && !administers(caller) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "all=true lists everyone's keys: for administrators of the whole store",
        ));
    }
    let mut keys: Vec<KeyRecord> = live::<KeyRecord>(&state.keys)
        .await?
        .into_iter()
        .filter(|k| params.all || k.owner == name)
        .collect();
    keys.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    Ok(Json(
        json!({"keys": keys.iter().map(KeyRecord::public).collect::<Vec<_>>()}),
    ))
}

/// `DELETE /api/v1/keys/{id}`: revokes a key of the caller's (anyone's,
/// for administrators); at once here, within `KEPT_FOR` on other replicas.
pub async fn revoke(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let (caller, name) = owner(caller.as_deref())?;
    let missing = || ApiError::not_found(format!("no key '{id}' of {name}"));
    if crate::auth::keys::presented(&format!("zk_{id}_x")).is_none() {
        return Err(missing());
    }
    let record = state
        .keys
        .get(&id)
        .await
        .map_err(crate::service::ServiceError::from)?
        .and_then(|r| parse::<KeyRecord>(&r))
        .ok_or_else(missing)?;
    if record.owner != name && !administers(caller) {
        return Err(missing());
    }
    state
        .keys
        .delete(&id)
        .await
        .map_err(crate::service::ServiceError::from)?;
    tracing::info!(target: "zarrd::audit", who = name, key = id, owner = record.owner, outcome = "key revoked");
    Ok(StatusCode::NO_CONTENT.into_response())
}
