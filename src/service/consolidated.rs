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
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{ErrorKind, Reservation, Result, Service};
use crate::config::Recheck;
use crate::store::{KeyMeta, StoreKey, Version};
use crate::zarr::array::run_blocking;
use crate::zarr::metadata::MAX_CONSOLIDATED_BYTES;

/// The name of the consolidated document.
pub const ZMETADATA: &str = ".zmetadata";
/// The name of a v3 node's document.
const ZARR_JSON: &str = "zarr.json";
/// Documents it gathers.
const DOCUMENTS: [&str; 3] = [".zgroup", ".zarray", ".zattrs"];
/// Documents that make a folder an array's, whose folders a walk for
/// consolidated metadata does not enter.
const ARRAY_DOCUMENTS: [&str; 2] = [".zarray", ZARR_JSON];
/// Most documents one is built from: past this, building it on every
/// request would cost more than the requests it saves, so the group has
/// none and clients read node by node, as without one.
const MAX_DOCUMENTS: usize = 10_000;

/// Documents built, by group and the subtree version they were built at.
/// Requests for one at the same time share one build (moka runs one
/// initialisation per key and hands its result to every waiter).
pub struct Consolidated {
    built: moka::future::Cache<(String, u64), Arc<Built>>,
}

/// One built document (or the finding that the group is too large to
/// have one, kept as long) and what it was built from.
pub(super) struct Built {
    /// When it was built: which nodes exist is trusted for a while.
    at: Instant,
    /// The document and how it is served; `None`: too large to build.
    served: Option<(Bytes, KeyMeta)>,
    /// The documents it gathers, with the ETags they were read at (see
    /// [`super::validator`]), rechecked as `--recheck-cached` says.
    sources: Vec<(StoreKey, Option<String>)>,
}

impl Built {
    fn new(served: Option<(Bytes, KeyMeta)>, sources: Vec<(StoreKey, Option<String>)>) -> Self {
        Built {
            at: Instant::now(),
            served,
            sources,
        }
    }
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
                .weigher(|k: &(String, u64), v: &Arc<Built>| {
                    let sources: usize = v.sources.iter().map(|(k, _)| k.as_str().len() + 40).sum();
                    let bytes = v.served.as_ref().map_or(0, |(b, _)| b.len());
                    u32::try_from(k.0.len() + bytes + sources).unwrap_or(u32::MAX)
                })
                .build(),
        }
    }
}

/// How long which nodes exist below a group is trusted when cached values
/// are always rechecked: a node another process adds or removes shows
/// within this time; a document another process changes shows at once.
const LISTING_TRUST: Duration = Duration::from_secs(2);
/// Most folders a build lists: past them the group has none (clients read
/// node by node), so a store of many folders that are not nodes cannot make
/// every open of its root walk all of them.
const MAX_FOLDERS: usize = 20_000;
/// Memory a build reserves per byte of the documents it gathers: their
/// parsed form and the served bytes.
const BUILD_BYTES_PER_BYTE: u64 = 8;

/// What a built document is served with: its size, and as ETag the MD5 of
/// its bytes, as S3 gives a single-part object: S3 tools (rclone, mc,
/// s3cmd) take a 32-hex ETag for the body's MD5 and check it.
fn served_meta(bytes: &Bytes, last_modified: crate::store::chrono_like::Timestamp) -> KeyMeta {
    use md5::Digest;
    KeyMeta {
        size: bytes.len() as u64,
        version: Version {
            e_tag: Some(hex::encode(md5::Md5::digest(bytes))),
            version: None,
        },
        last_modified,
    }
}

/// The consolidated form zarr-python 3 gives a group's `zarr.json`.
fn inline(metadata: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"kind": "inline", "must_understand": false, "metadata": metadata})
}

/// The documents below a group, by path relative to it (`None`: too many
/// to consolidate), with what they were read at, and the memory reserved
/// for holding them and what is built of them.
type Gathered = (
    Option<BTreeMap<String, serde_json::Value>>,
    Vec<(StoreKey, Option<String>)>,
    Reservation,
);

impl Service {
    /// The document built for `name` at subtree `version`, when one is kept
    /// that is still current; else built now by `build`, once for every
    /// request that asks meanwhile.
    async fn built<F>(&self, name: &str, version: u64, build: F) -> Result<Arc<Built>>
    where
        F: std::future::Future<Output = Result<Built>> + Send,
    {
        let key = (name.to_string(), version);
        if let Some(kept) = self.consolidated.built.get(&key).await {
            if self.still_current(&kept).await? {
                return Ok(kept);
            }
            self.consolidated.built.invalidate(&key).await;
        }
        self.consolidated
            .built
            .try_get_with(key, async { build.await.map(Arc::new) })
            .await
            .map_err(|e| (*e).clone())
    }

    /// Whether a kept document still describes the hierarchy: its
    /// documents unchanged (rechecked as `--recheck-cached` says), and which
    /// nodes exist trusted for [`LISTING_TRUST`] (or as configured).
    async fn still_current(&self, kept: &Built) -> Result<bool> {
        let age = kept.at.elapsed();
        match self.cache.recheck() {
            Recheck::Never => return Ok(true),
            Recheck::After(d) if age < d => return Ok(true),
            Recheck::After(d) if age >= d.max(LISTING_TRUST) => return Ok(false),
            Recheck::Always if age >= LISTING_TRUST => return Ok(false),
            _ => {}
        }
        self.unchanged(&kept.sources).await
    }

    /// The documents named one of `names` at and below `group`, found
    /// folder by folder without entering arrays (their chunks are most of a
    /// store's keys), parsed; none past [`MAX_DOCUMENTS`] documents,
    /// [`MAX_FOLDERS`] folders or what a consolidated document may hold,
    /// found while walking.
    async fn documents_below(
        &self,
        group: &StoreKey,
        names: &[&str],
        except: Option<&StoreKey>,
    ) -> Result<Gathered> {
        let prefix = if group.is_root() {
            0
        } else {
            group.as_str().len() + 1
        };
        let mut documents = BTreeMap::new();
        let mut sources = Vec::new();
        // Reserved as the documents are read, so a small group reserves
        // little and a large one waits for memory or is refused.
        let mut held = Reservation::default();
        let mut gathered = 0u64;
        let mut folders = vec![group.clone()];
        let mut listed = 0usize;
        while let Some(folder) = folders.pop() {
            listed += 1;
            if listed > MAX_FOLDERS {
                return Ok((None, sources, held));
            }
            // The folder's documents first, by name: an array's folder (with
            // a v2 array's chunks in it) is never listed.
            let mut array = false;
            for name in names
                .iter()
                .chain(ARRAY_DOCUMENTS.iter().filter(|n| !names.contains(n)))
            {
                let key = folder.join(name)?;
                let Some(got) = self.store.get_versioned(&key).await? else {
                    continue;
                };
                let doc = serde_json::from_slice::<serde_json::Value>(&got.bytes).ok();
                array |= *name == ".zarray"
                    || doc
                        .as_ref()
                        .and_then(|d| d.get("node_type"))
                        .and_then(|t| t.as_str())
                        == Some("array");
                if !names.contains(name) || Some(&key) == except {
                    continue;
                }
                if sources.len() >= MAX_DOCUMENTS {
                    return Ok((None, sources, held));
                }
                sources.push((key.clone(), Some(super::validator(&got.meta))));
                gathered += got.bytes.len() as u64 * BUILD_BYTES_PER_BYTE;
                // Larger than any consolidated document may be: none.
                if gathered > MAX_CONSOLIDATED_BYTES as u64 * BUILD_BYTES_PER_BYTE {
                    return Ok((None, sources, held));
                }
                if gathered > held.bytes().max(super::budget::SMALL) {
                    let more = self
                        .budget
                        .reserve(held.bytes().max(1 << 20), "building consolidated metadata")
                        .await?;
                    held = held.merge(more);
                }
                // A document that is not JSON is left out, as zarr-python
                // could not have read it either; the node's own reads say why.
                if let Some(doc) = doc {
                    documents.insert(key.as_str()[prefix..].to_string(), doc);
                }
            }
            if !array {
                let level = self.store.list_dir_values(&folder).await?;
                for p in level.prefixes.iter().rev() {
                    folders.push(folder.join(p)?);
                }
            }
        }
        Ok((Some(documents), sources, held))
    }

    /// The consolidated document for `key` when it is a `.zmetadata` the
    /// store does not hold, of a v2 group that does exist.
    pub(super) async fn synthesized(&self, key: &StoreKey) -> Result<Option<(Bytes, KeyMeta)>> {
        if !self.consolidate_v2 || key.name() != ZMETADATA {
            return Ok(None);
        }
        let group = key.parent().unwrap_or_else(StoreKey::root);
        if self.store.head(&group.join(".zgroup")?).await?.is_none() {
            return Ok(None);
        }
        let version = self.cache.subtree_version(&group);
        let built = self
            .built(key.as_str(), version, async {
                let (documents, sources, _memory) =
                    self.documents_below(&group, &DOCUMENTS, None).await?;
                let Some(documents) = documents else {
                    return Ok(Built::new(None, sources));
                };
                let bytes = run_blocking(move || {
                    let doc =
                        serde_json::json!({"metadata": documents, "zarr_consolidated_format": 1});
                    Ok(Bytes::from(
                        serde_json::to_vec_pretty(&doc).unwrap_or_default(),
                    ))
                })
                .await?;
                let meta = served_meta(
                    &bytes,
                    crate::store::chrono_like::Timestamp::from_millis(
                        chrono::Utc::now().timestamp_millis(),
                    ),
                );
                Ok(Built::new(Some((bytes, meta)), sources))
            })
            .await?;
        Ok(built.served.clone())
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
        let own_tag = Some(super::validator(&meta));
        let built = self
            .built(key.as_str(), version, async {
                let (documents, mut sources, _memory) = self
                    .documents_below(&group, &[ZARR_JSON], Some(key))
                    .await?;
                // The served bytes follow the stored document too.
                sources.push((key.clone(), own_tag));
                let Some(documents) = documents else {
                    return Ok(Built::new(None, sources));
                };
                let bytes = run_blocking(move || {
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
                                    m.insert(
                                        "consolidated_metadata".into(),
                                        inline(Default::default()),
                                    );
                                }
                            }
                            (node, member)
                        })
                        .collect();
                    doc.insert("consolidated_metadata".into(), inline(members));
                    Ok(Bytes::from(
                        serde_json::to_vec_pretty(&doc).unwrap_or_default(),
                    ))
                })
                .await?;
                let served = (bytes.len() <= MAX_CONSOLIDATED_BYTES)
                    .then(|| (bytes.clone(), served_meta(&bytes, meta.last_modified)));
                Ok(Built::new(served, sources))
            })
            .await;
        Ok(match built {
            Ok(b) => b.served.clone().unwrap_or((stored, meta)),
            // The document every client opens first is not refused for
            // want of memory to consolidate: it is served as stored.
            Err(e) if e.kind == ErrorKind::Busy => (stored, meta),
            Err(e) => return Err(e),
        })
    }
}
