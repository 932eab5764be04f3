//! Listings: every value below a prefix, one level of a folder, and pages
//! of values in key order after any key (which hold one page whatever the
//! number of values).

use std::collections::BinaryHeap;

use futures::TryStreamExt;
use object_store::path::Path;

use super::{
    icechunk_repo, is_internal, key_meta, key_of, reserved, walk, DirValues, KeyMeta, Listing,
    Store, StoreError, StoreKey,
};

/// One entry of a folder's level: a value, or a folder holding values
/// (its name ending in `/`); names relative to the folder.
#[derive(Debug, Clone)]
pub enum LevelEntry {
    Value(String, KeyMeta),
    Folder(String),
}

impl LevelEntry {
    pub fn name(&self) -> &str {
        match self {
            LevelEntry::Value(name, _) | LevelEntry::Folder(name) => name,
        }
    }
}

/// A listed value, ordered by key (for keeping the first of a listing).
struct ByKey(StoreKey, KeyMeta);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.as_str().cmp(other.0.as_str())
    }
}

impl Store {
    /// Every key below `prefix` with its size.
    pub async fn list_sizes(&self, prefix: &StoreKey) -> Result<Vec<(StoreKey, u64)>, StoreError> {
        Ok(self
            .list_metas(prefix)
            .await?
            .into_iter()
            .map(|(k, m)| (k, m.size))
            .collect())
    }

    /// The first `limit` values below `prefix` whose keys come after
    /// `offset` (byte order of whole keys), sorted; at the root, the
    /// mounts' values too (everything `/zarr/` serves). Fewer than `limit`
    /// means there are no more. Holds at most `limit` values whatever the
    /// store holds; stores that list in key order (directories, memory,
    /// S3, GCS, Azure) read only as far as the page.
    pub async fn list_page(
        &self,
        prefix: &StoreKey,
        offset: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(StoreKey, KeyMeta)>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        if let Some((m, k)) = self.mount_for(prefix) {
            let name = prefix.as_str().split('/').next().unwrap_or("");
            let base = format!("{name}/");
            let folder = version_folder(name);
            let inner_offset = match offset {
                Some(o) if o.starts_with(&base) => Some(format!(
                    "{}{}",
                    folder.as_deref().unwrap_or(""),
                    &o[base.len()..]
                )),
                // Past every key of the mount.
                Some(o) if o > base.as_str() => return Ok(Vec::new()),
                _ => None,
            };
            let inner = Box::pin(m.list_page(&k, inner_offset.as_deref(), limit)).await?;
            return Ok(from_mount(name, folder.as_deref(), inner));
        }
        let mut values = self.list_page_here(prefix, offset, limit).await?;
        if prefix.is_root() && !self.mounts.is_empty() {
            // Each source's first `limit` hold the first `limit` of all.
            for (name, _) in self.mounts.iter() {
                let name = StoreKey::new(name)?;
                values.extend(Box::pin(self.list_page(&name, offset, limit)).await?);
            }
            values.sort_by(|a, b| a.0.cmp(&b.0));
            values.truncate(limit);
        }
        Ok(values)
    }

    /// [`Store::list_page`] of this store's own backend.
    async fn list_page_here(
        &self,
        prefix: &StoreKey,
        offset: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(StoreKey, KeyMeta)>, StoreError> {
        reserved(prefix)?;
        let path = (!prefix.is_root()).then(|| self.path(prefix));
        // Always with an offset, which keeps ordered backends in order.
        let from = offset.map(path_at_or_below).unwrap_or_default();
        let listed = self.inner.list_with_offset(path.as_ref(), &from);
        let mut listed = std::pin::pin!(listed);
        // Keys under a mount's name are the mount's, not this store's.
        let shadowed = |key: &str| {
            prefix.is_root()
                && self.mounts.iter().any(|(name, _)| {
                    key.strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
                })
        };
        // The first `limit` keys, largest on top: what a store listing in no
        // particular order gives is sifted through it.
        let mut first = BinaryHeap::with_capacity(limit + 1);
        let mut ordered = self.ordered_listing;
        let mut last: Option<StoreKey> = None;
        while let Some(m) = listed
            .try_next()
            .await
            .map_err(|e| StoreError::from_backend(prefix, e))?
        {
            let Some(key) = key_of(&m.location).filter(|k| !is_internal(k.as_str())) else {
                continue;
            };
            if offset.is_some_and(|o| key.as_str() <= o) || shadowed(key.as_str()) {
                continue;
            }
            // A backend said to list in order that does not is read whole.
            if last.as_ref().is_some_and(|l| l.as_str() > key.as_str()) {
                ordered = false;
            }
            last = Some(key.clone());
            first.push(ByKey(key, key_meta(&m)));
            if first.len() > limit {
                first.pop();
            }
            if ordered && first.len() == limit {
                break;
            }
        }
        Ok(first
            .into_sorted_vec()
            .into_iter()
            .map(|ByKey(k, m)| (k, m))
            .collect())
    }

    /// Up to `limit` entries directly below the folder `prefix`, in key
    /// order after `offset` (a whole key): its values and the folders that
    /// hold any (at the root, the mounts too), named relative to it. A
    /// directory store reads only as far as the page (and keeps large
    /// folders' sorted names between pages), S3, GCS and Azure list the
    /// page by their own paged listing; other stores list the level whole
    /// and cut the page from it.
    pub async fn list_level_page(
        &self,
        prefix: &StoreKey,
        offset: Option<&str>,
        limit: usize,
    ) -> Result<Vec<LevelEntry>, StoreError> {
        let base = if prefix.is_root() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let after = match offset {
            Some(o) if o.starts_with(&base) => Some(o[base.len()..].to_string()),
            // Past every key of the folder.
            Some(o) if o > base.as_str() => return Ok(Vec::new()),
            _ => None,
        };
        let (store, inner) = self.route(prefix)?;
        let mut entries = if let Some(local) = &store.local {
            let found = local.list_level(&inner, after.clone(), limit).await?;
            found
                .into_iter()
                .map(|found| match found {
                    walk::Found::File(name, meta) => LevelEntry::Value(name, key_meta(&meta)),
                    walk::Found::Folder(name) => LevelEntry::Folder(name),
                })
                .collect()
        } else if let Some(pages) = &store.pages {
            let page = pages.page(&inner, after.as_deref(), limit).await;
            match page.map_err(|e| StoreError::from_backend(prefix, e))? {
                Some(page) => page,
                None => return self.level_cut(prefix, after.as_deref(), limit).await,
            }
        } else {
            return self.level_cut(prefix, after.as_deref(), limit).await;
        };
        if prefix.is_root() && !self.mounts.is_empty() {
            let mounts = self.mounts.iter().map(|(name, _)| format!("{name}/"));
            entries.extend(
                mounts
                    .filter(|m| after.as_deref().is_none_or(|a| m.as_str() > a))
                    .map(LevelEntry::Folder),
            );
            entries.sort_by(|a, b| a.name().cmp(b.name()));
            entries.dedup_by(|a, b| a.name() == b.name());
            entries.truncate(limit);
        }
        Ok(entries)
    }

    /// [`Store::list_level_page`] cut from the whole level, for stores that
    /// list no other way.
    async fn level_cut(
        &self,
        prefix: &StoreKey,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<LevelEntry>, StoreError> {
        let level = self.list_dir_values(prefix).await?;
        let values = level
            .values
            .into_iter()
            .map(|(n, m)| LevelEntry::Value(n, m));
        let folders = level
            .prefixes
            .into_iter()
            .map(|p| LevelEntry::Folder(p + "/"));
        let mut entries: Vec<LevelEntry> = values
            .chain(folders)
            .filter(|e| after.is_none_or(|a| e.name() > a))
            .collect();
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        entries.truncate(limit);
        Ok(entries)
    }

    /// Every value below `prefix` with its metadata.
    async fn list_metas(&self, prefix: &StoreKey) -> Result<Vec<(StoreKey, KeyMeta)>, StoreError> {
        if let Some((m, k)) = self.mount_for(prefix) {
            let name = prefix.as_str().split('/').next().unwrap_or("");
            let inner = Box::pin(m.list_metas(&k)).await?;
            return Ok(from_mount(name, version_folder(name).as_deref(), inner));
        }
        reserved(prefix)?;
        let path = (!prefix.is_root()).then(|| self.path(prefix));
        let mut listed = self.inner.list(path.as_ref());
        let mut values = Vec::new();
        while let Some(m) = listed
            .try_next()
            .await
            .map_err(|e| StoreError::from_backend(prefix, e))?
        {
            if let Some(key) = key_of(&m.location).filter(|k| !is_internal(k.as_str())) {
                values.push((key, key_meta(&m)));
            }
        }
        Ok(values)
    }

    /// Every key below `prefix` (recursively), as full keys, sorted.
    pub async fn list_recursive(&self, prefix: &StoreKey) -> Result<Vec<StoreKey>, StoreError> {
        let mut keys: Vec<StoreKey> = self
            .list_sizes(prefix)
            .await?
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// One level below `prefix`: the keys and sub-prefixes there, as relative names.
    pub async fn list_dir(&self, prefix: &StoreKey) -> Result<Listing, StoreError> {
        let level = self.list_dir_values(prefix).await?;
        Ok(Listing {
            keys: level.values.into_iter().map(|(name, _)| name).collect(),
            prefixes: level.prefixes,
        })
    }

    /// One level below `prefix`, with each value's metadata; sorted by name.
    pub async fn list_dir_values(&self, prefix: &StoreKey) -> Result<DirValues, StoreError> {
        let (store, inner) = self.route(prefix)?;
        let path = (!inner.is_root()).then(|| store.path(&inner));
        let result = store
            .inner
            .list_with_delimiter(path.as_ref())
            .await
            .map_err(|e| StoreError::from_backend(prefix, e))?;
        let strip = |p: &Path| -> Option<String> {
            let full = key_of(p)?;
            let rel = if inner.is_root() {
                full.as_str()
            } else {
                full.as_str()
                    .strip_prefix(inner.as_str())?
                    .strip_prefix('/')?
            };
            (!rel.is_empty() && !is_internal(full.as_str())).then(|| rel.to_string())
        };
        let mut listing = DirValues {
            values: result
                .objects
                .iter()
                .filter_map(|m| strip(&m.location).map(|name| (name, key_meta(m))))
                .collect(),
            prefixes: result.common_prefixes.iter().filter_map(strip).collect(),
        };
        if prefix.is_root() {
            listing
                .prefixes
                .extend(self.mounts.iter().map(|(name, _)| name.clone()));
        }
        listing.values.sort_by(|a, b| a.0.cmp(&b.0));
        listing.prefixes.sort();
        listing.prefixes.dedup();
        Ok(listing)
    }
}

/// The path nearest `offset` at or below it: an offset that is no valid
/// path (an empty or `.` segment, a control character) is cut at a `/`
/// until it is one, and a path `parse` would raise (a leading `/` dropped)
/// is not taken. Keys between it and the offset are skipped by the caller.
fn path_at_or_below(offset: &str) -> Path {
    let mut cut = offset;
    loop {
        if let Ok(path) = Path::parse(cut) {
            if path.as_ref() <= offset {
                return path;
            }
        }
        match cut.rfind('/') {
            Some(i) => cut = &cut[..i],
            None => return Path::default(),
        }
    }
}

/// The folder a mount named `name` (`repo@v1`) keeps a version's keys in.
fn version_folder(name: &str) -> Option<String> {
    name.split_once('@')
        .map(|(_, v)| format!("{}/{v}/", icechunk_repo::VERSION_FOLDER))
}

/// A mount's listed values as keys of the store it is mounted in.
fn from_mount(
    name: &str,
    folder: Option<&str>,
    values: Vec<(StoreKey, KeyMeta)>,
) -> Vec<(StoreKey, KeyMeta)> {
    values
        .into_iter()
        .filter_map(|(key, meta)| {
            let key = match folder {
                Some(f) => key.as_str().strip_prefix(f)?,
                None => key.as_str(),
            };
            StoreKey::new(name).ok()?.join(key).ok().map(|k| (k, meta))
        })
        .collect()
}

#[cfg(test)]
#[path = "list_tests.rs"]
pub(super) mod tests;
