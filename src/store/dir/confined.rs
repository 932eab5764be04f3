//! A local directory that requests cannot leave. `LocalFileSystem` follows
//! symbolic links wherever they point, for reads, writes, deletes and
//! listings alike, so a link inside the served directory to `/etc` would be
//! served, written and deleted through. [`ConfinedDir`] wraps it and follows
//! no link at all below the root: a key whose path passes through one is
//! refused, and listings leave links out. (Links inside the root would
//! still let a token limited to one prefix reach another, and a delete of
//! one node reach another's files.) Reads open files with `openat2`
//! refusing links in the kernel, so a link swapped in after a check is not
//! followed either. The root itself may be a link; it is resolved once.
//! Only regular files are values: FIFOs, sockets and devices are opened
//! without waiting and read as missing. On a local file system, a path the
//! kernel has cached is opened on the calling thread with the same checks
//! ([`ConfinedDir::open_read_at_once`]).
//!
//! Listings are our own walk rather than `LocalFileSystem`'s, which would
//! descend into linked trees and report empty directories as prefixes,
//! which an object store never does. Deletes remove the directories they
//! leave empty, so a deleted node does not linger as an empty prefix.

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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

use super::walk::{self, Walk};
use crate::store::INTERNAL_PREFIX;

/// A location whose path passes through a symbolic link.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' passes through a symbolic link, which the store does not follow")]
pub struct Escape(pub String);

/// A file name `LocalFileSystem` keeps for uploads in progress (`name#123`).
#[derive(Debug, thiserror::Error)]
#[error("names ending in '#' and digits are reserved for uploads in progress on directory stores")]
pub struct UploadName;

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
    /// The root, open, for opening files beneath it without following links.
    root_dir: File,
    /// Files kept open for reads; every write here forgets what it replaces.
    pub(in crate::store) open_files: super::open_files::OpenFiles,
    /// Whether the root's file system answers opens of cached paths and
    /// `fstat` from memory (see [`ConfinedDir::open_read_at_once`]).
    in_memory_when_cached: bool,
}

/// What an attempt to do something without blocking came to.
#[derive(Debug)]
pub enum Attempt<T> {
    Done(T),
    /// It would have to wait for the disk or the network: do it on the
    /// blocking pool instead.
    WouldBlock,
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
        let root_dir = File::open(&root)?;
        // Kernels before 5.12 know no RESOLVE_CACHED (and before 5.6 no
        // openat2): asked once, so that they do not fail it on every read.
        let in_memory_when_cached = local_file_system(&root_dir)
            && open_beneath(&root_dir, std::path::Path::new("."), 0, AT_ONCE).is_ok();
        Ok(ConfinedDir {
            inner,
            root,
            root_dir,
            open_files: Default::default(),
            in_memory_when_cached,
        })
    }

    /// The file a location names (links not yet resolved).
    ///
    /// `LocalFileSystem` gets there through a `file:` URL, percent-encoding
    /// each part and decoding it again: the root joined with the location's
    /// parts as they are, at the cost of parsing a URL on every read. A
    /// location is joined directly unless the URL would make something
    /// else of it: a part that is empty, `.` or `..` (which `Path` never
    /// holds), or a `:` or `|`, which the URL reads as a Windows drive
    /// letter (`c|` becomes `c:` right below a root of `/`, and a trailing
    /// `b:` gains a slash). A test holds the two to each other byte for
    /// byte.
    pub fn file_path(&self, location: &Path) -> object_store::Result<PathBuf> {
        match self.key_path(location.as_ref()) {
            Some(path) => path,
            None => self.inner.path_to_filesystem(location),
        }
    }

    /// [`ConfinedDir::file_path`] of the location `raw` (a store key is
    /// one as it stands), without building the location; `None` when it
    /// is not a plain file path.
    pub fn key_path(&self, raw: &str) -> Option<object_store::Result<PathBuf>> {
        if raw.is_empty()
            || raw.contains([':', '|'])
            || raw.split('/').any(|p| matches!(p, "" | "." | ".."))
        {
            return None;
        }
        if raw.rsplit('/').next().is_some_and(upload_name) {
            return Some(Err(generic(UploadName)));
        }
        Some(Ok(self.root.join(raw)))
    }

    /// `path` below the root, refused when it names an upload in progress.
    fn relative<'p>(&self, path: &'p std::path::Path) -> object_store::Result<&'p std::path::Path> {
        use std::os::unix::ffi::OsStrExt;
        // What `file_path` made, `root/rest`, taken apart on its bytes
        // (`strip_prefix` compares component by component).
        let bytes = path.as_os_str().as_bytes();
        let rel = match bytes
            .strip_prefix(self.root.as_os_str().as_bytes())
            .and_then(|rest| rest.strip_prefix(b"/"))
        {
            Some(rest) if !rest.is_empty() && !rest.starts_with(b"/") => {
                std::path::Path::new(std::ffi::OsStr::from_bytes(rest))
            }
            _ => path
                .strip_prefix(&self.root)
                .map_err(|_| generic(Escape(path.display().to_string())))?,
        };
        if rel
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(upload_name)
        {
            return Err(generic(UploadName));
        }
        Ok(rel)
    }

    /// Refuse `path` when it passes through a symbolic link below the root,
    /// or names an upload in progress. Blocking.
    pub fn confine(&self, path: &std::path::Path) -> object_store::Result<()> {
        let escape = || generic(Escape(path.display().to_string()));
        let rel = self.relative(path)?;
        let mut at = self.root.clone();
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(escape());
            };
            at.push(name);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => return Err(escape()),
                Ok(_) => {}
                // Nothing more exists on the way: what is created there is created inside.
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    return Ok(())
                }
                Err(e) => return Err(generic(e)),
            }
        }
        Ok(())
    }

    /// Open the file at `path` (below the root) for reading, following no
    /// symbolic link on the way, in one step the kernel checks; `None` when
    /// it does not exist or cannot be a value. Blocking (on a lease another
    /// process holds), but not on a FIFO or a device: they are opened
    /// without waiting (a FIFO's writer might never come), and callers take
    /// only regular files as values.
    pub fn open_read(&self, path: &std::path::Path) -> object_store::Result<Option<File>> {
        let escape = || generic(Escape(path.display().to_string()));
        let rel = self.relative(path)?;
        let opened = match self.open_confined(path, rel, libc::O_NONBLOCK)? {
            // Only regular files carry leases: wait for this one to break
            // here, on the pool. A device that would block is no value.
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) && self.is_file(path, rel) => {
                self.open_confined(path, rel, 0)?
            }
            other => other,
        };
        match opened {
            Ok(f) => Ok(Some(f)),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Ok(None)
            }
            // A socket, a device without its driver, or one that would block.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENXIO | libc::ENODEV | libc::EWOULDBLOCK)
                ) =>
            {
                Ok(None)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) => Err(escape()),
            Err(e) => Err(generic(e)),
        }
    }

    /// `open_beneath` with `flags`, or on a kernel without `openat2` a
    /// check of the path and then an open of its last component that does
    /// not follow it (refusals of the check are the outer error).
    fn open_confined(
        &self,
        path: &std::path::Path,
        rel: &std::path::Path,
        flags: libc::c_int,
    ) -> object_store::Result<std::io::Result<File>> {
        Ok(match open_beneath(&self.root_dir, rel, flags, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                self.confine(path)?;
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | flags)
                    .open(path)
            }
            other => other,
        })
    }

    /// Whether `path` is a regular file, asked without opening it
    /// (`O_PATH` neither breaks leases nor opens devices).
    fn is_file(&self, path: &std::path::Path, rel: &std::path::Path) -> bool {
        match open_beneath(&self.root_dir, rel, libc::O_PATH, 0) {
            Ok(f) => f.metadata().is_ok_and(|m| m.is_file()),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
            }
            Err(_) => false,
        }
    }

    /// [`ConfinedDir::open_read`] on the calling thread, when the kernel
    /// can do it without waiting: every directory on the way is in its
    /// lookup cache (`RESOLVE_CACHED`) and on the root's own file system
    /// (`RESOLVE_NO_XDEV`), which is a local one. Opening and `fstat` then
    /// touch only memory; on a network file system either may wait on the
    /// server, so there every open goes to the pool. Only an open file and a
    /// missing one are answered here: anything else (not cached, a mount, a
    /// link, a lease to break, an old kernel) is left to `open_read`, which
    /// decides it. Like `open_read`, it opens a FIFO without waiting
    /// (`O_NONBLOCK`, which reads of regular files ignore).
    pub fn open_read_at_once(
        &self,
        path: &std::path::Path,
    ) -> object_store::Result<Attempt<Option<File>>> {
        let rel = self.relative(path)?;
        if !self.in_memory_when_cached {
            return Ok(Attempt::WouldBlock);
        }
        // O_NONBLOCK: without it, opening a FIFO waits for a writer, and
        // a file under another process's write lease (Samba, NFS
        // delegations) waits for the lease to break, up to 45 s, holding
        // the thread every other request needs.
        Ok(
            match open_beneath(&self.root_dir, rel, libc::O_NONBLOCK, AT_ONCE) {
                Ok(f) => Attempt::Done(Some(f)),
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    Attempt::Done(None)
                }
                Err(_) => Attempt::WouldBlock,
            },
        )
    }

    /// The file at `location` was (or is being) written or deleted.
    fn forget(&self, location: &Path) {
        self.open_files.forget(location.as_ref());
    }

    /// Forgets `location` when dropped: after the write, and also when the
    /// writer is cancelled (a timeout, a client gone) while the write may
    /// still land.
    fn forgetting(self: &Arc<Self>, location: &Path) -> Forget {
        Forget(self.clone(), location.clone())
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

    /// What a directory entry is: a file or a directory, never a link
    /// (links are not followed, so listings leave them out).
    fn resolve(&self, path: &std::path::Path) -> Option<Metadata> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        (meta.is_file() || meta.is_dir()).then_some(meta)
    }

    /// The location of a file below the root, `None` for names that are
    /// not UTF-8 or are `LocalFileSystem`'s in-progress uploads (`name#123`).
    fn location(&self, path: &std::path::Path) -> Option<Path> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        let parts = parts?;
        if upload_name(parts.last()?) {
            return None;
        }
        // The file's own name, as the key it is (see `path_of`).
        Path::parse(parts.join("/")).ok()
    }

    /// The files and folders directly in `dir` with their metadata: no
    /// links, not the root's reserved folder; none when it cannot be read.
    /// Blocking.
    fn entries<'a>(
        &'a self,
        dir: &'a std::path::Path,
    ) -> impl Iterator<Item = (PathBuf, Metadata)> + 'a {
        let read = std::fs::read_dir(dir).into_iter().flatten().flatten();
        read.filter(move |e| !(dir == self.root && e.file_name() == INTERNAL_PREFIX))
            .filter_map(|e| {
                let path = e.path();
                self.resolve(&path).map(|meta| (path, meta))
            })
    }

    /// Every file below `dir`, depth first. Blocking.
    fn walk(&self, dir: PathBuf, out: &mut Vec<ObjectMeta>) {
        // A stack, not recursion: a deep tree must not overflow the thread's.
        let mut dirs = vec![dir];
        while let Some(dir) = dirs.pop() {
            for (path, meta) in self.entries(&dir) {
                if meta.is_dir() {
                    dirs.push(path);
                } else if let Some(location) = self.location(&path) {
                    out.push(object_meta(location, &meta));
                }
            }
        }
    }

    /// Whether any file lies below `dir` (stops at the first) whose name
    /// is a key. Blocking.
    fn holds_files(&self, dir: &std::path::Path) -> bool {
        // The folder's own files first, then its folders, from a stack.
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            let mut below = Vec::new();
            for (path, meta) in self.entries(&dir) {
                if meta.is_dir() {
                    below.push(path);
                } else if self
                    .location(&path)
                    .is_some_and(|k| crate::store::StoreKey::new(k.as_ref()).is_ok())
                {
                    return true;
                }
            }
            dirs.extend(below.into_iter().rev());
        }
        false
    }
}

/// Files a walk reads at a time on the blocking pool.
const LIST_BATCH: usize = 1000;

/// What listings of a confined directory leave out: the server's folder
/// at the root, uploads in progress, and names that are not UTF-8 (the
/// walk leaves out links).
struct WalkRules(Arc<ConfinedDir>);

impl walk::Rules for WalkRules {
    type Meta = ObjectMeta;
    fn lists(&self, path: &std::path::Path, name: &str, dir: bool) -> bool {
        let reserved = name == INTERNAL_PREFIX && path == self.0.root;
        !reserved && (dir || !upload_name(name)) && crate::store::StoreKey::new(name).is_ok()
    }
    fn meta(&self, path: &std::path::Path, _key: &str) -> Option<ObjectMeta> {
        let meta = self.0.resolve(path)?;
        Some(object_meta(self.0.location(path)?, &meta)).filter(|_| meta.is_file())
    }
    fn holds_files(&self, path: &std::path::Path) -> bool {
        self.0.holds_files(path)
    }
}

impl ConfinedDir {
    /// Up to `limit` of the files and folders (keys ending in `/`, those
    /// holding files) directly in the folder `prefix` names, in key order,
    /// after `offset`; keys relative to the folder. Blocking.
    pub(in crate::store) fn list_level(
        self: &Arc<Self>,
        prefix: Option<&Path>,
        offset: Option<String>,
        limit: usize,
    ) -> object_store::Result<Vec<walk::Found<ObjectMeta>>> {
        let Some(start) = self.list_dir_path(prefix)? else {
            return Ok(Vec::new());
        };
        let rules = WalkRules(self.clone());
        Ok(Walk::level(rules, start, String::new(), offset).next_batch(limit))
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
        let _forget = self.0.forgetting(location);
        self.0.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.0.check(location).await?;
        // Forgotten when the upload starts; a file of the old value opened
        // before it completes may be kept (for the time-to-live, if any).
        // The server itself never writes in parts.
        self.0.forget(location);
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
                    // Also when the file is already gone (deleted by another
                    // process): a DELETE that succeeds must not leave it served.
                    dir.forget(&location);
                    Ok(location)
                }
            })
            .boxed();
        let dir = self.0.clone();
        self.0
            .inner
            .delete_stream(checked)
            .inspect(move |deleted| {
                if let Ok(location) = deleted {
                    dir.forget(location);
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (dir, prefix) = (self.0.clone(), prefix.cloned());
        futures::stream::once(async move {
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                if let Some(start) = dir.list_dir_path(prefix.as_ref())? {
                    dir.walk(start, &mut out);
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

    /// In key order, one batch of files at a time: a page of a listing
    /// reads only as far as the page.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        use futures::TryStreamExt;
        let (dir, prefix, offset) = (self.0.clone(), prefix.cloned(), offset.to_string());
        let start = async move {
            tokio::task::spawn_blocking(move || {
                let Some(start) = dir.list_dir_path(prefix.as_ref())? else {
                    return Ok(None);
                };
                let key = match &prefix {
                    Some(p) if !p.as_ref().is_empty() => format!("{p}/"),
                    _ => String::new(),
                };
                Ok(Some(Walk::new(WalkRules(dir), start, key, Some(offset))))
            })
            .await
            .map_err(generic)?
        };
        type Walking = Option<Walk<WalkRules>>;
        futures::stream::once(start)
            .map(|walk: object_store::Result<Walking>| {
                let batches = futures::stream::try_unfold(walk?, |walk: Walking| async move {
                    let Some(mut walk) = walk else {
                        return Ok(None);
                    };
                    let (batch, walk) =
                        tokio::task::spawn_blocking(move || (walk.next_batch(LIST_BATCH), walk))
                            .await
                            .map_err(generic)?;
                    let more = (batch.len() == LIST_BATCH).then_some(walk);
                    let files = batch.into_iter().filter_map(|found| match found {
                        walk::Found::File(_, meta) => Some(Ok(meta)),
                        walk::Found::Folder(_) => None,
                    });
                    let batch = futures::stream::iter(files);
                    Ok::<_, object_store::Error>(Some((batch, more)))
                });
                Ok::<_, object_store::Error>(batches.try_flatten())
            })
            .try_flatten()
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
            for (path, meta) in dir.entries(&start) {
                let Some(location) = dir.location(&path) else {
                    continue;
                };
                if meta.is_file() {
                    result.objects.push(object_meta(location, &meta));
                } else if dir.holds_files(&path) {
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
        let _forget = self.0.forgetting(to);
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
        let (_from, _to) = (self.0.forgetting(from), self.0.forgetting(to));
        self.0.inner.rename_opts(from, to, options).await
    }
}

struct Forget(Arc<ConfinedDir>, Path);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.forget(&self.1);
    }
}

/// `LocalFileSystem` writes `name#N` and renames it: such names are not keys.
fn upload_name(name: &str) -> bool {
    name.rsplit_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Resolution an open on the async thread adds: only paths the kernel has
/// looked up (`EAGAIN` otherwise), and none onto another file system.
#[cfg(target_os = "linux")]
const AT_ONCE: u64 = libc::RESOLVE_CACHED | libc::RESOLVE_NO_XDEV;
#[cfg(not(target_os = "linux"))]
const AT_ONCE: u64 = 0;

/// `openat2(root, rel, O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`:
/// the kernel refuses any symbolic link on the way (ELOOP) and any step out
/// of `root` (EXDEV), atomically with the open. `flags` and `resolve` add
/// to the open's and the resolution's flags.
#[cfg(target_os = "linux")]
fn open_beneath(
    root: &File,
    rel: &std::path::Path,
    flags: libc::c_int,
    resolve: u64,
) -> std::io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // O_NOCTTY: a terminal device among the files must not become the
    // server's controlling terminal. `openat2` refuses it (EINVAL) beside
    // `O_PATH`, which opens no device anyway.
    let noctty = if flags & libc::O_PATH == 0 {
        libc::O_NOCTTY
    } else {
        0
    };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | noctty | flags) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | resolve;
    // SAFETY: the descriptor and the NUL-terminated name outlive the call,
    // and `how` is a valid open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

#[cfg(not(target_os = "linux"))]
fn open_beneath(
    _root: &File,
    _rel: &std::path::Path,
    _flags: libc::c_int,
    _resolve: u64,
) -> std::io::Result<File> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Whether `dir` is on a disk file system of this machine (or in memory),
/// whose opens and `fstat`s of cached files do not wait; network and
/// FUSE file systems (and any not known here) are not.
#[cfg(target_os = "linux")]
fn local_file_system(dir: &File) -> bool {
    use std::os::fd::AsRawFd;
    const LOCAL: [u32; 9] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs (container layers over a local disk)
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
        0xCA45_1A4E, // bcachefs
    ];
    // SAFETY: fstatfs writes the struct it is given.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(dir.as_raw_fd(), &mut stat) } != 0 {
        return false;
    }
    // f_type is 32 or 64 bits wide, signed, by target: the magic numbers
    // are its low 32 bits.
    LOCAL.contains(&(stat.f_type as u32))
}

#[cfg(not(target_os = "linux"))]
fn local_file_system(_dir: &File) -> bool {
    false
}

/// Whether `dir` opens files on the calling thread (a local file system,
/// a kernel of 5.12 or later). Tests of that path skip where it cannot be
/// taken, unless the test script, by `ZARRD_REQUIRE_OPEN_AT_ONCE`, says
/// this machine must take it.
#[cfg(test)]
pub(in crate::store) fn opens_at_once(dir: &ConfinedDir) -> bool {
    if !dir.in_memory_when_cached {
        assert!(
            std::env::var_os("ZARRD_REQUIRE_OPEN_AT_ONCE").is_none(),
            "temporary directories here are not opened in place (not a local file system, or a kernel before 5.12)"
        );
        eprintln!("skipped: temporary directories here are not opened in place");
    }
    dir.in_memory_when_cached
}

#[cfg(test)]
#[path = "confined_tests.rs"]
mod tests;
