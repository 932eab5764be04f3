//! `/s3`: the read subset of the S3 API, path-style, over what `/zarr/`
//! serves, for the tools that only speak S3 (and Neuroglancer's folder
//! browsing). One bucket, `zarr`, holds every key; mounts are its top-level
//! prefixes. Object reads are `/zarr/` reads (ranges, validators, the
//! mount's Cache-Control); errors are S3's XML, converted from the server's
//! own errors in one place ([`xml_errors`]).

mod list;

use crate::http::output::xml;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::{signed_parts, Caller};
use crate::http::input::extract::ApiPath;
use crate::http::state::AppState;
use crate::service::Listed;

/// The one bucket.
pub const BUCKET: &str = "zarr";

/// The namespace of S3's documents.
const XMLNS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// Sub-resources of buckets and objects that are not reads of data (ACLs,
/// versioning, uploads...): S3 clients get NotImplemented for them rather
/// than a listing or an object they did not ask for.
const UNSUPPORTED: &[&str] = &[
    "acl",
    "attributes",
    "cors",
    "delete",
    "encryption",
    "lifecycle",
    "logging",
    "notification",
    "object-lock",
    "policy",
    "replication",
    "requestPayment",
    "restore",
    "retention",
    "legal-hold",
    "select",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

fn xml(body: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        )],
        body,
    )
        .into_response()
}

fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn refuse_unsupported(pairs: &[(String, String)]) -> ApiResult<()> {
    match pairs
        .iter()
        .find(|(k, _)| UNSUPPORTED.contains(&k.as_str()))
    {
        Some((k, _)) => Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_implemented",
            format!("'{k}' is not served: this is a read-only view of the hierarchy's data"),
        )),
        None => Ok(()),
    }
}

fn no_such_bucket(bucket: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_such_bucket",
        format!("there is no bucket '{bucket}'; the one bucket is '{BUCKET}'"),
    )
}

fn check_bucket(bucket: &str) -> ApiResult<()> {
    if bucket == BUCKET {
        Ok(())
    } else {
        Err(no_such_bucket(bucket))
    }
}

/// When the server started: the bucket's creation date.
fn started() -> chrono::DateTime<chrono::Utc> {
    static STARTED: std::sync::OnceLock<chrono::DateTime<chrono::Utc>> = std::sync::OnceLock::new();
    *STARTED.get_or_init(chrono::Utc::now)
}

/// `GET /s3/`: ListBuckets.
pub async fn list_buckets() -> Response {
    xml(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult xmlns=\"{XMLNS}\"><Owner><ID>zarrd</ID><DisplayName>zarrd</DisplayName></Owner><Buckets><Bucket><Name>{BUCKET}</Name><CreationDate>{}</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>\n",
        started().format("%Y-%m-%dT%H:%M:%S%.3fZ")
    ))
}

/// `GET /s3/{bucket}`: ListObjectsV2 (`list-type=2`), ListObjects, or
/// GetBucketLocation (`?location`).
pub async fn get_bucket(
    State(state): State<AppState>,
    ApiPath(bucket): ApiPath<String>,
    request: Request,
) -> ApiResult<Response> {
    check_bucket(&bucket)?;
    let pairs = query_pairs(request.uri().query());
    refuse_unsupported(&pairs)?;
    if pairs.iter().any(|(k, _)| k == "location") {
        return Ok(xml(format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"{XMLNS}\"></LocationConstraint>\n"
        )));
    }
    let query = list::ListQuery::parse(&pairs)?;
    let folder = query.prefix.rfind('/').map_or("", |i| &query.prefix[..i]);
    let sight = request
        .extensions()
        .get::<Caller>()
        .filter(|c| Caller::filters(Some(c), folder))
        .map(|c| c.rights.clone());
    let Some(sight) = sight else {
        let page = state
            .service
            .list_page(
                &query.prefix,
                query.delimiter.as_deref(),
                query.after.as_deref(),
                query.max_keys,
            )
            .await?;
        return Ok(xml(list::render(&query, &page.entries, page.truncated)));
    };
    // Pages are read on past what the caller may not see, so that the
    // next marker or token names a key they may (never a hidden one),
    // and each answer but the last shows at least one.
    let visible = |e: &Listed| match e {
        Listed::Prefix(p) => sight.sees(p.trim_end_matches('/')),
        Listed::Value { key, .. } => sight.may(Scope::Read, key),
    };
    let mut after = query.after.clone();
    let mut shown = Vec::new();
    let mut truncated = query.max_keys > 0;
    while truncated && shown.len() < query.max_keys {
        let page = state
            .service
            .list_page(
                &query.prefix,
                query.delimiter.as_deref(),
                after.as_deref(),
                query.max_keys,
            )
            .await?;
        truncated = page.truncated;
        after = page.entries.last().map(|e| e.key().to_string());
        let mut entries = page.entries.into_iter().filter(visible);
        shown.extend(entries.by_ref().take(query.max_keys - shown.len()));
        truncated |= entries.next().is_some();
    }
    Ok(xml(list::render(&query, &shown, truncated)))
}

/// `HEAD /s3/{bucket}`: HeadBucket.
pub async fn head_bucket(ApiPath(bucket): ApiPath<String>) -> ApiResult<Response> {
    check_bucket(&bucket)?;
    Ok(StatusCode::OK.into_response())
}

fn object_key(bucket: &str, key: &str, query: Option<&str>) -> ApiResult<String> {
    check_bucket(bucket)?;
    refuse_unsupported(&query_pairs(query))?;
    // A key ending in `/` names a folder, which S3 has no object for
    // (`/zarr/` would answer it with a listing).
    if key.is_empty() || key.ends_with('/') {
        return Err(ApiError::not_found(format!("no value at key '{key}'")));
    }
    Ok(key.to_string())
}

/// `GET /s3/{bucket}/{key}`: GetObject, as `GET /zarr/{key}`.
pub async fn get_object(
    State(state): State<AppState>,
    ApiPath((bucket, key)): ApiPath<(String, String)>,
    request: Request,
) -> ApiResult<Response> {
    let key = object_key(&bucket, &key, request.uri().query())?;
    let overrides = overrides(&request)?;
    let response = super::raw::get_value(
        &state,
        &key,
        request.headers(),
        request.extensions().get::<Caller>(),
    )
    .await?;
    Ok(with_overrides(
        state.cache_control.apply(&key, response),
        overrides,
    ))
}

/// `HEAD /s3/{bucket}/{key}`: HeadObject, as `HEAD /zarr/{key}`.
pub async fn head_object(
    State(state): State<AppState>,
    ApiPath((bucket, key)): ApiPath<(String, String)>,
    request: Request,
) -> ApiResult<Response> {
    let key = object_key(&bucket, &key, request.uri().query())?;
    let overrides = overrides(&request)?;
    let response = super::raw::head_value(
        &state,
        &key,
        request.headers(),
        request.extensions().get::<Caller>(),
    )
    .await?;
    Ok(with_overrides(
        state.cache_control.apply(&key, response),
        overrides,
    ))
}

/// The query parameters of GetObject that set a header of the answer
/// (what presigned download links carry), and the header each sets.
const OVERRIDES: [(&str, header::HeaderName); 6] = [
    ("response-content-type", header::CONTENT_TYPE),
    ("response-content-disposition", header::CONTENT_DISPOSITION),
    ("response-content-language", header::CONTENT_LANGUAGE),
    ("response-content-encoding", header::CONTENT_ENCODING),
    ("response-cache-control", header::CACHE_CONTROL),
    ("response-expires", header::EXPIRES),
];

/// The headers a request's `response-*` parameters set; a value no header
/// can carry is refused, naming the parameter. As S3 does, only requests
/// that authenticate (signed, or with a bearer token) may set them: an
/// anonymous link could otherwise serve any stored bytes as a page of
/// this origin.
fn overrides(request: &Request) -> ApiResult<Vec<(header::HeaderName, HeaderValue)>> {
    let mut set = Vec::new();
    for (k, v) in query_pairs(request.uri().query()) {
        let Some((_, name)) = OVERRIDES.iter().find(|(p, _)| *p == k) else {
            continue;
        };
        let value = HeaderValue::from_str(&v)
            .ok()
            .filter(|v| v.to_str().is_ok())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "bad_parameter",
                    format!("{k} must be a header value: visible ASCII, spaces and tabs"),
                )
            })?;
        set.push((name.clone(), value));
    }
    let authenticated = request.headers().contains_key(header::AUTHORIZATION)
        || signed_parts(request.method(), request.uri(), request.headers()).is_signed();
    if !set.is_empty() && !authenticated {
        return Err(ApiError::bad_request(
            "anonymous_overrides",
            "response-* parameters cannot be used in anonymous requests (sign the request or send a token)",
        ));
    }
    Ok(set)
}

/// A successful answer with the headers its `response-*` parameters set
/// (S3 sets them on 200 and 206 alike, and on no error).
fn with_overrides(mut response: Response, set: Vec<(header::HeaderName, HeaderValue)>) -> Response {
    if response.status().is_success() {
        for (name, value) in set {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// Writes to a bucket or object: S3 operations this read-only view does
/// not serve (`NotImplemented`, as S3 answers an operation it lacks).
pub async fn not_served(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "not_implemented",
        format!(
            "{} is not served through /s3, a read-only view of the hierarchy: write through /zarr/{{key}}",
            request.method()
        ),
    )
}

/// S3's code for one of the server's errors.
fn s3_code(status: StatusCode, code: &str) -> &'static str {
    match (status.as_u16(), code) {
        (_, "no_such_bucket") => "NoSuchBucket",
        (_, "anonymous_overrides") => "InvalidRequest",
        (_, "signature_does_not_match") => "SignatureDoesNotMatch",
        (_, "request_time_too_skewed") => "RequestTimeTooSkewed",
        (_, "invalid_access_key_id") => "InvalidAccessKeyId",
        (_, "authorization_header_malformed") => "AuthorizationHeaderMalformed",
        (404, _) => "NoSuchKey",
        (401 | 403, _) => "AccessDenied",
        (412, _) => "PreconditionFailed",
        (416, _) => "InvalidRange",
        (405, _) => "MethodNotAllowed",
        (501, _) => "NotImplemented",
        (503, _) => "SlowDown",
        (413, _) => "InvalidArgument",
        (400, _) => "InvalidArgument",
        (s, _) if s < 500 => "InvalidRequest",
        _ => "InternalError",
    }
}

/// Requests under `/s3` get their errors as S3's XML (`Error` with `Code`,
/// `Message`, `Resource`, `RequestId`), whichever layer refused them: the
/// router, authorization, limits or a handler.
pub async fn xml_errors<Fut>(request: Request, next: impl FnOnce(Request) -> Fut) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let path = request.uri().path();
    if !(path == "/s3" || path.starts_with("/s3/")) {
        return next(request).await;
    }
    let resource = path.to_string();
    let head = request.method() == Method::HEAD;
    let id = request
        .headers()
        .get(&crate::http::error::X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let response = next(request).await;
    if !(response.status().is_client_error() || response.status().is_server_error()) {
        return response;
    }
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    let (mut parts, body) = response.into_parts();
    // Error bodies are a few hundred bytes; the router's own (405) have none.
    let bytes = if json {
        axum::body::to_bytes(body, 64 << 10)
            .await
            .unwrap_or_default()
    } else {
        Default::default()
    };
    let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let code = error["error"]["code"].as_str().unwrap_or("");
    let fallback = match parts.status {
        StatusCode::METHOD_NOT_ALLOWED => {
            "this is a read-only view of the hierarchy: GET and HEAD only".to_string()
        }
        status => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let message = error["error"]["message"].as_str().unwrap_or(&fallback);
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message><Resource>{}</Resource><RequestId>{}</RequestId></Error>\n",
        s3_code(parts.status, code),
        xml::escape(message),
        xml::escape(&resource),
        xml::escape(&id),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    let body = if head {
        axum::body::Body::empty()
    } else {
        axum::body::Body::from(document)
    };
    Response::from_parts(parts, body)
}
