//! `/api/v1/policy`: the access rules kept on the store, beside the config
//! file's, that administrators of the whole store read and replace through
//! the API. Every replica serving the store takes a new document within
//! `KEPT_FOR` (this one at once).

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::policy::Document as Stored;
use crate::auth::{Policy, RuleConfig};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::state::AppState;

/// Rules one document may hold.
pub const MAX_RULES: usize = 1000;

/// What replacing the document sends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Replace {
    rules: Vec<RuleConfig>,
}

/// The document on the store (an empty one when there is none).
pub async fn stored(state: &AppState) -> ApiResult<Stored> {
    let bytes = state
        .policy
        .get(crate::service::records::POLICY)
        .await
        .map_err(crate::service::ServiceError::from)?;
    Ok(bytes
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default())
}

fn answer(state: &AppState, stored: &Stored) -> Json<Value> {
    Json(json!({
        "config": state.auth.configured_rules(),
        "stored": stored.rules,
        "updated": stored.updated,
        "by": stored.by,
    }))
}

/// `GET /api/v1/policy`: the config file's rules and the store's.
pub async fn get(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let stored = stored(&state).await?;
    Ok(answer(&state, &stored))
}

/// `PUT /api/v1/policy`: replaces the store's rules (`{"rules": [...]}`),
/// checked as the config file's are, and in force here at once.
pub async fn put(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let asked: Replace = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "bad_body",
            format!(
                "the body is {{\"rules\": [{{\"path\", \"grant\", \"to\", \"deny\"}}, ...]}}: {e}"
            ),
        )
    })?;
    if asked.rules.len() > MAX_RULES {
        return Err(ApiError::bad_request(
            "bad_body",
            format!("rules: at most {MAX_RULES}"),
        ));
    }
    let all: Vec<RuleConfig> = state
        .auth
        .configured_rules()
        .iter()
        .chain(&asked.rules)
        .cloned()
        .collect();
    Policy::new(&all).map_err(|e| {
        // Numbered as the document's own rules, after the config file's.
        ApiError::bad_request("bad_policy", e.to_string())
    })?;
    let by = caller
        .as_deref()
        .and_then(|c| c.name.clone())
        .unwrap_or_else(|| "anonymous".into());
    let stored = Stored {
        rules: asked.rules,
        updated: crate::auth::credential::now(),
        by: by.clone(),
    };
    let bytes = serde_json::to_vec(&stored)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    state
        .policy
        .put(crate::service::records::POLICY, bytes.into())
        .await
        .map_err(crate::service::ServiceError::from)?;
    state
        .auth
        .set_stored_rules(&stored.rules)
        .map_err(|e| ApiError::bad_request("bad_policy", e.to_string()))?;
    tracing::info!(target: "zarrd::audit", who = by, rules = stored.rules.len(), outcome = "policy replaced");
    Ok(answer(&state, &stored))
}
