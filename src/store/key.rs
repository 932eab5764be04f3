//! Store keys: the only way a string from a client or a metadata document
//! becomes a location in a store. Validation here is what keeps every read and
//! write inside the store's root.

use super::StoreError;

/// A validated store key: `/`-separated segments, none empty, none `.` or `..`,
/// no NUL or control characters, no leading or trailing `/`. The empty key is
/// the root and is only valid as a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreKey(String);

impl StoreKey {
    /// Validate `key`. The empty string is the root prefix.
    pub fn new(key: &str) -> Result<Self, StoreError> {
        if key.is_empty() {
            return Ok(StoreKey(String::new()));
        }
        let invalid = |reason: &str| StoreError::InvalidKey {
            key: key.escape_default().to_string(),
            reason: reason.to_string(),
        };
        if key.len() > 4096 {
            return Err(invalid("longer than 4096 bytes"));
        }
        if key.starts_with('/') {
            return Err(invalid("absolute keys are not allowed"));
        }
        if key.chars().any(|c| c.is_control()) {
            return Err(invalid("control characters (NUL included) are not allowed"));
        }
        // Noncharacters XML cannot carry: S3 listings could not name the key.
        if key.contains(['\u{FFFE}', '\u{FFFF}']) {
            return Err(invalid(
                "the noncharacters U+FFFE and U+FFFF are not allowed",
            ));
        }
        if key.contains('\\') {
            return Err(invalid("backslashes are not allowed"));
        }
        for segment in key.split('/') {
            match segment {
                "" => return Err(invalid("empty path segment")),
                "." | ".." => return Err(invalid("'.' and '..' segments are not allowed")),
                // File systems refuse longer names; refuse them here with a clear reason.
                s if s.len() > 255 => {
                    return Err(invalid("a path segment is longer than 255 bytes"))
                }
                _ => {}
            }
        }
        Ok(StoreKey(key.to_string()))
    }

    /// The root (empty) key.
    pub fn root() -> Self {
        StoreKey(String::new())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this key is `node` or lies below it.
    pub fn is_at_or_below(&self, node: &StoreKey) -> bool {
        node.is_root()
            || self.as_str() == node.as_str()
            || self
                .as_str()
                .strip_prefix(node.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// `self/child`; `child` is validated.
    pub fn join(&self, child: &str) -> Result<Self, StoreError> {
        if self.0.is_empty() {
            StoreKey::new(child)
        } else if child.is_empty() {
            Ok(self.clone())
        } else {
            StoreKey::new(&format!("{}/{}", self.0, child))
        }
    }

    /// The parent key, `None` for the root.
    pub fn parent(&self) -> Option<StoreKey> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => StoreKey(self.0[..i].to_string()),
            None => StoreKey::root(),
        })
    }

    /// The last segment (empty for the root).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }
}

impl std::fmt::Display for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Normalize a node path as users write it (`/a/b/`, `a/b`) into a key.
pub fn node_path(path: &str) -> Result<StoreKey, StoreError> {
    StoreKey::new(path.trim_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_keys() {
        for k in ["a", "a/b", "x.zarr/c/0/0", ".zarray", "a/.zattrs", "0.0.1"] {
            assert_eq!(StoreKey::new(k).unwrap().as_str(), k);
        }
    }

    #[test]
    fn rejects_escapes() {
        for k in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "a/",
            "a/./b",
            "a\0b",
            "a\\..\\b",
            "a\nb",
            "a\u{FFFE}b",
            "a/\u{FFFF}",
        ] {
            assert!(StoreKey::new(k).is_err(), "{k:?} accepted");
        }
    }

    #[test]
    fn parent_and_name() {
        let k = StoreKey::new("a/b/c").unwrap();
        assert_eq!(k.parent().unwrap().as_str(), "a/b");
        assert_eq!(k.name(), "c");
        assert!(StoreKey::new("a").unwrap().parent().unwrap().is_root());
        assert!(StoreKey::root().parent().is_none());
    }
}
