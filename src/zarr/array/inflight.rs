//! Loads of a shard's inner chunks in flight, shared with whoever asks for
//! one of those chunks before the load is done. Inner chunks are fetched
//! several at a time in one vectored read, so a per-key cache load cannot
//! share them; without this, two reads side by side (two slabs of one
//! stream, two viewers of one region) each fetched and decoded them.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};

use crate::zarr::buffer::ArrayBytes;
use crate::zarr::error::{Result, ZarrError};

/// One vectored read and decode of some inner chunks of a shard.
type InnerLoad =
    Shared<BoxFuture<'static, std::result::Result<Arc<Vec<Arc<ArrayBytes>>>, Arc<ZarrError>>>>;

/// An inner chunk being loaded: the load (shared by whoever waits for it),
/// the chunk's place in what it returns, and its byte range in the shard.
#[derive(Debug)]
struct Pending {
    load: InnerLoad,
    at: usize,
    range: Range<u64>,
}

/// Inner chunks being loaded, by the key their cache keeps them under.
#[derive(Debug)]
pub struct InFlight<K> {
    pending: Mutex<HashMap<K, Pending>>,
}

impl<K> Default for InFlight<K> {
    fn default() -> Self {
        InFlight {
            pending: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone> InFlight<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forget every load in flight (they finish for those already waiting).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many inner chunks are being loaded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inner chunks `wanted` (index in the shard, byte range), each named
    /// `id(index)`: what `find` has is taken, what another caller is
    /// loading is waited for, and the rest is loaded by `load` in one go
    /// and each chunk handed to `keep` before other callers stop finding it
    /// here. A chunk whose load ends between a caller's `find` and its look
    /// here is loaded again: rare, and only a cost.
    pub async fn inner_chunks<Find, Found, Keep, Kept>(
        &self,
        wanted: &[(usize, Range<u64>)],
        id: impl Fn(usize) -> K,
        find: Find,
        load: impl FnOnce(Vec<(usize, Range<u64>)>) -> BoxFuture<'static, Result<Vec<Arc<ArrayBytes>>>>,
        keep: Keep,
    ) -> Result<Vec<Arc<ArrayBytes>>>
    where
        Find: Fn(K) -> Found,
        Found: Future<Output = Option<Arc<ArrayBytes>>>,
        Keep: Fn(K, Arc<ArrayBytes>) -> Kept,
        Kept: Future<Output = ()>,
    {
        // Found ones first, without the lock: a warm read takes it not at all.
        let mut found = Vec::with_capacity(wanted.len());
        for (i, _) in wanted {
            found.push(find(id(*i)).await);
        }
        if found.iter().all(Option::is_some) {
            return Ok(found.into_iter().flatten().collect());
        }
        // Deciding what to load and registering it is one critical
        // section: reads on other threads see either this load or none.
        // (The same range too: a store without ETags gives two versions of
        // a shard one key.)
        let mut waits: Vec<(usize, InnerLoad, usize)> = Vec::new();
        let mut missing: Vec<(usize, (usize, Range<u64>))> = Vec::new();
        let own = {
            let mut pending = self.lock();
            for (slot, (i, range)) in wanted.iter().enumerate() {
                if found[slot].is_some() {
                    continue;
                }
                match pending.get(&id(*i)).filter(|p| p.range == *range) {
                    Some(p) => waits.push((slot, p.load.clone(), p.at)),
                    None => missing.push((slot, (*i, range.clone()))),
                }
            }
            (!missing.is_empty()).then(|| {
                let ranges = missing.iter().map(|(_, w)| w.clone()).collect();
                let loading: InnerLoad = load(ranges)
                    .map(|r| r.map(Arc::new).map_err(Arc::new))
                    .boxed()
                    .shared();
                for (at, (_, (i, range))) in missing.iter().enumerate() {
                    let (load, range) = (loading.clone(), range.clone());
                    pending.insert(id(*i), Pending { load, at, range });
                }
                // Until dropped (also when this read is), the entries stay.
                let registered = Registered {
                    flight: self,
                    keys: missing.iter().map(|(_, (i, _))| id(*i)).collect(),
                    load: loading.clone(),
                };
                (loading, registered)
            })
        };
        let own = async {
            let Some((loading, registered)) = own else {
                return Ok(Vec::new());
            };
            let loaded = loading.await.map_err(ZarrError::unshare)?;
            let mut got = Vec::with_capacity(missing.len());
            for ((slot, (i, _)), chunk) in missing.iter().zip(loaded.iter()) {
                keep(id(*i), chunk.clone()).await;
                got.push((*slot, chunk.clone()));
            }
            drop(registered);
            Ok::<_, ZarrError>(got)
        };
        // Each wait keeps only its own chunk of another read's load, and
        // lets go of that load as soon as it is done.
        let waited =
            futures::future::try_join_all(waits.into_iter().map(|(slot, load, at)| async move {
                let loaded = load.await.map_err(ZarrError::unshare)?;
                Ok::<_, ZarrError>((slot, loaded.get(at).cloned()))
            }));
        let (got, waited) = futures::join!(own, waited);
        for (slot, chunk) in got? {
            found[slot] = Some(chunk);
        }
        for (slot, chunk) in waited? {
            found[slot] = chunk;
        }
        found
            .into_iter()
            .map(|c| c.ok_or_else(|| ZarrError::Internal("an inner chunk was not read".into())))
            .collect()
    }
}

/// A load's entries in [`InFlight`], taken out when this is dropped: after
/// the load is kept, or with a read dropped while it waited. Entries a
/// later load put under the same keys (after [`InFlight::clear`]) stay.
struct Registered<'a, K: Hash + Eq + Clone> {
    flight: &'a InFlight<K>,
    keys: Vec<K>,
    load: InnerLoad,
}

impl<K: Hash + Eq + Clone> Drop for Registered<'_, K> {
    fn drop(&mut self) {
        let mut pending = self.flight.lock();
        for key in &self.keys {
            if pending.get(key).is_some_and(|p| p.load.ptr_eq(&self.load)) {
                pending.remove(key);
            }
        }
    }
}
