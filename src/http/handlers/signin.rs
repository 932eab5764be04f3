//! Browser sign-in (`/auth/...`): the authorization-code flow with PKCE
//! against a configured provider (`[[oidc]]` with a `client_id`), ending in
//! a session cookie (`HttpOnly`, `SameSite=Lax`, `Secure` over HTTPS).
//! The authorization middleware finds the session by its cookie
//! ([`session_of`]); writes made with it must repeat its CSRF token in
//! `X-CSRF-Token`, and pages of origins other than this server's and those
//! `[cors] credentials` names are never answered as its user.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::auth::credential::now;
use crate::auth::oidc::TokenError;
use crate::auth::session::{
    self, local_path, Pending, SessionRecord, COOKIE, CSRF_HEADER, LIFE_SECONDS, PENDING_COOKIE,
    PENDING_SECONDS,
};
use crate::auth::{Denied, Identity};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::cookie;
use crate::http::input::extract::ApiQuery;
use crate::http::state::AppState;

/// How browsers reach this server: `--public-url`, or the request's host.
fn public_base(state: &AppState, headers: &HeaderMap, uri: &Uri) -> String {
    if let Some(url) = &state.config.public_url {
        return url.clone();
    }
    let scheme = if state.config.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

fn redirect_uri(state: &AppState, headers: &HeaderMap, uri: &Uri) -> String {
    format!("{}/auth/callback", public_base(state, headers, uri))
}

/// Whether browsers reach the server over HTTPS.
fn https(state: &AppState) -> bool {
    state.config.tls_cert.is_some()
        || state
            .config
            .public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https:"))
}

/// A cookie's name: over HTTPS with the `__Host-` prefix, so no other
/// host of the site (a sibling subdomain) can set one in its place.
pub fn cookie_name(state: &AppState, name: &'static str) -> &'static str {
    match (https(state), name) {
        (false, name) => name,
        (true, COOKIE) => "__Host-zarrd_session",
        (true, _) => "__Host-zarrd_signin",
    }
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Lax` and `Path=/` always,
/// `Secure` when browsers reach the server over HTTPS.
fn set_cookie(state: &AppState, name: &'static str, value: &str, max_age: u64) -> HeaderValue {
    let secure = if https(state) { "; Secure" } else { "" };
    let name = cookie_name(state, name);
    let text = format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn redirect(to: &str) -> Response {
    let mut response = StatusCode::FOUND.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn provider_error(e: TokenError) -> ApiError {
    match e {
        TokenError::Unavailable { .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "identity_provider_unavailable",
            e.to_string(),
        ),
        other => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "sign_in_refused",
            other.to_string(),
        ),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginParams {
    /// The path to return to (on this server).
    #[serde(default)]
    next: Option<String>,
    /// Which provider, by its issuer URL (default: the first with a client_id).
    #[serde(default)]
    issuer: Option<String>,
}

/// `GET /auth/login`: to the provider's sign-in page.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    ApiQuery(params): ApiQuery<LoginParams>,
) -> ApiResult<Response> {
    let mut offered = state.auth.sign_in_issuers();
    let found = match &params.issuer {
        Some(wanted) => offered.find(|(_, i)| &i.config.issuer == wanted),
        None => offered.next(),
    };
    let Some((index, issuer)) = found else {
        return Err(ApiError::not_found(match &params.issuer {
            Some(wanted) => format!("issuer: browsers do not sign in with '{wanted}' here"),
            None => "browsers do not sign in here: no [[oidc]] table has a client_id".into(),
        }));
    };
    let endpoints = issuer.endpoints().await.map_err(provider_error)?;
    // A long path would make the cookie one browsers drop.
    let next = params.next.as_deref().filter(|n| n.len() <= 1024);
    let pending = Pending::new(index, local_path(next))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
    let mut to = url::Url::parse(&endpoints.authorization).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "identity_provider_unavailable",
            format!("the provider's authorization_endpoint: {e}"),
        )
    })?;
    to.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair(
            "client_id",
            issuer.config.client_id.as_deref().unwrap_or_default(),
        )
        .append_pair("redirect_uri", &redirect_uri(&state, &headers, &uri))
        .append_pair("scope", &issuer.config.scopes.join(" "))
        .append_pair("state", &pending.state)
        .append_pair("nonce", &pending.nonce)
        .append_pair("code_challenge", &session::challenge(&pending.verifier))
        .append_pair("code_challenge_method", "S256");
    let mut response = redirect(to.as_str());
    let cookie = set_cookie(
        &state,
        PENDING_COOKIE,
        &pending.to_cookie(),
        PENDING_SECONDS,
    );
    response.headers_mut().append(header::SET_COOKIE, cookie);
    Ok(response)
}

#[derive(Debug, Default, Deserialize)]
pub struct CallbackParams {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// Expired sessions' records are deleted at most this often (by their ids).
const PRUNE_EVERY: u64 = 600;

/// Deletes expired sessions' records, in the background, at most once per
/// [`PRUNE_EVERY`] in this process.
fn prune(state: &AppState) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let at = now();
    let last = LAST.load(Ordering::Relaxed);
    if at.saturating_sub(last) < PRUNE_EVERY
        || LAST
            .compare_exchange(last, at, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let sessions = state.sessions.clone();
    tokio::spawn(async move {
        let Ok(ids) = sessions.ids().await else {
            return;
        };
        for id in ids.iter().filter(|id| session::expired_id(id, at)) {
            let _ = sessions.delete(id).await;
        }
    });
}

/// `GET /auth/callback`: the provider sends the browser back with a code,
/// exchanged (with the PKCE verifier) for an ID token; the session begins.
pub async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    ApiQuery(params): ApiQuery<CallbackParams>,
) -> ApiResult<Response> {
    let pending = cookie(&headers, cookie_name(&state, PENDING_COOKIE))
        .and_then(Pending::from_cookie)
        .ok_or_else(|| {
            ApiError::bad_request(
                "no_sign_in",
                format!("no sign-in is under way in this browser (or it took over {PENDING_SECONDS} s): start again at /auth/login"),
            )
        })?;
    if let Some(error) = params.error {
        let why = params.error_description.unwrap_or_default();
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "sign_in_refused",
            format!("the provider refused the sign-in: {error} {why}")
                .trim_end()
                .to_string(),
        ));
    }
    let same = params.state.as_deref().is_some_and(|s| {
        use subtle::ConstantTimeEq;
        bool::from(s.as_bytes().ct_eq(pending.state.as_bytes()))
    });
    if !same {
        return Err(ApiError::bad_request(
            "sign_in_state",
            "state: not the one this browser's sign-in began with",
        ));
    }
    let code = params
        .code
        .filter(|c| !c.is_empty() && c.len() <= 4096)
        .ok_or_else(|| ApiError::bad_request("sign_in_state", "code: missing"))?;
    let issuer = state.auth.sign_in_issuer(pending.issuer).ok_or_else(|| {
        ApiError::bad_request(
            "no_sign_in",
            "the sign-in's provider is no longer configured",
        )
    })?;
    let verified = issuer
        .exchange(
            &code,
            &redirect_uri(&state, &headers, &uri),
            &pending.verifier,
            &pending.nonce,
        )
        .await
        .map_err(provider_error)?;
    let user = verified.who.user.clone().unwrap_or_default();
    let (record, text) = SessionRecord::mint(
        &issuer.config.issuer,
        user.clone(),
        verified.who.groups.clone(),
        now(),
        LIFE_SECONDS,
    )
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
    let stored = serde_json::to_vec(&record)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    state
        .sessions
        .put(&record.id, stored.into())
        .await
        .map_err(crate::service::ServiceError::from)?;
    prune(&state);
    tracing::info!(target: "zarrd::audit", who = format!("user:{user}"), issuer = issuer.config.issuer, outcome = "signed in");
    let mut response = redirect(&pending.next);
    let headers = response.headers_mut();
    headers.append(
        header::SET_COOKIE,
        set_cookie(&state, COOKIE, &text, LIFE_SECONDS),
    );
    headers.append(
        header::SET_COOKIE,
        set_cookie(&state, PENDING_COOKIE, "", 0),
    );
    Ok(response)
}

/// Whether a request may be answered as its session cookie's user: pages
/// of this server and of the origins `[cors] credentials` names; top-level
/// navigations from elsewhere (a link followed) too, as they show the
/// answer to the user only.
fn cookie_usable(state: &AppState, headers: &HeaderMap, uri: &Uri) -> bool {
    fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
        headers.get(name).and_then(|v| v.to_str().ok())
    }
    if let Some(origin) = text(headers, "origin") {
        if state.config.cors.credentials.iter().any(|o| o == origin) {
            return true;
        }
        // This server's own origin: `--public-url`'s, or the scheme it
        // serves and the host the request names.
        let own = url::Url::parse(&public_base(state, headers, uri))
            .map(|u| u.origin().ascii_serialization());
        return own.is_ok_and(|own| own.eq_ignore_ascii_case(origin));
    }
    match text(headers, "sec-fetch-site") {
        Some("cross-site" | "same-site") => text(headers, "sec-fetch-mode") == Some("navigate"),
        _ => true,
    }
}

/// The session a request's cookie holds, if it may be used here and is
/// valid; refused when a write lacks its CSRF token.
pub async fn session_of(
    state: &AppState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    text: &str,
) -> Result<Option<Identity>, Denied> {
    let Some(record) = stored_session(state, headers, uri, text).await? else {
        return Ok(None);
    };
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    let token = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    if !safe && !record.csrf_matches(token) {
        return Err(Denied::Forbidden(format!(
            "writes made with the session cookie must carry its CSRF token in {CSRF_HEADER} (from GET /auth/session)"
        )));
    }
    Ok(Some(state.auth.session_identity(&record)))
}

/// The valid session record a cookie's text names, if it may be used.
async fn stored_session(
    state: &AppState,
    headers: &HeaderMap,
    uri: &Uri,
    text: &str,
) -> Result<Option<SessionRecord>, Denied> {
    if !cookie_usable(state, headers, uri) {
        return Ok(None);
    }
    let Some(presented) = session::presented(text) else {
        return Ok(None);
    };
    let bytes = match state.sessions.get(presented.id).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(Denied::Unavailable(format!(
                "sessions could not be read from the store: {e}"
            )))
        }
    };
    // A session ends with its provider's sign-in configuration too.
    Ok(serde_json::from_slice::<SessionRecord>(&bytes)
        .ok()
        .filter(|r| r.admits(&presented, now()).is_ok())
        .filter(|r| {
            state
                .auth
                .sign_in_issuers()
                .any(|(_, i)| i.config.issuer == r.issuer)
        }))
}

/// `GET /auth/session`: who the browser is signed in as (with the CSRF
/// token its writes repeat), and where it may sign in.
pub async fn session(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Response> {
    let record = match cookie(&headers, cookie_name(&state, COOKIE)) {
        Some(text) => stored_session(&state, &headers, &uri, text)
            .await
            .map_err(|_| unavailable())?,
        None => None,
    };
    let providers: Vec<_> = state
        .auth
        .sign_in_issuers()
        .map(|(_, i)| {
            let login = url::form_urlencoded::Serializer::new(String::from("/auth/login?"))
                .append_pair("issuer", &i.config.issuer)
                .finish();
            json!({"issuer": i.config.issuer, "login": login})
        })
        .collect();
    let body = match record {
        Some(r) => json!({
            "signed_in": true, "user": r.user, "groups": r.groups, "issuer": r.issuer,
            "expires": r.expires, "csrf": r.csrf, "providers": providers,
        }),
        None => json!({"signed_in": false, "providers": providers}),
    };
    let mut response = Json(body).into_response();
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::VARY, HeaderValue::from_static("Cookie, Origin"));
    Ok(response)
}

/// `POST /auth/logout`: ends the session everywhere (its record is
/// deleted) and clears the cookie. Needs the session's CSRF token from one
/// of the pages that may use the session, so no other page can sign the
/// user out.
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Response> {
    let Some(text) = cookie(&headers, cookie_name(&state, COOKIE)) else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let refused = |why: &str| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("signing out {why}"),
        ))
    };
    if !cookie_usable(&state, &headers, &uri) {
        return refused("is for this server's own pages");
    }
    let record = stored_session(&state, &headers, &uri, text)
        .await
        .map_err(|_| unavailable())?;
    if let Some(record) = record {
        let token = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !record.csrf_matches(token) {
            return refused(&format!("needs the session's CSRF token in {CSRF_HEADER}"));
        }
        state
            .sessions
            .delete(&record.id)
            .await
            .map_err(crate::service::ServiceError::from)?;
        tracing::info!(target: "zarrd::audit", who = format!("user:{}", record.user), outcome = "signed out");
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(&state, COOKIE, "", 0));
    Ok(response)
}

fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "sessions could not be read from the store",
    )
}
