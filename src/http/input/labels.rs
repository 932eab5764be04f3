//! The query grammar of selections and computations in the data's terms,
//! shared by every endpoint that reads a selection:
//!
//! - `sel.{dim}=LABEL`, `START..STOP` (inclusive, either end empty),
//!   `~LABEL` (nearest) with `tolerance.{dim}=`;
//! - `isel.{dim}=` an index, a slice `start:stop:step` or a list `[1,5]`;
//! - `reduce=OP[:DIM[,DIM…]]` (`ddof=`, `q=`), `coarsen=DIM:N[,DIM:N]`,
//!   `resample=DIM:PERIOD` (`1D`, `1M`, `1Y`), both with `reduce=OP`;
//! - `decode=cf`.

use crate::http::error::{ApiError, ApiResult};
use crate::service::{Query, Reduction};
use crate::zarr::cf::coords::LabelSel;
use crate::zarr::cf::Period;
use crate::zarr::reduce::Op;
use crate::zarr::selection::DimSelector;
use crate::zarr::Selection;

/// The plain names of the grammar (beside the `sel.`, `isel.` and
/// `tolerance.` families).
pub const NAMES: &[&str] = &["reduce", "coarsen", "resample", "decode", "ddof", "q"];

/// Whether `name` is one of the grammar's.
pub fn is_label_param(name: &str) -> bool {
    NAMES.contains(&name)
        || ["sel.", "isel.", "tolerance."]
            .iter()
            .any(|p| name.strip_prefix(p).is_some_and(|d| !d.is_empty()))
}

/// The longest value of the grammar: labels, lists and quantiles are short;
/// a longer value is a mistake that errors would otherwise echo.
const MAX_VALUE: usize = 4096;

fn bad(param: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request("bad_query", format!("{param}: {why}"))
}

/// The query the grammar's `pairs` make (every pair one of the grammar's,
/// each name once).
pub fn parse(pairs: &[(String, String)]) -> ApiResult<Query> {
    let mut query = Query::default();
    let mut seen = std::collections::HashSet::new();
    let mut plain = std::collections::HashMap::new();
    for (name, value) in pairs {
        if value.len() > MAX_VALUE {
            return Err(bad(
                name,
                format!(
                    "a value of at most {MAX_VALUE} characters (this one has {})",
                    value.len()
                ),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(ApiError::bad_request(
                "bad_query",
                format!("query parameters: '{name}' is given more than once"),
            ));
        }
        if let Some(dim) = name.strip_prefix("sel.") {
            if value.trim().is_empty() {
                return Err(bad(name, "a label, a range START..STOP or ~LABEL"));
            }
            query.sel.push((dim.to_string(), LabelSel::parse(value)));
        } else if let Some(dim) = name.strip_prefix("isel.") {
            query
                .isel
                .push((dim.to_string(), index_selector(name, value)?));
        } else if let Some(dim) = name.strip_prefix("tolerance.") {
            query
                .tolerance
                .push((dim.to_string(), value.trim().to_string()));
        } else {
            plain.insert(name.as_str(), value.as_str());
        }
    }
    query.decode = match plain.get("decode").map(|v| v.trim()) {
        None | Some("none") | Some("raw") => false,
        Some("cf") => true,
        Some(other) => return Err(bad("decode", format!("'{other}' is not cf or none"))),
    };
    let reduce = plain.get("reduce");
    for needs in ["coarsen", "resample", "ddof", "q"] {
        if plain.contains_key(needs) && reduce.is_none() {
            return Err(bad(needs, "goes with reduce=OP"));
        }
    }
    let Some(reduce) = reduce else {
        return Ok(query);
    };
    let (op, dims) = match reduce.split_once(':') {
        Some((op, dims)) => (op, Some(dims)),
        None => (*reduce, None),
    };
    let op = Op::parse(op.trim()).map_err(|e| bad("reduce", e))?;
    let dims: Vec<String> = match dims {
        None => Vec::new(),
        Some(d) => {
            let list: Vec<String> = d.split(',').map(|s| s.trim().to_string()).collect();
            if list.iter().any(String::is_empty) {
                return Err(bad("reduce", "OP:DIM[,DIM…], the dimensions by name"));
            }
            list
        }
    };
    let coarsen = match plain.get("coarsen") {
        None => Vec::new(),
        Some(c) => {
            c.split(',')
                .map(|part| {
                    let (dim, n) = part.split_once(':').ok_or_else(|| {
                        bad("coarsen", "DIM:N[,DIM:N], a block size per dimension")
                    })?;
                    let n: u64 = n.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        bad("coarsen", format!("'{n}' is not a positive block size"))
                    })?;
                    Ok((dim.trim().to_string(), n))
                })
                .collect::<ApiResult<_>>()?
        }
    };
    let resample = match plain.get("resample") {
        None => None,
        Some(r) => {
            let (dim, period) = r
                .split_once(':')
                .ok_or_else(|| bad("resample", "DIM:PERIOD, as time:1M"))?;
            Some((
                dim.trim().to_string(),
                Period::parse(period).map_err(|e| bad("resample", e))?,
            ))
        }
    };
    let ddof = match plain.get("ddof") {
        None => 0,
        Some(_) if !matches!(op, Op::Std | Op::Var) => {
            return Err(bad("ddof", "goes with std and var"))
        }
        Some(d) => d
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&d| d <= 1_000_000)
            .ok_or_else(|| {
                bad(
                    "ddof",
                    format!("'{d}' is not a count of degrees of freedom"),
                )
            })?,
    };
    let q = match (plain.get("q"), op) {
        (None, Op::Quantile) => return Err(bad("q", "quantile needs q=, as q=0.5 or q=0.1,0.9")),
        (None, _) => Vec::new(),
        (Some(_), op) if op != Op::Quantile => return Err(bad("q", "goes with reduce=quantile")),
        (Some(q), _) => {
            let list = q
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| (0.0..=1.0).contains(v))
                })
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| bad("q", format!("'{q}' is not quantiles between 0 and 1")))?;
            if list.len() > 1000 {
                return Err(bad("q", "at most 1000 quantiles"));
            }
            list
        }
    };
    if (op.is_arg() || op.holds_values()) && (!coarsen.is_empty() || resample.is_some()) {
        return Err(bad(
            "reduce",
            format!(
                "{} reduces whole dimensions, not blocks or periods",
                op.name()
            ),
        ));
    }
    query.reduction = Some(Reduction {
        op,
        dims,
        coarsen,
        resample,
        ddof,
        q,
    });
    Ok(query)
}

/// `isel.{dim}=`: one dimension of a `select=`.
fn index_selector(param: &str, value: &str) -> ApiResult<DimSelector> {
    let why = "an index, a slice start:stop:step or a list [1,5,9]";
    match Selection::parse(value) {
        Ok(Selection::Orthogonal(mut dims))
            if dims.len() == 1 && dims[0] != DimSelector::Ellipsis =>
        {
            Ok(dims.remove(0))
        }
        Ok(_) => Err(bad(param, why)),
        Err(e) => Err(bad(param, format!("{why}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn the_grammar_reads_into_a_query() {
        let q = parse(&pairs(&[
            ("sel.time", "2024-01..2024-03"),
            ("sel.lat", "~52.1"),
            ("tolerance.lat", "0.5"),
            ("isel.lon", "::-1"),
            ("reduce", "std:time"),
            ("ddof", "1"),
            ("decode", "cf"),
        ]))
        .unwrap();
        assert_eq!(q.sel.len(), 2);
        assert_eq!(
            q.isel[0].1,
            DimSelector::Slice {
                start: None,
                stop: None,
                step: Some(-1)
            }
        );
        let r = q.reduction.unwrap();
        assert_eq!(
            (r.op, r.dims, r.ddof),
            (Op::Std, vec!["time".to_string()], 1)
        );
        assert!(q.decode);
    }

    #[test]
    fn mistakes_name_their_parameter() {
        for (bad_pairs, names) in [
            (vec![("reduce", "average:time")], "reduce"),
            (vec![("coarsen", "time:2")], "coarsen"),
            (vec![("reduce", "mean"), ("coarsen", "time:0")], "coarsen"),
            (vec![("reduce", "quantile:time")], "q"),
            (vec![("reduce", "mean:time"), ("ddof", "1")], "ddof"),
            (vec![("isel.x", "1,2")], "isel.x"),
            (vec![("decode", "yes")], "decode"),
            (
                vec![("reduce", "mean"), ("resample", "time:2W")],
                "resample",
            ),
            (vec![("reduce", "median"), ("coarsen", "x:2")], "reduce"),
        ] {
            let e = parse(&pairs(&bad_pairs)).unwrap_err();
            assert!(e.message.starts_with(names), "{e:?}");
        }
        assert!(is_label_param("sel.time") && !is_label_param("sel.") && !is_label_param("vmin"));
    }
}
