//! Values at places (`service::Sampled`) as OGC API – EDR answers them:
//! CoverageJSON (a Coverage, or a CoverageCollection when parameters
//! have different domains), GeoJSON (a Feature per element) and CSV (a
//! row per element, a column per dimension and parameter). NetCDF is
//! `netcdf::numbers_file`.

use serde_json::{json, Map, Value};

use crate::service::{number_json, Axis, Sampled};
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

/// Axis `i`'s value at position `k` as JSON.
fn label(axis: &Axis, k: usize) -> Value {
    match axis.label(k) {
        Some(Value::String(s)) if axis.coordinate.as_ref().is_some_and(|c| c.time.is_some()) => {
            Value::String(instant(&s))
        }
        Some(v) => v,
        None => Value::from(k),
    }
}

fn axis_values(axis: &Axis, n: u64) -> Vec<Value> {
    (0..n as usize).map(|k| label(axis, k)).collect()
}

fn crs_uri(crs: &Crs) -> String {
    match (crs.is_degrees(), crs.epsg) {
        (true, _) => "http://www.opengis.net/def/crs/OGC/1.3/CRS84".into(),
        (false, Some(code)) => format!("http://www.opengis.net/def/crs/EPSG/0/{code}"),
        (false, None) => crs.name.clone(),
    }
}

fn domain(s: &Sampled) -> Value {
    let mut axes = Map::new();
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
        return json!({"type": "Domain", "domainType": kind, "axes": axes, "referencing": referencing});
    }
    for (i, name) in names.iter().enumerate() {
        axes.insert(
            name.clone(),
            json!({"values": axis_values(&s.axes[i], s.shape[i])}),
        );
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
    let mut d = json!({"type": "Domain", "axes": axes, "referencing": referencing});
    if let Some(kind) = kind {
        d["domainType"] = json!(kind);
    }
    d
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

fn range(s: &Sampled) -> Value {
    let values: Vec<Value> = s
        .values
        .iter()
        .map(|&v| {
            if v.is_nan() {
                Value::Null
            } else {
                number_json(v, s.single)
            }
        })
        .collect();
    let (names, shape): (Vec<String>, Vec<u64>) = if s.xy.is_none() {
        (vec!["composite".into()], s.shape.clone())
    } else {
        (
            (0..s.axes.len()).map(|i| axis_name(s, i)).collect(),
            s.shape.clone(),
        )
    };
    json!({"type": "NdArray", "dataType": "float", "axisNames": names, "shape": shape, "values": values})
}

/// `samples` grouped by their domain (parameters of the same dimensions).
fn by_domain(samples: &[Sampled]) -> Vec<(Value, Vec<&Sampled>)> {
    let mut groups: Vec<(Value, Vec<&Sampled>)> = Vec::new();
    for s in samples {
        let d = domain(s);
        match groups.iter_mut().find(|(g, _)| *g == d) {
            Some((_, members)) => members.push(s),
            None => groups.push((d, vec![s])),
        }
    }
    groups
}

/// CoverageJSON of `samples`: one Coverage when they share a domain,
/// else a CoverageCollection of a Coverage per domain.
pub fn coverage_json(samples: &[Sampled]) -> Value {
    let groups = by_domain(samples);
    let parameters: Map<String, Value> = samples
        .iter()
        .map(|s| (s.name.clone(), parameter(&s.name, &s.attributes)))
        .collect();
    let coverage = |d: &Value, members: &[&Sampled], with_parameters: bool| {
        let ranges: Map<String, Value> =
            members.iter().map(|s| (s.name.clone(), range(s))).collect();
        let mut c = json!({"type": "Coverage", "domain": d, "ranges": ranges});
        if with_parameters {
            let own: Map<String, Value> = members
                .iter()
                .map(|s| (s.name.clone(), parameters[&s.name].clone()))
                .collect();
            c["parameters"] = Value::Object(own);
        }
        c
    };
    if groups.len() == 1 {
        let (d, members) = &groups[0];
        return coverage(d, members, true);
    }
    json!({
        "type": "CoverageCollection",
        "parameters": parameters,
        "coverages": groups.iter().map(|(d, m)| coverage(d, m, false)).collect::<Vec<_>>(),
    })
}

/// Each element of a sample: its (x, y), and the other axes' labels.
struct Element {
    xy: (f64, f64),
    labels: Vec<(String, Value)>,
}

fn elements(s: &Sampled) -> Vec<Element> {
    let n = s.values.len();
    if s.xy.is_none() {
        let labels: Vec<(String, Value)> = match &s.instant {
            Some(Value::String(t)) => vec![("datetime".into(), Value::String(instant(t)))],
            _ => Vec::new(),
        };
        return s
            .points
            .iter()
            .map(|&xy| Element {
                xy,
                labels: labels.clone(),
            })
            .take(n)
            .collect();
    }
    let (xd, yd) = s.xy.unwrap_or((0, 0));
    let xs = axis_values(&s.axes[xd], s.shape[xd]);
    let ys = axis_values(&s.axes[yd], s.shape[yd]);
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; s.shape.len()];
    for _ in 0..n {
        let labels = (0..s.axes.len())
            .filter(|&d| d != xd && d != yd)
            .map(|d| {
                let name = match axis_name(s, d).as_str() {
                    "t" => "datetime".to_string(),
                    "z" => "z".to_string(),
                    _ => s.axes[d].name.clone(),
                };
                (name, label(&s.axes[d], index[d]))
            })
            .collect();
        out.push(Element {
            xy: (
                xs[index[xd]].as_f64().unwrap_or(f64::NAN),
                ys[index[yd]].as_f64().unwrap_or(f64::NAN),
            ),
            labels,
        });
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if (index[d] as u64) < s.shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// GeoJSON: a Feature per element with a value, at its place in
/// longitude and latitude, its times and levels and every parameter of
/// the same domain as properties.
pub fn geojson(samples: &[Sampled]) -> Value {
    let mut features = Vec::new();
    for (_, same) in by_domain(samples) {
        let first = same[0];
        let mut places = elements(first);
        let mut points: Vec<(f64, f64)> = places.iter().map(|e| e.xy).collect();
        first.crs.to_degrees(&mut points);
        for (k, e) in places.iter_mut().enumerate() {
            let values: Vec<(String, f64)> =
                same.iter().map(|s| (s.name.clone(), s.values[k])).collect();
            if values.iter().all(|(_, v)| v.is_nan()) {
                continue;
            }
            let mut props = Map::new();
            for (name, label) in e.labels.drain(..) {
                props.insert(name, label);
            }
            for (name, v) in values {
                let v = if v.is_nan() {
                    Value::Null
                } else {
                    number_json(v, first.single)
                };
                props.insert(name, v);
            }
            features.push(json!({
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [points[k].0, points[k].1]},
                "properties": props,
            }));
        }
    }
    json!({"type": "FeatureCollection", "features": features})
}

/// CSV: a row per element; columns x and y (named as the dimensions,
/// `x`/`y` for a trajectory), the other dimensions, then each parameter.
pub fn csv(samples: &[Sampled], x_name: &str, y_name: &str) -> String {
    let mut columns: Vec<String> = vec![x_name.to_string(), y_name.to_string()];
    let mut rows: Vec<Map<String, Value>> = Vec::new();
    for (_, same) in by_domain(samples) {
        let first = same[0];
        for (k, e) in elements(first).into_iter().enumerate() {
            let mut row = Map::new();
            row.insert(x_name.to_string(), json!(e.xy.0));
            row.insert(y_name.to_string(), json!(e.xy.1));
            for (name, label) in e.labels {
                if !columns.contains(&name) {
                    columns.push(name.clone());
                }
                row.insert(name, label);
            }
            for s in &same {
                let v = s.values[k];
                row.insert(
                    s.name.clone(),
                    if v.is_nan() {
                        Value::Null
                    } else {
                        number_json(v, s.single)
                    },
                );
            }
            rows.push(row);
        }
        for s in &same {
            if !columns.contains(&s.name) {
                columns.push(s.name.clone());
            }
        }
    }
    let cell = |v: Option<&Value>| -> String {
        match v {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.contains([',', '"', '\n']) => {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    };
    let mut out = columns.join(",");
    out.push('\n');
    for row in &rows {
        let line: Vec<String> = columns.iter().map(|c| cell(row.get(c))).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
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
