//! Changing the hierarchy: nodes, regions, appends and raw keys. Every
//! operation here forgets what it makes stale, once, whether it succeeded
//! or not (a failed write may have changed some chunks).

use bytes::Bytes;
use serde_json::{Map, Value};

use super::events::{bounds, Change, ChangeKind};
use super::{Result, Service, ServiceError};
use crate::store::chrono_like::Timestamp;
use crate::store::{etags_match, KeyMeta, Outcome, Replacement, StoreError, StoreKey, Versioned};
use crate::zarr::metadata::{
    v1, v2, v3, DOCUMENT_NAMES, MAX_CONSOLIDATED_BYTES, MAX_DOCUMENT_BYTES, NODE_DOCUMENTS,
};
use crate::zarr::{Array, ArrayBytes, ArrayMetadata, ArraySpec, NodeMetadata, Resolved, ZarrError};

/// Chunks one broadcast write may touch: a scalar body is a few bytes, so
/// the work is bounded here rather than by the body size limit.
const MAX_BROADCAST_CHUNKS: u64 = 1 << 20;
/// Chunks one write in a transaction (an Icechunk commit) may touch: the
/// branch waits for it, and its commit lists every chunk it wrote.
const MAX_COMMIT_CHUNKS: u64 = 1 << 16;

/// Array data from a client, with its shape when the encoding carries one.
#[derive(Debug)]
pub struct Incoming {
    pub data: ArrayBytes,
    /// `None` for raw bytes, which carry no shape.
    pub shape: Option<Vec<u64>>,
}

/// A node to create.
#[derive(Debug)]
pub enum NodeCreate {
    Group {
        zarr_format: u8,
        attributes: Map<String, Value>,
    },
    Array(Box<ArraySpec>),
}

/// What a region write did.
#[derive(Debug, Clone)]
pub struct Written {
    pub shape: Vec<u64>,
    pub elements: u64,
    pub chunks_written: usize,
    pub chunks_deleted: usize,
}

fn spec_error(message: impl Into<String>) -> ServiceError {
    ServiceError::unprocessable("bad_spec", message)
}

/// What a raw write asks of the value it replaces (RFC 9110 §13.1).
#[derive(Debug, Default, Clone)]
pub struct Preconditions {
    /// `If-Match`: strong ETags, unquoted (`*`: any stored value).
    pub if_match: Option<Vec<String>>,
    /// `If-None-Match`: ETags, unquoted (`*`: only where none is stored).
    pub if_none_match: Option<Vec<String>>,
    /// `If-Unmodified-Since`, heeded without `If-Match` (the more exact).
    pub unmodified_since: Option<Timestamp>,
}

impl Preconditions {
    fn any(&self) -> bool {
        self.if_match.is_some() || self.if_none_match.is_some() || self.unmodified_since.is_some()
    }

    /// Only where no value is stored (`If-None-Match: *`).
    pub fn create_only(&self) -> bool {
        self.if_none_match
            .as_ref()
            .is_some_and(|tags| tags.iter().any(|t| t == "*"))
    }

    /// Whether they hold for `current`, the stored value's metadata.
    fn hold(&self, current: Option<&KeyMeta>) -> bool {
        let stored = current.and_then(|m| m.version.e_tag.as_deref());
        if let Some(tags) = &self.if_match {
            if !etags_match(tags, stored) {
                return false;
            }
        } else if let (Some(since), Some(current)) = (self.unmodified_since, current) {
            if current.last_modified > since {
                return false;
            }
        }
        match &self.if_none_match {
            Some(tags) => current.is_none() || !(self.create_only() || etags_match(tags, stored)),
            None => true,
        }
    }
}

/// What a raw put did: whether it created the key (else it replaced a
/// value), and the version it stored, as the store named it.
#[derive(Debug, Clone)]
pub struct Put {
    pub created: bool,
    pub version: crate::store::Version,
}

impl Service {
    /// Forget what a change below `path` makes stale: its node and every
    /// decoded chunk below it.
    async fn changed_node(&self, path: &StoreKey) {
        self.cache.invalidate_node(path.as_str()).await;
    }

    /// Forget what a change of the value at `key` makes stale: the value,
    /// and for a metadata document its node and every decoded chunk below it.
    async fn changed_key(&self, key: &StoreKey) {
        self.cache.invalidate_key(key.as_str());
        if DOCUMENT_NAMES.contains(&key.name()) {
            let node = key.parent().unwrap_or_else(StoreKey::root);
            self.changed_node(&node).await;
        }
    }

    /// Create a group or an array at `path`, replacing what is there (and
    /// everything below it) when `overwrite`. Missing parents are created
    /// at or below `parents_from` only (the prefix a writer is limited to).
    pub async fn create(
        &self,
        path: &StoreKey,
        node: NodeCreate,
        overwrite: bool,
        parents_from: Option<StoreKey>,
    ) -> Result<()> {
        let format = match &node {
            NodeCreate::Group { zarr_format, .. } => *zarr_format,
            NodeCreate::Array(spec) => spec.zarr_format,
        };
        if format != 3 && self.store.is_versioned(path) {
            return Err(spec_error(format!(
                "'{path}' is in an Icechunk repository, which holds Zarr v3 only: create it with zarr_format 3"
            )));
        }
        let limited;
        let h = match parents_from {
            Some(floor) => {
                limited = self.hierarchy.creating_parents_from(floor);
                &limited
            }
            None => &self.hierarchy,
        };
        let created_shape = match &node {
            NodeCreate::Array(spec) => Some(spec.shape.clone()),
            NodeCreate::Group { .. } => None,
        };
        let result = match node {
            NodeCreate::Group {
                zarr_format,
                attributes,
            } => {
                h.create_group(path, zarr_format, attributes, overwrite)
                    .await
            }
            NodeCreate::Array(spec) => h.create_array(path, &spec, overwrite).await.map(|_| ()),
        };
        self.changed_node(path).await;
        if overwrite {
            // The subtree it replaced is gone: so are the nodes below it.
            self.cache.invalidate_all_metadata();
        }
        if result.is_ok() {
            let mut change = Change::new(path, ChangeKind::Created);
            if let Some(shape) = &created_shape {
                change = change.shape(shape);
            }
            self.notify(change);
        }
        result.map_err(|e| match e {
            ZarrError::NodeExists { .. } => ServiceError::new(
                super::ErrorKind::Conflict,
                "exists",
                format!("a node already exists at '{path}'; add ?overwrite=true to replace it"),
            ),
            ZarrError::Data(m) | ZarrError::DataType(m) | ZarrError::FillValue(m) => spec_error(m),
            ZarrError::Metadata { reason, .. } => spec_error(reason),
            other => other.into(),
        })
    }

    /// Merge-patch attributes and/or resize. Shrinking deletes the chunks
    /// outside the new shape, more than the request names: only when
    /// `may_delete` (the caller's scope allows it).
    pub async fn patch(
        &self,
        path: &StoreKey,
        attributes: Option<&Value>,
        shape: Option<Vec<u64>>,
        may_delete: bool,
    ) -> Result<()> {
        let outcome = async {
            if let Some(attrs) = attributes {
                self.hierarchy.patch_attributes(path, attrs).await?;
                self.notify(Change::new(path, ChangeKind::Attributes));
            }
            if let Some(shape) = shape {
                self.hierarchy
                    .resize(path, shape.clone(), may_delete)
                    .await?;
                self.notify(Change::new(path, ChangeKind::Resized).shape(&shape));
            }
            Ok::<_, ZarrError>(())
        }
        .await;
        self.changed_node(path).await;
        outcome.map_err(|e| match e {
            ZarrError::Data(m) => spec_error(m),
            other => other.into(),
        })
    }

    /// Delete a node and everything below it.
    pub async fn delete_node(&self, path: &StoreKey) -> Result<()> {
        let result = self.hierarchy.delete(path).await;
        self.changed_node(path).await;
        self.cache.invalidate_all_metadata();
        result?;
        self.notify(Change::new(path, ChangeKind::Deleted));
        Ok(())
    }

    /// Write `incoming` into `selection` of `array`: exactly one value per
    /// element, or one value for all (a broadcast, written chunk by chunk).
    pub async fn write_region(
        &self,
        array: &Array,
        selection: &Resolved,
        incoming: Incoming,
    ) -> Result<Written> {
        let shape = selection.shape();
        let want: u64 = shape.iter().product();
        if self.transactional {
            let chunks = selection.chunk_count_bound(&array.read_chunk_shape());
            if chunks > MAX_COMMIT_CHUNKS {
                return Err(ServiceError::too_large(format!(
                    "the selection touches up to {chunks} chunks; one commit to a versioned store may write at most {MAX_COMMIT_CHUNKS} (split the write)"
                )));
            }
        }
        let have = incoming.data.len(array.elem_size().max(1)) as u64;
        let exact = match &incoming.shape {
            Some(s) => {
                s.as_slice() == shape
                    || (s.iter().product::<u64>() == want
                        && s.iter()
                            .filter(|&&d| d != 1)
                            .eq(shape.iter().filter(|&&d| d != 1)))
            }
            None => have == want,
        };
        let stats = if exact && have == want {
            array.write(selection, incoming.data).await?
        } else if have == 1 {
            let chunks = selection.chunk_count_bound(&array.read_chunk_shape());
            if chunks > MAX_BROADCAST_CHUNKS {
                return Err(ServiceError::too_large(format!(
                    "the selection touches up to {chunks} chunks; one broadcast write may touch at most {MAX_BROADCAST_CHUNKS}"
                )));
            }
            array.write_broadcast(selection, incoming.data).await?
        } else {
            let given = incoming
                .shape
                .map(|s| format!("{s:?}"))
                .unwrap_or_else(|| format!("{have} elements"));
            return Err(ServiceError::unprocessable(
                "shape_mismatch",
                format!("the data has shape {given}, the selection has shape {shape:?}"),
            ));
        };
        self.notify(
            Change::new(array.path(), ChangeKind::Written)
                .shape(array.shape())
                .region(bounds(selection)),
        );
        Ok(Written {
            elements: want,
            shape,
            chunks_written: stats.chunks_written,
            chunks_deleted: stats.chunks_deleted,
        })
    }

    /// Append along `axis` of the array at `path`; the new shape. Data
    /// without a shape (raw bytes) is whole slices along the axis.
    pub async fn append(
        &self,
        path: &StoreKey,
        axis: usize,
        incoming: Incoming,
    ) -> Result<Vec<u64>> {
        let array = self.array(path).await?;
        let current = array.shape().to_vec();
        let shape = match incoming.shape {
            Some(s) => s,
            // An axis out of range is the engine's to refuse.
            None if axis >= current.len() => current.clone(),
            None => {
                let slice: u64 = current
                    .iter()
                    .enumerate()
                    .filter(|(d, _)| *d != axis)
                    .map(|(_, &n)| n)
                    .product();
                let n = incoming.data.len(array.elem_size().max(1)) as u64;
                if slice == 0 || !n.is_multiple_of(slice) {
                    return Err(ServiceError::unprocessable(
                        "shape_mismatch",
                        format!("{n} elements are not whole slices of {slice} along axis {axis}"),
                    ));
                }
                let mut s = current.clone();
                s[axis] = n / slice;
                s
            }
        };
        let result = self
            .hierarchy
            .append(path, incoming.data, &shape, axis)
            .await;
        self.changed_node(path).await;
        let grown = result.map_err(|e| match e {
            ZarrError::Data(m) => ServiceError::unprocessable("shape_mismatch", m),
            other => other.into(),
        })?;
        // The rows it wrote: from the old length to the new along the axis.
        let region = grown
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                if d == axis {
                    [n - shape.get(d).copied().unwrap_or(0).min(n), n]
                } else {
                    [0, n]
                }
            })
            .collect();
        self.notify(
            Change::new(path, ChangeKind::Appended)
                .shape(&grown)
                .region(region),
        );
        Ok(grown)
    }

    /// Store a raw value if `preconditions` hold for the value it replaces.
    /// Metadata documents must parse and, for arrays, have codecs that can
    /// be built, as created nodes do; one that replaces a node (see
    /// [`Array::replaced_by`]), or makes a node of another format or
    /// kind beside its document, only `may_replace`.
    pub async fn put_key(
        &self,
        key: &StoreKey,
        value: Bytes,
        preconditions: &Preconditions,
        may_replace: bool,
    ) -> Result<Put> {
        let node = match self.check_documents {
            true => check_document(key, &value)?,
            false => None,
        };
        if node.is_some() {
            self.hierarchy.check_placement(&node_of(key)).await?;
        }
        let guarded = node.as_ref().filter(|_| !may_replace);
        if guarded.is_some() {
            self.refuse_other_documents(key).await?;
        }
        let conditional = preconditions.any() || guarded.is_some();
        // Whether the put creates the key (201, not 204): the update sees
        // the current value, a blind put looks first.
        let created = std::sync::atomic::AtomicBool::new(false);
        if !conditional {
            created.store(
                self.store.head(key).await?.is_none(),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        let result = self
            .store
            .update(key, !conditional, |current: Option<Versioned>| {
                if conditional {
                    created.store(current.is_none(), std::sync::atomic::Ordering::Relaxed);
                }
                let refused = !preconditions.hold(current.as_ref().map(|v| &v.meta));
                let replaced = match (guarded, &current) {
                    (Some(new), Some(current)) => stored_node(key, &current.bytes)
                        .and_then(|old| Array::replaced_by(&node_of(key), &old, new)),
                    _ => None,
                };
                let check = if refused {
                    Err(StoreError::Precondition {
                        key: key.to_string(),
                    }
                    .into())
                } else if let Some(why) = replaced {
                    Err(needs_admin(key, &why))
                } else {
                    Ok(Replacement {
                        bytes: value.to_vec(),
                        removable: false,
                    })
                };
                std::future::ready(check)
            })
            .await;
        self.changed_key(key).await;
        let version = match result? {
            Outcome::Stored(version) => version,
            Outcome::Deleted => Default::default(),
        };
        self.notify(Change::new(key, ChangeKind::Key));
        Ok(Put {
            created: created.into_inner(),
            version,
        })
    }

    /// Refuse a node document beside another one of the node (a `.zgroup`
    /// by an array's `.zarray`, a `zarr.json` by a v2 node's): it would
    /// make the node another.
    async fn refuse_other_documents(&self, key: &StoreKey) -> Result<()> {
        let node = node_of(key);
        for name in NODE_DOCUMENTS.iter().filter(|n| **n != key.name()) {
            let other = node.join(name)?;
            if self.store.head(&other).await?.is_some() {
                let why = format!("'{other}' already makes '{node}' a node");
                return Err(needs_admin(key, &why));
            }
        }
        Ok(())
    }

    /// Delete a raw value if it still has `expected_etag`.
    pub async fn delete_key(&self, key: &StoreKey, expected_etag: Option<&str>) -> Result<()> {
        let result = self.store.delete_if(key, expected_etag).await;
        self.changed_key(key).await;
        result?;
        self.notify(Change::new(key, ChangeKind::Key));
        Ok(())
    }
}

/// A metadata document must parse as what its name says, and an array's
/// codecs must build, before it is stored: a client cannot break a node.
/// Returns the node a node document (`zarr.json`, `.zarray`, `.zgroup`,
/// `meta`) makes.
fn check_document(key: &StoreKey, value: &[u8]) -> Result<Option<NodeMetadata>> {
    let name = key.name();
    if !DOCUMENT_NAMES.contains(&name) {
        return Ok(None);
    }
    let limit = if name == ".zmetadata" {
        MAX_CONSOLIDATED_BYTES
    } else {
        MAX_DOCUMENT_BYTES
    };
    if value.len() > limit {
        return Err(ServiceError::too_large(format!(
            "metadata document '{key}' is {} bytes; at most {limit} (every reader of the node parses it)",
            value.len()
        )));
    }
    let bad = |e: ZarrError| ServiceError::unprocessable("bad_metadata", e.to_string());
    let doc = crate::zarr::metadata::parse_json(key.as_str(), value).map_err(bad)?;
    let node = node_of(key);
    // The structure is checked, not whether zarrd implements every codec:
    // an array of a codec it lacks is stored and served raw (REST reads of
    // it answer 422 naming the codec).
    let array = |meta: ArrayMetadata| {
        match Array::check_metadata(&node, &meta) {
            Ok(()) | Err(ZarrError::UnsupportedCodec { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(Some(NodeMetadata::Array(Box::new(meta))))
    };
    let checked = match name {
        "zarr.json" => v3::parse(key.as_str(), &doc).and_then(|n| match n {
            NodeMetadata::Array(meta) => array(*meta),
            group => Ok(Some(group)),
        }),
        ".zarray" => v2::parse_array(key.as_str(), &doc, None).and_then(array),
        ".zgroup" => {
            v2::parse_group(key.as_str(), &doc, None).map(|g| Some(NodeMetadata::Group(g)))
        }
        ".zmetadata" => v2::parse_consolidated(key.as_str(), &doc).map(|_| None),
        "meta" => v1::parse(key.as_str(), &doc, None).and_then(array),
        _ => match doc {
            Value::Object(_) => Ok(None),
            _ => Err(ZarrError::metadata(
                key.as_str(),
                "attributes must be a JSON object",
            )),
        },
    };
    checked.map_err(bad)
}

/// The node a stored node document makes, if it still parses.
fn stored_node(key: &StoreKey, bytes: &[u8]) -> Option<NodeMetadata> {
    let doc = crate::zarr::metadata::parse_json(key.as_str(), bytes).ok()?;
    match key.name() {
        "zarr.json" => v3::parse(key.as_str(), &doc).ok(),
        ".zarray" => v2::parse_array(key.as_str(), &doc, None)
            .ok()
            .map(|a| NodeMetadata::Array(Box::new(a))),
        ".zgroup" => v2::parse_group(key.as_str(), &doc, None)
            .ok()
            .map(NodeMetadata::Group),
        "meta" => v1::parse(key.as_str(), &doc, None)
            .ok()
            .map(|a| NodeMetadata::Array(Box::new(a))),
        _ => None,
    }
}

/// The node a document key belongs to.
fn node_of(key: &StoreKey) -> StoreKey {
    key.parent().unwrap_or_else(StoreKey::root)
}

fn needs_admin(key: &StoreKey, why: &str) -> ServiceError {
    ServiceError::forbidden(
        "forbidden",
        format!("storing '{key}' replaces the node, which needs the admin scope: {why}"),
    )
}
