//! Metadata documents of every Zarr version, parsed into one model.
//! These types describe what is stored; [`crate::zarr::array::Array`] turns
//! array metadata into runtime codecs.

pub mod consolidated;
pub mod v1;
pub mod v2;
pub mod v3;

use serde_json::{Map, Value};

use super::chunk_key::ChunkKeyEncoding;
use super::dtype::{DataType, Endian};
use super::error::{Result, ZarrError};
use super::fill::FillValue;

/// Elements in an array of `shape`, `None` when that does not fit in 64 bits.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Names of the keys that hold metadata documents, in any Zarr version.
/// The largest metadata document (attributes included) written through
/// zarrd: every reader of the node parses it, at many times its size.
pub const MAX_DOCUMENT_BYTES: usize = 4 << 20;

/// The largest consolidated metadata document (`.zmetadata`).
pub const MAX_CONSOLIDATED_BYTES: usize = 64 << 20;

/// A document as stored: pretty JSON, refused past [`MAX_DOCUMENT_BYTES`].
pub fn document_bytes(key: &str, doc: &Value) -> Result<Vec<u8>> {
    let bytes = serde_json::to_vec_pretty(doc).map_err(|e| ZarrError::Internal(e.to_string()))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(ZarrError::TooLarge(format!(
            "metadata document '{key}' would be {} bytes; at most {MAX_DOCUMENT_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Documents whose presence makes a node: deleting one removes it.
pub const NODE_DOCUMENTS: [&str; 4] = ["zarr.json", ".zarray", ".zgroup", "meta"];

pub const DOCUMENT_NAMES: [&str; 7] = [
    "zarr.json",
    ".zarray",
    ".zgroup",
    ".zattrs",
    ".zmetadata",
    "meta",
    "attrs",
];

/// The most dimensions an array may have: numpy's own limit (numpy 2's
/// `NPY_MAXDIMS`; TensorStore's is 32), so every array served is one a
/// numpy client can hold. It also bounds how deeply JSON data nests, in
/// requests and answers, and so the recursion that reads and writes it;
/// and it keeps chunk keys short (64 indices joined by `.` whose shape's
/// product fits 2^63 stay far under the 255 bytes a key segment allows).
pub const MAX_DIMENSIONS: usize = 64;

/// The largest decoded chunk (or shard) zarrd will hold in memory.
pub const MAX_CHUNK_BYTES: u64 = 1 << 31;

/// Decoded bytes of one chunk of a variable-length type, counting 24 bytes
/// per element (what holding one costs) even when it is empty.
pub const MAX_VARIABLE_CHUNK_BYTES: u64 = 512 << 20;

/// Chunk layout: row-major (C) or column-major (F, v1/v2 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    C,
    F,
}

/// The codecs as metadata declares them.
#[derive(Debug, Clone, PartialEq)]
pub enum CodecSpec {
    /// A v3 `codecs` list.
    V3(Value),
    /// v1/v2 `filters` and `compressor`, plus the dtype's declared byte order.
    V2 {
        filters: Value,
        compressor: Value,
        endian: Endian,
    },
}

/// An array's metadata, whatever version it was stored as.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayMetadata {
    pub zarr_format: u8,
    pub shape: Vec<u64>,
    /// The chunk grid's chunk shape (the shard shape when sharded).
    pub chunk_shape: Vec<u64>,
    pub dtype: DataType,
    pub fill_value: FillValue,
    /// The fill value as the document wrote it (`null` kept for v2).
    pub fill_value_json: Value,
    pub order: Order,
    pub chunk_key_encoding: ChunkKeyEncoding,
    pub codecs: CodecSpec,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<Vec<Option<String>>>,
}

impl ArrayMetadata {
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Chunks along each dimension (a zero-length dimension has none).
    pub fn grid_shape(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(&s, &c)| s.div_ceil(c))
            .collect()
    }

    /// Validate the relations between fields; `key` names the document.
    pub fn validate(&self, key: &str) -> Result<()> {
        // A record's subarray fields add theirs, as numpy counts them.
        let ndim = self.shape.len() + self.dtype.field_dimensions();
        if ndim > MAX_DIMENSIONS {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "the array has {ndim} dimensions (counting its fields' subarrays); \
                     zarrd serves arrays of at most {MAX_DIMENSIONS} (numpy's limit)"
                ),
            ));
        }
        // Every size computed from the shape downstream fits once this does.
        // Selections index with signed numbers (negative counts from the
        // end), so no dimension may be longer than they reach, even in an
        // array of no elements.
        if let Some(d) = self.shape.iter().position(|&n| n > i64::MAX as u64) {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "dimension {d} of shape {:?} is longer than zarrd can address (2^63 - 1)",
                    self.shape
                ),
            ));
        }
        if element_count(&self.shape).is_none_or(|n| n > i64::MAX as u64) {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "shape {:?} has more elements than zarrd can address",
                    self.shape
                ),
            ));
        }
        if self.chunk_shape.len() != self.shape.len() {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "chunk shape {:?} has {} dimensions, shape {:?} has {}",
                    self.chunk_shape,
                    self.chunk_shape.len(),
                    self.shape,
                    self.shape.len()
                ),
            ));
        }
        if self.chunk_shape.contains(&0) {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "chunk shape {:?} has a zero-length dimension",
                    self.chunk_shape
                ),
            ));
        }
        let elems = self
            .chunk_shape
            .iter()
            .try_fold(1u64, |acc, &c| acc.checked_mul(c));
        // A variable-length element costs at least its 24-byte handle once
        // decoded, whatever it holds; those chunks are held to a tighter bound.
        let (per_element, limit) = match self.dtype.size() {
            Some(size) => (size as u64, MAX_CHUNK_BYTES),
            None => (24, MAX_VARIABLE_CHUNK_BYTES),
        };
        let bytes = elems.and_then(|n| n.checked_mul(per_element));
        if bytes.is_none_or(|b| b > limit) {
            return Err(ZarrError::metadata(
                key,
                format!(
                    "chunk shape {:?} decodes to more than {limit} bytes",
                    self.chunk_shape
                ),
            ));
        }
        if let Some(names) = &self.dimension_names {
            if names.len() != self.shape.len() {
                return Err(ZarrError::metadata(
                    key,
                    format!(
                        "{} dimension_names for {} dimensions",
                        names.len(),
                        self.shape.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A group's metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupMetadata {
    pub zarr_format: u8,
    pub attributes: Map<String, Value>,
    /// Consolidated metadata of the nodes below, by relative path, when stored.
    pub consolidated: Option<Vec<(String, NodeMetadata)>>,
    /// No document: a prefix with children (v3 implicit group).
    pub implicit: bool,
}

/// An array or a group.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeMetadata {
    Array(Box<ArrayMetadata>),
    Group(GroupMetadata),
}

impl NodeMetadata {
    pub fn node_type(&self) -> &'static str {
        match self {
            NodeMetadata::Array(_) => "array",
            NodeMetadata::Group(_) => "group",
        }
    }
    pub fn zarr_format(&self) -> u8 {
        match self {
            NodeMetadata::Array(a) => a.zarr_format,
            NodeMetadata::Group(g) => g.zarr_format,
        }
    }
    pub fn attributes(&self) -> &Map<String, Value> {
        match self {
            NodeMetadata::Array(a) => &a.attributes,
            NodeMetadata::Group(g) => &g.attributes,
        }
    }

    /// The node without its attributes (and consolidated children), for
    /// listings of many nodes that show neither.
    pub fn summary(mut self) -> Self {
        match &mut self {
            NodeMetadata::Array(a) => a.attributes = Map::new(),
            NodeMetadata::Group(g) => {
                // Except what says the group is an OME-Zarr image, which
                // the tree shows as such.
                g.attributes.retain(|k, _| k == "ome" || k == "multiscales");
                g.consolidated = None;
            }
        }
        self
    }
}

// ---- helpers shared by the version parsers ----

pub(crate) fn parse_json(key: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| ZarrError::metadata(key, format!("not valid JSON: {e}")))
}

pub(crate) fn object<'a>(key: &str, doc: &'a Value) -> Result<&'a Map<String, Value>> {
    doc.as_object()
        .ok_or_else(|| ZarrError::metadata(key, "the document is not a JSON object"))
}

pub(crate) fn field<'a>(key: &str, doc: &'a Map<String, Value>, name: &str) -> Result<&'a Value> {
    doc.get(name)
        .ok_or_else(|| ZarrError::metadata(key, format!("missing field '{name}'")))
}

pub(crate) fn u64_list(key: &str, value: &Value, name: &str) -> Result<Vec<u64>> {
    match value {
        // zarr-python accepts a bare integer for 1-d shapes.
        Value::Number(n) => n.as_u64().map(|n| vec![n]),
        Value::Array(items) => items.iter().map(Value::as_u64).collect(),
        _ => None,
    }
    .ok_or_else(|| {
        ZarrError::metadata(
            key,
            format!("'{name}' must be a list of non-negative integers, found {value}"),
        )
    })
}

pub(crate) fn attributes(key: &str, value: Option<&Value>) -> Result<Map<String, Value>> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(other) => Err(ZarrError::metadata(
            key,
            format!("attributes must be an object, found {other}"),
        )),
    }
}

pub(crate) fn format_of(key: &str, doc: &Map<String, Value>, expected: u64) -> Result<()> {
    match doc.get("zarr_format").and_then(Value::as_u64) {
        Some(v) if v == expected => Ok(()),
        Some(v) => Err(ZarrError::metadata(
            key,
            format!("zarr_format is {v}, expected {expected}"),
        )),
        None => Err(ZarrError::metadata(
            key,
            "missing or non-integer 'zarr_format'",
        )),
    }
}
