//! `PROPFIND /zarr/{key}`: the read-only part of WebDAV (RFC 4918) that
//! clients list with. object_store's and obstore's HTTP stores list only
//! this way (Depth 1 for a folder's level, infinity for everything below
//! it), and so do rclone's WebDAV backend and davfs2.
//!
//! The answer is a `multistatus` streamed a page of the listing at a
//! time, so a folder of any size costs a page of memory; sizes and ETags
//! are those reads answer (a group's `zarr.json` with its consolidated
//! metadata), as in the S3 listing.

use crate::http::output::xml;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use super::raw::quote_etag;
use crate::auth::Scope;
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::ApiPath;
use crate::http::state::AppState;
use crate::service::Listed;
use crate::store::chrono_like::Timestamp;
use crate::store::{KeyMeta, StoreKey};

/// Entries read from the store at a time.
const PAGE: usize = 1000;

/// The largest request body read (a `propfind` naming properties); the
/// answer carries the same properties whatever it names, as RFC 4918
/// lets a server answer `allprop`.
const MAX_REQUEST: usize = 64 << 10;

/// Characters escaped in a segment of an `href`.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b'\'')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// How deep below the resource the answer goes (the `Depth` header).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Depth {
    Zero,
    One,
    Infinity,
}

fn depth(headers: &HeaderMap) -> ApiResult<Depth> {
    let Some(value) = headers.get("depth") else {
        // RFC 4918 §9.1: no Depth header means infinity.
        return Ok(Depth::Infinity);
    };
    match value.to_str().map(str::trim) {
        Ok("0") => Ok(Depth::Zero),
        Ok("1") => Ok(Depth::One),
        Ok(v) if v.eq_ignore_ascii_case("infinity") => Ok(Depth::Infinity),
        _ => Err(ApiError::bad_request(
            "bad_header",
            "Depth must be 0, 1 or infinity",
        )),
    }
}

/// `PROPFIND /zarr/`: the root folder. Other methods the route lacks
/// are answered 405 (these handlers are the routes' method fallback).
pub async fn propfind_root(State(state): State<AppState>, request: Request) -> Response {
    let answer = if request.method().as_str() != "PROPFIND" {
        super::fallback::method_not_allowed(request)
            .await
            .into_response()
    } else {
        let caller = request.extensions().get::<Caller>().cloned();
        propfind(&state, String::new(), request, caller)
            .await
            .into_response()
    };
    allowing("GET,HEAD,PROPFIND", answer)
}

/// `PROPFIND /zarr/{key}`: a value, or a folder (with or without its
/// trailing slash) and what it holds to the requested depth.
pub async fn propfind_key(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    request: Request,
) -> Response {
    let answer = if request.method().as_str() != "PROPFIND" {
        super::fallback::method_not_allowed(request)
            .await
            .into_response()
    } else {
        let caller = request.extensions().get::<Caller>().cloned();
        propfind(&state, raw, request, caller).await.into_response()
    };
    allowing("GET,HEAD,PUT,DELETE,PROPFIND", answer)
}

/// The methods the route has, PROPFIND among them (axum's own `Allow`
/// knows only the methods it routes).
fn allowing(methods: &'static str, mut answer: Response) -> Response {
    answer
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(methods));
    answer
}

async fn propfind(
    state: &AppState,
    raw: String,
    request: Request,
    caller: Option<Caller>,
) -> ApiResult<Response> {
    let depth = depth(request.headers())?;
    // What the client asks for is read (a connection with an unread body
    // cannot be kept) but does not change the answer.
    crate::http::input::extract::read_small_body(
        request.into_body(),
        MAX_REQUEST,
        "a PROPFIND body",
    )
    .await?;
    let key = StoreKey::new(raw.trim_end_matches('/'))?;
    let folder = if key.is_root() {
        String::new()
    } else {
        format!("{key}/")
    };
    // What the caller may not see is left out (`None`: nothing is).
    let sight = caller
        .filter(|c| Caller::filters(Some(c), key.as_str()))
        .map(|c| c.rights);
    if !key.is_root() && !raw.ends_with('/') {
        let readable = sight
            .as_ref()
            .is_none_or(|r| r.may(Scope::Read, key.as_str()));
        if let Some(meta) = state.service.head_value(&key).await?.filter(|_| readable) {
            let entry = value_entry(key.as_str(), &meta);
            return Ok(multistatus(Body::from(format!("{HEAD}{entry}{TAIL}"))));
        }
    }
    let probe = state.service.list_page(&folder, Some("/"), None, 1).await?;
    if !key.is_root() && probe.entries.is_empty() {
        return Err(ApiError::not_found(format!(
            "nothing is stored at or under '{key}'"
        )));
    }
    let own = folder_entry(&folder);
    if depth == Depth::Zero {
        return Ok(multistatus(Body::from(format!("{HEAD}{own}{TAIL}"))));
    }
    let delimiter = (depth == Depth::One).then_some("/");
    let service = state.service.clone();
    // Where the listing is: the key to read after, and (below a level)
    // the folder of the last value written, whose own entries are written.
    struct Cursor {
        after: Option<String>,
        folder: String,
        done: bool,
    }
    let start = Cursor {
        after: None,
        folder: folder.clone(),
        done: false,
    };
    let pages = futures::stream::try_unfold(start, move |mut cursor| {
        let (service, folder, sight) = (service.clone(), folder.clone(), sight.clone());
        async move {
            if cursor.done {
                return Ok::<_, std::io::Error>(None);
            }
            let page = service
                .list_page(&folder, delimiter, cursor.after.as_deref(), PAGE)
                .await
                .map_err(std::io::Error::other)?;
            let mut out = String::new();
            let sees = |path: &str| sight.as_ref().is_none_or(|r| r.sees(path));
            let reads = |path: &str| sight.as_ref().is_none_or(|r| r.may(Scope::Read, path));
            for listed in &page.entries {
                match listed {
                    Listed::Prefix(p) if sees(p) => out.push_str(&folder_entry(p)),
                    Listed::Prefix(_) => {}
                    Listed::Value { key, .. } if !reads(key) => {}
                    Listed::Value { key, meta } => {
                        // Every folder between the last value's and this
                        // one's, once: the listing is in key order, so a
                        // folder's keys come together.
                        let parent = key.rfind('/').map_or("", |i| &key[..=i]);
                        for new in folders_between(&cursor.folder, parent) {
                            // A value below it is shown: the way there is too.
                            out.push_str(&folder_entry(new));
                        }
                        cursor.folder = parent.to_string();
                        out.push_str(&value_entry(key, meta));
                    }
                }
            }
            cursor.after = page.entries.last().map(|e| e.key().to_string());
            if !page.truncated {
                out.push_str(TAIL);
                cursor.done = true;
            }
            Ok(Some((Bytes::from(out), cursor)))
        }
    });
    let head = futures::stream::once(async move { Ok(Bytes::from(format!("{HEAD}{own}"))) });
    Ok(multistatus(Body::from_stream(head.chain(pages))))
}

/// The folders `next` (a folder, with its slash) lies in that `last`
/// does not, outermost first, from `next`'s first segment below `last`'s
/// common part on.
fn folders_between<'a>(last: &str, next: &'a str) -> Vec<&'a str> {
    let common = last
        .char_indices()
        .zip(next.chars())
        .take_while(|((_, a), b)| a == b)
        .filter(|((_, a), _)| *a == '/')
        .last()
        .map_or(0, |((i, _), _)| i + 1);
    next[common..]
        .match_indices('/')
        .map(|(i, _)| &next[..common + i + 1])
        .collect()
}

const HEAD: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<multistatus xmlns=\"DAV:\">\n";
const TAIL: &str = "</multistatus>\n";

/// The `href` of a key below `/zarr/`, each segment escaped.
fn href(key: &str) -> String {
    let mut out = String::from("/zarr/");
    for (i, segment) in key.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.extend(utf8_percent_encode(segment, SEGMENT));
    }
    out
}

fn http_date(ts: Timestamp) -> String {
    httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(ts.seconds().max(0) as u64),
    )
}

fn value_entry(key: &str, meta: &KeyMeta) -> String {
    let etag = meta
        .version
        .e_tag
        .as_deref()
        .map(|t| format!("<getetag>{}</getetag>", xml::escape(&quote_etag(t))))
        .unwrap_or_default();
    let name = key.rsplit('/').next().unwrap_or(key);
    let kind = if crate::zarr::metadata::DOCUMENT_NAMES.contains(&name) {
        "application/json"
    } else {
        "application/octet-stream"
    };
    format!(
        "<response><href>{}</href><propstat><prop><resourcetype/>\
         <getcontentlength>{}</getcontentlength><getlastmodified>{}</getlastmodified>\
         {etag}<getcontenttype>{kind}</getcontenttype></prop>\
         <status>HTTP/1.1 200 OK</status></propstat></response>\n",
        xml::escape(&href(key)),
        meta.size,
        http_date(meta.last_modified),
    )
}

/// A folder (`""` for the root, else with its trailing slash). Folders
/// have no time of their own in a key-value store; clients that parse
/// one for every entry (object_store does) get the epoch.
fn folder_entry(folder: &str) -> String {
    format!(
        "<response><href>{}</href><propstat><prop>\
         <resourcetype><collection/></resourcetype><getlastmodified>{}</getlastmodified></prop>\
         <status>HTTP/1.1 200 OK</status></propstat></response>\n",
        xml::escape(&href(folder)),
        http_date(Timestamp::from_millis(0)),
    )
}

fn multistatus(body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::MULTI_STATUS;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_between_names_each_new_folder_once() {
        assert_eq!(folders_between("", "a/b/"), vec!["a/", "a/b/"]);
        assert_eq!(folders_between("a/b/", "a/b/"), Vec::<&str>::new());
        assert_eq!(folders_between("a/b/", "a/c/d/"), vec!["a/c/", "a/c/d/"]);
        assert_eq!(folders_between("a/b/", "a/"), Vec::<&str>::new());
        assert_eq!(folders_between("ab/", "a/"), vec!["a/"]);
        assert_eq!(folders_between("v2/", "v2/x/"), vec!["v2/x/"]);
    }

    #[test]
    fn hrefs_escape_each_segment() {
        assert_eq!(href("a b/c#d/.zarray"), "/zarr/a%20b/c%23d/.zarray");
        assert_eq!(href(""), "/zarr/");
        assert_eq!(href("g/"), "/zarr/g/");
    }
}
