//! `/api/v1/data`: server-side slicing. The read's parameters (`select`,
//! `points`, `field`, `level`) are parsed here; the format `format=` or
//! `Accept` chooses reads its own (see [`crate::http::output`]).

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::{ApiPath, ApiQuery};
use crate::http::input::labels;
use crate::http::output::{self, Params, FORMATS};
use crate::http::state::AppState;
use crate::service::{Content, Query, ReadRequest};
use crate::store::node_path;
use crate::zarr::selection::MAX_LISTED;
use crate::zarr::Selection;

/// The parameters of `GET /api/v1/data` (query) and `POST` (JSON body)
/// that say what to read; the rest are the chosen format's (see
/// [`crate::http::output::Output::params`]).
#[derive(Debug, Default, Deserialize)]
pub struct DataParams {
    select: Option<String>,
    /// Points as a JSON string (query) or a list (body).
    points: Option<Points>,
    field: Option<String>,
    format: Option<String>,
    /// A level of an OME-Zarr multiscale image, when the path is its group.
    level: Option<i64>,
}

/// The names of [`DataParams`].
const READ_PARAMS: &[&str] = &["select", "points", "field", "format", "level"];

/// A POST body: the read's parameters typed as they are read (a points
/// list straight into coordinates), the others kept for the format.
struct BodyParams(DataParams, Map<String, Value>);

impl<'de> Deserialize<'de> for BodyParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = BodyParams;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object of parameters")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<BodyParams, A::Error> {
                let mut p = DataParams::default();
                let mut rest = Map::new();
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "'{key}' is given more than once"
                        )));
                    }
                    match key.as_str() {
                        "select" => p.select = map.next_value()?,
                        "points" => p.points = map.next_value()?,
                        "field" => p.field = map.next_value()?,
                        "format" => p.format = map.next_value()?,
                        "level" => p.level = map.next_value()?,
                        _ => {
                            rest.insert(key, map.next_value()?);
                        }
                    }
                }
                Ok(BodyParams(p, rest))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// `GET /api/v1/data/{path}`: a selection of an array in the format asked.
pub async fn data_get(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    ApiQuery(params): ApiQuery<DataParams>,
    RawQuery(query): RawQuery,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (labelled, others): (Vec<_>, Vec<_>) =
        url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
            .filter(|(k, _)| !READ_PARAMS.contains(&k.as_ref()))
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .partition(|(k, _)| labels::is_label_param(k));
    let mut query = labels::parse(&labelled)?;
    query.without_coordinates = !may_read_group(&path, caller);
    data(
        state,
        &path,
        params,
        query,
        Params::from_query(others)?,
        &headers,
    )
    .await
}

/// `points`: JSON text in a query, a list in a body. Read straight into
/// coordinates: as a `Value` (and a copy of it) a point cost some 300 bytes.
#[derive(Debug)]
enum Points {
    Text(String),
    List(Vec<Vec<i64>>),
    /// Why a list is not one of coordinates, for a 400 that says so.
    Bad(String),
}

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Points;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of coordinate lists of integers, as [[0, 1], [5, 2]]")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Points, E> {
                Ok(Points::Text(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Points, A::Error> {
                let mut points = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                let mut bad = None;
                loop {
                    // After a bad point, or one more than a selection may
                    // list (refused when it is resolved), the rest is only
                    // read past.
                    if bad.is_some() || points.len() > MAX_LISTED {
                        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                        break;
                    }
                    // One point at a time as a `Value`, so a point that is
                    // not integers is a bad selection, not a bad body.
                    let Some(point) = seq.next_element::<Value>()? else {
                        break;
                    };
                    match serde_json::from_value::<Vec<i64>>(point) {
                        Ok(point) => points.push(point),
                        Err(e) => bad = Some(e.to_string()),
                    }
                }
                Ok(bad.map_or(Points::List(points), Points::Bad))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The largest body of parameters `POST /api/v1/data` takes.
const MAX_PARAMS_BODY: u64 = 16 << 20;

/// `POST /api/v1/data/{path}`: a read with its parameters in a JSON body
/// (point lists too long for a URL).
pub async fn data_post(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let headers = request.headers().clone();
    let caller = request.extensions().get::<Caller>().cloned();
    // Parameters, not data: a points list this size is already a million
    // points, and parsing JSON costs many times its bytes.
    let crate::http::input::extract::ApiBody(body, _held) =
        crate::http::input::extract::read_body(request, &state, MAX_PARAMS_BODY)
            .await
            .map_err(|e| match e.code {
                "body_too_large" => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!(
                        "the parameters are longer than {MAX_PARAMS_BODY} bytes (read a large point set in several requests)"
                    ),
                ),
                _ => e,
            })?;
    let BodyParams(params, mut others) = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            format!(
                "the body must be a JSON object with select, points, field, format, level: {e}"
            ),
        )
    })?;
    let labelled: Vec<(String, String)> = others
        .keys()
        .filter(|k| labels::is_label_param(k))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(|k| {
            let v = others.remove(&k)?;
            Some(match v {
                Value::String(s) => Ok((k, s)),
                Value::Number(n) => Ok((k, n.to_string())),
                other => Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "bad_body",
                    format!("the body's parameters: '{k}' is {other}, not a string or number"),
                )),
            })
        })
        .collect::<ApiResult<_>>()?;
    let mut query = labels::parse(&labelled)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", e.message))?;
    query.without_coordinates = !may_read_group(&path, caller.map(axum::Extension));
    data(
        state,
        &path,
        params,
        query,
        Params::from_body(others),
        &headers,
    )
    .await
}

/// Whether the caller may read all of the group of the array at `path`,
/// where its coordinates are (a token limited to the array may not, nor a
/// caller denied one of the group's arrays: it may be a coordinate).
pub fn may_read_group(path: &str, caller: Option<axum::Extension<Caller>>) -> bool {
    let parent = node_path(path).ok().and_then(|k| k.parent());
    parent.is_some_and(|parent| Caller::reads_whole(caller.as_deref(), parent.as_str()))
}

/// A `select=` parameter, with parse errors as 400s.
pub fn parse_select(s: &str) -> ApiResult<Selection> {
    Selection::parse(s).map_err(|e| ApiError::bad_request("bad_selection", format!("select: {e}")))
}

fn selection(select: Option<&str>, points: Option<Points>) -> ApiResult<Selection> {
    match (select, points) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "bad_selection",
            "give either select or points, not both",
        )),
        (_, Some(Points::Text(t))) => Selection::parse_points(&t)
            .map_err(|e| ApiError::bad_request("bad_selection", format!("points: {e}"))),
        (_, Some(Points::List(list))) => Ok(Selection::Points(list)),
        (_, Some(Points::Bad(e))) => Err(ApiError::bad_request(
            "bad_selection",
            format!("points: a list of coordinate lists of integers, as [[0, 1], [5, 2]]: {e}"),
        )),
        (Some(s), None) => parse_select(s),
        (None, None) => Ok(Selection::all()),
    }
}

async fn data(
    state: AppState,
    path: &str,
    mut params: DataParams,
    query: Query,
    others: Params,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    unknown_params(&others)?;
    if query.selects() && (params.select.is_some() || params.points.is_some()) {
        return Err(ApiError::bad_request(
            "bad_selection",
            "sel.{dim} and isel.{dim} select by themselves: give them or select=/points=, not both",
        ));
    }
    let mut key = node_path(path)?;
    if let Some(level) = params.level {
        key = state.service.level_path(&key, level).await?;
    }
    let format = output::choose(
        params.format.as_deref(),
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
    )
    .map_err(|e| ApiError::bad_request("bad_format", e))?;
    let encoder = format.encoder(&others, &state.config)?;
    let request = ReadRequest {
        selection: selection(params.select.as_deref(), params.points.take())?,
        field: params.field,
        fixed_size_only: format.fixed_size_only(),
        encoding_per_element: format.encoding_per_element(),
    };
    let mut data = state
        .service
        .read_query(
            &key,
            request,
            &query,
            format.residence(),
            format.wants_axes(),
        )
        .await
        .map_err(|e| format.explain(e.into()))?;
    // The memory the read reserved for the data and its encoding, held
    // until the answer has been sent.
    let mut held = std::mem::take(&mut data.reservation);
    let response = if matches!(data.content, Content::Whole(_)) && held.bytes() > 0 {
        // Building a large answer whole (drawing, JSON) is CPU work the
        // size of the answer: on the decoding pool, off the threads that
        // answer requests. The reservation goes with the work, so a client
        // that leaves does not free memory the work still holds.
        let (response, kept) = crate::zarr::array::run_blocking(move || {
            let response = encoder.encode(data);
            // What drawing or building took is given back; the answer's
            // bytes stay reserved until they are sent.
            if let Ok(r) = &response {
                held.shrink_to(
                    http_body::Body::size_hint(r.body())
                        .upper()
                        .unwrap_or(u64::MAX),
                );
            }
            Ok((response, held))
        })
        .await?;
        held = kept;
        response?
    } else {
        encoder.encode(data)?
    };
    Ok(response
        .map(|body| axum::body::Body::new(crate::http::server::idle::Keeping::new(body, held))))
}

/// A parameter neither the read nor any format reads is a mistake (a
/// misspelt `vmni` would otherwise draw with the default range).
fn unknown_params(others: &Params) -> ApiResult<()> {
    let Some(name) = others
        .names()
        .find(|n| !FORMATS.iter().any(|f| f.params().contains(n)))
    else {
        return Ok(());
    };
    let mut known: Vec<&str> = READ_PARAMS.to_vec();
    known.extend(["sel.{dim}", "isel.{dim}", "tolerance.{dim}"]);
    known.extend(labels::NAMES);
    known.extend(FORMATS.iter().flat_map(|f| f.params()));
    let message = format!(
        "unknown parameter '{name}' (the parameters are {})",
        known.join(", ")
    );
    Err(if others.is_body() {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", message)
    } else {
        ApiError::bad_request("bad_query", message)
    })
}
