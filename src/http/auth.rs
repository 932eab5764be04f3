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

fn scope(method: &Method, path: &str) -> Scope {
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Scope::Read,
        // POST /api/v1/data is a read with its parameters in the body.
        Method::POST if path.starts_with("/api/v1/data/") => Scope::Read,
        // Deleting a node deletes everything below it.
        Method::DELETE if path.starts_with("/api/v1/meta/") => Scope::Admin,
        _ => Scope::Write,
    }
}

pub async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if PUBLIC.contains(&path.as_str()) {
        return next.run(request).await;
    }
    let needed = scope(request.method(), &path);
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match state
        .auth
        .check(authorization, needed, resource(&path).as_deref())
    {
        Ok(_) => next.run(request).await,
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
        assert_eq!(scope(&Method::POST, "/api/v1/data/x"), Scope::Read);
        assert_eq!(scope(&Method::DELETE, "/api/v1/meta/x"), Scope::Admin);
        assert_eq!(scope(&Method::PUT, "/zarr/x"), Scope::Write);
    }
}
