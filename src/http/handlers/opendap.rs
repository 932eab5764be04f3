//! OPeNDAP over every group and array: `/opendap/{path}.dds`, `.das`,
//! `.dods`, `.ascii` and `.html` (DAP2), `.dmr` and `.dap` (DAP4), with
//! their constraint expressions. A group is the dataset of its arrays;
//! an array, of itself and the coordinates beside it when the caller may
//! read its group. Errors are DAP's own: DAP2's `Error {...}`, DAP4's XML.

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures::StreamExt;

use crate::http::error::ApiError;
use crate::http::input::constraint::{self, Projection};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::ApiPath;
use crate::http::output::dap::{dap2, dap4, html, Dataset, Item, Piece, Version, Wire};
use crate::http::state::AppState;
use crate::service::{Content, ReadRequest, Residence};
use crate::store::node_path;
use crate::zarr::{ArrayBytes, DataType};

/// What a request asks for, by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Dds,
    Das,
    Dods,
    Ascii,
    Html,
    Dmr,
    Dap,
}

/// The suffixes, longest first (`.dmr.xml` before `.dmr`).
const SUFFIXES: &[(&str, Answer)] = &[
    (".dmr.xml", Answer::Dmr),
    (".dmr", Answer::Dmr),
    (".dap", Answer::Dap),
    (".dds", Answer::Dds),
    (".das", Answer::Das),
    (".dods", Answer::Dods),
    (".ascii", Answer::Ascii),
    (".asc", Answer::Ascii),
    (".html", Answer::Html),
];

impl Answer {
    fn version(self) -> Version {
        match self {
            Answer::Dmr | Answer::Dap | Answer::Html => Version::Dap4,
            _ => Version::Dap2,
        }
    }
}

/// The node a request's path names, and what it asks for (the form page
/// without a suffix).
fn parse(path: &str) -> (&str, Answer) {
    SUFFIXES
        .iter()
        .find_map(|(suffix, answer)| path.strip_suffix(suffix).map(|node| (node, *answer)))
        .unwrap_or((path, Answer::Html))
}

/// The store path a request is about, for authorization.
pub fn node_of(path: &str) -> &str {
    parse(path).0
}

/// A DAP error: the status, and DAP2's or DAP4's document of it.
fn dap_error(version: Version, e: ApiError) -> Response {
    let message = format!("{} ({})", e.message, e.code);
    let mut response = match version {
        Version::Dap2 => {
            let text = format!(
                "Error {{\n    code = {};\n    message = \"{}\";\n}};\n",
                e.status.as_u16(),
                message.replace('\\', "\\\\").replace('"', "\\\"")
            );
            let mut r = (e.status, text).into_response();
            r.headers_mut().insert(
                "content-description",
                HeaderValue::from_static("dods-error"),
            );
            r
        }
        Version::Dap4 => {
            let mut r = (e.status, dap4::error(e.status.as_u16(), &message)).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.opendap.dap4.error+xml"),
            );
            r
        }
    };
    if e.status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn bad(e: String) -> ApiError {
    ApiError::bad_request("bad_constraint", e)
}

/// `GET /opendap/{path}`.
pub async fn opendap(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    RawQuery(query): RawQuery,
    caller: Option<Extension<Caller>>,
) -> Response {
    let (node, answer) = parse(&path);
    match answer_of(&state, node, answer, query.as_deref().unwrap_or(""), caller).await {
        Ok(r) => r,
        Err(e) => dap_error(answer.version(), e),
    }
}

async fn answer_of(
    state: &AppState,
    node: &str,
    answer: Answer,
    query: &str,
    caller: Option<Extension<Caller>>,
) -> Result<Response, ApiError> {
    let key = node_path(node.trim_matches('/'))
        .map_err(|e| ApiError::bad_request("bad_path", e.to_string()))?;
    let beside = super::data::may_read_group(key.as_str(), caller);
    let described = state.service.described(&key, beside).await?;
    let dataset = Dataset::new(described, answer.version());
    let (projections, checksum) = match answer.version() {
        Version::Dap2 => (constraint::dap2(query).map_err(bad)?, false),
        Version::Dap4 => dap4_query(query)?,
    };
    let items = dataset.plan(&projections).map_err(bad)?;
    match answer {
        Answer::Dds => Ok(text(dap2::dds(&dataset.name, &items), "dods-dds")),
        Answer::Das => Ok(text(dap2::das(&dataset), "dods-das")),
        Answer::Dmr => {
            let pieces: Vec<&Piece> = items.iter().flat_map(Item::pieces).collect();
            Ok(typed(
                dap4::dmr(&dataset, &pieces),
                "application/vnd.opendap.dap4.dataset-metadata+xml",
            ))
        }
        Answer::Html => {
            let base = key.name().to_string();
            let mut r = axum::response::Html(html::page(&dataset, &base)).into_response();
            r.headers_mut()
                .insert("xdap", HeaderValue::from_static("4.0"));
            Ok(r)
        }
        Answer::Ascii => ascii(state, &dataset, &items).await,
        Answer::Dods => {
            let mut body = dap2::dds(&dataset.name, &items).into_bytes();
            body.extend_from_slice(b"Data:\n");
            for part in encoded(state, &items, Wire::Xdr, |p, dtype, data| {
                dap2::xdr(p, dtype, data)
            })
            .await?
            {
                body.extend_from_slice(&part);
            }
            let mut r = body.into_response();
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            h.insert("content-description", HeaderValue::from_static("dods-data"));
            dap2_headers(h);
            Ok(r)
        }
        Answer::Dap => {
            let pieces: Vec<&Piece> = items.iter().flat_map(Item::pieces).collect();
            let mut body = dap4::head(&dap4::dmr(&dataset, &pieces));
            for part in encoded(state, &items, Wire::Little, |p, dtype, data| {
                dap4::values(p, dtype, data, checksum)
            })
            .await?
            {
                body.extend_from_slice(&part);
            }
            body.extend_from_slice(&dap4::end());
            let mut r = body.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.opendap.dap4.data"),
            );
            Ok(r)
        }
    }
}

/// DAP4's `dap4.ce` and `dap4.checksum` (on unless `false`: netCDF-C
/// expects checksums unless asked not to, pydap always).
fn dap4_query(query: &str) -> Result<(Vec<Projection>, bool), ApiError> {
    let mut projections = Vec::new();
    let mut checksum = true;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "dap4.ce" => projections.extend(constraint::dap4(&v).map_err(bad)?),
            "dap4.checksum" => checksum = !v.eq_ignore_ascii_case("false"),
            _ => {}
        }
    }
    Ok((projections, checksum))
}

fn dap2_headers(h: &mut axum::http::HeaderMap) {
    h.insert("xdods-server", HeaderValue::from_static("dods/3.2"));
    h.insert(
        "xopendap-server",
        HeaderValue::from_static(concat!("zarrd/", env!("CARGO_PKG_VERSION"))),
    );
    h.insert("xdap", HeaderValue::from_static("2.0"));
}

fn text(body: String, description: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert("content-description", HeaderValue::from_static(description));
    dap2_headers(h);
    r
}

fn typed(body: String, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Bytes a string element is counted as before it is read (its length
/// word and some text); the read itself holds strings to the limit.
const STRING_BYTES: u64 = 16;

/// Bytes an element takes as text, about.
const ASCII_BYTES: u64 = 16;

/// The pieces of `items` read and encoded by `encode`, in order. Nothing
/// is sent before every read has succeeded, so a limit or a spent memory
/// budget is a status, never an answer cut short: the elements of all
/// pieces count together against the in-memory limit (each its stored
/// and its encoded bytes), and each read reserves its encoding from the
/// memory budget.
async fn encoded(
    state: &AppState,
    items: &[Item],
    wire: Wire,
    encode: impl Fn(&Piece, &DataType, &ArrayBytes) -> Result<Vec<u8>, String>,
) -> Result<Vec<Vec<u8>>, ApiError> {
    let limit = state.service.limits().in_memory;
    let pieces: Vec<&Piece> = items.iter().flat_map(Item::pieces).collect();
    let per_element = |p: &Piece| {
        let stored = p.var.dtype.size().map_or(STRING_BYTES, |s| s as u64);
        stored + p.ty.wire_size(wire).max(1)
    };
    let total = pieces.iter().fold(0u64, |sum, p| {
        sum.saturating_add(p.count().saturating_mul(per_element(p)))
    });
    if total > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "this answer would hold {total} bytes, over the {limit} one answer may hold: ask for fewer variables or a hyperslab"
            ),
        ));
    }
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        let (dtype, data) = read(state, p, p.ty.wire_size(wire)).await?;
        out.push(
            encode(p, &dtype, &data)
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?,
        );
    }
    Ok(out)
}

/// One piece read: its elements as decoded, with `encoding` bytes an
/// element reserved beside them for what they are written as.
async fn read(
    state: &AppState,
    piece: &Piece,
    encoding: u64,
) -> Result<(DataType, ArrayBytes), ApiError> {
    let request = ReadRequest {
        selection: piece.selection(),
        field: None,
        fixed_size_only: false,
        encoding_per_element: encoding,
    };
    let data = state
        .service
        .read(
            &piece.var.path,
            request,
            Residence::InMemory { expansion: 1 },
        )
        .await?;
    let bytes = match data.content {
        Content::Whole(b) => b,
        Content::Slabs { first, rest, .. } => {
            let mut all = first.to_vec();
            let mut rest = rest;
            while let Some(part) = rest.next().await {
                all.extend_from_slice(&part?);
            }
            ArrayBytes::Fixed(all)
        }
    };
    Ok((data.dtype, bytes))
}

/// `.ascii`: the DDS, a rule, and each piece's values as text (built
/// whole: text takes some ten times the values' bytes).
async fn ascii(state: &AppState, dataset: &Dataset, items: &[Item]) -> Result<Response, ApiError> {
    let limit = state.service.limits().in_memory / 10;
    let total: u64 = items
        .iter()
        .flat_map(Item::pieces)
        .map(|p| {
            let each = p.var.dtype.size().map_or(STRING_BYTES, |s| s as u64);
            p.count().saturating_mul(each)
        })
        .fold(0, u64::saturating_add);
    if total > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("{total} bytes of values are too many to write as text (at most {limit}): ask for a hyperslab, or .dods"),
        ));
    }
    let mut s = format!("Dataset: {}\n", dataset.name);
    for item in items {
        let prefix = match item {
            Item::Array(_) => String::new(),
            Item::Grid { array, .. } => format!("{}.", array.var.name),
            Item::Structure { name, .. } => format!("{name}."),
        };
        for p in item.pieces() {
            let (dtype, data) = read(state, p, ASCII_BYTES).await?;
            let text = dap2::ascii(&prefix, p, &dtype, &data).map_err(bad)?;
            if (s.len() + text.len()) as u64 > limit * 10 {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!(
                        "the values are too many to write as text (at most {} bytes): ask for a hyperslab, or .dods",
                        limit * 10
                    ),
                ));
            }
            s.push_str(&text);
        }
    }
    Ok(text(s, "dods-ascii"))
}
