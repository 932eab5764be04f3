//! CSV: one row per element with a column per dimension holding its label
//! (an ISO 8601 time, a number, or the index when the dimension has no
//! coordinate) and a column of values, as pandas' `to_csv` of a
//! `to_dataframe()` writes it; or, with `layout=wide`, a 2-D selection as
//! a table (rows the first dimension, columns the second). Missing values
//! are empty. Built in memory, held to the in-memory limit as it is
//! written.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::{Encode, Output, Params};
use crate::config::Config;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data, Residence};
use crate::zarr::fill::element_to_json;
use crate::zarr::ArrayBytes;

pub struct Csv;

#[derive(Debug, Default, Deserialize)]
struct CsvParams {
    layout: Option<Layout>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Layout {
    #[default]
    Long,
    Wide,
}

impl Output for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn content_type(&self) -> &'static str {
        "text/csv"
    }
    fn params(&self) -> &'static [&'static str] {
        &["layout"]
    }
    fn residence(&self) -> Residence {
        // A row holds a label per dimension beside the value.
        Residence::InMemory { expansion: 8 }
    }
    fn fixed_size_only(&self) -> bool {
        true
    }
    fn wants_axes(&self) -> bool {
        true
    }
    fn encoder(&self, params: &Params, _: &Config) -> ApiResult<Box<dyn Encode>> {
        let p: CsvParams = params.read(self.params())?;
        let layout = p.layout.unwrap_or_default();
        Ok(Box::new(move |data: Data| encode(data, layout)))
    }
}

/// A CSV field: quoted when it holds a separator, quote or line break.
/// Names (never numbers) that a spreadsheet would run as a formula start
/// with a quote.
fn name_field(out: &mut String, text: &str) {
    if text.starts_with(['=', '+', '-', '@']) {
        field(out, &format!("'{text}"));
    } else {
        field(out, text);
    }
}

fn field(out: &mut String, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) if s == "NaN" => String::new(),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn encode(data: Data, layout: Layout) -> ApiResult<Response> {
    let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "CSV carries fixed-size values; use format=json",
        ));
    };
    let size = data.dtype.size().unwrap_or(1).max(1);
    let n = data.shape.len();
    let named = data.axes.len() == n;
    let name = |d: usize| -> String {
        if named {
            data.axes[d].name.clone()
        } else if n == 1 && data.shape.len() == 1 && data.axes.is_empty() {
            "index".into()
        } else {
            format!("dim_{d}")
        }
    };
    let label = |d: usize, i: usize| -> String {
        match named.then(|| data.axes[d].label(i)).flatten() {
            Some(v) => value_text(&v),
            None => i.to_string(),
        }
    };
    // A coordinate read itself would name two columns alike.
    let column = if data.name.is_empty() || data.axes.iter().any(|a| a.name == data.name) {
        "value".to_string()
    } else {
        data.name.clone()
    };
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "the CSV text passes {} bytes, the limit for answers built in memory; select less, or use format=npy",
                data.limit
            ),
        )
    };
    let mut out = String::new();
    let shape: Vec<usize> = data.shape.iter().map(|&s| s as usize).collect();
    let element = |k: usize| {
        value_text(&element_to_json(
            &data.dtype,
            &bytes[k * size..(k + 1) * size],
        ))
    };
    if layout == Layout::Wide {
        let [rows, cols] = shape[..] else {
            return Err(ApiError::bad_request(
                "bad_query",
                format!(
                    "layout=wide is for 2-D selections; this one has {n} dimensions (use layout=long)"
                ),
            ));
        };
        name_field(&mut out, &name(0));
        for c in 0..cols {
            out.push(',');
            field(&mut out, &label(1, c));
        }
        out.push('\n');
        for r in 0..rows {
            field(&mut out, &label(0, r));
            for c in 0..cols {
                out.push(',');
                out.push_str(&element(r * cols + c));
            }
            out.push('\n');
            if out.len() as u64 > data.limit {
                return Err(too_large());
            }
        }
    } else {
        for d in 0..n {
            name_field(&mut out, &name(d));
            out.push(',');
        }
        name_field(&mut out, &column);
        out.push('\n');
        // Labels per dimension, computed once.
        let labels: Vec<Vec<String>> = (0..n)
            .map(|d| (0..shape[d]).map(|i| label(d, i)).collect())
            .collect();
        let count: usize = shape.iter().product();
        let mut index = vec![0usize; n];
        for k in 0..count {
            for d in 0..n {
                field(&mut out, &labels[d][index[d]]);
                out.push(',');
            }
            out.push_str(&element(k));
            out.push('\n');
            for d in (0..n).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
            if k % 4096 == 0 && out.len() as u64 > data.limit {
                return Err(too_large());
            }
        }
        if out.len() as u64 > data.limit {
            return Err(too_large());
        }
    }
    let mut response = Response::new(Body::from(out));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8; header=present"),
    );
    Ok(response)
}
