//! One level of a bucket, a page at a time, as the backend lists it: S3's,
//! GCS's and Azure's list calls take a delimiter, a key to start after and
//! a page size, so a page of a folder holding a million values costs one
//! call instead of the whole level.

use std::sync::Arc;

use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;

use super::{is_internal, key_meta, LevelEntry, StoreKey};

/// Paged level listings of the bucket a store's objects are in.
pub(super) struct LevelPages {
    list: Arc<dyn PaginatedListStore>,
    /// Where the store's objects start in the bucket (the URL's path, with
    /// a `/` after it), or empty for the whole bucket.
    root: String,
}

impl std::fmt::Debug for LevelPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelPages")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl LevelPages {
    pub(super) fn new(list: Arc<dyn PaginatedListStore>, root: &str) -> Self {
        let root = root.trim_matches('/');
        LevelPages {
            list,
            root: if root.is_empty() {
                String::new()
            } else {
                format!("{root}/")
            },
        }
    }

    /// Up to `limit` entries directly below `folder` (a key of the store)
    /// whose names come after `after`, in name order: what
    /// [`super::Store::list_level_page`] answers. `None` when the bucket
    /// lists values from before the offset (a service that ignores the key
    /// to start after, as some emulators and Azure's older service versions
    /// do): paging through it would read the level from its start for every
    /// page.
    pub(super) async fn page(
        &self,
        folder: &StoreKey,
        after: Option<&str>,
        limit: usize,
    ) -> object_store::Result<Option<Vec<LevelEntry>>> {
        let base = if folder.is_root() {
            self.root.clone()
        } else {
            format!("{}{folder}/", self.root)
        };
        // The backend starts after a key: after a folder, past the keys in
        // it (bar those going on with `char::MAX`, whose folder comes
        // again and is dropped below).
        let offset = after.map(|a| match a.ends_with('/') {
            true => format!("{base}{a}{}", char::MAX),
            false => format!("{base}{a}"),
        });
        let mut entries = Vec::new();
        let mut token = None;
        loop {
            let opts = PaginatedListOptions {
                offset: offset.clone(),
                delimiter: Some("/".into()),
                // A page may come back shorter than asked (the backend's
                // own cap, names dropped below); the loop asks for more.
                max_keys: Some(limit.saturating_sub(entries.len()).clamp(1, 1000)),
                page_token: token.clone(),
                ..Default::default()
            };
            let listed = self
                .list
                .list_paginated((!base.is_empty()).then_some(base.as_str()), opts)
                .await?;
            if let Some(offset) = &offset {
                let mut keys = listed.result.objects.iter().map(|m| m.location.as_ref());
                // A folder comes again only when the offset lies inside it.
                let mut folders = listed.result.common_prefixes.iter();
                let before = |p: &Path| {
                    let folder = format!("{p}/");
                    folder.as_str() <= offset.as_str() && !offset.starts_with(&folder)
                };
                if keys.any(|key| key <= offset.as_str()) || folders.any(before) {
                    return Ok(None);
                }
            }
            // A location's name in the level, `/` after a folder's, when
            // it is one to list.
            let name = |location: &Path, folder: bool| -> Option<String> {
                let name = location.as_ref().strip_prefix(base.as_str())?;
                let key = StoreKey::new(&location.as_ref()[self.root.len()..]).ok()?;
                if name.is_empty() || is_internal(key.as_str()) {
                    return None;
                }
                let name = if folder {
                    format!("{name}/")
                } else {
                    name.to_string()
                };
                after.is_none_or(|a| name.as_str() > a).then_some(name)
            };
            let values = listed.result.objects.iter().filter_map(|m| {
                let name = name(&m.location, false)?;
                Some(LevelEntry::Value(name, key_meta(m)))
            });
            let folders = listed.result.common_prefixes.iter();
            let folders = folders.filter_map(|p| Some(LevelEntry::Folder(name(p, true)?)));
            entries.extend(values.chain(folders));
            // A token that comes back unchanged would ask for the same page forever.
            let asked = std::mem::replace(&mut token, listed.page_token);
            if entries.len() >= limit || token.is_none() || token == asked {
                break;
            }
        }
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        entries.dedup_by(|a, b| a.name() == b.name());
        entries.truncate(limit);
        Ok(Some(entries))
    }
}
