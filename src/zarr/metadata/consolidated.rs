//! Consolidated metadata with some nodes left out: what a reader who may
//! not see every node below a group is given of `.zmetadata` (v2) or a v3
//! group's `zarr.json` with its `consolidated_metadata`.

use serde_json::Value;

/// `document` (the bytes of a `.zmetadata` or a `zarr.json`, named by
/// `name`) without the nodes for whose path (relative to the group, `""`
/// for the group itself) `keep` is false. `None` when the document is no
/// JSON object; unchanged bytes when it consolidates nothing.
pub fn retain(name: &str, document: &[u8], keep: impl Fn(&str) -> bool) -> Option<Vec<u8>> {
    let mut doc: serde_json::Map<String, Value> = serde_json::from_slice(document).ok()?;
    let nodes = match name {
        ".zmetadata" => doc.get_mut("metadata"),
        "zarr.json" => doc
            .get_mut("consolidated_metadata")
            .and_then(|c| c.get_mut("metadata")),
        _ => None,
    };
    let Some(Value::Object(nodes)) = nodes else {
        return Some(document.to_vec());
    };
    nodes.retain(|key, _| {
        let node = if name == ".zmetadata" {
            // `a/b/.zarray`: the node is `a/b`.
            key.rsplit_once('/').map_or("", |(folder, _)| folder)
        } else {
            key.as_str()
        };
        keep(node.trim_matches('/'))
    });
    serde_json::to_vec(&doc).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_nodes_are_left_out_of_both_forms() {
        let v2 = br#"{"metadata":{".zgroup":{"zarr_format":2},"a/.zarray":{},"a/.zattrs":{},"b/c/.zarray":{}},"zarr_consolidated_format":1}"#;
        let kept = retain(".zmetadata", v2, |p| p != "a").unwrap();
        let kept: Value = serde_json::from_slice(&kept).unwrap();
        let names: Vec<&String> = kept["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(names, [".zgroup", "b/c/.zarray"]);
        let v3 = br#"{"zarr_format":3,"node_type":"group","consolidated_metadata":{"kind":"inline","must_understand":false,"metadata":{"a":{},"a/x":{},"b":{}}}}"#;
        let kept = retain("zarr.json", v3, |p| !p.starts_with('a')).unwrap();
        let kept: Value = serde_json::from_slice(&kept).unwrap();
        let names: Vec<&String> = kept["consolidated_metadata"]["metadata"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(names, ["b"]);
        assert_eq!(
            retain("zarr.json", b"{\"a\":1}", |_| false).unwrap(),
            b"{\"a\":1}"
        );
        assert!(retain("zarr.json", b"not json", |_| true).is_none());
    }
}
