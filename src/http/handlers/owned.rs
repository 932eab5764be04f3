//! What API keys and share links have in common as things a caller owns:
//! who may manage them (a signed-in caller, not a key or a link), their
//! records' listing (expired ones deleted on the way) and revocation (by
//! their owner, or an administrator of the whole store).

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::auth::credential::{self, now};
use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::service::records::Records;
use crate::service::ServiceError;

/// Keys, or share links, one owner may hold at once.
pub const MAX_OWNED: usize = 100;

/// A record a caller owns, with an id and an expiry.
pub(super) trait Owned: serde::de::DeserializeOwned {
    /// What the record is, in messages (`key`, `share link`).
    const WHAT: &'static str;
    /// Its texts' kind (`zk`, `zs`).
    const KIND: &'static str;
    fn id(&self) -> &str;
    fn owner(&self) -> &str;
    fn created(&self) -> u64;
    fn expires(&self) -> u64;
    /// What a listing shows of it: never its secret's digest.
    fn public(&self) -> Value;
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
            "API keys and share links belong to someone: sign in first (Authorization: Bearer ...)",
        )),
    }
}

/// Whether the caller administers the whole store (anyone's keys and links).
pub(super) fn administers(caller: &Caller) -> bool {
    caller.rights.may(Scope::Admin, "")
}

/// Every record in `records`; expired ones are deleted on the way.
pub(super) async fn live<T: Owned>(records: &Records) -> ApiResult<Vec<T>> {
    let mut live = Vec::new();
    let stored = records.all().await.map_err(ServiceError::from)?;
    for record in stored
        .iter()
        .filter_map(|r| serde_json::from_slice::<T>(r).ok())
    {
        if record.expires() <= now() {
            records
                .delete(record.id())
                .await
                .map_err(ServiceError::from)?;
        } else {
            live.push(record);
        }
    }
    Ok(live)
}

/// Refuses a new record when `name` holds [`MAX_OWNED`] already.
pub(super) async fn room_for<T: Owned>(
    records: &Records,
    name: &str,
    code: &'static str,
) -> ApiResult<()> {
    let held: Vec<T> = live(records).await?;
    if held.iter().filter(|r| r.owner() == name).count() >= MAX_OWNED {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            code,
            format!("{name} holds {MAX_OWNED} {}s: revoke one first", T::WHAT),
        ));
    }
    Ok(())
}

/// What listing asks for.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Everyone's (administrators of the whole store only).
    #[serde(default)]
    all: bool,
}

/// The caller's records, oldest first (everyone's with `all=true`, for
/// administrators), as listings show them.
pub(super) async fn listed<T: Owned>(
    records: &Records,
    caller: Option<&Caller>,
    params: &ListParams,
) -> ApiResult<Vec<Value>> {
    let (caller, name) = owner(caller)?;
    if params.all && !administers(caller) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "all=true lists everyone's {}s: for administrators of the whole store",
                T::WHAT
            ),
        ));
    }
    let mut mine: Vec<T> = live::<T>(records)
        .await?
        .into_iter()
        .filter(|r| params.all || r.owner() == name)
        .collect();
    mine.sort_by(|a, b| (a.created(), a.id()).cmp(&(b.created(), b.id())));
    Ok(mine.iter().map(T::public).collect())
}

/// Revokes the record `id` of the caller's (anyone's, for administrators):
/// at once here, within `KEPT_FOR` on other replicas. 404 for one that is
/// not there or not theirs.
pub(super) async fn revoked<T: Owned>(
    records: &Records,
    caller: Option<&Caller>,
    id: &str,
) -> ApiResult<()> {
    let (caller, name) = owner(caller)?;
    let missing = || ApiError::not_found(format!("no {} '{id}' of {name}", T::WHAT));
    if credential::presented(T::KIND, &format!("{}_{id}_x", T::KIND)).is_none() {
        return Err(missing());
    }
    let record = records
        .get(id)
        .await
        .map_err(ServiceError::from)?
        .and_then(|r| serde_json::from_slice::<T>(&r).ok())
        .ok_or_else(missing)?;
    if record.owner() != name && !administers(caller) {
        return Err(missing());
    }
    records.delete(id).await.map_err(ServiceError::from)?;
    tracing::info!(target: "zarrd::audit", who = name, id, owner = record.owner(), outcome = %format!("{} revoked", T::WHAT));
    Ok(())
}
