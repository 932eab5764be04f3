//! Values at places (`service::Sampled`) as OGC API – EDR answers them:
//! CoverageJSON (a Coverage, or a CoverageCollection when parameters
//! have different domains), GeoJSON (a Feature per element) and CSV (a
//! row per element, a column per dimension and parameter). NetCDF is
//! `netcdf::numbers_file`.

use serde_json::{json, Map, Value};

use crate::service::{Axis, Sampled};
use crate::zarr::geo::Crs;

/// The role of an answer's axis in CoverageJSON.
fn axis_name(s: &Sampled, i: usize) -> String {
    let axis = &s.axes[i];
    match s.xy {
        Some((x, _)) if x == i => return "x".into(),
        Some((_, y)) if y == i => return "y".into(),
        _ => {}
    }
    let Some(c) = &axis.coordinate else {
        return axis.name.clone();
    };
    if c.time.is_some() {
        return "t".into();
    }
    let vertical = c.attributes.contains_key("positive")
        || c.attributes.get("axis").and_then(Value::as_str) == Some("Z");
    if vertical {
        "z".into()
    } else {
        axis.name.clone()
    }
}

/// A time label as RFC 3339 (CoverageJSON's and GeoJSON's), UTC.
pub fn instant(label: &str) -> String {
    match label.len() {
        4 => format!("{label}-01-01T00:00:00Z"),
        7 => format!("{label}-01T00:00:00Z"),
        10 => format!("{label}T00:00:00Z"),
        _ if label.ends_with('Z') || label.get(10..).is_some_and(|r| r.contains(['+', '-'])) => {
            label.to_string()
        }
        _ => format!("{label}Z"),
    }
}

fn crs_uri(crs: &Crs) -> String {
    match (crs.is_degrees(), crs.epsg) {
        (true, _) => "http://www.opengis.net/def/crs/OGC/1.3/CRS84".into(),
        (false, Some(code)) => format!("http://www.opengis.net/def/crs/EPSG/0/{code}"),
        (false, None) => crs.name.clone(),
    }
}

/// The domain of a sample as JSON text (its axes' values written
/// straight into it: a year of hourly times is 8760 labels).
fn domain(s: &Sampled) -> String {
    let mut axes = Map::new();
    let mut axes_text = String::new();
    let mut referencing = Vec::new();
    let names: Vec<String> = (0..s.axes.len()).map(|i| axis_name(s, i)).collect();
    let spatial = json!({
        "type": if s.crs.is_degrees() { "GeographicCRS" } else { "ProjectedCRS" },
        "id": crs_uri(&s.crs),
    });
    if s.xy.is_none() {
        // A trajectory: its vertices as (t, x, y) tuples; without a time,
        // points.
        let t = s.instant.as_ref().map(|v| match v {
            Value::String(t) => Value::String(instant(t)),
            other => other.clone(),
        });
        let values: Vec<Value> = s
            .points
            .iter()
            .map(|&(x, y)| match &t {
                Some(t) => json!([t, x, y]),
                None => json!([x, y]),
            })
            .collect();
        let (kind, coordinates) = match t {
            Some(_) => ("Trajectory", json!(["t", "x", "y"])),
            None => ("MultiPoint", json!(["x", "y"])),
        };
        axes.insert(
            "composite".into(),
            json!({"dataType": "tuple", "coordinates": coordinates, "values": values}),
        );
        referencing.push(json!({"coordinates": ["x", "y"], "system": spatial}));
        if s.instant.is_some() {
            referencing.push(json!({"coordinates": ["t"], "system": {"type": "TemporalRS", "calendar": "Gregorian"}}));
        }
        let d =
            json!({"type": "Domain", "domainType": kind, "axes": axes, "referencing": referencing});
        return d.to_string();
    }
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            axes_text.push(',');
        }
        axes_text.push_str(&Value::String(name.clone()).to_string());
        axes_text.push_str(":{\"values\":[");
        for k in 0..s.shape[i] as usize {
            if k > 0 {
                axes_text.push(',');
            }
            push_label(&mut axes_text, &s.axes[i], k, true);
        }
        axes_text.push_str("]}");
    }
    referencing.push(json!({"coordinates": ["x", "y"], "system": spatial}));
    if let Some(i) = names.iter().position(|n| n == "t") {
        let calendar = s.axes[i]
            .coordinate
            .as_ref()
            .and_then(|c| c.time.as_ref())
            .map(|t| t.calendar.name())
            .unwrap_or("standard");
        let calendar = match calendar {
            "standard" | "gregorian" | "proleptic_gregorian" => "Gregorian".to_string(),
            other => other.to_string(),
        };
        referencing.push(
            json!({"coordinates": ["t"], "system": {"type": "TemporalRS", "calendar": calendar}}),
        );
    }
    if let Some(i) = names.iter().position(|n| n == "z") {
        let attrs = s.axes[i]
            .coordinate
            .as_ref()
            .map(|c| c.attributes.clone())
            .unwrap_or_default();
        let mut axis = json!({"name": {"en": s.axes[i].name}});
        if let Some(u) = attrs.get("units").and_then(Value::as_str) {
            axis["unit"] = json!({"symbol": u});
        }
        if let Some(p) = attrs.get("positive").and_then(Value::as_str) {
            axis["direction"] = json!(p);
        }
        referencing.push(json!({"coordinates": ["z"], "system": {"type": "VerticalCRS", "cs": {"csAxes": [axis]}}}));
    }
    let many = |n: &str| {
        names
            .iter()
            .position(|m| m == n)
            .is_some_and(|i| s.shape[i] > 1)
    };
    let plain = names
        .iter()
        .all(|n| ["x", "y", "z", "t"].contains(&n.as_str()));
    let kind = match (many("x") || many("y"), many("t"), many("z")) {
        _ if !plain => None,
        (true, _, _) => Some("Grid"),
        (false, false, false) => Some("Point"),
        (false, true, false) => Some("PointSeries"),
        (false, false, true) => Some("VerticalProfile"),
        (false, true, true) => Some("Grid"),
    };
    let mut d = json!({"type": "Domain", "referencing": referencing});
    if let Some(kind) = kind {
        d["domainType"] = json!(kind);
    }
    with_member(d.to_string(), "axes", &format!("{{{axes_text}}}"))
}

/// `object` (JSON text of an object) with one more member, already JSON.
fn with_member(mut object: String, key: &str, raw: &str) -> String {
    object.pop();
    if !object.ends_with('{') {
        object.push(',');
    }
    object.push_str(&Value::String(key.into()).to_string());
    object.push(':');
    object.push_str(raw);
    object.push('}');
    object
}

/// A number as JSON (`null` for NaN and infinities, which JSON lacks);
/// single precision as its shortest decimal.
fn push_number(out: &mut String, v: f64, single: bool) {
    use std::fmt::Write;
    let _ = match (v.is_finite(), single) {
        (false, _) => write!(out, "null"),
        (true, true) => write!(out, "{}", v as f32),
        (true, false) => write!(out, "{v}"),
    };
}

/// Position `k` of `axis` as JSON: an RFC 3339 time, its number, or `k`.
fn push_label(out: &mut String, axis: &Axis, k: usize, quoted: bool) {
    let Some(c) = &axis.coordinate else {
        out.push_str(&k.to_string());
        return;
    };
    let Some(&v) = c.values.get(k) else {
        if quoted {
            out.push_str("null");
        }
        return;
    };
    match c.time.as_ref().map(|t| t.to_datetime(v)) {
        Some(Some(at)) if (0..=9999).contains(&at.year) => {
            let s = at.nanos / 1_000_000_000;
            // Digits pushed one by one: a year of hourly labels is 8760 of them.
            let digits = |out: &mut String, n: i64, width: usize| {
                let mut buf = [b'0'; 20];
                let (mut n, mut i) = (n.unsigned_abs(), buf.len());
                while n > 0 || i + width > buf.len() {
                    i -= 1;
                    buf[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                }
                out.extend(buf[i..].iter().map(|&b| b as char));
            };
            if quoted {
                out.push('"');
            }
            digits(out, at.year, 4);
            out.push('-');
            digits(out, at.month.into(), 2);
            out.push('-');
            digits(out, at.day.into(), 2);
            out.push('T');
            digits(out, s / 3600, 2);
            out.push(':');
            digits(out, s / 60 % 60, 2);
            out.push(':');
            digits(out, s % 60, 2);
            let frac = at.nanos % 1_000_000_000;
            if frac != 0 {
                let f = format!("{frac:09}");
                out.push('.');
                out.push_str(f.trim_end_matches('0'));
            }
            out.push('Z');
            if quoted {
                out.push('"');
            }
        }
        Some(Some(at)) if quoted => {
            out.push_str(&Value::String(instant(&at.to_string())).to_string())
        }
        Some(Some(at)) => out.push_str(&instant(&at.to_string())),
        Some(None) if quoted => out.push_str("null"),
        Some(None) => {}
        None if !v.is_finite() && !quoted => {}
        None => push_number(out, v, c.single),
    }
}

/// A parameter's CoverageJSON description from its CF attributes.
pub fn parameter(name: &str, attrs: &Map<String, Value>) -> Value {
    let text = |k: &str| attrs.get(k).and_then(Value::as_str);
    let label = text("long_name").or(text("standard_name")).unwrap_or(name);
    let mut p = json!({
        "type": "Parameter",
        "description": {"en": label},
        "observedProperty": {"label": {"en": text("standard_name").unwrap_or(label)}},
    });
    if let Some(sn) = text("standard_name") {
        p["observedProperty"]["id"] = json!(format!("http://vocab.nerc.ac.uk/standard_name/{sn}/"));
    }
    if let Some(u) = text("units") {
        p["unit"] = json!({"symbol": u, "label": {"en": u}});
    }
    p
}

/// A sample's values as a CoverageJSON NdArray (JSON text).
fn range(s: &Sampled) -> String {
    let names: Vec<String> = if s.xy.is_none() {
        vec!["composite".into()]
    } else {
        (0..s.axes.len()).map(|i| axis_name(s, i)).collect()
    };
    let head =
        json!({"type": "NdArray", "dataType": "float", "axisNames": names, "shape": s.shape});
    let mut values = String::with_capacity(s.values.len() * 10 + 2);
    values.push('[');
    for (k, &v) in s.values.iter().enumerate() {
        if k > 0 {
            values.push(',');
        }
        push_number(&mut values, v, s.single);
    }
    values.push(']');
    with_member(head.to_string(), "values", &values)
}

/// `samples` grouped by their domain (parameters of the same dimensions).
fn by_domain(samples: &[Sampled]) -> Vec<(String, Vec<&Sampled>)> {
    let mut groups: Vec<(String, Vec<&Sampled>)> = Vec::new();
    for s in samples {
        let d = domain(s);
        match groups.iter_mut().find(|(g, _)| *g == d) {
            Some((_, members)) => members.push(s),
            None => groups.push((d, vec![s])),
        }
    }
    groups
}

/// CoverageJSON of `samples` (text): one Coverage when they share a
/// domain, else a CoverageCollection of a Coverage per domain.
pub fn coverage_json(samples: &[Sampled]) -> String {
    let groups = by_domain(samples);
    let parameters = |members: &[&Sampled]| -> String {
        let p: Map<String, Value> = members
            .iter()
            .map(|s| (s.name.clone(), parameter(&s.name, &s.attributes)))
            .collect();
        Value::Object(p).to_string()
    };
    let coverage = |d: &str, members: &[&Sampled], with_parameters: bool| {
        let mut ranges = String::from("{");
        for (k, s) in members.iter().enumerate() {
            if k > 0 {
                ranges.push(',');
            }
            ranges.push_str(&Value::String(s.name.clone()).to_string());
            ranges.push(':');
            ranges.push_str(&range(s));
        }
        ranges.push('}');
        let mut c = with_member(r#"{"type":"Coverage"}"#.into(), "domain", d);
        if with_parameters {
            c = with_member(c, "parameters", &parameters(members));
        }
        with_member(c, "ranges", &ranges)
    };
    if groups.len() == 1 {
        let (d, members) = &groups[0];
        return coverage(d, members, true);
    }
    let all: Vec<&Sampled> = samples.iter().collect();
    let coverages: Vec<String> = groups.iter().map(|(d, m)| coverage(d, m, false)).collect();
    let c = with_member(
        r#"{"type":"CoverageCollection"}"#.into(),
        "parameters",
        &parameters(&all),
    );
    with_member(c, "coverages", &format!("[{}]", coverages.join(",")))
}

/// Calls `f` with each element's position `k` and its index along each
/// axis, in C order.
fn each_element(s: &Sampled, mut f: impl FnMut(usize, &[usize])) {
    let mut index = vec![0usize; s.shape.len()];
    for k in 0..s.values.len() {
        f(k, &index);
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if (index[d] as u64) < s.shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// The column (CSV) or property (GeoJSON) an axis that is not x or y fills.
fn axis_column(s: &Sampled, d: usize) -> String {
    match axis_name(s, d).as_str() {
        "t" => "datetime".to_string(),
        "z" => "z".to_string(),
        _ => s.axes[d].name.clone(),
    }
}

/// An element's x and y in the sample's CRS.
fn place_of(s: &Sampled, k: usize, index: &[usize]) -> (f64, f64) {
    let coord = |d: usize| {
        s.axes[d]
            .coordinate
            .as_ref()
            .and_then(|c| c.values.get(index[d]).copied())
            .unwrap_or(index[d] as f64)
    };
    match s.xy {
        Some((xd, yd)) => (coord(xd), coord(yd)),
        None => s.points.get(k).copied().unwrap_or((f64::NAN, f64::NAN)),
    }
}

/// GeoJSON: a Feature per element with a value, at its place in
/// longitude and latitude, its times and levels and every parameter of
/// the same domain as properties (JSON text).
pub fn geojson(samples: &[Sampled]) -> String {
    let mut out = String::from(r#"{"type":"FeatureCollection","features":["#);
    let mut first_feature = true;
    for (_, same) in by_domain(samples) {
        let first = same[0];
        let axes: Vec<(usize, String)> = match first.xy {
            Some((xd, yd)) => (0..first.axes.len())
                .filter(|&d| d != xd && d != yd)
                .map(|d| (d, Value::String(axis_column(first, d)).to_string()))
                .collect(),
            None => Vec::new(),
        };
        let instant = match &first.instant {
            Some(Value::String(t)) => Some(Value::String(instant(t)).to_string()),
            _ => None,
        };
        let names: Vec<String> = same
            .iter()
            .map(|s| Value::String(s.name.clone()).to_string())
            .collect();
        each_element(first, |k, index| {
            if same.iter().all(|s| !s.values[k].is_finite()) {
                return;
            }
            let mut p = [place_of(first, k, index)];
            first.crs.to_degrees(&mut p);
            // Longitudes between -180 and 180, as GeoJSON has them.
            let lon = (p[0].0 + 180.0).rem_euclid(360.0) - 180.0;
            if !first_feature {
                out.push(',');
            }
            first_feature = false;
            out.push_str(r#"{"type":"Feature","geometry":{"type":"Point","coordinates":["#);
            push_number(&mut out, lon, false);
            out.push(',');
            push_number(&mut out, p[0].1, false);
            out.push_str(r#"]},"properties":{"#);
            let mut sep = "";
            if let Some(t) = &instant {
                out.push_str("\"datetime\":");
                out.push_str(t);
                sep = ",";
            }
            for (d, name) in &axes {
                out.push_str(sep);
                out.push_str(name);
                out.push(':');
                push_label(&mut out, &first.axes[*d], index[*d], true);
                sep = ",";
            }
            for (s, name) in same.iter().zip(&names) {
                out.push_str(sep);
                out.push_str(name);
                out.push(':');
                push_number(&mut out, s.values[k], s.single);
                sep = ",";
            }
            out.push_str("}}");
        });
    }
    out.push_str("]}");
    out
}

/// CSV: a row per element; columns x and y (named as the dimensions,
/// `x`/`y` for a trajectory), the other dimensions, then each parameter.
pub fn csv(samples: &[Sampled], x_name: &str, y_name: &str) -> String {
    /// Where a column's cells come from, in one group of samples.
    enum Cell {
        X,
        Y,
        Axis(usize),
        Instant,
        Parameter(usize),
        Empty,
    }
    let groups = by_domain(samples);
    let mut columns: Vec<String> = vec![x_name.to_string(), y_name.to_string()];
    for (_, same) in &groups {
        let s = same[0];
        let names: Vec<String> = match s.xy {
            Some((xd, yd)) => (0..s.axes.len())
                .filter(|&d| d != xd && d != yd)
                .map(|d| axis_column(s, d))
                .collect(),
            None if s.instant.is_some() => vec!["datetime".into()],
            None => Vec::new(),
        };
        for n in names {
            if !columns.contains(&n) {
                columns.push(n);
            }
        }
    }
    let dims = columns.len();
    for s in samples {
        if !columns.contains(&s.name) {
            columns.push(s.name.clone());
        }
    }
    let mut out = columns
        .iter()
        .map(|c| csv_text(c))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for (_, same) in &groups {
        let first = same[0];
        let cells: Vec<Cell> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    return Cell::X;
                }
                if i == 1 {
                    return Cell::Y;
                }
                if i >= dims {
                    return same
                        .iter()
                        .position(|s| s.name == *c)
                        .map_or(Cell::Empty, Cell::Parameter);
                }
                match first.xy {
                    Some((xd, yd)) => (0..first.axes.len())
                        .find(|&d| d != xd && d != yd && axis_column(first, d) == *c)
                        .map_or(Cell::Empty, Cell::Axis),
                    None if c == "datetime" && first.instant.is_some() => Cell::Instant,
                    None => Cell::Empty,
                }
            })
            .collect();
        each_element(first, |k, index| {
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match cell {
                    Cell::X => push_number(&mut out, place_of(first, k, index).0, false),
                    Cell::Y => push_number(&mut out, place_of(first, k, index).1, false),
                    Cell::Axis(d) => push_label(&mut out, &first.axes[*d], index[*d], false),
                    Cell::Instant => {
                        if let Some(Value::String(t)) = &first.instant {
                            out.push_str(&instant(t));
                        }
                    }
                    Cell::Parameter(p) => {
                        let v = same[*p].values[k];
                        if v.is_finite() {
                            push_number(&mut out, v, same[*p].single);
                        }
                    }
                    Cell::Empty => {}
                }
            }
            out.push('\n');
        });
    }
    out
}

/// A CSV cell of text: quoted when it holds a comma, quote or line break.
fn csv_text(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_labels_become_rfc3339() {
        assert_eq!(instant("2001-02-03"), "2001-02-03T00:00:00Z");
        assert_eq!(instant("2001-02-03T06:00:00"), "2001-02-03T06:00:00Z");
        assert_eq!(instant("2001-02-03T06:00:00Z"), "2001-02-03T06:00:00Z");
    }
}
