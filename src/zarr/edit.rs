//! Changing existing nodes: attributes, resize, append. Every change of a
//! metadata document is a read-modify-write through the store's updater
//! (compare-and-swap, or a file lock on directories), so two writers that
//! edit attributes or append at once never lose each other's change.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::array::metadata_key;
use super::buffer::ArrayBytes;
use super::error::{Result, ZarrError};
use super::hierarchy::Hierarchy;
use super::metadata::{document_bytes, parse_json, v2, v3, ArrayMetadata, NodeMetadata};
use super::selection::{Indices, Resolved, ResolvedDim};
use crate::store::{Replacement, StoreError, StoreKey, Versioned};

/// RFC 7386 JSON merge patch: objects merge, `null` removes, the rest replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in fields {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The shape before and after a resize.
type ShapeChange = (Vec<u64>, Vec<u64>);

impl Hierarchy {
    /// Read-modify-write one JSON document; `edit` gets the current document
    /// (`None` when missing) and may run more than once.
    /// Returns the bytes stored.
    async fn update_document(
        &self,
        key: &StoreKey,
        edit: impl Fn(Option<Value>) -> Result<Value> + Send + Sync,
    ) -> Result<Vec<u8>> {
        let store = self.store();
        let stored = Mutex::new(Vec::new());
        store
            .update(key, false, |current: Option<Versioned>| {
                let doc = current
                    .map(|v| parse_json(key.as_str(), &v.bytes))
                    .transpose();
                let next = doc
                    .and_then(&edit)
                    .and_then(|doc| document_bytes(key.as_str(), &doc));
                if let Ok(bytes) = &next {
                    *stored.lock().unwrap_or_else(|e| e.into_inner()) = bytes.clone();
                }
                std::future::ready(next.map(|bytes| Replacement {
                    bytes,
                    removable: false,
                }))
            })
            .await?;
        Ok(stored.into_inner().unwrap_or_else(|e| e.into_inner()))
    }

    /// A v2 node's attributes are a document beside the one that makes it a
    /// node: when the node was deleted while they were written, the
    /// `.zattrs` just stored would outlive it (and be read as the attributes
    /// of a node created there later). Take it back, unless another writer
    /// has replaced it since, and report the node gone.
    async fn attributes_outlived(
        &self,
        path: &StoreKey,
        key: &StoreKey,
        written: &[u8],
    ) -> Result<()> {
        if self.exists(path).await? {
            return Ok(());
        }
        if let Some(now) = self.store().get_versioned(key).await? {
            if now.bytes == written {
                match self
                    .store()
                    .delete_if(key, now.meta.version.e_tag.as_deref())
                    .await
                {
                    Ok(()) | Err(StoreError::Precondition { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(ZarrError::NodeNotFound {
            path: path.to_string(),
        })
    }

    /// The document that holds a node's attributes, and the node.
    async fn attributes_key(&self, path: &StoreKey) -> Result<(StoreKey, NodeMetadata)> {
        let node = self.node(path).await?;
        let name = match (&node, node.zarr_format()) {
            (_, 3) => "zarr.json",
            (_, 2) => ".zattrs",
            _ => {
                return Err(ZarrError::Data(format!(
                    "'{path}' is a Zarr v1 array, which zarrd only reads"
                )))
            }
        };
        if let NodeMetadata::Group(g) = &node {
            if g.implicit {
                return Err(ZarrError::Data(format!(
                    "'{path}' is an implicit group with no document to hold attributes"
                )));
            }
        }
        Ok((path.join(name)?, node))
    }

    /// Apply a JSON merge patch to a node's attributes; returns the new attributes.
    pub async fn patch_attributes(
        &self,
        path: &StoreKey,
        patch: &Value,
    ) -> Result<Map<String, Value>> {
        if !patch.is_object() {
            return Err(ZarrError::Data(
                "attributes must be a JSON object (a merge patch)".into(),
            ));
        }
        let (key, node) = self.attributes_key(path).await?;
        let v3 = node.zarr_format() == 3;
        let written = self
            .update_document(&key, |doc| {
                // A v2 node without attributes has no `.zattrs`; a v3 node
                // without its document was deleted meanwhile.
                let mut doc = match doc {
                    Some(doc) => doc,
                    None if v3 => {
                        return Err(ZarrError::NodeNotFound {
                            path: path.to_string(),
                        })
                    }
                    None => Value::Object(Map::new()),
                };
                if v3 {
                    merge_patch(
                        doc.as_object_mut()
                            .and_then(|o| o.get_mut("attributes"))
                            .unwrap_or(&mut Value::Null),
                        patch,
                    );
                    if doc.get("attributes").is_none_or(Value::is_null) {
                        let mut attrs = Value::Object(Map::new());
                        merge_patch(&mut attrs, patch);
                        doc["attributes"] = attrs;
                    }
                } else {
                    merge_patch(&mut doc, patch);
                }
                Ok(doc)
            })
            .await?;
        if !v3 {
            self.attributes_outlived(path, &key, &written).await?;
        }
        Ok(self.node(path).await?.attributes().clone())
    }

    /// Replace a node's attributes.
    pub async fn set_attributes(
        &self,
        path: &StoreKey,
        attributes: Map<String, Value>,
    ) -> Result<()> {
        let (key, node) = self.attributes_key(path).await?;
        let v3 = node.zarr_format() == 3;
        let written = self
            .update_document(&key, |doc| {
                if v3 {
                    let mut doc = doc.ok_or_else(|| ZarrError::NodeNotFound {
                        path: path.to_string(),
                    })?;
                    doc["attributes"] = Value::Object(attributes.clone());
                    Ok(doc)
                } else {
                    Ok(Value::Object(attributes.clone()))
                }
            })
            .await?;
        match v3 {
            true => Ok(()),
            false => self.attributes_outlived(path, &key, &written).await,
        }
    }

    /// Change an array's shape with `reshape(old shape) -> new shape`, as one
    /// read-modify-write of its metadata. Returns (old shape, new metadata).
    async fn reshape(
        &self,
        path: &StoreKey,
        reshape: impl Fn(&[u64]) -> Result<Vec<u64>> + Send + Sync,
    ) -> Result<(Vec<u64>, ArrayMetadata)> {
        let node = self.node(path).await?;
        let NodeMetadata::Array(meta) = node else {
            return Err(ZarrError::WrongNodeType {
                path: path.to_string(),
                expected: "array",
                found: "group",
            });
        };
        if meta.zarr_format == 1 {
            return Err(ZarrError::Data(format!(
                "'{path}' is a Zarr v1 array, which zarrd only reads"
            )));
        }
        let key = StoreKey::new(&metadata_key(path, meta.zarr_format))?;
        // The shape the successful run saw and made, for the caller.
        let seen: Arc<Mutex<Option<ShapeChange>>> = Arc::default();
        self.update_document(&key, |doc| {
            let mut doc = doc.ok_or_else(|| ZarrError::NodeNotFound {
                path: path.to_string(),
            })?;
            let current = match meta.zarr_format {
                3 => match v3::parse(key.as_str(), &doc)? {
                    NodeMetadata::Array(a) => a.shape,
                    NodeMetadata::Group(_) => {
                        return Err(ZarrError::NodeNotFound {
                            path: path.to_string(),
                        })
                    }
                },
                _ => v2::parse_array(key.as_str(), &doc, None)?.shape,
            };
            let shape = reshape(&current)?;
            if shape.len() != current.len() {
                return Err(ZarrError::Data(format!(
                    "new shape {shape:?} has {} dimensions, the array has {}",
                    shape.len(),
                    current.len()
                )));
            }
            doc["shape"] = serde_json::json!(shape);
            // Store only a document that reads back (an unaddressable shape
            // would leave the array unreadable): check it as readers will.
            let reread = match meta.zarr_format {
                3 => v3::parse(key.as_str(), &doc).map(drop),
                _ => v2::parse_array(key.as_str(), &doc, None).map(drop),
            };
            if let Err(e) = reread {
                return Err(ZarrError::Data(format!(
                    "cannot make the shape {shape:?}: {e}"
                )));
            }
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some((current, shape));
            Ok(doc)
        })
        .await?;
        let (old, new) = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| ZarrError::Internal("resize did not run".into()))?;
        let mut meta = *meta;
        meta.shape = new;
        Ok((old, meta))
    }

    /// Change an array's shape; chunks wholly outside the new shape are deleted.
    /// Resize the array at `path`. Unless `may_shrink`, a shape smaller
    /// than the stored one along any axis is refused, judged against the
    /// shape read inside the update (so a concurrent append cannot turn an
    /// allowed resize into one that deletes chunks).
    pub async fn resize(
        &self,
        path: &StoreKey,
        shape: Vec<u64>,
        may_shrink: bool,
    ) -> Result<ArrayMetadata> {
        let (old, meta) = self
            .reshape(path, |current| {
                if !may_shrink && shape.iter().zip(current).any(|(n, o)| n < o) {
                    return Err(ZarrError::NotAllowed(format!(
                        "shrinking '{path}' from {current:?} to {shape:?} deletes the chunks outside the new shape"
                    )));
                }
                Ok(shape.clone())
            })
            .await?;
        if shape.iter().zip(&old).any(|(n, o)| n < o) {
            self.delete_chunks_outside(path, &meta).await?;
        }
        Ok(meta)
    }

    async fn delete_chunks_outside(&self, path: &StoreKey, meta: &ArrayMetadata) -> Result<()> {
        let array = self.bind(path, meta.clone())?;
        let prefix_len = if path.is_root() {
            0
        } else {
            path.as_str().len() + 1
        };
        for key in self.store().list_recursive(path).await? {
            let rel = &key.as_str()[prefix_len..];
            let Some(coords) = meta.chunk_key_encoding.decode(rel, meta.ndim()) else {
                continue;
            };
            if coords
                .iter()
                .zip(&meta.chunk_shape)
                .zip(&meta.shape)
                .any(|((&c, &n), &s)| c * n >= s)
            {
                self.store().delete(&key).await?;
                array.forget_chunk(&key);
            }
        }
        Ok(())
    }

    /// Append `data` (shaped `data_shape`) along `axis`; returns the new shape.
    /// The region is reserved by one compare-and-swap of the metadata, so
    /// concurrent appenders each get their own rows.
    pub async fn append(
        &self,
        path: &StoreKey,
        data: ArrayBytes,
        data_shape: &[u64],
        axis: usize,
    ) -> Result<Vec<u64>> {
        // The data must be the array's elements before rows are reserved
        // for it: a reservation is not taken back, and data that could not
        // be written left the array grown by rows of fill values.
        self.array(path).await?.check_block(data_shape, &data)?;
        let (old, meta) = self
            .reshape(path, |current| {
                if axis >= current.len() {
                    return Err(ZarrError::Selection(format!(
                        "axis {axis} is out of range for an array of {} dimensions",
                        current.len()
                    )));
                }
                if data_shape.len() != current.len()
                    || data_shape
                        .iter()
                        .zip(current)
                        .enumerate()
                        .any(|(d, (a, b))| d != axis && a != b)
                {
                    return Err(ZarrError::Data(format!(
                        "cannot append shape {data_shape:?} to {current:?} along axis {axis}"
                    )));
                }
                let mut shape = current.to_vec();
                shape[axis] = shape[axis]
                    .checked_add(data_shape[axis])
                    .filter(|&n| n <= i64::MAX as u64)
                    .ok_or_else(|| {
                        ZarrError::Data(format!(
                            "appending shape {data_shape:?} to {current:?} along axis {axis} \
                             makes the axis longer than zarrd can address (2^63 - 1)"
                        ))
                    })?;
                Ok(shape)
            })
            .await?;
        let grown = self.bind(path, meta.clone())?;
        let region = Resolved::Orthogonal(
            meta.shape
                .iter()
                .enumerate()
                .map(|(d, &len)| {
                    let start = if d == axis { old[d] } else { 0 };
                    let len = if d == axis { data_shape[d] } else { len };
                    ResolvedDim {
                        indices: Indices::Range {
                            start,
                            step: 1,
                            len,
                        },
                        keep: true,
                    }
                })
                .collect(),
        );
        grown.write(&region, data).await?;
        Ok(meta.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
        let mut doc = json!({"a": [1]});
        merge_patch(&mut doc, &json!({"a": {"b": 1}, "n": null}));
        assert_eq!(doc, json!({"a": {"b": 1}}));
    }
}
