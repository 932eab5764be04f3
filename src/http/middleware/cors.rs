//! Cross-origin access for browsers: the headers pages may send and read.

use std::time::Duration;

use axum::http::{header, HeaderName, Method};
use tower_http::cors::CorsLayer;

use crate::http::error::X_REQUEST_ID;

/// The CORS layer `--cors-*` configures.
pub fn cors(config: &crate::config::Cors) -> CorsLayer {
    use tower_http::cors::AllowOrigin;
    let mut exposed = vec![
        header::CONTENT_RANGE,
        header::CONTENT_LENGTH,
        header::ETAG,
        header::ACCEPT_RANGES,
        header::LAST_MODIFIED,
        HeaderName::from_static("x-zarr-shape"),
        HeaderName::from_static("x-zarr-dtype"),
        HeaderName::from_static("x-zarr-vmin"),
        HeaderName::from_static("x-zarr-vmax"),
        HeaderName::from_static(crate::http::handlers::write::SNAPSHOT),
        X_REQUEST_ID.clone(),
    ];
    exposed.extend(
        config
            .expose
            .iter()
            .filter_map(|h| HeaderName::try_from(h.as_str()).ok()),
    );
    let mut allowed = vec![
        header::RANGE,
        header::IF_NONE_MATCH,
        header::IF_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_RANGE,
        header::IF_UNMODIFIED_SINCE,
        header::AUTHORIZATION,
        // What S3 clients in a browser sign with.
        HeaderName::from_static("x-amz-date"),
        HeaderName::from_static("x-amz-content-sha256"),
        HeaderName::from_static("x-amz-security-token"),
        HeaderName::from_static("x-amz-user-agent"),
        HeaderName::from_static("x-amz-checksum-mode"),
        HeaderName::from_static("amz-sdk-invocation-id"),
        HeaderName::from_static("amz-sdk-request"),
        header::CONTENT_TYPE,
        header::ACCEPT,
        HeaderName::from_static(crate::http::input::extract::COMMIT_MESSAGE),
        HeaderName::from_static(crate::auth::session::CSRF_HEADER),
    ];
    allowed.extend(
        config
            .headers
            .iter()
            .filter_map(|h| HeaderName::try_from(h.as_str()).ok()),
    );
    let any = config.origins.iter().any(|o| o == "*");
    let origins = match (any, config.credentials.is_empty()) {
        (true, true) => AllowOrigin::any(),
        // A credentialed answer must name its origin: `*` is then each
        // request's own (browsers send the cookie only to those named in
        // `credentials`, which alone are answered with credentials).
        (true, false) => AllowOrigin::mirror_request(),
        (false, _) => AllowOrigin::list(
            config
                .origins
                .iter()
                .chain(&config.credentials)
                .filter_map(|o| axum::http::HeaderValue::from_str(o).ok()),
        ),
    };
    let credentialed: Vec<axum::http::HeaderValue> = config
        .credentials
        .iter()
        .filter_map(|o| axum::http::HeaderValue::from_str(o).ok())
        .collect();
    let credentials = tower_http::cors::AllowCredentials::predicate(move |origin, _| {
        credentialed.contains(origin)
    });
    let methods: Vec<Method> = config
        .methods
        .iter()
        .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(origins)
        .allow_methods(methods)
        .allow_headers(allowed)
        .expose_headers(exposed)
        .allow_credentials(credentials)
        .max_age(Duration::from_secs(3600))
}
