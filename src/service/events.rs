//! Change notifications: what each write through this server changed,
//! published to whoever watches a path, and changes made elsewhere (other
//! replicas, other programs) noticed by revalidating the metadata below a
//! watched path at an interval. Publishing never waits for watchers: each
//! has a bounded buffer, and one that falls behind it is told so and
//! dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, StreamExt};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;

use super::{Result, Service};
use crate::store::StoreKey;
use crate::zarr::Resolved;

/// Changes a watcher may fall behind by before it is dropped.
pub const WATCH_BUFFER: usize = 1024;
/// Nodes one watch revalidates: past this, changes made elsewhere are not
/// looked for (writes through this server still are).
const MAX_WATCHED_NODES: usize = 1000;

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Written,
    Appended,
    Resized,
    Attributes,
    Deleted,
    /// A stored value written or deleted through `/zarr/`.
    Key,
    /// A metadata document changed by someone else (seen on revalidation).
    Metadata,
}

/// One change at a path.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Order of publication in this server (0 for changes seen elsewhere).
    pub seq: u64,
    pub path: String,
    pub kind: ChangeKind,
    /// The array's shape after the change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// The bounding box written, `[start, stop)` per dimension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<Vec<[u64; 2]>>,
    /// The commit that made it, on a versioned store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

impl Change {
    pub fn new(path: &StoreKey, kind: ChangeKind) -> Self {
        Change {
            seq: 0,
            path: path.to_string(),
            kind,
            shape: None,
            region: None,
            snapshot: None,
        }
    }

    pub fn shape(mut self, shape: &[u64]) -> Self {
        self.shape = Some(shape.to_vec());
        self
    }

    pub fn region(mut self, region: Vec<[u64; 2]>) -> Self {
        self.region = Some(region);
        self
    }

    /// Whether it happened at `path` or below it.
    pub fn under(&self, path: &StoreKey) -> bool {
        path.is_root()
            || self.path == path.as_str()
            || self
                .path
                .strip_prefix(path.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum Notice {
    Change(Arc<Change>),
    /// The watcher fell more than [`WATCH_BUFFER`] changes behind; nothing
    /// more follows.
    Dropped {
        missed: u64,
    },
}

/// The channel every write publishes to.
#[derive(Debug)]
pub struct Events {
    tx: broadcast::Sender<Arc<Change>>,
    seq: AtomicU64,
    /// Changes of a transaction, published once it commits.
    held: Mutex<Option<Vec<Change>>>,
    /// One look for changes made elsewhere at a time.
    looks: tokio::sync::Semaphore,
    /// The last look at each path watched, shared by its watchers.
    looked: Mutex<HashMap<StoreKey, (Instant, Arc<Fingerprints>)>>,
}

/// A fingerprint of each node's metadata, by path.
type Fingerprints = BTreeMap<String, String>;

impl Default for Events {
    fn default() -> Self {
        Events {
            tx: broadcast::channel(WATCH_BUFFER).0,
            seq: AtomicU64::new(0),
            held: Mutex::new(None),
            looks: tokio::sync::Semaphore::new(1),
            looked: Mutex::new(HashMap::new()),
        }
    }
}

impl Events {
    /// Events that hold changes until [`Events::release`].
    pub fn held() -> Self {
        let events = Events::default();
        *events.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
        events
    }

    pub fn publish(&self, mut change: Change) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = held.as_mut() {
            held.push(change);
            return;
        }
        change.seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        // No watcher is not an error.
        let _ = self.tx.send(Arc::new(change));
    }

    /// The held changes, for publication elsewhere.
    pub fn release(&self) -> Vec<Change> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

/// The bounding box of a selection, `[start, stop)` per dimension.
pub fn bounds(selection: &Resolved) -> Vec<[u64; 2]> {
    match selection {
        Resolved::Orthogonal(dims) => dims
            .iter()
            .map(|d| {
                let n = d.indices.len();
                if n == 0 {
                    return [0, 0];
                }
                let (a, b) = (d.indices.get(0), d.indices.get(n - 1));
                [a.min(b), a.max(b) + 1]
            })
            .collect(),
        Resolved::Points { coords } => {
            let ndim = coords.first().map_or(0, Vec::len);
            (0..ndim)
                .map(|d| {
                    let lo = coords.iter().map(|c| c[d]).min().unwrap_or(0);
                    let hi = coords.iter().map(|c| c[d]).max().map_or(0, |h| h + 1);
                    [lo, hi]
                })
                .collect()
        }
    }
}

impl Service {
    /// Publish what a write did (held until commit in a transaction).
    pub(super) fn notify(&self, change: Change) {
        self.events.publish(change);
    }

    /// Changes at or below `path`: those made through this server as they
    /// are published, and, every `interval`, changes to the metadata
    /// documents below it made elsewhere.
    pub fn watch(
        self: &Arc<Self>,
        path: &StoreKey,
        interval: Option<Duration>,
    ) -> BoxStream<'static, Notice> {
        let receiver = self.events.tx.subscribe();
        let here = {
            let path = path.clone();
            futures::stream::unfold(Some(receiver), move |rx| {
                let path = path.clone();
                async move {
                    let mut rx = rx?;
                    loop {
                        match rx.recv().await {
                            Ok(change) if change.under(&path) => {
                                return Some((Notice::Change(change), Some(rx)))
                            }
                            Ok(_) => continue,
                            Err(broadcast::error::RecvError::Lagged(missed)) => {
                                return Some((Notice::Dropped { missed }, None))
                            }
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            })
        };
        let elsewhere = match interval {
            None => futures::stream::pending().boxed(),
            Some(interval) => self.revalidated(path, interval),
        };
        // The watch ends with its own changes (after `dropped`), whatever
        // the revalidation would still find.
        let here = here.map(Some).chain(futures::stream::once(async { None }));
        futures::stream::select(here, elsewhere.map(Some))
            .take_while({
                let mut dropped = false;
                move |n| {
                    let go = n.is_some() && !dropped;
                    dropped |= matches!(n, Some(Notice::Dropped { .. }));
                    std::future::ready(go)
                }
            })
            .filter_map(std::future::ready)
            .boxed()
    }

    /// Changes to the metadata documents at or below `path` made elsewhere,
    /// looked for every `interval`: documents that appeared, changed or went
    /// away, except those of nodes this server changed meanwhile (their
    /// changes were published as they were made).
    fn revalidated(
        self: &Arc<Self>,
        path: &StoreKey,
        interval: Duration,
    ) -> BoxStream<'static, Notice> {
        let local = self.events.tx.subscribe();
        let (service, path) = (self.clone(), path.clone());
        futures::stream::unfold(
            (None, local),
            move |(seen, mut local): (Option<Arc<Fingerprints>>, _)| {
                let (service, path) = (service.clone(), path.clone());
                async move {
                    let mut seen = seen;
                    loop {
                        if seen.is_some() {
                            tokio::time::sleep(interval).await;
                        }
                        // Looks a watcher of the same path made within
                        // half an interval are as good as its own.
                        let now = service
                            .documents(&path, interval / 2)
                            .await
                            .unwrap_or_default();
                        // Nodes changed here since the last look.
                        let mut here = std::collections::HashSet::new();
                        let mut all_here = false;
                        loop {
                            match local.try_recv() {
                                Ok(change) => {
                                    here.insert(change.path.clone());
                                }
                                Err(broadcast::error::TryRecvError::Lagged(_)) => all_here = true,
                                Err(_) => break,
                            }
                        }
                        let changed: Vec<Notice> = match &seen {
                            Some(before) if !all_here => changed_documents(before, &now)
                                .into_iter()
                                .filter(|n| match n {
                                    Notice::Change(c) => !here.contains(&c.path),
                                    Notice::Dropped { .. } => true,
                                })
                                .collect(),
                            _ => Vec::new(),
                        };
                        seen = Some(now);
                        if !changed.is_empty() {
                            return Some((futures::stream::iter(changed), (seen, local)));
                        }
                    }
                }
            },
        )
        .flatten()
        .boxed()
    }

    /// A fingerprint of every node's metadata (attributes included) at or
    /// below `path` (none past [`MAX_WATCHED_NODES`]). One look at a time
    /// in this server, however many watchers there are, and watchers of
    /// one path share a look made within `fresh` of theirs: a look walks
    /// the hierarchy (its groups' listings, not its chunks), and watchers
    /// may only make it late.
    async fn documents(&self, path: &StoreKey, fresh: Duration) -> Result<Arc<Fingerprints>> {
        let _turn = self.events.looks.acquire().await;
        let shared = |now: Instant| {
            let looked = self.events.looked.lock().unwrap_or_else(|e| e.into_inner());
            looked
                .get(path)
                .filter(|(at, _)| now.duration_since(*at) < fresh)
                .map(|(_, seen)| seen.clone())
        };
        if let Some(seen) = shared(Instant::now()) {
            return Ok(seen);
        }
        let digest = |seen: String| hex::encode(&Sha256::digest(seen.as_bytes())[..16]);
        // Each node is reduced to its digest as it is read: a thousand
        // nodes' attributes are not held at once.
        let nodes = self
            .hierarchy
            .walk_with(path, MAX_WATCHED_NODES, true, &|meta| {
                digest(format!("{meta:?}"))
            })
            .await?;
        let mut out = BTreeMap::new();
        if nodes.len() <= MAX_WATCHED_NODES {
            for (node, seen) in nodes {
                let seen = seen.unwrap_or_else(|e| digest(format!("unreadable: {e}")));
                out.insert(node, seen);
            }
        }
        let out = Arc::new(out);
        let now = Instant::now();
        let mut looked = self.events.looked.lock().unwrap_or_else(|e| e.into_inner());
        // Paths no one has looked at for a while are no one's any more.
        looked.retain(|_, (at, _)| now.duration_since(*at) < FORGET_LOOKS);
        looked.insert(path.clone(), (now, out.clone()));
        Ok(out)
    }
}

/// How long a look at a path is kept for watchers that come after.
const FORGET_LOOKS: Duration = Duration::from_secs(300);

/// A change per node whose metadata appeared, changed or went away.
fn changed_documents(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Vec<Notice> {
    let node = |path: &str| StoreKey::new(path).unwrap_or_else(|_| StoreKey::root());
    let mut out = Vec::new();
    for (path, seen) in now {
        if before.get(path) != Some(seen) {
            out.push(Notice::Change(Arc::new(Change::new(
                &node(path),
                ChangeKind::Metadata,
            ))));
        }
    }
    for path in before.keys().filter(|k| !now.contains_key(*k)) {
        out.push(Notice::Change(Arc::new(Change::new(
            &node(path),
            ChangeKind::Deleted,
        ))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Recheck;
    use crate::service::Limits;
    use crate::store::Store;

    fn key(k: &str) -> StoreKey {
        StoreKey::new(k).unwrap()
    }

    #[tokio::test]
    async fn a_watcher_sees_changes_below_its_path_and_is_dropped_when_it_falls_behind() {
        let limits = Limits {
            in_memory: 1 << 20,
            streamed: 1 << 20,
        };
        let service = Arc::new(Service::new(
            Store::memory(),
            1 << 20,
            Recheck::Never,
            limits,
        ));
        let mut watch = service.watch(&key("a"), None);
        let mut everything = service.watch(&StoreKey::root(), None);
        service.notify(Change::new(&key("ab"), ChangeKind::Created));
        service.notify(Change::new(&key("a/b"), ChangeKind::Attributes));
        let Some(Notice::Change(c)) = watch.next().await else {
            panic!("no change")
        };
        assert_eq!(
            (c.path.as_str(), c.kind, c.seq),
            ("a/b", ChangeKind::Attributes, 2)
        );
        let Some(Notice::Change(c)) = everything.next().await else {
            panic!("no change")
        };
        assert_eq!(c.path, "ab", "the root's watcher sees everything");
        // More changes than its buffer holds, unread: the watcher is told and ends.
        for _ in 0..WATCH_BUFFER + 10 {
            service.notify(Change::new(&key("a"), ChangeKind::Written));
        }
        assert!(matches!(watch.next().await, Some(Notice::Dropped { missed }) if missed > 0));
        assert!(watch.next().await.is_none());
    }

    #[tokio::test]
    async fn held_changes_wait_for_their_release() {
        let events = Events::held();
        let mut rx = events.tx.subscribe();
        events.publish(Change::new(&key("a"), ChangeKind::Appended));
        assert!(rx.try_recv().is_err());
        let released = events.release();
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].kind, ChangeKind::Appended);
    }

    #[test]
    fn a_selection_is_written_as_its_bounding_box() {
        let s = crate::zarr::Selection::parse("2:5,7").unwrap();
        assert_eq!(bounds(&s.resolve(&[10, 10]).unwrap()), vec![[2, 5], [7, 8]]);
        let points = crate::zarr::Selection::parse_points("[[1,9],[4,2]]").unwrap();
        assert_eq!(
            bounds(&points.resolve(&[10, 10]).unwrap()),
            vec![[1, 5], [2, 10]]
        );
    }
}
