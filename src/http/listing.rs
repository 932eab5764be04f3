//! One-level listings of `/zarr/{prefix}/`: HTML with relative links (what
//! fsspec's HTTP file system and browsers walk) or JSON on request.

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::json;

use super::error::{ApiError, ApiResult};
use super::AppState;
use crate::store::StoreKey;

/// Characters escaped in the href of a listed name.
const HREF: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    // In an attribute `&` starts a character reference (`&lt;` reads as `<`).
    .add(b'&')
    .add(b'%')
    // A name with a colon would read as a URL scheme (`javascript:...`).
    .add(b':')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

pub async fn list(state: &AppState, prefix: &str, headers: &HeaderMap) -> ApiResult<Response> {
    let key = StoreKey::new(prefix)?;
    let listing = state.store.list_dir(&key).await?;
    if !key.is_root() && listing.keys.is_empty() && listing.prefixes.is_empty() {
        return Err(ApiError::not_found(format!(
            "nothing is stored under '{prefix}/'"
        )));
    }
    if wants_json(headers) {
        return Ok(
            axum::Json(json!({"keys": listing.keys, "prefixes": listing.prefixes})).into_response(),
        );
    }
    let title = html_escape(&format!(
        "/zarr/{}",
        if key.is_root() {
            String::new()
        } else {
            format!("{prefix}/")
        }
    ));
    let mut html = format!("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n");
    if !key.is_root() {
        html.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for p in &listing.prefixes {
        let href = utf8_percent_encode(p, HREF);
        html.push_str(&format!(
            "<li><a href=\"{href}/\">{}/</a></li>\n",
            html_escape(p)
        ));
    }
    for k in &listing.keys {
        let href = utf8_percent_encode(k, HREF);
        html.push_str(&format!(
            "<li><a href=\"{href}\">{}</a></li>\n",
            html_escape(k)
        ));
    }
    html.push_str("</ul></body></html>\n");
    let mut response = html.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // A list of links: nothing on it may run or load.
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'"),
    );
    Ok(response)
}
