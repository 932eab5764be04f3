//! Listings of stored values below any key prefix (not only whole
//! segments), with each value's size, version and time as served, for the
//! object-store view of the hierarchy.

use super::{Result, Service};
use crate::store::{KeyMeta, LevelEntry, StoreError, StoreKey};

/// Values one store call lists at a time beyond a page's own keys.
const BATCH_MIN: usize = 100;

/// One entry of a listing, in key order.
#[derive(Debug, Clone)]
pub enum Listed {
    /// A stored value.
    Value { key: String, meta: KeyMeta },
    /// Values rolled up at the delimiter: the key up to and including it.
    Prefix(String),
}

/// One page of a listing: its entries, and whether more follow.
#[derive(Debug, Default)]
pub struct Page {
    pub entries: Vec<Listed>,
    pub truncated: bool,
}

impl Page {
    /// A page of the first `max` of `entries` (more: truncated). A page
    /// of no keys asked for says nothing of what follows, as S3's does.
    fn cut(entries: &mut Vec<Listed>, max: usize) -> Page {
        let truncated = entries.len() > max && max > 0;
        entries.truncate(max);
        Page {
            entries: std::mem::take(entries),
            truncated,
        }
    }
}

/// An offset below every key that starts with `prefix` and above as many
/// others as it can be (a listing after it starts at the prefix's keys),
/// that the store can take as a path.
fn before(prefix: &str) -> Option<String> {
    let mut chars = prefix.chars();
    let last = chars.next_back()?;
    let head = chars.as_str();
    match (last as u32).checked_sub(1).and_then(char::from_u32) {
        // No key holds an empty segment, so none lies between this and
        // `head/` followed by anything.
        Some('/') => Some(format!("{head}.{}", char::MAX)),
        Some(c) if !c.is_control() => Some(format!("{head}{c}{}", char::MAX)),
        // No key holds a control character.
        _ => (!head.is_empty()).then(|| head.to_string()),
    }
}

/// Where reading a page starts: after `after`, and no lower than just
/// below the prefix's keys.
fn start(after: Option<&str>, prefix: &str) -> Option<String> {
    [after.map(str::to_string), before(prefix)]
        .into_iter()
        .flatten()
        .max()
}

/// A store listing's answer; `None` for a folder no valid key, or none the
/// store lets us read, lies in (it lists nothing).
fn listed<T>(answer: std::result::Result<T, StoreError>) -> Result<Option<T>> {
    match answer {
        Ok(found) => Ok(Some(found)),
        Err(StoreError::InvalidKey { .. } | StoreError::Forbidden { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An offset after every key that starts with `prefix` but those that go
/// on with `char::MAX` (which are skipped one by one).
fn past(prefix: &str) -> String {
    format!("{prefix}{}", char::MAX)
}

impl Listed {
    pub fn key(&self) -> &str {
        match self {
            Listed::Value { key, .. } | Listed::Prefix(key) => key,
        }
    }
}

/// The folder holding every key that starts with `prefix`: up to its last `/`.
fn folder_of(prefix: &str) -> &str {
    prefix.rfind('/').map_or("", |i| &prefix[..i])
}

impl Service {
    /// A page of what `/zarr/` serves whose key starts with `prefix`, in
    /// key order, after `after`, at most `max` entries; with a delimiter,
    /// the keys that hold it after the prefix rolled up into one
    /// [`Listed::Prefix`] each. A prefix no valid key can start with lists
    /// nothing. The store is read in key order from the page's start, a
    /// batch (or, for `/`, a level's page) at a time, so a page holds one
    /// batch whatever the number of values below the prefix.
    pub async fn list_page(
        &self,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<&str>,
        max: usize,
    ) -> Result<Page> {
        let Ok(folder) = StoreKey::new(folder_of(prefix)) else {
            return Ok(Page::default());
        };
        let delimiter = delimiter.filter(|d| !d.is_empty());
        let mut page = if delimiter == Some("/") {
            self.list_level(&folder, prefix, after, max).await?
        } else {
            self.list_walked(&folder, prefix, delimiter, after, max)
                .await?
        };
        page.entries = self.as_served(page.entries).await?;
        Ok(page)
    }

    /// A page of a `/` listing: one level of the prefix's folder, read
    /// from the store in key order from the first entry that can be on it.
    async fn list_level(
        &self,
        folder: &StoreKey,
        prefix: &str,
        after: Option<&str>,
        max: usize,
    ) -> Result<Page> {
        let base = if folder.is_root() {
            String::new()
        } else {
            format!("{folder}/")
        };
        let mut offset = start(after, prefix);
        let mut entries: Vec<Listed> = Vec::new();
        loop {
            tokio::task::consume_budget().await;
            let level = self
                .store
                .list_level_page(folder, offset.as_deref(), max + 1);
            let Some(level) = listed(level.await)? else {
                return Ok(Page::default());
            };
            let more = level.len() == max + 1;
            for entry in level {
                let key = format!("{base}{}", entry.name());
                offset = Some(key.clone());
                if !key.starts_with(prefix) {
                    if key.as_str() > prefix {
                        return Ok(Page::cut(&mut entries, max));
                    }
                    continue;
                }
                entries.push(match entry {
                    LevelEntry::Value(_, meta) => Listed::Value { key, meta },
                    LevelEntry::Folder(_) => Listed::Prefix(key),
                });
                if entries.len() > max {
                    return Ok(Page::cut(&mut entries, max));
                }
            }
            if !more {
                return Ok(Page::cut(&mut entries, max));
            }
        }
    }

    /// A page of a listing of every value below the prefix's folder, read
    /// from the store in key order from the first key that can be on it.
    async fn list_walked(
        &self,
        folder: &StoreKey,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<&str>,
        max: usize,
    ) -> Result<Page> {
        let batch = (max + 1).max(BATCH_MIN);
        let mut offset = start(after, prefix);
        let mut entries: Vec<Listed> = Vec::new();
        loop {
            // A store that lists without waiting (memory) must not keep
            // this thread through a long walk.
            tokio::task::consume_budget().await;
            let values = self.store.list_page(folder, offset.as_deref(), batch);
            let Some(values) = listed(values.await)? else {
                return Ok(Page::default());
            };
            let more = values.len() == batch;
            // The rolled-up prefix the batch ended in, to skip the rest of.
            let mut within = None;
            for (key, meta) in values {
                let key = key.as_str().to_string();
                offset = Some(key.clone());
                let Some(rest) = key.strip_prefix(prefix) else {
                    if key.as_str() > prefix {
                        // Past every key starting with the prefix.
                        return Ok(Page::cut(&mut entries, max));
                    }
                    continue;
                };
                let common = delimiter.and_then(|d| {
                    rest.find(d)
                        .map(|i| format!("{prefix}{}", &rest[..i + d.len()]))
                });
                match common {
                    Some(common) => {
                        let listed = after.is_some_and(|a| common.as_str() <= a)
                            || matches!(entries.last(), Some(Listed::Prefix(p)) if *p == common);
                        if !listed {
                            entries.push(Listed::Prefix(common.clone()));
                        }
                        within = Some(common);
                    }
                    None => {
                        entries.push(Listed::Value { key, meta });
                        within = None;
                    }
                }
                if entries.len() > max {
                    return Ok(Page::cut(&mut entries, max));
                }
            }
            if !more {
                return Ok(Page::cut(&mut entries, max));
            }
            // Never back: a key going on past `char::MAX` sorts after
            // `past`, and a batch of them would be read again and again.
            if let Some(common) = within {
                offset = offset.max(Some(past(&common)));
            }
        }
    }

    /// Listed sizes and versions as reads answer them: a v3 group's
    /// `zarr.json` is served with its consolidated metadata.
    async fn as_served(&self, mut listed: Vec<Listed>) -> Result<Vec<Listed>> {
        for entry in &mut listed {
            if let Listed::Value { key, meta } = entry {
                let Ok(store_key) = StoreKey::new(key.as_str()) else {
                    continue;
                };
                if self.consolidates(&store_key) {
                    if let Some(served) = self.head_value(&store_key).await? {
                        *meta = served;
                    }
                }
            }
        }
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::chrono_like::Timestamp;

    fn meta() -> KeyMeta {
        KeyMeta {
            size: 1,
            version: Default::default(),
            last_modified: Timestamp::from_millis(0),
        }
    }

    /// The whole listing, rolled up at the first `delimiter` after
    /// `prefix`, sorted: the oracle pages are checked against.
    fn roll_up(
        values: Vec<(String, KeyMeta)>,
        prefix: &str,
        delimiter: Option<&str>,
    ) -> Vec<Listed> {
        let mut out: Vec<Listed> = Vec::new();
        for (key, meta) in values {
            let Some(rest) = key.strip_prefix(prefix) else {
                continue;
            };
            match delimiter.filter(|d| !d.is_empty()).and_then(|d| {
                rest.find(d)
                    .map(|i| format!("{prefix}{}", &rest[..i + d.len()]))
            }) {
                Some(common) => {
                    if !matches!(out.last(), Some(Listed::Prefix(p)) if *p == common) {
                        out.push(Listed::Prefix(common));
                    }
                }
                None => out.push(Listed::Value { key, meta }),
            }
        }
        out.sort_by(|a, b| a.key().cmp(b.key()));
        out.dedup_by(|a, b| a.key() == b.key());
        out
    }

    /// The entries of a whole listing after `after`, at most `max`.
    fn page_of(listed: Vec<Listed>, after: Option<&str>, max: usize) -> Page {
        let start = after.map_or(0, |a| listed.partition_point(|l| l.key() <= a));
        let mut entries: Vec<Listed> = listed.into_iter().skip(start).collect();
        Page::cut(&mut entries, max)
    }

    fn keys(listed: &[Listed]) -> Vec<String> {
        listed
            .iter()
            .map(|l| match l {
                Listed::Value { key, .. } => key.clone(),
                Listed::Prefix(p) => format!("[{p}]"),
            })
            .collect()
    }

    /// Pages read from `store` (which holds `stored`) agree with the
    /// whole listing rolled up and cut (the way listings were made when
    /// they were gathered whole), for prefixes inside names, `/` and other
    /// delimiters, rolled-up prefixes longer than a batch, and pages of
    /// every size.
    async fn pages_agree(store: crate::store::Store, mut stored: Vec<String>) {
        use crate::service::{Limits, Recheck};
        for key in &stored {
            let key = StoreKey::new(key).unwrap();
            store.put(&key, bytes::Bytes::new()).await.unwrap();
        }
        stored.sort();
        let limits = Limits {
            in_memory: 1 << 20,
            streamed: 1 << 20,
        };
        let service = Service::new(store, 1 << 20, Recheck::Never, limits);
        for (prefix, delimiter) in [
            ("a/c", None),
            ("", None),
            ("a/", Some("/1")),
            ("a", Some("c/")),
            ("a/c/1/", Some("9")),
            ("zz", None),
            ("", Some("/")),
            ("a/", Some("/")),
            ("a/c", Some("/")),
            ("a/c/1/1", Some("/")),
        ] {
            let whole = roll_up(
                stored.iter().map(|k| (k.clone(), meta())).collect(),
                prefix,
                delimiter,
            );
            for max in [1, 3, 40, 1000] {
                let (mut got, mut after) = (Vec::new(), None::<String>);
                loop {
                    let page = service.list_page(prefix, delimiter, after.as_deref(), max);
                    let page = tokio::time::timeout(std::time::Duration::from_secs(30), page);
                    let page = page.await.expect("a page ends").unwrap();
                    let want = page_of(whole.clone(), after.as_deref(), max);
                    assert_eq!(
                        (keys(&page.entries), page.truncated),
                        (keys(&want.entries), want.truncated),
                        "{prefix:?} {delimiter:?} max {max} after {after:?}"
                    );
                    after = page.entries.last().map(|l| l.key().to_string());
                    got.extend(page.entries);
                    if !page.truncated {
                        break;
                    }
                }
                assert_eq!(keys(&got), keys(&whole), "{prefix:?} {delimiter:?}");
            }
        }
    }

    fn chunk_keys() -> Vec<String> {
        let mut stored: Vec<String> = ["a/zarr.json", "a/cx", "ab", "b/x"]
            .into_iter()
            .map(str::to_string)
            .collect();
        for row in 0..2 {
            for col in 0..150 {
                stored.push(format!("a/c/{row}/{col}"));
            }
        }
        // More than a batch of keys going on past `past("a/c/1")`.
        for n in 0..120 {
            stored.push(format!("a/c/1{}{n}", char::MAX));
        }
        stored
    }

    #[tokio::test]
    async fn pages_of_a_memory_store_agree_with_the_whole_listing() {
        let mut stored = chunk_keys();
        // A key that is also a folder, as object stores allow.
        stored.push("a/c".to_string());
        pages_agree(crate::store::Store::memory(), stored).await;
    }

    #[tokio::test]
    async fn pages_of_a_directory_store_agree_with_the_whole_listing() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::local(dir.path()).unwrap();
        pages_agree(store, chunk_keys()).await;
    }

    #[test]
    fn offsets_below_a_prefix_are_paths() {
        assert_eq!(before("a/c"), Some(format!("a/b{}", char::MAX)));
        assert_eq!(before("x/0"), Some(format!("x/.{}", char::MAX)));
        assert_eq!(before("a "), Some("a".to_string()));
        assert_eq!(before("\0"), None);
        assert_eq!(before(""), None);
    }

    #[test]
    fn prefixes_need_not_end_at_a_folder_and_delimiters_roll_up() {
        let values = || {
            ["a/zarr.json", "a/c/0/0", "a/c/0/1", "a/cx", "ab", "b/x"]
                .iter()
                .map(|k| (k.to_string(), meta()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&roll_up(values(), "a/c", Some("/"))),
            ["[a/c/]", "a/cx"]
        );
        assert_eq!(
            keys(&roll_up(values(), "a", None)),
            ["a/c/0/0", "a/c/0/1", "a/cx", "a/zarr.json", "ab"]
        );
        assert_eq!(
            keys(&roll_up(values(), "", Some("/"))),
            ["[a/]", "ab", "[b/]"]
        );
        assert_eq!(
            keys(&roll_up(values(), "a/", Some("0"))),
            ["[a/c/0]", "a/cx", "a/zarr.json"]
        );
        assert_eq!(folder_of("a/c"), "a");
        assert_eq!(folder_of("a/c/"), "a/c");
        assert_eq!(folder_of("ab"), "");
    }
}
