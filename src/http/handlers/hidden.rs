//! What a caller who may not read every node below a group is given of a
//! document that describes them all: `.zmetadata`, or a v3 group's
//! `zarr.json` with consolidated metadata, without the hidden nodes. Such
//! an answer is the caller's own: no ETag of the stored bytes, `private`.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;

use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::range;
use crate::http::state::AppState;
use crate::service::{Got, ValueBody};
use crate::store::StoreKey;
use crate::zarr::metadata::consolidated;

/// The rights to filter `key` by, when it is a document that describes
/// nodes the caller may not all read.
pub fn filtered_for<'a>(caller: Option<&'a Caller>, key: &StoreKey) -> Option<&'a Caller> {
    let name = key.name();
    if name != ".zmetadata" && name != "zarr.json" {
        return None;
    }
    let group = key
        .parent()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    caller.filter(|c| Caller::filters(Some(c), &group))
}

/// `key`'s document without the nodes `caller` may not read; its body
/// left out for a HEAD.
pub async fn document(
    state: &AppState,
    key: &StoreKey,
    caller: &Caller,
    headers: &HeaderMap,
    head: bool,
) -> ApiResult<Response> {
    let value = match state.service.get_value(key, None).await? {
        Got::Value(v) => v,
        _ => return Err(ApiError::not_found(format!("no value at key '{key}'"))),
    };
    let limit = state.config.json_limit;
    if value.meta.size > limit {
        return Err(too_large(key, limit));
    }
    // The stored document and its filtered copy are held until the answer
    // is sent: reserved from the memory budget, as every answer that grows
    // with what is stored.
    let held = state
        .service
        .budget()
        .reserve(
            value.meta.size.saturating_mul(2),
            "filtering consolidated metadata",
        )
        .await?;
    let bytes = match value.body {
        ValueBody::Bytes(b) => b,
        ValueBody::Stream(mut s) => {
            let mut all = Vec::new();
            while let Some(piece) = s.next().await {
                all.extend_from_slice(&piece?);
                if all.len() as u64 > limit {
                    return Err(too_large(key, limit));
                }
            }
            Bytes::from(all)
        }
    };
    let group = key.parent().map(|p| format!("{p}/")).unwrap_or_default();
    let kept = consolidated::retain(key.name(), &bytes, |node| {
        caller.rights.may(Scope::Read, &format!("{group}{node}"))
    })
    .map(Bytes::from)
    .unwrap_or(bytes);
    let size = kept.len() as u64;
    let ranges = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(range::parse)
        .map(|r| range::coalesce(&r, size));
    let (status, span) = match ranges.as_deref() {
        Some([one]) => (StatusCode::PARTIAL_CONTENT, one.clone()),
        Some([]) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                response.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return Ok(response);
        }
        _ => (StatusCode::OK, 0..size),
    };
    let length = span.end - span.start;
    let body = if head {
        Body::empty()
    } else {
        Body::from(kept.slice(span.start as usize..span.end as usize))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if status == StatusCode::OK {
            "application/json"
        } else {
            "application/octet-stream"
        }),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
    if status == StatusCode::PARTIAL_CONTENT {
        if let Ok(v) =
            HeaderValue::from_str(&format!("bytes {}-{}/{size}", span.start, span.end - 1))
        {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    response
        .extensions_mut()
        .insert(crate::http::output::NoCompression);
    Ok(response.map(|body| Body::new(crate::http::server::idle::Keeping::new(body, held))))
}

fn too_large(key: &StoreKey, limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("'{key}' is larger than the JSON limit ({limit} bytes)"),
    )
}
