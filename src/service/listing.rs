//! Listings of stored values below any key prefix (not only whole
//! segments), with each value's size, version and time as served, for the
//! object-store view of the hierarchy.

use super::{Result, Service};
use crate::store::{KeyMeta, StoreError, StoreKey};

/// Values a listing without a delimiter may gather: it lists everything
/// below the prefix's folder, so it is refused where that would not fit
/// in memory (a listing by folder costs one level only).
pub const MAX_LISTED: usize = 100_000;

/// One entry of a listing, in key order.
#[derive(Debug, Clone)]
pub enum Listed {
    /// A stored value.
    Value { key: String, meta: KeyMeta },
    /// Values rolled up at the delimiter: the key up to and including it.
    Prefix(String),
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

/// Roll keys up at the first `delimiter` after `prefix`; keys sorted.
fn roll_up(values: Vec<(String, KeyMeta)>, prefix: &str, delimiter: Option<&str>) -> Vec<Listed> {
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

impl Service {
    /// What `/zarr/` serves whose key starts with `prefix`, in key order;
    /// with a delimiter, the keys that hold it after the prefix rolled up
    /// into one [`Listed::Prefix`] each. A prefix no valid key can start
    /// with lists nothing.
    pub async fn list_values(&self, prefix: &str, delimiter: Option<&str>) -> Result<Vec<Listed>> {
        let Ok(folder) = StoreKey::new(folder_of(prefix)) else {
            return Ok(Vec::new());
        };
        let below = |name: &str| {
            if folder.is_root() {
                name.to_string()
            } else {
                format!("{folder}/{name}")
            }
        };
        let values: Vec<(String, KeyMeta)> = if delimiter == Some("/") {
            // One level of the folder is all a `/` listing needs.
            let level = match self.store.list_dir_values(&folder).await {
                Ok(level) => level,
                Err(StoreError::InvalidKey { .. } | StoreError::Forbidden { .. }) => {
                    return Ok(Vec::new())
                }
                Err(e) => return Err(e.into()),
            };
            let mut values: Vec<(String, KeyMeta)> = level
                .values
                .into_iter()
                .map(|(name, meta)| (below(&name), meta))
                .collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            let mut listed = roll_up(values, prefix, delimiter);
            listed.extend(
                level
                    .prefixes
                    .iter()
                    .map(|p| format!("{}/", below(p)))
                    .filter(|p| p.starts_with(prefix))
                    .map(Listed::Prefix),
            );
            listed.sort_by(|a, b| a.key().cmp(b.key()));
            listed.dedup_by(|a, b| a.key() == b.key());
            return self.as_served(listed).await;
        } else {
            match self.store.list_values(&folder, MAX_LISTED).await {
                Ok(values) => values
                    .into_iter()
                    .map(|(k, m)| (k.as_str().to_string(), m))
                    .collect(),
                Err(StoreError::InvalidKey { .. } | StoreError::Forbidden { .. }) => {
                    return Ok(Vec::new())
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.as_served(roll_up(values, prefix, delimiter)).await
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

    fn keys(listed: &[Listed]) -> Vec<String> {
        listed
            .iter()
            .map(|l| match l {
                Listed::Value { key, .. } => key.clone(),
                Listed::Prefix(p) => format!("[{p}]"),
            })
            .collect()
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
