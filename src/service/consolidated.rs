//! Consolidated metadata, synthesized: over HTTP a client cannot list
//! cheaply, so xarray and zarr-python open Zarr v2 groups through one
//! `.zmetadata` document. For a v2 group that has none stored, zarrd answers
//! `.zmetadata` with the document zarr-python's `consolidate_metadata`
//! would write for the hierarchy below it as it is now. A stored one
//! always wins.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{Result, Service};
use crate::config::Recheck;
use crate::store::{KeyMeta, StoreKey, Version};

/// The name of the consolidated document.
pub const ZMETADATA: &str = ".zmetadata";
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

impl Service {
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
        let trusted = |at: &Instant| match self.cache.recheck() {
            Recheck::Always => false,
            Recheck::After(d) => at.elapsed() < d,
            Recheck::Never => true,
        };
        if let Some((v, at, bytes, meta)) = self.consolidated.built.get(group.as_str()).await {
            if v == version && trusted(&at) {
                return Ok(Some((bytes, meta)));
            }
        }
        let prefix = if group.is_root() {
            0
        } else {
            group.as_str().len() + 1
        };
        let keys: Vec<StoreKey> = self
            .store
            .list_sizes(&group)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| DOCUMENTS.contains(&k.name()))
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
        let doc = serde_json::json!({"metadata": documents, "zarr_consolidated_format": 1});
        let bytes = Bytes::from(serde_json::to_vec_pretty(&doc).unwrap_or_default());
        let meta = KeyMeta {
            size: bytes.len() as u64,
            version: Version {
                e_tag: Some(hex::encode(&Sha256::digest(&bytes)[..16])),
                version: None,
            },
            last_modified: crate::store::chrono_like::Timestamp::from_millis(
                chrono::Utc::now().timestamp_millis(),
            ),
        };
        self.consolidated
            .built
            .insert(
                group.as_str().to_string(),
                (version, Instant::now(), bytes.clone(), meta.clone()),
            )
            .await;
        Ok(Some((bytes, meta)))
    }
}
