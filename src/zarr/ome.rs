//! OME-NGFF multiscale images: the `multiscales` a group's attributes
//! declare (0.4 and earlier at the top level of `.zattrs`; 0.5 under `ome`
//! in `zarr.json`), read as types. The levels are arrays named relative to
//! the group, finest first.

use serde::Deserialize;
use serde_json::{Map, Value};

/// One axis of an image.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub struct Axis {
    pub name: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// One resolution level: an array below the group, with its transformation.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub path: String,
    /// Physical size of one element along each axis (`scale` transformations).
    pub scale: Option<Vec<f64>>,
    pub translation: Option<Vec<f64>>,
}

/// A multiscale image as a group declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Multiscale {
    pub version: Option<String>,
    pub name: Option<String>,
    pub axes: Vec<Axis>,
    /// Finest first, as the specification orders them.
    pub datasets: Vec<Dataset>,
}

#[derive(Deserialize)]
struct RawTransform {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    scale: Option<Vec<f64>>,
    #[serde(default)]
    translation: Option<Vec<f64>>,
}

#[derive(Deserialize)]
struct RawDataset {
    path: String,
    #[serde(default, rename = "coordinateTransformations")]
    transforms: Vec<RawTransform>,
}

#[derive(Deserialize)]
struct RawAxis {
    name: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    unit: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AxisEntry {
    /// 0.4 and later.
    Named(RawAxis),
    /// 0.3: names only.
    Bare(String),
}

#[derive(Deserialize)]
struct RawMultiscale {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    axes: Vec<AxisEntry>,
    datasets: Vec<RawDataset>,
}

/// The most levels an image may declare: pyramids halve each level, so
/// real ones have a few dozen at most, and each level is a node to open.
pub const MAX_LEVELS: usize = 64;

/// A level's path must name an array below the group, never above it, by
/// a name a key can hold.
fn below(path: &str) -> bool {
    !path.is_empty() && crate::store::StoreKey::new(path).is_ok()
}

/// The multiscale images a group's attributes declare; none when it
/// declares none or the declaration is not one a reader could use.
pub fn multiscales(attributes: &Map<String, Value>) -> Vec<Multiscale> {
    let (list, version) = match attributes.get("ome") {
        Some(ome) => (
            ome.get("multiscales"),
            ome.get("version").and_then(Value::as_str),
        ),
        None => (attributes.get("multiscales"), None),
    };
    let Some(Ok(raw)) = list.map(Vec::<RawMultiscale>::deserialize) else {
        return Vec::new();
    };
    raw.into_iter()
        .filter(|m| {
            (1..=MAX_LEVELS).contains(&m.datasets.len())
                && m.datasets.iter().all(|d| below(&d.path))
        })
        .map(|m| Multiscale {
            version: version.map(str::to_string).or(m.version),
            name: m.name,
            axes: m
                .axes
                .into_iter()
                .map(|a| match a {
                    AxisEntry::Named(a) => Axis {
                        name: a.name,
                        kind: a.kind,
                        unit: a.unit,
                    },
                    AxisEntry::Bare(name) => Axis {
                        name,
                        kind: None,
                        unit: None,
                    },
                })
                .collect(),
            datasets: m
                .datasets
                .into_iter()
                .map(|d| {
                    let find = |kind: &str| d.transforms.iter().find(|t| t.kind == kind);
                    Dataset {
                        scale: find("scale").and_then(|t| t.scale.clone()),
                        translation: find("translation").and_then(|t| t.translation.clone()),
                        path: d.path,
                    }
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn versions_0_4_and_0_5_are_read_alike() {
        let datasets = json!([
            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 0.5, 0.5]}]},
            {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 1.0]},
                                                       {"type": "translation", "translation": [0.0, 0.25, 0.25]}]}
        ]);
        let axes = json!([{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}]);
        let v04 = attrs(
            json!({"multiscales": [{"version": "0.4", "name": "img", "axes": axes, "datasets": datasets}]}),
        );
        let v05 = attrs(
            json!({"ome": {"version": "0.5", "multiscales": [{"name": "img", "axes": axes, "datasets": datasets}]}}),
        );
        let (a, b) = (&multiscales(&v04)[0], &multiscales(&v05)[0]);
        assert_eq!(a.version.as_deref(), Some("0.4"));
        assert_eq!(b.version.as_deref(), Some("0.5"));
        assert_eq!((&a.axes, &a.datasets), (&b.axes, &b.datasets));
        assert_eq!(a.datasets[1].path, "1");
        assert_eq!(a.datasets[0].scale.as_deref(), Some(&[1.0, 0.5, 0.5][..]));
        assert_eq!(
            a.datasets[1].translation.as_deref(),
            Some(&[0.0, 0.25, 0.25][..])
        );
        assert_eq!(a.axes[1].unit.as_deref(), Some("micrometer"));
    }

    #[test]
    fn unusable_declarations_are_none() {
        for bad in [
            json!({"multiscales": "no"}),
            json!({"multiscales": [{"datasets": []}]}),
            json!({"multiscales": [{"datasets": [{"path": "../outside"}]}]}),
            json!({"multiscales": [{"datasets": [{"path": "/abs"}]}]}),
            json!({"ome": {"multiscales": [{"axes": []}]}}),
            json!({"title": "plain group"}),
            json!({"multiscales": [{"datasets": [{"path": "a\u{1}"}]}]}),
            json!({"multiscales": [{"datasets": (0..=MAX_LEVELS).map(|i| json!({"path": i.to_string()})).collect::<Vec<_>>()}]}),
        ] {
            assert!(multiscales(&attrs(bad.clone())).is_empty(), "{bad}");
        }
        let v03 = attrs(
            json!({"multiscales": [{"version": "0.3", "axes": ["y", "x"], "datasets": [{"path": "0"}]}]}),
        );
        assert_eq!(multiscales(&v03)[0].axes[1].name, "x");
    }
}
