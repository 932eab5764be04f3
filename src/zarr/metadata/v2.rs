//! v2 `.zarray`, `.zgroup`, `.zattrs` and consolidated `.zmetadata` documents.

use serde_json::{json, Map, Value};

use super::{
    attributes, field, format_of, object, u64_list, ArrayMetadata, CodecSpec, GroupMetadata,
    NodeMetadata, Order,
};
use crate::zarr::chunk_key::ChunkKeyEncoding;
use crate::zarr::dtype::{DataType, Endian};
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::fill::parse_fill;

/// The element type of an object (`|O`) array, from its object codec.
fn object_dtype(key: &str, filters: &Value) -> Result<DataType> {
    let first = filters
        .as_array()
        .and_then(|f| f.first())
        .and_then(|f| f.get("id"))
        .and_then(Value::as_str);
    match first {
        Some("vlen-utf8") => Ok(DataType::String),
        Some("vlen-bytes") => Ok(DataType::Bytes),
        Some(other) => Err(ZarrError::metadata(key, format!("object arrays with codec '{other}' are not supported (vlen-utf8 and vlen-bytes are)"))),
        None => Err(ZarrError::metadata(key, "an object (|O) array needs a vlen-utf8 or vlen-bytes filter")),
    }
}

/// Parse `.zarray` at `key` with the attributes of its `.zattrs`.
pub fn parse_array(key: &str, doc: &Value, attrs: Option<&Value>) -> Result<ArrayMetadata> {
    let obj = object(key, doc)?;
    format_of(key, obj, 2)?;
    let shape = u64_list(key, field(key, obj, "shape")?, "shape")?;
    let chunk_shape = u64_list(key, field(key, obj, "chunks")?, "chunks")?;
    let dtype_json = field(key, obj, "dtype")?;
    let (mut dtype, endian) =
        DataType::from_v2_json(dtype_json).map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let filters = obj.get("filters").cloned().unwrap_or(Value::Null);
    if dtype_json.as_str().is_some_and(|s| s.ends_with('O')) {
        dtype = object_dtype(key, &filters)?;
    }
    let order = match obj.get("order").and_then(Value::as_str) {
        Some("C") | None => Order::C,
        Some("F") => Order::F,
        Some(other) => {
            return Err(ZarrError::metadata(
                key,
                format!("order '{other}' is not C or F"),
            ))
        }
    };
    let separator = match obj.get("dimension_separator") {
        None | Some(Value::Null) => '.',
        Some(Value::String(s)) if s == "." => '.',
        Some(Value::String(s)) if s == "/" => '/',
        Some(other) => {
            return Err(ZarrError::metadata(
                key,
                format!("dimension_separator {other} is not \".\" or \"/\""),
            ))
        }
    };
    let fill_json = obj.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill_value =
        parse_fill(&dtype, &fill_json).map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let compressor = obj.get("compressor").cloned().unwrap_or(Value::Null);
    if !(compressor.is_null() || compressor.get("id").is_some_and(Value::is_string)) {
        return Err(ZarrError::metadata(
            key,
            format!("compressor {compressor} is not null or a codec with an id"),
        ));
    }
    let meta = ArrayMetadata {
        zarr_format: 2,
        shape,
        chunk_shape,
        dtype,
        fill_value,
        fill_value_json: fill_json,
        order,
        chunk_key_encoding: ChunkKeyEncoding::V2 { separator },
        codecs: CodecSpec::V2 {
            filters,
            compressor,
            endian,
        },
        attributes: attributes(key, attrs)?,
        dimension_names: None,
    };
    meta.validate(key)?;
    Ok(meta)
}

/// Parse `.zgroup` at `key`.
pub fn parse_group(key: &str, doc: &Value, attrs: Option<&Value>) -> Result<GroupMetadata> {
    format_of(key, object(key, doc)?, 2)?;
    Ok(GroupMetadata {
        zarr_format: 2,
        attributes: attributes(key, attrs)?,
        consolidated: None,
        implicit: false,
    })
}

/// Parse `.zmetadata`: every node below, by path relative to the group.
pub fn parse_consolidated(key: &str, doc: &Value) -> Result<Vec<(String, NodeMetadata)>> {
    let entries = object(key, doc)?
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| ZarrError::metadata(key, "missing object 'metadata'"))?;
    let mut nodes = Vec::new();
    for (doc_key, doc) in entries {
        let (path, name) = match doc_key.rsplit_once('/') {
            Some((p, n)) => (p.to_string(), n),
            None => (String::new(), doc_key.as_str()),
        };
        let attrs_key = if path.is_empty() {
            ".zattrs".to_string()
        } else {
            format!("{path}/.zattrs")
        };
        let attrs = entries.get(&attrs_key);
        let inner_key = format!("{key}#{doc_key}");
        let node = match name {
            ".zarray" => NodeMetadata::Array(Box::new(parse_array(&inner_key, doc, attrs)?)),
            ".zgroup" => NodeMetadata::Group(parse_group(&inner_key, doc, attrs)?),
            _ => continue,
        };
        nodes.push((path, node));
    }
    Ok(nodes)
}

/// The `.zarray` document for an array.
pub fn array_document(
    meta: &ArrayMetadata,
    filters: &Value,
    compressor: &Value,
    endian: Endian,
) -> Value {
    json!({
        "zarr_format": 2,
        "shape": meta.shape,
        "chunks": meta.chunk_shape,
        "dtype": meta.dtype.to_v2_json(endian),
        "compressor": compressor,
        "fill_value": meta.fill_value_json,
        "order": if meta.order == Order::F { "F" } else { "C" },
        "filters": filters,
        "dimension_separator": meta.chunk_key_encoding.separator().to_string(),
    })
}

/// A `.zattrs` document.
pub fn attributes_document(attributes: &Map<String, Value>) -> Value {
    Value::Object(attributes.clone())
}
