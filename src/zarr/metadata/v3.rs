//! v3 `zarr.json` documents.

use serde_json::{json, Map, Value};

use super::{
    attributes, field, format_of, object, u64_list, ArrayMetadata, CodecSpec, GroupMetadata,
    NodeMetadata, Order,
};
use crate::zarr::chunk_key::ChunkKeyEncoding;
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::fill::{fill_to_v3_json, parse_fill};

const ARRAY_FIELDS: [&str; 11] = [
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
];
const GROUP_FIELDS: [&str; 4] = [
    "zarr_format",
    "node_type",
    "attributes",
    "consolidated_metadata",
];

/// Extra fields are allowed only as `{"must_understand": false, ...}`.
fn check_extensions(key: &str, doc: &Map<String, Value>, known: &[&str]) -> Result<()> {
    for (name, value) in doc {
        if known.contains(&name.as_str()) {
            continue;
        }
        let optional = value.get("must_understand").and_then(Value::as_bool) == Some(false);
        if !optional {
            return Err(ZarrError::metadata(
                key,
                format!("unknown field '{name}' (extensions need \"must_understand\": false)"),
            ));
        }
    }
    Ok(())
}

/// Parse a `zarr.json` document stored at `key`.
pub fn parse(key: &str, doc: &Value) -> Result<NodeMetadata> {
    let obj = object(key, doc)?;
    format_of(key, obj, 3)?;
    match field(key, obj, "node_type")?.as_str() {
        Some("group") => parse_group(key, obj).map(NodeMetadata::Group),
        Some("array") => parse_array(key, obj).map(|a| NodeMetadata::Array(Box::new(a))),
        _ => Err(ZarrError::metadata(
            key,
            "node_type must be \"array\" or \"group\"",
        )),
    }
}

fn parse_group(key: &str, obj: &Map<String, Value>) -> Result<GroupMetadata> {
    check_extensions(key, obj, &GROUP_FIELDS)?;
    let consolidated = match obj.get("consolidated_metadata") {
        None | Some(Value::Null) => None,
        Some(cm) => {
            let entries = cm
                .get("metadata")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    ZarrError::metadata(key, "consolidated_metadata.metadata must be an object")
                })?;
            let mut nodes = Vec::with_capacity(entries.len());
            for (path, doc) in entries {
                nodes.push((
                    path.clone(),
                    parse(&format!("{key}#consolidated/{path}"), doc)?,
                ));
            }
            Some(nodes)
        }
    };
    Ok(GroupMetadata {
        zarr_format: 3,
        attributes: attributes(key, obj.get("attributes"))?,
        consolidated,
        implicit: false,
    })
}

fn parse_array(key: &str, obj: &Map<String, Value>) -> Result<ArrayMetadata> {
    check_extensions(key, obj, &ARRAY_FIELDS)?;
    let shape = u64_list(key, field(key, obj, "shape")?, "shape")?;
    let dtype = DataType::from_v3_json(field(key, obj, "data_type")?)
        .map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let grid = field(key, obj, "chunk_grid")?;
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return Err(ZarrError::metadata(
            key,
            format!("chunk_grid {grid} is not supported (only \"regular\")"),
        ));
    }
    let chunk_shape = u64_list(
        key,
        grid.get("configuration")
            .and_then(|c| c.get("chunk_shape"))
            .unwrap_or(&Value::Null),
        "chunk_grid.configuration.chunk_shape",
    )?;
    let chunk_key_encoding = ChunkKeyEncoding::from_v3(field(key, obj, "chunk_key_encoding")?)
        .map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let fill_json = field(key, obj, "fill_value")?.clone();
    let fill_value =
        parse_fill(&dtype, &fill_json).map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let codecs = field(key, obj, "codecs")?;
    if !codecs.is_array() {
        return Err(ZarrError::metadata(key, "codecs must be a list"));
    }
    if let Some(st) = obj.get("storage_transformers") {
        if st.as_array().is_some_and(|a| !a.is_empty()) {
            return Err(ZarrError::metadata(
                key,
                "storage_transformers are not supported",
            ));
        }
    }
    let dimension_names = match obj.get("dimension_names") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|n| match n {
                    Value::Null => Ok(None),
                    Value::String(s) => Ok(Some(s.clone())),
                    other => Err(ZarrError::metadata(
                        key,
                        format!("dimension name {other} is not a string or null"),
                    )),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        Some(other) => {
            return Err(ZarrError::metadata(
                key,
                format!("dimension_names {other} is not a list"),
            ))
        }
    };
    let meta = ArrayMetadata {
        zarr_format: 3,
        shape,
        chunk_shape,
        dtype,
        fill_value,
        fill_value_json: fill_json,
        order: Order::C,
        chunk_key_encoding,
        codecs: CodecSpec::V3(codecs.clone()),
        attributes: attributes(key, obj.get("attributes"))?,
        dimension_names,
    };
    meta.validate(key)?;
    Ok(meta)
}

/// The `zarr.json` document for an array.
pub fn array_document(meta: &ArrayMetadata, codecs: &Value) -> Value {
    let mut doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": meta.shape,
        "data_type": meta.dtype.to_v3_json(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": meta.chunk_shape}},
        "chunk_key_encoding": meta.chunk_key_encoding.to_v3(),
        "fill_value": fill_to_v3_json(&meta.dtype, &meta.fill_value),
        "codecs": codecs,
        "attributes": meta.attributes,
    });
    if let Some(names) = &meta.dimension_names {
        doc["dimension_names"] = json!(names);
    }
    doc
}

/// The `zarr.json` document for a group.
pub fn group_document(attributes: &Map<String, Value>) -> Value {
    json!({"zarr_format": 3, "node_type": "group", "attributes": attributes})
}
