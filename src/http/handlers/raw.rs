//! `/zarr/{key}`: stored values with byte ranges and validators, and
//! one-level listings, so any Zarr client can use zarrd as an HTTP store.

use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::Extension;

use crate::http::input::extract::ApiPath;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::range::{self, ByteRange};
use crate::http::output::NoCompression;
use crate::http::state::AppState;
use crate::service::{Got, ValueBody};
use crate::store::chrono_like::Timestamp;
use crate::store::{KeyMeta, StoreKey, StoreRange};
use crate::zarr::metadata::DOCUMENT_NAMES;

fn content_type(key: &StoreKey) -> &'static str {
    if DOCUMENT_NAMES.contains(&key.name()) {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

/// Names whose values browsers render or run when they open them.
fn renders_in_browsers(key: &StoreKey) -> bool {
    let name = key.name();
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    [
        "html", "htm", "xhtml", "shtml", "svg", "svgz", "js", "mjs", "xml", "xsl", "xslt", "css",
        "pdf", "swf", "wasm",
    ]
    .iter()
    .any(|e| ext.eq_ignore_ascii_case(e))
}

/// A stored ETag as a strong, quoted HTTP entity tag.
pub fn quote_etag(e_tag: &str) -> String {
    format!("\"{}\"", e_tag.trim_matches('"'))
}

/// Entity tags from a request header, without quotes or `W/` (`*` kept).
pub(super) fn request_etags(headers: &HeaderMap, name: header::HeaderName) -> Option<Vec<String>> {
    let value = headers.get(name)?.to_str().ok()?;
    let tags: Vec<String> = value
        .split(',')
        .map(|t| {
            t.trim()
                .trim_start_matches("W/")
                .trim_matches('"')
                .to_string()
        })
        .filter(|t| !t.is_empty())
        .collect();
    (!tags.is_empty()).then_some(tags)
}

/// The strong entity tags of a header, unquoted: a weak tag never matches
/// where comparison is strong (`If-Match`), so it is left out.
pub(super) fn strong_etags(headers: &HeaderMap, name: header::HeaderName) -> Option<Vec<String>> {
    let value = headers.get(name)?.to_str().ok()?;
    let tags = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.starts_with("W/"))
        .map(|t| t.trim_matches('"').to_string())
        .filter(|t| !t.is_empty())
        .collect();
    Some(tags)
}

/// A stored ETag without quotes (backends differ in whether they quote).
fn bare_etag(meta: &KeyMeta) -> Option<&str> {
    meta.version.e_tag.as_deref().map(|t| t.trim_matches('"'))
}

/// What the request's preconditions say about a value (RFC 9110 §13.2.2).
enum Verdict {
    Proceed,
    NotModified,
    PreconditionFailed,
}

pub(super) use crate::store::etags_match;

fn evaluate(headers: &HeaderMap, meta: &KeyMeta) -> Verdict {
    let matches = |tags: &[String]| etags_match(tags, bare_etag(meta));
    // If-Match compares strongly: a weak tag never matches (§13.1.1).
    if let Some(tags) = strong_etags(headers, header::IF_MATCH) {
        if !matches(&tags) {
            return Verdict::PreconditionFailed;
        }
    } else if let Some(since) = http_date(headers, header::IF_UNMODIFIED_SINCE) {
        // Only without If-Match, which is the more exact of the two.
        if meta.last_modified > since {
            return Verdict::PreconditionFailed;
        }
    }
    match request_etags(headers, header::IF_NONE_MATCH) {
        Some(tags) if matches(&tags) => Verdict::NotModified,
        Some(_) => Verdict::Proceed,
        // If-None-Match takes precedence over If-Modified-Since.
        None => match http_date(headers, header::IF_MODIFIED_SINCE) {
            Some(since) if meta.last_modified <= since => Verdict::NotModified,
            _ => Verdict::Proceed,
        },
    }
}

pub(super) fn http_date(headers: &HeaderMap, name: header::HeaderName) -> Option<Timestamp> {
    let value = headers.get(name)?.to_str().ok()?;
    let time = httpdate::parse_http_date(value).ok()?;
    let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
    // HTTP dates have second precision: "not modified since" means up to the end of that second.
    Some(Timestamp::from_millis(secs as i64 * 1000 + 999))
}

fn format_date(ts: Timestamp) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(ts.seconds().max(0) as u64))
}

fn key_of(raw: &str) -> ApiResult<StoreKey> {
    Ok(StoreKey::new(raw)?)
}

fn value_headers(response: &mut Response, key: &StoreKey, meta: &KeyMeta) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(key)),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    // A stored value is whatever a client wrote: never sniffed into a type
    // a browser runs (a script under the viewer's `script-src 'self'`), and
    // what a browser would render or run is a download when opened.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if renders_in_browsers(key) {
        h.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    // And should a browser render one anyway (a type set by a signed S3
    // link's `response-content-type`), it runs nothing, in an origin of
    // its own, away from the viewer's token.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    if let Some(tag) = meta
        .version
        .e_tag
        .as_deref()
        .and_then(|t| HeaderValue::from_str(&quote_etag(t)).ok())
    {
        h.insert(header::ETAG, tag);
    }
    if let Ok(date) = HeaderValue::from_str(&format_date(meta.last_modified)) {
        h.insert(header::LAST_MODIFIED, date);
    }
    if meta.immutable() {
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        );
    }
    response.extensions_mut().insert(NoCompression);
}

fn not_modified(key: &StoreKey, meta: &KeyMeta) -> Response {
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    value_headers(&mut response, key, meta);
    response.headers_mut().remove(header::CONTENT_TYPE);
    response
}

fn unsatisfiable(size: u64) -> Response {
    let err = ApiError::new(
        StatusCode::RANGE_NOT_SATISFIABLE,
        "range_not_satisfiable",
        format!("the requested range is outside the value of {size} bytes"),
    );
    let mut response = err.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
        response.headers_mut().insert(header::CONTENT_RANGE, v);
    }
    response
}

/// Whether an `If-Range` validator still matches, so the range applies.
fn if_range_matches(headers: &HeaderMap, meta: &KeyMeta) -> bool {
    let Some(value) = headers.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    if value.starts_with('"') {
        // Strong comparison: a weak tag never matches.
        meta.version
            .e_tag
            .as_deref()
            .is_some_and(|t| quote_etag(t) == value)
    } else {
        httpdate::parse_http_date(value)
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .is_some_and(|t| t.as_secs() as i64 == meta.last_modified.seconds())
    }
}

fn wants_multipart(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("multipart/byteranges"))
}

pub(super) fn missing(key: &StoreKey) -> ApiError {
    ApiError::not_found(format!("no value at key '{key}'"))
}

pub(super) fn precondition_failed(key: &StoreKey) -> ApiError {
    ApiError::new(
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
        format!("key '{key}' does not match If-Match (or changed after If-Unmodified-Since)"),
    )
}

/// `GET /zarr/{key}`, or a listing when the path ends with `/`; with the
/// Cache-Control of the mount that holds it.
pub async fn get_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    uri: Uri,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Response> {
    let response = match get_value(&state, &raw, &headers, caller.as_deref()).await {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            folder_redirect(&state, &raw, &uri, e).await?
        }
        answer => answer?,
    };
    Ok(state.cache_control.apply(&raw, response))
}

/// A folder asked for without its trailing slash is redirected to its
/// listing, as nginx, Apache and Python's `http.server` do: clients that
/// walk folders over HTTP (fsspec's `find`, GDAL's `/vsicurl/`) build
/// such URLs and follow the redirect. Only where the key is missing: a
/// value is answered as itself even on a store where a folder of the
/// same name exists. `missing` is the answer otherwise.
async fn folder_redirect(
    state: &AppState,
    raw: &str,
    uri: &Uri,
    missing: ApiError,
) -> ApiResult<Response> {
    let folder = match StoreKey::new(raw) {
        Ok(key) if !key.is_root() && !raw.ends_with('/') => key,
        _ => return Err(missing),
    };
    // The key's own answer stands when the listing cannot be had (a
    // backend that lists no such folder, or not at all).
    match state.store.list_level_page(&folder, None, 1).await {
        Ok(page) if !page.is_empty() => {}
        _ => return Err(missing),
    }
    Ok(to_folder(uri))
}

/// A redirect to the path the client sent (still percent-encoded, so it
/// names exactly what was asked for) with a slash, and the same query.
fn to_folder(uri: &Uri) -> Response {
    let location = match uri.query() {
        Some(q) => format!("{}/?{q}", uri.path()),
        None => format!("{}/", uri.path()),
    };
    let mut response = StatusCode::MOVED_PERMANENTLY.into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

/// `GET /zarr`: the root folder is `/zarr/`.
pub async fn to_root(uri: Uri) -> Response {
    to_folder(&uri)
}

pub(super) async fn get_value(
    state: &AppState,
    raw: &str,
    headers: &HeaderMap,
    caller: Option<&Caller>,
) -> ApiResult<Response> {
    if let Some(prefix) = raw.strip_suffix('/') {
        return super::listing::list(state, prefix, headers, caller).await;
    }
    let key = key_of(raw)?;
    if let Some(caller) = super::hidden::filtered_for(caller, &key) {
        return super::hidden::document(state, &key, caller, headers, false).await;
    }
    let mut ranges = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(range::parse);
    if headers.contains_key(header::IF_RANGE) && ranges.is_some() {
        let meta = state
            .service
            .head_value(&key)
            .await?
            .ok_or_else(|| missing(&key))?;
        if !if_range_matches(headers, &meta) {
            ranges = None;
        }
    }
    let range = match ranges.as_deref() {
        Some([single]) => {
            if matches!(single, ByteRange::Suffix(0)) {
                return unsatisfiable_unless(state, &key, headers, None).await;
            }
            Some(match *single {
                ByteRange::FromTo(a, b) => StoreRange::Bounded(a..b.saturating_add(1)),
                ByteRange::From(a) => StoreRange::From(a),
                ByteRange::Suffix(n) => StoreRange::Suffix(n),
            })
        }
        Some(many) if wants_multipart(headers) => {
            match multipart(state, &key, many, headers).await? {
                Some(answer) => return Ok(answer),
                None => None,
            }
        }
        // Several ranges without multipart in Accept: the whole value, as S3 does.
        _ => None,
    };
    let ranged = range.is_some();
    let value = match state.service.get_value(&key, range).await? {
        Got::Value(v) => v,
        Got::Unsatisfiable { size } => {
            return unsatisfiable_unless(state, &key, headers, Some(size)).await
        }
        Got::Missing => return Err(missing(&key)),
    };
    // Preconditions are checked against the metadata of the read itself
    // (before the range, as RFC 9110 orders them); a streamed body is
    // dropped unread when they fail.
    if let Some(answer) = preconditions(&key, headers, &value.meta) {
        return answer;
    }
    let body = match value.body {
        ValueBody::Bytes(bytes) => Body::from(bytes),
        ValueBody::Stream(s) => Body::from_stream(s.map(|r| r.map_err(std::io::Error::other))),
    };
    Ok(finish(&key, &value.meta, value.span, ranged, body))
}

/// A 416 for a range the value cannot satisfy, unless a precondition
/// decides the request first (RFC 9110 §13.2.2 evaluates them before the
/// range). `size` when the read found it and no condition needs the rest.
async fn unsatisfiable_unless(
    state: &AppState,
    key: &StoreKey,
    headers: &HeaderMap,
    size: Option<u64>,
) -> ApiResult<Response> {
    let conditional = [
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
    ]
    .iter()
    .any(|h| headers.contains_key(h));
    if let (Some(size), false) = (size, conditional) {
        return Ok(unsatisfiable(size));
    }
    let meta = state
        .service
        .head_value(key)
        .await?
        .ok_or_else(|| missing(key))?;
    if let Some(answer) = preconditions(key, headers, &meta) {
        return answer;
    }
    Ok(unsatisfiable(meta.size))
}

/// The answer when `If-None-Match` / `If-Modified-Since` / `If-Match` decide
/// the request (304 or 412), `None` when it proceeds.
fn preconditions(
    key: &StoreKey,
    headers: &HeaderMap,
    meta: &KeyMeta,
) -> Option<ApiResult<Response>> {
    match evaluate(headers, meta) {
        Verdict::Proceed => None,
        Verdict::NotModified => Some(Ok(not_modified(key, meta))),
        Verdict::PreconditionFailed => Some(Err(precondition_failed(key))),
    }
}

/// The response to a GET of a value, or of `span` of it when `ranged`.
fn finish(
    key: &StoreKey,
    meta: &KeyMeta,
    span: std::ops::Range<u64>,
    ranged: bool,
    body: Body,
) -> Response {
    let length = span.end - span.start;
    let mut response = Response::new(body);
    value_headers(&mut response, key, meta);
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if ranged {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        // Part of a JSON document is not JSON.
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        let range = format!("bytes {}-{}/{}", span.start, span.end - 1, meta.size);
        if let Ok(v) = HeaderValue::from_str(&range) {
            response.headers_mut().insert(header::CONTENT_RANGE, v);
        }
    }
    response
}

/// Ranges one multipart answer may hold after overlapping and adjacent ones
/// are merged; a request for more gets the whole value (RFC 9110 lets a
/// server ignore a Range header it finds too costly).
const MAX_PARTS: usize = 64;

/// Bytes read from the store at a time while a multipart body streams.
const PART_PIECE: u64 = 4 << 20;

/// `multipart/byteranges` for several ranges, streamed piece by piece from
/// the version of the value the preconditions were checked against. `None`
/// when there are too many parts to be worth it (the caller sends it whole).
async fn multipart(
    state: &AppState,
    key: &StoreKey,
    ranges: &[ByteRange],
    headers: &HeaderMap,
) -> ApiResult<Option<Response>> {
    let meta = state
        .service
        .head_value(key)
        .await?
        .ok_or_else(|| missing(key))?;
    if let Some(answer) = preconditions(key, headers, &meta) {
        return answer.map(Some);
    }
    let parts = range::coalesce(ranges, meta.size);
    if parts.is_empty() {
        return Ok(Some(unsatisfiable(meta.size)));
    }
    if parts.len() > MAX_PARTS {
        return Ok(None);
    }
    // The parts are read from the store: a value the service builds
    // (consolidated metadata) is sent whole instead.
    let stored = state.store.head(key).await?.map(|m| m.version.e_tag);
    if stored != Some(meta.version.e_tag.clone()) {
        return Ok(None);
    }
    // A boundary the stored bytes cannot be expected to contain: a fixed
    // one would make a value that holds it ambiguous to parse.
    let boundary = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(key.as_str().as_bytes());
        format!("zarrd-{:016x}", h.finish())
    };
    let head = |r: &std::ops::Range<u64>| {
        format!(
            "--{boundary}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
            content_type(key),
            r.start,
            r.end - 1,
            meta.size
        )
    };
    let closing = format!("--{boundary}--\r\n");
    let length: u64 = parts
        .iter()
        .map(|r| head(r).len() as u64 + (r.end - r.start) + 2)
        .sum::<u64>()
        + closing.len() as u64;
    // Each part: its header, then its bytes in pieces, then CRLF.
    let pieces: Vec<Result<Bytes, std::ops::Range<u64>>> = parts
        .iter()
        .flat_map(|r| {
            let mut out = vec![Ok(Bytes::from(head(r)))];
            let mut at = r.start;
            while at < r.end {
                let end = (at + PART_PIECE).min(r.end);
                out.push(Err(at..end));
                at = end;
            }
            out.push(Ok(Bytes::from_static(b"\r\n")));
            out
        })
        .chain([Ok(Bytes::from(closing))])
        .collect();
    let (store, owned, e_tag) = (state.store.clone(), key.clone(), meta.version.e_tag.clone());
    let body = futures::stream::iter(pieces).then(move |piece| {
        let (store, key, e_tag) = (store.clone(), owned.clone(), e_tag.clone());
        async move {
            match piece {
                Ok(bytes) => Ok(bytes),
                Err(range) => store
                    .get_range_at(&key, range, e_tag.as_deref())
                    .await
                    .map_err(std::io::Error::other),
            }
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    value_headers(&mut response, key, &meta);
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    if let Ok(v) = HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}")) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    Ok(Some(response))
}

/// `HEAD /zarr/{key}`: headers of the value, with the exact length.
pub async fn head_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    uri: Uri,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Response> {
    let response = match head_value(&state, &raw, &headers, caller.as_deref()).await {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            folder_redirect(&state, &raw, &uri, e).await?
        }
        answer => answer?,
    };
    Ok(state.cache_control.apply(&raw, response))
}

pub(super) async fn head_value(
    state: &AppState,
    raw: &str,
    headers: &HeaderMap,
    caller: Option<&Caller>,
) -> ApiResult<Response> {
    if let Some(prefix) = raw.strip_suffix('/') {
        let mut response = super::listing::list(state, prefix, headers, caller).await?;
        *response.body_mut() = Body::empty();
        return Ok(response);
    }
    let key = key_of(raw)?;
    if let Some(caller) = super::hidden::filtered_for(caller, &key) {
        return super::hidden::document(state, &key, caller, headers, true).await;
    }
    let meta = state
        .service
        .head_value(&key)
        .await?
        .ok_or_else(|| missing(&key))?;
    if let Some(answer) = preconditions(&key, headers, &meta) {
        return answer;
    }
    let mut response = Response::new(Body::empty());
    value_headers(&mut response, &key, &meta);
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(meta.size));
    Ok(response)
}

/// `GET /zarr/`: the root listing.
pub async fn list_root(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
) -> ApiResult<Response> {
    super::listing::list(&state, "", &headers, caller.as_deref()).await
}
