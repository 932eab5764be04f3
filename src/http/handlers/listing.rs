//! One-level listings of `/zarr/{prefix}/`: HTML with relative links (what
//! fsspec's HTTP file system and browsers walk) or JSON on request, streamed
//! a page of the folder at a time so a folder of any size costs a page of
//! memory.

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::state::AppState;
use crate::store::{LevelEntry, StoreKey};

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

/// Entries read from the store at a time: a listing is streamed, holding a
/// page of names whatever the folder holds.
const PAGE: usize = 1000;

/// Which entries a pass over the folder writes.
#[derive(Clone, Copy, PartialEq)]
enum Pass {
    Folders,
    Values,
}

/// How one listed name is written, by format and pass.
fn entry(json: bool, pass: Pass, first: bool, name: &str) -> String {
    if json {
        let comma = if first { "" } else { "," };
        let name = name.trim_end_matches('/');
        return format!("{comma}{}", serde_json::Value::from(name));
    }
    let href = utf8_percent_encode(name, HREF);
    match pass {
        Pass::Folders => {
            let name = name.trim_end_matches('/');
            let href = utf8_percent_encode(name, HREF);
            format!("<li><a href=\"{href}/\">{}/</a></li>\n", html_escape(name))
        }
        Pass::Values => format!("<li><a href=\"{href}\">{}</a></li>\n", html_escape(name)),
    }
}

/// Where a listing is: the pass, the page to read next (after which key),
/// and whether the pass has written anything.
struct Cursor {
    passes: Vec<Pass>,
    offset: Option<String>,
    first: bool,
}

pub async fn list(
    state: &AppState,
    prefix: &str,
    headers: &HeaderMap,
    caller: Option<&Caller>,
) -> ApiResult<Response> {
    let key = StoreKey::new(prefix)?;
    // What the caller may not see is left out (`None`: nothing is).
    let sight = caller
        .filter(|c| Caller::filters(Some(c), key.as_str()))
        .map(|c| c.rights.clone());
    let store = state.store.clone();
    let probe = store.list_level_page(&key, None, 1).await?;
    if !key.is_root() && probe.is_empty() {
        return Err(ApiError::not_found(format!(
            "nothing is stored under '{prefix}/'"
        )));
    }
    let json = wants_json(headers);
    let (head, passes, between, tail) = if json {
        (
            "{\"keys\":[".to_string(),
            vec![Pass::Values, Pass::Folders],
            "],\"prefixes\":[",
            "]}",
        )
    } else {
        let title = html_escape(&format!(
            "/zarr/{}",
            if key.is_root() {
                String::new()
            } else {
                format!("{prefix}/")
            }
        ));
        let mut head = format!("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n");
        if !key.is_root() {
            head.push_str("<li><a href=\"../\">../</a></li>\n");
        }
        (
            head,
            vec![Pass::Folders, Pass::Values],
            "",
            "</ul></body></html>\n",
        )
    };
    let base = if key.is_root() {
        String::new()
    } else {
        format!("{key}/")
    };
    // One pass over the folder per kind of entry, a page at a time.
    let cursor = Cursor {
        passes,
        offset: None,
        first: true,
    };
    let pages = futures::stream::try_unfold(Some(cursor), move |cursor| {
        let (store, key, base, sight) = (store.clone(), key.clone(), base.clone(), sight.clone());
        async move {
            let Some(mut cursor) = cursor else {
                return Ok::<_, std::io::Error>(None);
            };
            let Some(&pass) = cursor.passes.first() else {
                return Ok(Some((Bytes::from_static(tail.as_bytes()), None)));
            };
            let page = store
                .list_level_page(&key, cursor.offset.as_deref(), PAGE)
                .await
                .map_err(std::io::Error::other)?;
            let mut out = String::new();
            for e in &page {
                let wanted = match e {
                    LevelEntry::Folder(_) => pass == Pass::Folders,
                    LevelEntry::Value(..) => pass == Pass::Values,
                };
                let shown = sight.as_ref().is_none_or(|r| match e {
                    LevelEntry::Folder(_) => r.sees(&format!("{base}{}", e.name())),
                    LevelEntry::Value(..) => r.may(Scope::Read, &format!("{base}{}", e.name())),
                });
                if wanted && shown {
                    out.push_str(&entry(json, pass, cursor.first, e.name()));
                    cursor.first = false;
                }
            }
            if page.len() < PAGE {
                cursor.passes.remove(0);
                cursor.offset = None;
                cursor.first = true;
                if !cursor.passes.is_empty() {
                    out.push_str(between);
                }
            } else {
                cursor.offset = page.last().map(|e| format!("{base}{}", e.name()));
            }
            Ok(Some((Bytes::from(out), Some(cursor))))
        }
    });
    let body = futures::stream::once(async move { Ok(Bytes::from(head)) }).chain(pages);
    let mut response = Response::new(axum::body::Body::from_stream(body));
    let content_type = if json {
        "application/json"
    } else {
        "text/html; charset=utf-8"
    };
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // A list of links: nothing on it may run or load.
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'"),
    );
    Ok(response)
}
