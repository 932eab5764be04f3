//! `/api/v1/statistics/{path}` and `/api/v1/histogram/{path}`: small JSON
//! answers about a selection (for viewers' colour scales), taking the same
//! selection parameters as `/api/v1/data` (`select=`, `sel.`, `isel.`,
//! `decode=cf`). `/api/v1/stats` stays the cache's counters.

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use super::data::{may_read_group, parse_select};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::credentials::Caller;
use crate::http::input::extract::ApiPath;
use crate::http::input::labels;
use crate::http::state::AppState;
use crate::service::{Statistics, MAX_BINS};
use crate::store::node_path;
use crate::zarr::Selection;

/// The histogram's bins when `bins=` is not given.
const DEFAULT_BINS: usize = 64;

fn number(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

fn summary_json(stats: &Statistics) -> Value {
    let s = &stats.summary;
    json!({
        "count": s.count,
        "total": s.total,
        "valid_fraction": if s.total == 0 { Value::Null } else { json!(s.count as f64 / s.total as f64) },
        "min": if s.count == 0 { Value::Null } else { number(s.min) },
        "max": if s.count == 0 { Value::Null } else { number(s.max) },
        "mean": number(s.mean()),
        "std": number(s.std()),
    })
}

/// `GET /api/v1/statistics/{path}`: min, max, mean, std, count and the
/// fraction of values present, of a selection.
pub async fn statistics(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    RawQuery(query): RawQuery,
    caller: Option<axum::Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    let stats = run(&state, &path, query, caller, false).await?;
    Ok(Json(summary_json(&stats)))
}

/// `GET /api/v1/histogram/{path}?bins=&range=`: counts of a selection's
/// values in equal bins over `range` (default: the values' min to max).
pub async fn histogram(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    RawQuery(query): RawQuery,
    caller: Option<axum::Extension<Caller>>,
) -> ApiResult<Json<Value>> {
    let stats = run(&state, &path, query, caller, true).await?;
    let mut out = summary_json(&stats);
    if let Some(h) = &stats.histogram {
        out["bins"] = json!(h.counts.len());
        out["range"] = json!([number(h.lo), number(h.hi)]);
        out["edges"] = Value::Array(h.edges().into_iter().map(number).collect());
        out["counts"] = json!(h.counts);
    }
    Ok(Json(out))
}

async fn run(
    state: &AppState,
    path: &str,
    query: Option<String>,
    caller: Option<axum::Extension<Caller>>,
    histogram: bool,
) -> ApiResult<Statistics> {
    let key = node_path(path)?;
    let mut select = None;
    let mut bins = None;
    let mut range = None;
    let mut labelled = Vec::new();
    for (k, v) in url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes()) {
        let (k, v) = (k.into_owned(), v.into_owned());
        let slot = match k.as_str() {
            "select" => &mut select,
            "bins" if histogram => &mut bins,
            "range" if histogram => &mut range,
            name if labels::is_label_param(name) && !is_reduction(name) => {
                labelled.push((k, v));
                continue;
            }
            _ => {
                let known = if histogram {
                    "select, sel.{dim}, isel.{dim}, tolerance.{dim}, decode, bins, range"
                } else {
                    "select, sel.{dim}, isel.{dim}, tolerance.{dim}, decode"
                };
                return Err(ApiError::bad_request(
                    "bad_query",
                    format!("unknown parameter '{k}' (the parameters are {known})"),
                ));
            }
        };
        if slot.replace(v).is_some() {
            return Err(ApiError::bad_request(
                "bad_query",
                format!("query parameters: '{k}' is given more than once"),
            ));
        }
    }
    let mut query = labels::parse(&labelled)?;
    query.without_coordinates = !may_read_group(path, caller);
    if query.selects() && select.is_some() {
        return Err(ApiError::bad_request(
            "bad_selection",
            "sel.{dim} and isel.{dim} select by themselves: give them or select=, not both",
        ));
    }
    let selection = match &select {
        Some(s) => parse_select(s)?,
        None => Selection::all(),
    };
    let bins = match (histogram, bins) {
        (false, _) => None,
        (true, None) => Some(DEFAULT_BINS),
        (true, Some(b)) => Some(
            b.trim()
                .parse::<usize>()
                .ok()
                .filter(|b| (1..=MAX_BINS).contains(b))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_query",
                        format!("bins: '{b}' is not a count of bins from 1 to {MAX_BINS}"),
                    )
                })?,
        ),
    };
    let range = range
        .map(|r| {
            r.split_once(',')
                .and_then(|(a, b)| {
                    Some((a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?))
                })
                .filter(|(a, b)| a.is_finite() && b.is_finite() && a <= b)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_query",
                        format!("range: '{r}' is not LOW,HIGH, two numbers, the lower first"),
                    )
                })
        })
        .transpose()?;
    Ok(state
        .service
        .statistics(&key, selection, &query, bins, range)
        .await?)
}

/// Statistics are of the values selected: reductions do not apply.
fn is_reduction(name: &str) -> bool {
    matches!(name, "reduce" | "coarsen" | "resample" | "ddof" | "q")
}
