//! Consolidated metadata, synthesized: over HTTP a client cannot list
//! cheaply, so xarray and zarr-python open groups through one document.
//! For a v2 group that has none stored, zarrd answers `.zmetadata` with the
//! document zarr-python's `consolidate_metadata` would write for the
//! hierarchy below it as it is now. For a v3 group whose `zarr.json` holds
//! no `consolidated_metadata`, zarrd serves that document with the field
//! added, as zarr-python 3 writes it (unless turned off: it changes the
//! stored document's bytes). A stored one always wins.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{Result, Service};
use crate::config::Recheck;
use crate::store::{KeyMeta, StoreKey, Version};
use crate::zarr::metadata::MAX_CONSOLIDATED_BYTES;

/// The name of the consolidated document.
pub const ZMETADATA: &str = ".zmetadata";
/// The name of a v3 node's document.
const ZARR_JSON: &str = "zarr.json";
/// Documents it gathers.
const DOCUMENTS: [&str; 3] = [".zgroup", ".zarray", ".zattrs"];
/// Most documents one is built from: past this, building it on every
/// request would cost more than the requests it saves, so the group has
/// none and clients read node by node, as without one.
const MAX_DOCUMENTS: usize = 10_000;

/// Documents built, by group: kept while nothing below the group changes
/// through this server (and `--recheck-cached` trusts cached values).
pub struct Consolidated {
    built: moka::future::Cache<String, (u64, Instant, Bytes, KeyMeta)>,
}

impl std::fmt::Debug for Consolidated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Consolidated({} groups)", self.built.entry_count())
    }
}

impl Default for Consolidated {
    fn default() -> Self {
        Consolidated {
            built: moka::future::Cache::builder()
                .max_capacity(64 << 20)
                .weigher(|k: &String, v: &(u64, Instant, Bytes, KeyMeta)| {
                    u32::try_from(k.len() + v.2.len()).unwrap_or(u32::MAX)
                })
                .build(),
        }
    }
}

/// What a built document is served with: its size, and an ETag of its bytes.
fn served_meta(bytes: &Bytes, last_modified: crate::store::chrono_like::Timestamp) -> KeyMeta {
    KeyMeta {
        size: bytes.len() as u64,
        version: Version {
            e_tag: Some(hex::encode(&Sha256::digest(bytes)[..16])),
            version: None,
        },
        last_modified,
    }
}

/// The consolidated form zarr-python 3 gives a group's `zarr.json`.
fn inline(metadata: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"kind": "inline", "must_understand": false, "metadata": metadata})
}

impl Service {
    /// A document built for `name` (a cache key) while `version` holds,
    /// if it was built recently enough for `--recheck-cached`.
    async fn built(&self, name: &str, version: u64) -> Option<(Bytes, KeyMeta)> {
        let (v, at, bytes, meta) = self.consolidated.built.get(name).await?;
        let trusted = match self.cache.recheck() {
            Recheck::Always => false,
            Recheck::After(d) => at.elapsed() < d,
            Recheck::Never => true,
        };
        (v == version && trusted).then_some((bytes, meta))
    }

    async fn keep_built(&self, name: &str, version: u64, bytes: &Bytes, meta: &KeyMeta) {
        self.consolidated
            .built
            .insert(
                name.to_string(),
                (version, Instant::now(), bytes.clone(), meta.clone()),
            )
            .await;
    }

    /// The documents named one of `names` below `group`, by path relative
    /// to it, parsed; `None` when there are more than [`MAX_DOCUMENTS`].
    async fn documents_below(
        &self,
        group: &StoreKey,
        names: &[&str],
        except: Option<&StoreKey>,
    ) -> Result<Option<BTreeMap<String, serde_json::Value>>> {
        let prefix = if group.is_root() {
            0
        } else {
            group.as_str().len() + 1
        };
        let keys: Vec<StoreKey> = self
            .store
            .list_sizes(group)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| names.contains(&k.name()) && Some(k) != except)
            .collect();
        if keys.len() > MAX_DOCUMENTS {
            return Ok(None);
        }
        let mut documents = BTreeMap::new();
        for k in keys {
            let Some(bytes) = self.store.get(&k).await? else {
                continue;
            };
            // A document that is not JSON is left out, as zarr-python
            // could not have read it either; the node's own reads say why.
            if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                documents.insert(k.as_str()[prefix..].to_string(), doc);
            }
        }
        Ok(Some(documents))
    }

    /// The consolidated document for `key` when it is a `.zmetadata` the
    /// store does not hold, of a v2 group that does exist.
    pub(super) async fn synthesized(&self, key: &StoreKey) -> Result<Option<(Bytes, KeyMeta)>> {
        if key.name() != ZMETADATA {
            return Ok(None);
        }
        let group = key.parent().unwrap_or_else(StoreKey::root);
        if self.store.head(&group.join(".zgroup")?).await?.is_none() {
            return Ok(None);
        }
        let version = self.cache.subtree_version(&group);
        if let Some(built) = self.built(key.as_str(), version).await {
            return Ok(Some(built));
        }
        let Some(documents) = self.documents_below(&group, &DOCUMENTS, None).await? else {
            return Ok(None);
        };
        let doc = serde_json::json!({"metadata": documents, "zarr_consolidated_format": 1});
        let bytes = Bytes::from(serde_json::to_vec_pretty(&doc).unwrap_or_default());
        let meta = served_meta(
            &bytes,
            crate::store::chrono_like::Timestamp::from_millis(
                chrono::Utc::now().timestamp_millis(),
            ),
        );
        self.keep_built(key.as_str(), version, &bytes, &meta).await;
        Ok(Some((bytes, meta)))
    }

    /// Whether reads of `key` may be answered with consolidated metadata
    /// added: a `zarr.json`, with synthesis on.
    pub(super) fn consolidates(&self, key: &StoreKey) -> bool {
        self.consolidate_v3 && key.name() == ZARR_JSON
    }

    /// The `zarr.json` at `key` as served: when it is a v3 group's that
    /// holds no `consolidated_metadata`, with that field describing every
    /// node below it (nested groups with an empty one, as zarr-python 3
    /// writes them); any other document as stored.
    pub(super) async fn with_consolidated(
        &self,
        key: &StoreKey,
        stored: Bytes,
        meta: KeyMeta,
    ) -> Result<(Bytes, KeyMeta)> {
        let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_slice(&stored) else {
            return Ok((stored, meta));
        };
        let is_group = doc.get("node_type").and_then(|t| t.as_str()) == Some("group")
            && doc.get("zarr_format").and_then(|f| f.as_u64()) == Some(3);
        if !is_group
            || doc
                .get("consolidated_metadata")
                .is_some_and(|c| !c.is_null())
        {
            return Ok((stored, meta));
        }
        let group = key.parent().unwrap_or_else(StoreKey::root);
        let version = {
            // The served bytes follow the stored document too, which another
            // process may change.
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self.cache.subtree_version(&group), &meta.version.e_tag).hash(&mut h);
            h.finish()
        };
        if let Some(built) = self.built(key.as_str(), version).await {
            return Ok(built);
        }
        let Some(documents) = self
            .documents_below(&group, &[ZARR_JSON], Some(key))
            .await?
        else {
            return Ok((stored, meta));
        };
        let members = documents
            .into_iter()
            .map(|(path, mut member)| {
                let node = path
                    .strip_suffix(ZARR_JSON)
                    .unwrap_or(&path)
                    .trim_end_matches('/')
                    .to_string();
                if let Some(m) = member.as_object_mut() {
                    if m.get("node_type").and_then(|t| t.as_str()) == Some("group") {
                        m.insert("consolidated_metadata".into(), inline(Default::default()));
                    }
                }
                (node, member)
            })
            .collect();
        doc.insert("consolidated_metadata".into(), inline(members));
        let bytes = Bytes::from(serde_json::to_vec_pretty(&doc).unwrap_or_default());
        if bytes.len() > MAX_CONSOLIDATED_BYTES {
            return Ok((stored, meta));
        }
        let served = served_meta(&bytes, meta.last_modified);
        self.keep_built(key.as_str(), version, &bytes, &served)
            .await;
        Ok((bytes, served))
    }
}
