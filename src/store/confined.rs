//! A local directory that requests cannot leave. `LocalFileSystem` follows
//! symbolic links wherever they point, for reads, writes, deletes and
//! listings alike, so a link inside the served directory to `/etc` would be
//! served, written and deleted through. [`ConfinedDir`] wraps it: every
//! location is resolved link by link first, and one that leaves the root
//! (or dangles) is refused. Links that stay inside the root are followed.
//!
//! Listings are our own walk rather than `LocalFileSystem`'s, which would
//! descend into linked trees outside the root (a link to `/` would list the
//! whole machine) and report empty directories as prefixes, which an object
//! store never does. Deletes remove the directories they leave empty, so a
//! deleted node does not linger as an empty prefix.

use std::collections::HashSet;
use std::fs::Metadata;
use std::io::ErrorKind;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use super::INTERNAL_PREFIX;

/// A location that resolves outside the root through a symbolic link.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' resolves outside the store's root through a symbolic link")]
pub struct Escape(pub String);

/// A file name too long to write: `LocalFileSystem` writes `name#N` first
/// and renames it, and file systems allow 255 bytes.
#[derive(Debug, thiserror::Error)]
#[error("file names longer than {MAX_NAME} bytes cannot be written to a directory store")]
pub struct NameTooLong;

/// The longest file name a write accepts (255 less room for `#` and a counter).
pub const MAX_NAME: usize = 230;

/// A directory whose symbolic links are followed only within it.
#[derive(Debug)]
pub struct ConfinedDir {
    inner: LocalFileSystem,
    /// The root with every link resolved: what "inside" is measured against.
    root: PathBuf,
}

impl std::fmt::Display for ConfinedDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfinedDir({})", self.root.display())
    }
}

fn generic(e: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(e),
    }
}

impl ConfinedDir {
    pub fn new(dir: &std::path::Path) -> std::io::Result<Self> {
        let root = std::fs::canonicalize(dir)?;
        let inner = LocalFileSystem::new_with_prefix(&root)
            .map_err(std::io::Error::other)?
            .with_automatic_cleanup(true);
        Ok(ConfinedDir { inner, root })
    }

    /// The file a location names (links not yet resolved).
    pub fn file_path(&self, location: &Path) -> object_store::Result<PathBuf> {
        self.inner.path_to_filesystem(location)
    }

    /// Refuse `path` when a link on the way leads outside the root. Blocking.
    pub fn confine(&self, path: &std::path::Path) -> object_store::Result<()> {
        let escape = || generic(Escape(path.display().to_string()));
        let rel = path.strip_prefix(&self.root).map_err(|_| escape())?;
        let mut at = self.root.clone();
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(escape());
            };
            at.push(name);
            let meta = match std::fs::symlink_metadata(&at) {
                Ok(m) => m,
                // Nothing more exists on the way: what is created there is created inside.
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    return Ok(())
                }
                Err(e) => return Err(generic(e)),
            };
            if meta.file_type().is_symlink() {
                match std::fs::canonicalize(&at) {
                    Ok(real) if real.starts_with(&self.root) => at = real,
                    // Outside, or dangling (a write would create its target wherever it points).
                    _ => return Err(escape()),
                }
            }
        }
        Ok(())
    }

    async fn check(self: &Arc<Self>, location: &Path) -> object_store::Result<()> {
        let path = self.file_path(location)?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.confine(&path))
            .await
            .map_err(generic)?
    }

    /// The directory a listing prefix names, confined; `None` when it is not a directory.
    fn list_dir_path(&self, prefix: Option<&Path>) -> object_store::Result<Option<PathBuf>> {
        let dir = match prefix {
            Some(p) if !p.as_ref().is_empty() => {
                let dir = self.file_path(p)?;
                self.confine(&dir)?;
                dir
            }
            _ => self.root.clone(),
        };
        Ok(std::fs::metadata(&dir)
            .ok()
            .filter(Metadata::is_dir)
            .map(|_| dir))
    }

    /// What a directory entry is once links inside the root are followed;
    /// `None` for links that leave it, dangle, or loop back to a directory
    /// already walked, and for anything that is neither file nor directory.
    fn resolve(&self, path: &std::path::Path, visited: &mut HashSet<PathBuf>) -> Option<Metadata> {
        let lmeta = std::fs::symlink_metadata(path).ok()?;
        if !lmeta.file_type().is_symlink() {
            return (lmeta.is_file() || lmeta.is_dir()).then_some(lmeta);
        }
        let real = std::fs::canonicalize(path).ok()?;
        if !real.starts_with(&self.root) {
            return None;
        }
        let meta = std::fs::metadata(&real).ok()?;
        if meta.is_dir() && !visited.insert(real) {
            return None;
        }
        (meta.is_file() || meta.is_dir()).then_some(meta)
    }

    /// The location of a file below the root, `None` for names that are
    /// not UTF-8 or are `LocalFileSystem`'s in-progress uploads (`name#123`).
    fn location(&self, path: &std::path::Path) -> Option<Path> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        let parts = parts?;
        let name = parts.last()?;
        if let Some((_, suffix)) = name.rsplit_once('#') {
            if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
        }
        // The file's own name, as the key it is (see `path_of`).
        Path::parse(parts.join("/")).ok()
    }

    /// Every file below `dir`, depth first. Blocking.
    fn walk(&self, dir: PathBuf, out: &mut Vec<ObjectMeta>, visited: &mut HashSet<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if dir == self.root && entry.file_name() == INTERNAL_PREFIX {
                continue;
            }
            let Some(meta) = self.resolve(&path, visited) else {
                continue;
            };
            if meta.is_dir() {
                self.walk(path, out, visited);
            } else if let Some(location) = self.location(&path) {
                out.push(object_meta(location, &meta));
            }
        }
    }

    /// Whether any file lies below `dir` (stops at the first). Blocking.
    fn holds_files(&self, dir: &std::path::Path, visited: &mut HashSet<PathBuf>) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        let mut dirs = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            match self.resolve(&path, visited) {
                Some(m) if m.is_file() && self.location(&path).is_some() => return true,
                Some(m) if m.is_dir() => dirs.push(path),
                _ => {}
            }
        }
        dirs.iter().any(|d| self.holds_files(d, visited))
    }
}

/// Size, ETag and modification time exactly as `LocalFileSystem` reports them.
pub fn object_meta(location: Path, meta: &Metadata) -> ObjectMeta {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default();
    ObjectMeta {
        location,
        last_modified: meta
            .modified()
            .map(chrono::DateTime::<chrono::Utc>::from)
            .unwrap_or_default(),
        size: meta.len(),
        e_tag: Some(format!(
            "\"{:x}-{:x}-{:x}\"",
            meta.ino(),
            mtime.as_micros(),
            meta.len()
        )),
        version: None,
    }
}

/// The wrapper that `Store` holds: every location is confined before
/// `LocalFileSystem` sees it.
#[derive(Debug, Clone)]
pub struct Confined(pub Arc<ConfinedDir>);

impl std::fmt::Display for Confined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[async_trait]
impl ObjectStore for Confined {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if location.filename().is_some_and(|n| n.len() > MAX_NAME) {
            return Err(generic(NameTooLong));
        }
        self.0.check(location).await?;
        self.0.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.0.check(location).await?;
        self.0.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.0.check(location).await?;
        self.0.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.0.check(location).await?;
        self.0.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let dir = self.0.clone();
        let checked = locations
            .then(move |location| {
                let dir = dir.clone();
                async move {
                    let location = location?;
                    dir.check(&location).await?;
                    Ok(location)
                }
            })
            .boxed();
        self.0.inner.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (dir, prefix) = (self.0.clone(), prefix.cloned());
        futures::stream::once(async move {
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                if let Some(start) = dir.list_dir_path(prefix.as_ref())? {
                    let mut visited = HashSet::from([start.clone()]);
                    dir.walk(start, &mut out, &mut visited);
                }
                Ok::<_, object_store::Error>(out)
            })
            .await
            .map_err(generic)?
        })
        .map(|listed| match listed {
            Ok(metas) => futures::stream::iter(metas.into_iter().map(Ok)).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let (dir, prefix) = (self.0.clone(), prefix.cloned());
        tokio::task::spawn_blocking(move || {
            let mut result = ListResult {
                common_prefixes: Vec::new(),
                objects: Vec::new(),
                extensions: Default::default(),
            };
            let Some(start) = dir.list_dir_path(prefix.as_ref())? else {
                return Ok(result);
            };
            let Ok(entries) = std::fs::read_dir(&start) else {
                return Ok(result);
            };
            let mut visited = HashSet::from([start.clone()]);
            for entry in entries.flatten() {
                let path = entry.path();
                let Some(meta) = dir.resolve(&path, &mut visited) else {
                    continue;
                };
                let Some(location) = dir.location(&path) else {
                    continue;
                };
                if meta.is_file() {
                    result.objects.push(object_meta(location, &meta));
                } else if dir.holds_files(&path, &mut visited.clone()) {
                    // An empty directory is no prefix, as on object stores.
                    result.common_prefixes.push(location);
                }
            }
            result.common_prefixes.sort();
            result.objects.sort_by(|a, b| a.location.cmp(&b.location));
            Ok(result)
        })
        .await
        .map_err(generic)?
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.0.check(from).await?;
        self.0.check(to).await?;
        self.0.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.0.check(from).await?;
        self.0.check(to).await?;
        self.0.inner.rename_opts(from, to, options).await
    }
}
