//! The authorization middleware: which scope a request needs, on which path,
//! and the 401 / 403 answers.

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use super::audit;
use crate::auth::{credential, session, shares, Denied, Reach, Scope};
use crate::http::error::ApiError;
use crate::http::handlers::signin;
use crate::http::input::credentials::{cookie, signed_parts, Caller, ClientAddr, SharedRoot};
use crate::http::routes::{self, Access, Resource};
use crate::http::state::AppState;
use crate::zarr::metadata::NODE_DOCUMENTS;

/// The scope a request needs beyond its method's (from the route table):
/// whatever deletes more than the keys it names needs `admin`. (Resizing an
/// array smaller, which deletes the chunks outside the new shape, is
/// judged by the engine against the stored shape: see [`Caller`].)
fn escalate(needed: Scope, method: &Method, path: &str, query: Option<&str>) -> Scope {
    // The key as the handler will see it: decoded first (`%2F` is a `/`).
    let document = || {
        path.strip_prefix("/zarr/").is_some_and(|k| {
            let key = percent_decode_str(k).decode_utf8_lossy();
            let name = key.trim_end_matches('/').rsplit('/').next().unwrap_or("");
            // Consolidated metadata is what readers open a whole hierarchy by.
            NODE_DOCUMENTS.contains(&name) || name == ".zmetadata"
        })
    };
    match *method {
        // Replacing a node deletes everything below it first.
        Method::PUT if path.starts_with("/api/v1/meta/") && overwrites(query) => Scope::Admin,
        // Deleting a node's metadata document removes the node (and
        // deleting `.zmetadata` every node to readers that open by it).
        Method::DELETE if document() => Scope::Admin,
        _ => needed,
    }
}

/// Whether a query asks to replace what exists (`overwrite=` anything but `false`).
fn overwrites(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .any(|(k, v)| k == "overwrite" && v != "false")
}

pub async fn authorize<Fut>(
    state: &AppState,
    mut request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let uri = request.uri().clone();
    let path = uri.path();
    // Requests no route matched are answered 404 by the fallback.
    let Some(route) = request
        .extensions()
        .get::<MatchedPath>()
        .and_then(|m| routes::matched(m.as_str()))
    else {
        return next(request).await;
    };
    let method = routes::method_name(request.method());
    // A method the route lacks is answered 405; it needs no more than a read.
    let needed = match route.access(method).unwrap_or(Access::Needs(Scope::Read)) {
        Access::Public => return next(request).await,
        Access::Needs(scope) => escalate(scope, request.method(), path, request.uri().query()),
    };
    let mut resource = route.resource_of(method, path, request.uri().query());
    let reach = route.reach(method, path);
    let identity = if route.resource == Resource::Shared {
        // A share link's text is its credential, and its node the root
        // of the paths below it.
        match share_identity(state, path).await {
            Ok((who, root)) => {
                resource = resource.map(|below| join(&root, &below));
                request.extensions_mut().insert(SharedRoot(root));
                Ok(who)
            }
            Err(denied) => Err(denied),
        }
    } else {
        identify(state, request.method(), &uri, request.headers()).await
    };
    let who = match identity {
        Ok(who) => who,
        Err(denied) => {
            let response = refusal(denied, resource.as_deref(), path);
            audit::refused(&request, None, None, response.status());
            return response;
        }
    };
    // Deleting a node, or writing a document that describes it (and, as
    // consolidated metadata, the nodes below it), reaches all below it:
    // judged on the node, with every node below.
    let describes = method == "put"
        && resource
            .as_deref()
            .is_some_and(|p| node_of_document(p) != p);
    let (judged, reach) = match resource.as_deref() {
        Some(p) if needed == Scope::Admin || describes => {
            (Some(node_of_document(p)), Reach::Subtree)
        }
        p => (p, reach),
    };
    if let Err(denied) = state.auth.judge(&who, needed, judged, reach) {
        let response = refusal(denied, resource.as_deref(), path);
        audit::refused(
            &request,
            who.name.as_deref(),
            who.owner.as_deref(),
            response.status(),
        );
        return response;
    }
    let rights = &who.rights;
    let admin = match resource.as_deref() {
        Some(p) => rights.may_all_below(Scope::Admin, node_of_document(p)),
        None => rights.has(Scope::Admin),
    };
    // Where groups a create makes may begin: nowhere above what the caller may write.
    let within = resource
        .as_deref()
        .filter(|_| needed >= Scope::Write)
        .and_then(|p| rights.writes_from(p))
        .filter(|from| !from.is_empty());
    // What a session or a share link reads is for its holder alone.
    let private = match who.stored.as_ref().map(|s| s.kind) {
        Some("sessions") => Some(true),
        Some("shares") => Some(false),
        _ => None,
    };
    let bucket = who.rate.map(|_| match &who.owner {
        Some(name) => name.clone(),
        None => match request.extensions().get::<ClientAddr>() {
            Some(ClientAddr(ip)) => format!("address:{ip}"),
            None => "address:unknown".into(),
        },
    });
    request.extensions_mut().insert(Caller {
        admin,
        within,
        name: who.name.clone(),
        rights: who.rights.clone(),
        rate: who.rate,
        bucket,
        groups: who.groups.clone(),
        expires: who.expires,
        stored: who.stored.clone(),
    });
    if needed == Scope::Read {
        let response = next(request).await;
        return match private {
            Some(cookie) => kept_private(response, cookie),
            None => response,
        };
    }
    let written = audit::Written::of(&request, who.name, who.owner);
    let response = next(request).await;
    written.log(response.status());
    response
}

/// Who a request says it comes from: an S3 signature (on `/s3` only, so
/// other requests do not gather their headers for it), a bearer token, an
/// API key, a browser session's cookie, or no one.
async fn identify(
    state: &AppState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<crate::auth::Identity, Denied> {
    let path = uri.path();
    let s3 = path == "/s3" || path.starts_with("/s3/");
    let signed = s3
        .then(|| signed_parts(method, uri, headers))
        .filter(|signed| signed.is_signed());
    if let Some(signed) = &signed {
        return state
            .auth
            .identify_signed(signed, std::time::SystemTime::now());
    }
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Some(key) = authorization.and_then(api_key) {
        return key_identity(state, key, authorization).await;
    }
    if authorization.is_none() {
        let name = signin::cookie_name(state, session::COOKIE);
        if let Some(session) = cookie(headers, name) {
            if let Some(who) = signin::session_of(state, method, uri, headers, session).await? {
                return Ok(who);
            }
        }
    }
    state.auth.identify(authorization).await
}

/// An answer read with a session cookie (`cookie`) or a share link: no
/// shared cache may keep it, as it would serve it to others (and, for a
/// link, after its revocation); a browser revalidates it.
fn kept_private(mut response: Response, cookie: bool) -> Response {
    let headers = response.headers_mut();
    let no_store = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("no-store"));
    if !no_store {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-cache"),
        );
    }
    if cookie {
        headers.append(header::VARY, HeaderValue::from_static("Cookie"));
    }
    response
}

/// `base/below`, or either alone when the other is empty.
fn join(base: &str, below: &str) -> String {
    match (base.is_empty(), below.is_empty()) {
        (true, _) => below.to_string(),
        (_, true) => base.to_string(),
        _ => format!("{base}/{below}"),
    }
}

/// Who a share link (`/share/zs_.../...`) stands for, and the node it reads.
async fn share_identity(
    state: &AppState,
    path: &str,
) -> Result<(crate::auth::Identity, String), Denied> {
    let invalid = || Denied::Unauthenticated("the share link is not valid".into());
    let text = path
        .strip_prefix("/share/")
        .map(|rest| rest.split('/').next().unwrap_or(rest))
        .ok_or_else(invalid)?;
    let link = shares::presented(text).ok_or_else(invalid)?;
    let record = match state.shares.get(link.id).await {
        Ok(Some(bytes)) => {
            serde_json::from_slice::<shares::ShareRecord>(&bytes).map_err(|_| invalid())?
        }
        Ok(None) => return Err(invalid()),
        Err(e) => {
            return Err(Denied::Unavailable(format!(
                "share links could not be read from the store: {e}"
            )))
        }
    };
    record
        .admits(&link, credential::now())
        .map_err(Denied::Unauthenticated)?;
    let who = state.auth.share_identity(&record).ok_or_else(invalid)?;
    Ok((who, record.path))
}

/// The node a document key describes (`a/b/zarr.json` is `a/b`); any
/// other path as it is.
fn node_of_document(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some((node, name)) if NODE_DOCUMENTS.contains(&name) || name == ".zmetadata" => node,
        None if NODE_DOCUMENTS.contains(&path) || path == ".zmetadata" => "",
        _ => path,
    }
}

/// The API key in an `Authorization` header, if it holds one.
fn api_key(authorization: &str) -> Option<crate::auth::keys::Presented<'_>> {
    let token = authorization
        .strip_prefix("Bearer ")
        .or_else(|| authorization.strip_prefix("bearer "))?;
    crate::auth::keys::presented(token.trim())
}

/// Who an API key stands for, from its record on the store.
async fn key_identity(
    state: &AppState,
    key: crate::auth::keys::Presented<'_>,
    authorization: Option<&str>,
) -> Result<crate::auth::Identity, Denied> {
    let invalid = || Denied::Unauthenticated("the API key is not valid".into());
    let record = match state.keys.get(key.id).await {
        Ok(Some(bytes)) => {
            serde_json::from_slice::<crate::auth::keys::KeyRecord>(&bytes).map_err(|_| invalid())?
        }
        // No such key: perhaps a static token that looks like one.
        Ok(None) => return state.auth.identify(authorization).await,
        Err(e) => {
            return Err(Denied::Unavailable(format!(
                "API keys could not be read from the store: {e}"
            )))
        }
    };
    record
        .admits(&key, credential::now())
        .map_err(Denied::Unauthenticated)?;
    state.auth.key_identity(&record).ok_or_else(invalid)
}

/// The answer to a refused request.
fn refusal(denied: Denied, resource: Option<&str>, request_path: &str) -> Response {
    match denied {
        Denied::Unauthenticated(message) => {
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"zarrd\""),
            );
            response
        }
        Denied::Forbidden(message) => {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response()
        }
        // As the route answers what is not there.
        Denied::Hidden => {
            let key = resource.unwrap_or("");
            let raw = ["/zarr/", "/s3/", "/share/"]
                .iter()
                .any(|p| request_path.starts_with(p));
            let message = match (raw, request_path.ends_with('/')) {
                (true, true) => format!("nothing is stored under '{key}/'"),
                (true, false) => format!("no value at key '{key}'"),
                (false, _) => format!("no array or group at '{key}'"),
            };
            ApiError::not_found(message).into_response()
        }
        Denied::Signature { code, message } => {
            ApiError::new(StatusCode::FORBIDDEN, code, message).into_response()
        }
        Denied::Unavailable(message) => {
            let mut response = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "identity_provider_unavailable",
                message,
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_delete_more_than_they_name_need_admin() {
        let w = Scope::Write;
        assert_eq!(escalate(w, &Method::PUT, "/zarr/x", None), Scope::Write);
        assert_eq!(
            escalate(w, &Method::PUT, "/api/v1/meta/x", None),
            Scope::Write
        );
        for q in ["overwrite=true", "a=1&overwrite=1", "overwrite"] {
            assert_eq!(
                escalate(w, &Method::PUT, "/api/v1/meta/x", Some(q)),
                Scope::Admin,
                "{q}"
            );
        }
        assert_eq!(
            escalate(w, &Method::PUT, "/api/v1/meta/x", Some("overwrite=false")),
            Scope::Write
        );
        for doc in [
            "/zarr/a/zarr.json",
            "/zarr/a/%2Ezarray",
            "/zarr/a/arr%2Fzarr.json",
            "/zarr/a%2F.zarray",
        ] {
            assert_eq!(
                escalate(w, &Method::DELETE, doc, None),
                Scope::Admin,
                "{doc}"
            );
        }
        assert_eq!(
            escalate(w, &Method::DELETE, "/zarr/a/c/0/0", None),
            Scope::Write
        );
    }
}
