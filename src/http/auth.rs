//! The authorization middleware: which scope a request needs, on which path,
//! and the 401 / 403 answers.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use super::error::ApiError;
use super::AppState;
use crate::auth::{Denied, Scope};
use crate::zarr::metadata::NODE_DOCUMENTS;

/// Routes anyone may call: probes and the API description.
const PUBLIC: [&str; 4] = ["/healthz", "/readyz", "/openapi.yaml", "/metrics"];

/// The store path a request is about, for prefix-limited tokens.
fn resource(path: &str) -> Option<String> {
    let rest = [
        "/zarr/",
        "/api/v1/tree/",
        "/api/v1/meta/",
        "/api/v1/data/",
        "/api/v1/append/",
    ]
    .iter()
    .find_map(|p| path.strip_prefix(p))
    .or_else(|| {
        ["/zarr", "/api/v1/tree", "/api/v1/meta"]
            .contains(&path)
            .then_some("")
    })?;
    Some(
        percent_decode_str(rest)
            .decode_utf8_lossy()
            .trim_matches('/')
            .to_string(),
    )
}

/// The scope a request needs. Whatever deletes more than the keys it names
/// needs `admin`; the rest of a write needs `write`. (Resizing an array
/// smaller, which deletes the chunks outside the new shape, is checked by
/// its handler, which knows the current shape: see [`Caller`].)
fn scope(method: &Method, path: &str, query: Option<&str>) -> Scope {
    // The key as the handler will see it: decoded first (`%2F` is a `/`).
    let document = || {
        path.strip_prefix("/zarr/").is_some_and(|k| {
            let key = percent_decode_str(k).decode_utf8_lossy();
            let name = key.trim_end_matches('/').rsplit('/').next().unwrap_or("");
            NODE_DOCUMENTS.contains(&name)
        })
    };
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Scope::Read,
        // POST /api/v1/data is a read with its parameters in the body.
        Method::POST if path.starts_with("/api/v1/data/") => Scope::Read,
        // Deleting a node deletes everything below it.
        Method::DELETE if path.starts_with("/api/v1/meta/") => Scope::Admin,
        // Replacing a node deletes everything below it first.
        Method::PUT if path.starts_with("/api/v1/meta/") && overwrites(query) => Scope::Admin,
        // Deleting a node's metadata document removes the node.
        Method::DELETE if document() => Scope::Admin,
        _ => Scope::Write,
    }
}

/// Whether a query asks to replace what exists (`overwrite=` anything but `false`).
fn overwrites(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .any(|(k, v)| k == "overwrite" && v != "false")
}

/// What the authenticated caller may do beyond what the route needs, for
/// handlers whose scope depends on the stored data (a resize that shrinks).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub admin: bool,
}

pub async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if PUBLIC.contains(&path.as_str()) {
        return next.run(request).await;
    }
    let needed = scope(request.method(), &path, request.uri().query());
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let resource = resource(&path);
    match state.auth.check(authorization, needed, resource.as_deref()) {
        Ok(_) => {
            let admin = needed == Scope::Admin
                || (needed == Scope::Write
                    && state
                        .auth
                        .check(authorization, Scope::Admin, resource.as_deref())
                        .is_ok());
            let mut request = request;
            request.extensions_mut().insert(Caller { admin });
            next.run(request).await
        }
        Err(Denied::Unauthenticated(message)) => {
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"zarrd\""),
            );
            response
        }
        Err(Denied::Forbidden(message)) => {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_and_scopes() {
        assert_eq!(resource("/zarr/era5/t/c/0").as_deref(), Some("era5/t/c/0"));
        assert_eq!(resource("/zarr/").as_deref(), Some(""));
        assert_eq!(resource("/api/v1/data/a%20b").as_deref(), Some("a b"));
        assert_eq!(resource("/api/v1/stats"), None);
        assert_eq!(scope(&Method::POST, "/api/v1/data/x", None), Scope::Read);
        assert_eq!(scope(&Method::DELETE, "/api/v1/meta/x", None), Scope::Admin);
        assert_eq!(scope(&Method::PUT, "/zarr/x", None), Scope::Write);
        assert_eq!(scope(&Method::PUT, "/api/v1/meta/x", None), Scope::Write);
        for q in ["overwrite=true", "a=1&overwrite=1", "overwrite"] {
            assert_eq!(
                scope(&Method::PUT, "/api/v1/meta/x", Some(q)),
                Scope::Admin,
                "{q}"
            );
        }
        assert_eq!(
            scope(&Method::PUT, "/api/v1/meta/x", Some("overwrite=false")),
            Scope::Write
        );
        assert_eq!(
            scope(&Method::DELETE, "/zarr/a/zarr.json", None),
            Scope::Admin
        );
        assert_eq!(
            scope(&Method::DELETE, "/zarr/a/%2Ezarray", None),
            Scope::Admin
        );
        assert_eq!(scope(&Method::DELETE, "/zarr/a/c/0/0", None), Scope::Write);
    }
}
