//! A walk of a directory tree in key order, resumable after any key: what
//! an object store's listing with a start-after offset gives, so a listing
//! of any size can be paged holding one page (and one directory's names
//! per level) at a time.
//!
//! Key order is byte order of whole keys. Ordering each directory's
//! entries by name, with a `/` after directory names, gives it: sibling
//! sort keys are never prefixes of each other in a way that matters (a
//! directory's ends in `/`, which no name holds), so every key below one
//! entry sorts before every key below the next.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// One name in a directory: a file, or a directory to descend into.
struct Entry {
    name: String,
    dir: bool,
}

impl Entry {
    /// The key (for a directory: the prefix of every key) below `parent`.
    fn key(&self, parent: &str) -> String {
        if self.dir {
            format!("{parent}{}/", self.name)
        } else {
            format!("{parent}{}", self.name)
        }
    }
}

/// One directory on the way down, with the entries still to visit.
struct Level {
    dir: PathBuf,
    /// The prefix of the keys of its entries (`a/b/`; empty at the root).
    key: String,
    entries: Arc<[Entry]>,
    next: usize,
}

/// Folders with at least this many entries are kept sorted between pages.
const KEPT_MIN: usize = 4096;
/// Bytes of names all kept folders hold together, in the whole process.
const KEPT_BYTES: usize = 32 << 20;
/// How long a kept folder is trusted while its modification time stays
/// (file systems whose times are coarse would otherwise hide a change),
/// and kept at all.
const KEPT_FOR: Duration = Duration::from_secs(30);

/// Large folders' entries, sorted, kept while the folder's modification
/// time says nothing was added, removed or renamed in it: paging through
/// a folder of a million chunks reads and sorts it once, not once a page.
/// One for the process (folders are kept by their path), bounded in bytes.
static FOLDERS: Folders = Folders {
    kept: Mutex::new(VecDeque::new()),
};

struct Folders {
    kept: Mutex<VecDeque<Kept>>,
}

struct Kept {
    dir: PathBuf,
    modified: SystemTime,
    read_at: Instant,
    entries: Arc<[Entry]>,
    bytes: usize,
}

impl Folders {
    /// `dir`'s entries in key order: kept ones, or `read` and sorted.
    fn sorted(
        &self,
        dir: &Path,
        read: impl FnOnce() -> Option<Vec<Entry>>,
    ) -> Option<Arc<[Entry]>> {
        // Taken before the read: a change after it makes the kept entries
        // look stale, never current.
        let modified = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
        {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.retain(|k| k.read_at.elapsed() < KEPT_FOR);
            if let Some(k) = kept
                .iter()
                .find(|k| k.dir == dir && Some(k.modified) == modified)
            {
                return Some(k.entries.clone());
            }
        }
        let mut entries = read()?;
        entries.sort_by_cached_key(|e| e.key(""));
        let bytes = entries
            .iter()
            .map(|e| e.name.len() + std::mem::size_of::<Entry>())
            .sum();
        let entries: Arc<[Entry]> = entries.into();
        let worth_keeping = entries.len() >= KEPT_MIN && bytes <= KEPT_BYTES;
        if let (Some(modified), true) = (modified, worth_keeping) {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.retain(|k| k.dir != dir);
            kept.push_front(Kept {
                dir: dir.to_path_buf(),
                modified,
                read_at: Instant::now(),
                entries: entries.clone(),
                bytes,
            });
            let mut total = 0;
            kept.retain(|k| {
                total += k.bytes;
                total <= KEPT_BYTES
            });
        }
        Some(entries)
    }
}

/// What a walk finds: a file (its key and metadata), or, walking one
/// level, a folder holding files (its key, ending in `/`).
pub enum Found<M> {
    File(String, M),
    Folder(String),
}

/// Which directory entries a walk leaves out, and how it reads a file's
/// metadata: the store's rules.
pub trait Rules {
    type Meta;
    /// Whether `name` in the folder `path` is listed at all (a reserved
    /// folder, an upload in progress, a name no key can hold). Judged by
    /// the path alone: large folders' entries are kept by path.
    fn lists(&self, path: &Path, name: &str, dir: bool) -> bool;
    /// The file's metadata, `None` when it is gone or not to be listed.
    fn meta(&self, path: &Path, key: &str) -> Option<Self::Meta>;
    /// Whether any file lies below the folder (an empty one is no prefix,
    /// as on object stores).
    fn holds_files(&self, path: &Path) -> bool;
}

/// Files below a directory in key order, after an offset; or, walking one
/// level, its files and folders.
pub struct Walk<R> {
    rules: R,
    stack: Vec<Level>,
    offset: Option<String>,
    descend: bool,
}

impl<R: Rules> Walk<R> {
    /// A walk of `dir`, whose keys start with `key` (`a/b/`, or empty),
    /// listing only keys after `offset`. Blocking.
    pub fn new(rules: R, dir: PathBuf, key: String, offset: Option<String>) -> Self {
        Walk::start(rules, dir, key, offset, true)
    }

    /// A walk of `dir`'s own files and of its folders (as keys ending in
    /// `/`), those after `offset`. Blocking.
    pub fn level(rules: R, dir: PathBuf, key: String, offset: Option<String>) -> Self {
        Walk::start(rules, dir, key, offset, false)
    }

    fn start(rules: R, dir: PathBuf, key: String, offset: Option<String>, descend: bool) -> Self {
        let mut walk = Walk {
            rules,
            stack: Vec::new(),
            offset,
            descend,
        };
        walk.enter(dir, key);
        walk
    }

    /// Read a directory's entries in key order, skipping those whose keys
    /// all come at or before the offset.
    fn enter(&mut self, dir: PathBuf, key: String) {
        let read = || {
            let read = std::fs::read_dir(&dir).ok()?;
            let entries = read.flatten().filter_map(|e| {
                let kind = e.file_type().ok()?;
                // Links are not followed, and nothing else is a value.
                let is_dir = match (kind.is_dir(), kind.is_file()) {
                    (true, _) => true,
                    (_, true) => false,
                    _ => return None,
                };
                let name = e.file_name().into_string().ok()?;
                self.rules
                    .lists(&dir, &name, is_dir)
                    .then_some(Entry { name, dir: is_dir })
            });
            Some(entries.collect())
        };
        let Some(entries) = FOLDERS.sorted(&dir, read) else {
            return;
        };
        let next = match &self.offset {
            Some(offset) => entries.partition_point(|e| {
                let k = e.key(&key);
                // Every key of this entry is at or before the offset (a
                // folder listed as itself is one key).
                if e.dir && self.descend {
                    !offset.starts_with(&k) && offset.as_str() > k.as_str()
                } else {
                    offset.as_str() >= k.as_str()
                }
            }),
            None => 0,
        };
        self.stack.push(Level {
            dir,
            key,
            entries,
            next,
        });
    }

    /// Up to `n` more finds, in key order; fewer only at the end. Blocking.
    pub fn next_batch(&mut self, n: usize) -> Vec<Found<R::Meta>> {
        let mut out = Vec::new();
        while out.len() < n {
            let Some(level) = self.stack.last_mut() else {
                break;
            };
            let Some(entry) = level.entries.get(level.next) else {
                self.stack.pop();
                continue;
            };
            level.next += 1;
            let (path, key) = (level.dir.join(&entry.name), entry.key(&level.key));
            // Still a folder, not a link put in its place since the
            // entries were read (they may have been kept).
            let folder = || std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            if entry.dir && self.descend {
                if folder() {
                    self.enter(path, key);
                }
            } else if entry.dir {
                if folder() && self.rules.holds_files(&path) {
                    out.push(Found::Folder(key));
                }
            } else if let Some(meta) = self.rules.meta(&path, &key) {
                out.push(Found::File(key, meta));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Clone)]
    struct All;
    impl Rules for All {
        type Meta = String;
        fn lists(&self, _: &Path, _: &str, _: bool) -> bool {
            true
        }
        fn meta(&self, _: &Path, key: &str) -> Option<String> {
            Some(key.to_string())
        }
        fn holds_files(&self, path: &Path) -> bool {
            std::fs::read_dir(path).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.path().is_file() || self.holds_files(&e.path()))
            })
        }
    }

    fn found(found: Vec<Found<String>>) -> Vec<String> {
        found
            .into_iter()
            .map(|f| match f {
                Found::File(key, _) => key,
                Found::Folder(key) => format!("[{key}]"),
            })
            .collect()
    }

    #[test]
    fn walks_in_byte_order_of_whole_keys_from_any_offset() {
        let dir = tempfile::tempdir().unwrap();
        // `a.b` sorts before `a/x` ('.' < '/'), `a0` after.
        let keys = ["a.b", "a/x", "a/y/z", "a0", "b", "c/d/e/f", "c/d0"];
        for k in keys {
            let path = dir.path().join(k);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("empty/deeper")).unwrap();
        let all = |offset: Option<&str>, batch: usize| {
            let mut walk = Walk::new(
                All,
                dir.path().to_path_buf(),
                String::new(),
                offset.map(str::to_string),
            );
            let mut got = Vec::new();
            loop {
                let b = found(walk.next_batch(batch));
                assert!(b.len() <= batch);
                if b.is_empty() {
                    return got;
                }
                got.extend(b);
            }
        };
        assert_eq!(all(None, 1000), keys);
        assert_eq!(all(None, 1), keys);
        // Offsets that are keys, between keys, folder prefixes, and past all.
        for (i, offset) in keys.iter().enumerate() {
            assert_eq!(all(Some(offset), 2), keys[i + 1..], "after {offset}");
        }
        assert_eq!(all(Some("a/"), 3), keys[1..]);
        assert_eq!(all(Some("a/xx"), 3), keys[2..]);
        assert_eq!(all(Some("a/z"), 3), keys[3..]);
        assert_eq!(all(Some("c/"), 3), keys[5..]);
        assert_eq!(all(Some("c/d/e/g"), 3), keys[6..]);
        assert_eq!(all(Some(""), 3), keys);
        assert!(all(Some("d"), 3).is_empty());
        // Below a folder, keys carry its prefix.
        let mut walk = Walk::new(
            All,
            dir.path().join("c"),
            "c/".to_string(),
            Some("c/d/e/f".to_string()),
        );
        assert_eq!(found(walk.next_batch(10)), ["c/d0"]);
        // One level: files and the folders that hold any, as themselves.
        let level = |offset: Option<&str>| {
            let root = dir.path().to_path_buf();
            let offset = offset.map(str::to_string);
            found(Walk::level(All, root, String::new(), offset).next_batch(100))
        };
        assert_eq!(level(None), ["a.b", "[a/]", "a0", "b", "[c/]"]);
        assert_eq!(level(Some("a/")), ["a0", "b", "[c/]"]);
        assert_eq!(level(Some("a/x")), ["a0", "b", "[c/]"]);
        assert_eq!(level(Some("a.b")), ["[a/]", "a0", "b", "[c/]"]);
    }

    #[test]
    fn large_folders_are_read_once_while_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..KEPT_MIN {
            std::fs::write(dir.path().join(format!("{i:05}")), b"").unwrap();
        }
        let rules = All;
        let count = || {
            let root = dir.path().to_path_buf();
            let mut walk = Walk::new(rules.clone(), root, String::new(), None);
            walk.next_batch(usize::MAX).len()
        };
        assert_eq!(count(), KEPT_MIN);
        // A file added with the folder's time put back is not seen: the
        // sorted entries were kept...
        let folder = std::fs::File::open(dir.path()).unwrap();
        let modified = folder.metadata().unwrap().modified().unwrap();
        std::fs::write(dir.path().join("new"), b"").unwrap();
        folder.set_modified(modified).unwrap();
        assert_eq!(count(), KEPT_MIN);
        // ...until the folder's time says it changed.
        std::fs::write(dir.path().join("newer"), b"").unwrap();
        assert_eq!(count(), KEPT_MIN + 2);
    }

    #[test]
    fn a_kept_folder_does_not_follow_a_link_put_in_place_of_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"").unwrap();
        for i in 0..KEPT_MIN {
            std::fs::write(dir.path().join(format!("{i:05}")), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/ok"), b"").unwrap();
        let all = || {
            let root = dir.path().to_path_buf();
            found(Walk::new(All, root, String::new(), None).next_batch(usize::MAX))
        };
        assert!(all().contains(&"sub/ok".to_string()));
        // The folder's time put back: its entries, `sub` a folder, are kept.
        let folder = std::fs::File::open(dir.path()).unwrap();
        let modified = folder.metadata().unwrap().modified().unwrap();
        std::fs::remove_dir_all(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
        folder.set_modified(modified).unwrap();
        let listed = all();
        assert_eq!(listed.len(), KEPT_MIN, "{:?}", &listed[KEPT_MIN - 1..]);
    }
}
