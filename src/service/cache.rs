//! The server's caches: decoded chunks (and shard indexes and inner chunks)
//! and small stored values (served by raw GETs without touching the store)
//! in one moka cache bounded in bytes, and node metadata. Entries are
//! revalidated against the store by ETag as `--recheck-cached` says.
//!
//! Invalidation bumps a per-key generation that is part of the cache key, so
//! a load that started before an invalidation inserts under the old
//! generation, where no later lookup will find it.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use moka::future::Cache;
use moka::policy::EvictionPolicy;
use serde::Serialize;

use crate::config::Recheck;
use crate::store::{Change, KeyMeta, Store, StoreError, StoreKey};
use crate::zarr::array::inflight::InFlight;
use crate::zarr::array::source::{decode_chunk, fetch_inner_chunks, load_chunks, Direct, Settle};
use crate::zarr::array::ChunkSource;
use crate::zarr::codec::ShardIndex;
use crate::zarr::{Array, ArrayBytes, Hierarchy, NodeMetadata, NodeSources, Result, ZarrError};

/// Cache key: store key, its generation, and which part of the value.
type Key = (String, u64, Part);

/// What an entry holds of the value at a store key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Part {
    /// The decoded chunk, or a shard's index.
    Decoded,
    /// One inner chunk of a shard, of the shard version whose ETag hashes
    /// to the second number (so chunks of two versions never mix).
    Inner(usize, u64),
    /// The stored bytes themselves.
    Stored,
}

/// The cache's bookkeeping of one entry beyond its key and value.
const ENTRY_OVERHEAD: usize = 640;

/// Stored values up to this size are kept for raw GETs (metadata documents,
/// small chunks); larger ones are streamed from the store every time.
pub const STORED_MAX: u64 = 64 << 10;

#[derive(Debug, Clone)]
enum Value {
    Chunk(Arc<ArrayBytes>),
    Index(Arc<ShardIndex>),
    Stored(Bytes, KeyMeta),
    Missing,
}

#[derive(Debug)]
struct Entry {
    value: Value,
    /// ETag of the stored value this was decoded from.
    e_tag: Option<String>,
    checked: Mutex<Instant>,
}

impl Entry {
    fn new(value: Value, e_tag: Option<String>) -> Arc<Self> {
        Arc::new(Entry {
            value,
            e_tag,
            checked: Mutex::new(Instant::now()),
        })
    }
    /// When this was last found to describe the stored value.
    fn checked_at(&self) -> Instant {
        *self.checked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The decoded chunk this holds (`None` for a chunk not stored).
    fn chunk(&self) -> Option<Arc<ArrayBytes>> {
        match &self.value {
            Value::Chunk(c) => Some(c.clone()),
            _ => None,
        }
    }

    /// What holding this under `key` costs: the value, the key and ETag,
    /// and the cache's own bookkeeping of an entry (measured: a cache of
    /// four million one-byte chunks held ~700 bytes of memory per entry),
    /// so small and missing chunks stay within the cache's size too.
    fn weight(&self, key: &Key) -> u32 {
        let bytes = match &self.value {
            Value::Chunk(c) => c.footprint(),
            Value::Index(i) => i.len() * 16,
            Value::Stored(b, _) => b.len(),
            Value::Missing => 0,
        };
        let held = key.0.len() + self.e_tag.as_ref().map_or(0, String::len);
        (bytes + held + ENTRY_OVERHEAD).min(u32::MAX as usize) as u32
    }
}

/// A node as the server keeps it: its metadata and, for an array, the
/// runtime array bound to the store with its codec chain built.
#[derive(Debug)]
pub struct Node {
    pub meta: NodeMetadata,
    pub array: Option<Array>,
    /// Why an array's data cannot be read: a codec zarrd does not
    /// implement. Its metadata is still the node's (described, listed,
    /// consolidated); only its data is refused.
    pub undecodable: Option<Arc<ZarrError>>,
}

impl Node {
    fn bind(hierarchy: &Hierarchy, path: &StoreKey, meta: NodeMetadata) -> Result<Self> {
        let (array, undecodable) = match &meta {
            NodeMetadata::Array(m) => match hierarchy.bind(path, (**m).clone()) {
                Ok(array) => (Some(array), None),
                Err(e @ ZarrError::UnsupportedCodec { .. }) => (None, Some(Arc::new(e))),
                Err(e) => return Err(e),
            },
            NodeMetadata::Group(_) => (None, None),
        };
        Ok(Node {
            meta,
            array,
            undecodable,
        })
    }
}

/// Counters shown at `/api/v1/stats`.
#[derive(Debug, Default)]
pub struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub revalidations: AtomicU64,
    pub evictions: AtomicU64,
}

/// A snapshot of the cache for `/api/v1/stats`.
#[derive(Debug, Serialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub revalidations: u64,
    pub evictions: u64,
    pub entries: u64,
    pub weighted_bytes: u64,
    pub capacity_bytes: u64,
}

/// Decoded chunks and metadata, shared by every request.
#[derive(Debug)]
pub struct ZarrCache {
    chunks: Cache<Key, Arc<Entry>>,
    metadata: Cache<String, Arc<CachedNode>>,
    generations: RwLock<HashMap<String, u64>>,
    /// Per path, how many keys at or below it were invalidated: what a
    /// value derived from a whole subtree (a thumbnail) is checked against.
    below: RwLock<HashMap<String, u64>>,
    recheck: Recheck,
    capacity: u64,
    settle: Settle,
    counters: Arc<Counters>,
    /// Inner chunks being loaded, shared by the reads that want them.
    inner_loads: InFlight<Key>,
}

impl ZarrCache {
    pub fn new(capacity: u64, recheck: Recheck) -> Arc<Self> {
        let counters = Arc::new(Counters::default());
        let evictions = counters.clone();
        let chunks = Cache::builder()
            .max_capacity(capacity)
            .weigher(|k: &Key, v: &Arc<Entry>| v.weight(k))
            // LRU, so a cold chunk is always admitted (TinyLFU may refuse it).
            .eviction_policy(EvictionPolicy::lru())
            .eviction_listener(move |_k, _v, cause| {
                if cause.was_evicted() {
                    evictions.evictions.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build();
        let metadata = Cache::builder().max_capacity(100_000).build();
        Arc::new(ZarrCache {
            chunks,
            metadata,
            generations: RwLock::new(HashMap::new()),
            below: RwLock::new(HashMap::new()),
            recheck,
            capacity,
            settle: Settle::new(capacity),
            counters,
            inner_loads: InFlight::default(),
        })
    }

    /// The generation of a key: the sum of the counters of the key and of
    /// every prefix above it, so invalidating a node (its path) also retires
    /// every chunk below it. Counters only grow, so a sum never repeats.
    fn generation(&self, key: &str) -> u64 {
        let Ok(g) = self.generations.read() else {
            return 0;
        };
        if g.is_empty() {
            return 0;
        }
        let mut sum = g.get("").copied().unwrap_or(0) + g.get(key).copied().unwrap_or(0);
        for (i, _) in key.match_indices('/') {
            sum += g.get(&key[..i]).copied().unwrap_or(0);
        }
        sum
    }
    /// Forget everything cached for a store key (a chunk, or a shard and its inner chunks).
    pub fn invalidate_key(&self, key: &str) {
        if let Ok(mut g) = self.generations.write() {
            *g.entry(key.to_string()).or_insert(0) += 1;
        }
        if let Ok(mut b) = self.below.write() {
            *b.entry(String::new()).or_insert(0) += 1;
            for (i, _) in key.match_indices('/') {
                *b.entry(key[..i].to_string()).or_insert(0) += 1;
            }
            if !key.is_empty() {
                *b.entry(key.to_string()).or_insert(0) += 1;
            }
        }
    }

    /// How cached values are revalidated (`--recheck-cached`).
    pub fn recheck(&self) -> Recheck {
        self.recheck
    }

    /// A number that changes whenever anything at, above or below `path` is
    /// invalidated: a value computed from the subtree at `path` is current
    /// while this stays the same (and the recheck policy trusts it).
    pub fn subtree_version(&self, path: &StoreKey) -> u64 {
        let below = self
            .below
            .read()
            .ok()
            .and_then(|b| b.get(path.as_str()).copied())
            .unwrap_or(0);
        self.generation(path.as_str()) + below
    }

    /// Forget cached metadata of the node at `path` and every decoded chunk below it.
    pub async fn invalidate_node(&self, path: &str) {
        self.invalidate_key(path);
        self.metadata.invalidate(path).await;
    }

    /// Forget all cached metadata (after deletes of whole subtrees).
    pub fn invalidate_all_metadata(&self) {
        self.metadata.invalidate_all();
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            revalidations: c.revalidations.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            entries: self.chunks.entry_count(),
            weighted_bytes: self.chunks.weighted_size(),
            capacity_bytes: self.capacity,
        }
    }

    /// Whether an entry last checked at `checked` is to be checked again
    /// by a call that began at `began`. One loaded or checked since the
    /// call began is as fresh as a check would make it: readers that
    /// shared a load, or found what another read just kept, take it as it
    /// is (a value changed too recently to be trusted by its ETag would
    /// otherwise be read again by each of them).
    fn due(&self, checked: Instant, began: Instant) -> bool {
        if checked >= began {
            return false;
        }
        match self.recheck {
            Recheck::Never => false,
            Recheck::Always => true,
            Recheck::After(d) => checked.elapsed() >= d,
        }
    }

    /// Whether a cached entry for `key` still describes the stored value.
    async fn still_valid(
        &self,
        store: &Store,
        key: &StoreKey,
        entry: &Entry,
        began: Instant,
    ) -> std::result::Result<bool, StoreError> {
        if !self.due(entry.checked_at(), began) {
            return Ok(true);
        }
        let valid = self.revalidate(store, &[(key, entry)]).await?;
        Ok(valid.first().copied().unwrap_or(false))
    }

    /// Ask the store whether each entry due for a recheck still describes
    /// its key's value, all at once ([`Store::changed_since_many`]); the
    /// valid are marked checked now, the others' keys invalidated.
    async fn revalidate(
        &self,
        store: &Store,
        due: &[(&StoreKey, &Entry)],
    ) -> std::result::Result<Vec<bool>, StoreError> {
        // What to ask: a missing chunk stays valid while it is missing; a
        // value without an ETag cannot be revalidated.
        let mut asks = Vec::with_capacity(due.len());
        for (key, entry) in due {
            match (&entry.value, &entry.e_tag) {
                (Value::Missing, _) => asks.push(((*key).clone(), None)),
                (_, Some(e_tag)) => asks.push(((*key).clone(), Some(e_tag.clone()))),
                (_, None) => {}
            }
        }
        self.counters
            .revalidations
            .fetch_add(due.len() as u64, Ordering::Relaxed);
        let mut answers = store.changed_since_many(&asks).await?.into_iter();
        let now = Instant::now();
        let mut valid = Vec::with_capacity(due.len());
        for (key, entry) in due {
            let still = match (&entry.value, &entry.e_tag) {
                (Value::Missing, _) => matches!(answers.next(), Some(Change::Missing)),
                (_, Some(_)) => matches!(answers.next(), Some(Change::Unchanged)),
                (_, None) => false,
            };
            if still {
                *entry.checked.lock().unwrap_or_else(|p| p.into_inner()) = now;
            } else {
                self.invalidate_key(key.as_str());
            }
            valid.push(still);
        }
        Ok(valid)
    }

    /// Look up or load one entry; concurrent misses for one key load once.
    async fn get_or_load<F>(
        &self,
        array: &Array,
        key: &StoreKey,
        part: Part,
        load: impl Fn() -> F,
    ) -> Result<Arc<Entry>>
    where
        F: std::future::Future<Output = Result<Arc<Entry>>>,
    {
        let began = Instant::now();
        for _ in 0..2 {
            let cache_key = (
                key.as_str().to_string(),
                self.generation(key.as_str()),
                part,
            );
            // A hit takes the key by reference: no future to build and no
            // key to clone.
            if let Some(found) = self.chunks.get(&cache_key).await {
                match self.valid(array.store(), key, part, found, began).await? {
                    Some(entry) => return Ok(entry),
                    None => continue,
                }
            }
            let loaded = std::sync::atomic::AtomicBool::new(false);
            let entry = self
                .chunks
                .try_get_with(cache_key.clone(), async {
                    loaded.store(true, Ordering::Relaxed);
                    load().await
                })
                .await
                .map_err(ZarrError::unshare)?;
            if loaded.load(Ordering::Relaxed) {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                // One entry that fills much of the cache would evict
                // everything else, and moka evicts lazily: such an entry is
                // shared by the waiters of this load, then dropped.
                let weight = entry.weight(&cache_key);
                if !self.holds(weight) {
                    self.chunks.invalidate(&cache_key).await;
                } else {
                    let weight = u64::from(weight);
                    self.settle.inserted(&self.chunks, weight).await;
                }
                return Ok(entry);
            }
            if let Some(entry) = self.valid(array.store(), key, part, entry, began).await? {
                return Ok(entry);
            }
        }
        load().await
    }

    /// A cached entry, counted as a hit, when it is still valid.
    async fn valid(
        &self,
        store: &Store,
        key: &StoreKey,
        part: Part,
        entry: Arc<Entry>,
        began: Instant,
    ) -> Result<Option<Arc<Entry>>> {
        // Inner chunks are validated through their shard's index.
        let inner = matches!(part, Part::Inner(..));
        if inner || self.still_valid(store, key, &entry, began).await? {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(entry));
        }
        Ok(None)
    }

    /// Decoded chunks at `keys`: the valid cached ones, and the others
    /// loaded together ([`load_chunks`]) and kept. Entries due for a
    /// recheck are revalidated together. Unlike
    /// [`ZarrCache::get_or_load`], two reads missing the same chunk at once
    /// both load it: the price of loading small chunks in groups.
    async fn chunks_together(
        &self,
        array: &Array,
        keys: &[StoreKey],
    ) -> Result<Vec<Option<Arc<ArrayBytes>>>> {
        let began = Instant::now();
        let store = array.store();
        let mut found = Vec::with_capacity(keys.len());
        let mut due = Vec::new();
        let mut missing = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            // The generation before the read: a write meanwhile retires
            // what this read keeps.
            let cache_key = (
                key.as_str().to_string(),
                self.generation(key.as_str()),
                Part::Decoded,
            );
            match self.chunks.get(&cache_key).await {
                Some(entry) if self.due(entry.checked_at(), began) => {
                    found.push(None);
                    due.push((i, entry));
                }
                Some(entry) => {
                    self.counters.hits.fetch_add(1, Ordering::Relaxed);
                    found.push(Some(entry.chunk()));
                }
                None => {
                    found.push(None);
                    missing.push((i, cache_key));
                }
            }
        }
        let checks: Vec<_> = due.iter().map(|(i, e)| (&keys[*i], e.as_ref())).collect();
        let valid = self.revalidate(store, &checks).await?;
        for ((i, entry), valid) in due.into_iter().zip(valid) {
            if valid {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                found[i] = Some(entry.chunk());
            } else {
                // The failed check retired the old generation: the reload
                // is kept under the new one.
                let key = keys[i].as_str();
                missing.push((i, (key.to_string(), self.generation(key), Part::Decoded)));
            }
        }
        if !missing.is_empty() {
            let missing_keys: Vec<StoreKey> =
                missing.iter().map(|(i, _)| keys[*i].clone()).collect();
            let loaded = load_chunks(array, &missing_keys).await?;
            self.counters
                .misses
                .fetch_add(missing.len() as u64, Ordering::Relaxed);
            for ((i, cache_key), loaded) in missing.into_iter().zip(loaded) {
                let entry = match loaded {
                    Some((chunk, e_tag)) => Entry::new(Value::Chunk(chunk), e_tag),
                    None => Entry::new(Value::Missing, None),
                };
                found[i] = Some(entry.chunk());
                self.keep(cache_key, entry).await;
            }
        }
        Ok(found.into_iter().map(Option::flatten).collect())
    }

    /// Keep a loaded entry, when one of its weight is kept at all.
    async fn keep(&self, cache_key: Key, entry: Arc<Entry>) {
        let weight = entry.weight(&cache_key);
        if self.holds(weight) {
            self.chunks.insert(cache_key, entry).await;
            self.settle.inserted(&self.chunks, u64::from(weight)).await;
        }
    }

    /// Whether an entry of `weight` is kept once loaded.
    fn holds(&self, weight: u32) -> bool {
        u64::from(weight) <= self.capacity / 8 && self.capacity > 0
    }

    /// The generation a read of `key` starts at; pass it to
    /// [`ZarrCache::keep_stored`] so that a value read before a write
    /// invalidated the key is never found afterwards.
    pub fn read_generation(&self, key: &StoreKey) -> u64 {
        self.generation(key.as_str())
    }

    /// A small stored value and its metadata when cached and still valid by
    /// the recheck policy; `None` when it has to be read from the store.
    pub async fn stored(
        &self,
        store: &Store,
        key: &StoreKey,
    ) -> std::result::Result<Option<(Bytes, KeyMeta)>, StoreError> {
        let cache_key = (
            key.as_str().to_string(),
            self.generation(key.as_str()),
            Part::Stored,
        );
        let Some(entry) = self.chunks.get(&cache_key).await else {
            return Ok(None);
        };
        let Value::Stored(bytes, meta) = &entry.value else {
            return Ok(None);
        };
        if !self.still_valid(store, key, &entry, Instant::now()).await? {
            return Ok(None);
        }
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some((bytes.clone(), meta.clone())))
    }

    /// Keep a stored value that was just read whole (values over
    /// [`STORED_MAX`] are not kept), under the generation its read began at.
    pub async fn keep_stored(&self, key: &StoreKey, generation: u64, bytes: Bytes, meta: KeyMeta) {
        if bytes.len() as u64 > STORED_MAX || self.capacity == 0 {
            return;
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let e_tag = meta.trusted_e_tag();
        let entry = Entry::new(Value::Stored(bytes, meta), e_tag);
        self.keep((key.as_str().to_string(), generation, Part::Stored), entry)
            .await;
    }

    /// The node at `path` with, for an array, its runtime array (codec
    /// chain built once), cached as the recheck policy allows. A recheck
    /// asks the store whether the documents the node was found from are
    /// unchanged (opening each, reading none) and reads them again only
    /// when one is not; a read that finds the same metadata keeps the
    /// runtime array it has.
    pub async fn node(&self, hierarchy: &Hierarchy, path: &StoreKey) -> Result<Arc<Node>> {
        let began = Instant::now();
        let cached = self.metadata.get(path.as_str()).await;
        if let Some(cached) = &cached {
            if !self.due(cached.checked_at(), began) {
                return Ok(cached.node.clone());
            }
            if let Some(sources) = &cached.sources {
                if unchanged(hierarchy.store(), sources).await? {
                    cached.checked_now();
                    return Ok(cached.node.clone());
                }
            }
        }
        let (meta, sources) = hierarchy.node_with_sources(path).await?;
        let node = match cached {
            Some(cached) if cached.node.meta == meta => cached.node.clone(),
            _ => Arc::new(Node::bind(hierarchy, path, meta)?),
        };
        let kept = Arc::new(CachedNode {
            node: node.clone(),
            sources,
            checked: Mutex::new(Instant::now()),
        });
        self.metadata.insert(path.as_str().to_string(), kept).await;
        Ok(node)
    }
}

/// A cached node, the documents it was found from, and when they were last
/// found unchanged.
#[derive(Debug)]
struct CachedNode {
    node: Arc<Node>,
    sources: Option<NodeSources>,
    checked: Mutex<Instant>,
}

impl CachedNode {
    fn checked_at(&self) -> Instant {
        *self.checked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn checked_now(&self) {
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

/// Whether every document a node was found from is as it was: each one
/// found still has its ETag, and each one missing is still missing.
async fn unchanged(store: &Store, sources: &NodeSources) -> std::result::Result<bool, StoreError> {
    let answers = store.changed_since_many(sources).await?;
    Ok(answers.len() == sources.len()
        && sources.iter().zip(&answers).all(|((_, e_tag), answer)| {
            matches!(
                (e_tag, answer),
                (Some(_), Change::Unchanged) | (None, Change::Missing)
            )
        }))
}

/// The cache as the engine's chunk source.
#[derive(Debug, Clone)]
pub struct CachedSource(pub Arc<ZarrCache>);

#[async_trait]
impl ChunkSource for CachedSource {
    async fn chunk(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ArrayBytes>>> {
        if self.0.capacity == 0 {
            // Nothing is kept: a cache lookup and insert per chunk buys nothing.
            self.0.counters.misses.fetch_add(1, Ordering::Relaxed);
            return Direct.chunk(array, key).await;
        }
        let entry = self
            .0
            .get_or_load(array, key, Part::Decoded, || async {
                Ok(match array.store().get_versioned(key).await? {
                    Some(v) => Entry::new(
                        Value::Chunk(decode_chunk(array, key, v.bytes).await?),
                        v.meta.trusted_e_tag(),
                    ),
                    None => Entry::new(Value::Missing, None),
                })
            })
            .await?;
        Ok(entry.chunk())
    }

    async fn chunks(
        &self,
        array: &Array,
        keys: &[StoreKey],
    ) -> Result<Vec<Option<Arc<ArrayBytes>>>> {
        if self.0.capacity == 0 {
            let n = keys.len() as u64;
            self.0.counters.misses.fetch_add(n, Ordering::Relaxed);
            return Direct.chunks(array, keys).await;
        }
        self.0.chunks_together(array, keys).await
    }

    fn loads_together(&self) -> bool {
        true
    }

    async fn shard_index(&self, array: &Array, key: &StoreKey) -> Result<Option<Arc<ShardIndex>>> {
        if self.0.capacity == 0 {
            self.0.counters.misses.fetch_add(1, Ordering::Relaxed);
            return Direct.shard_index(array, key).await;
        }
        let entry = self
            .0
            .get_or_load(array, key, Part::Decoded, || async {
                // One read gives the index and the version it belongs to
                // (the store answers a suffix with the value's size and
                // ETag, and asks for the size first where it has no suffix
                // ranges): a rewrite meanwhile makes the entry look stale,
                // never current.
                match array.read_shard_index(key).await {
                    // The index keeps the ETag its inner chunks are read
                    // at; the entry is revalidated by it only once the
                    // shard has settled.
                    Ok(Some((index, meta))) => {
                        let e_tag = index.e_tag().map(str::to_string).filter(|_| meta.settled());
                        Ok(Entry::new(Value::Index(Arc::new(index)), e_tag))
                    }
                    // Deleted between the size and the range, where a store
                    // reads them apart.
                    Ok(None) | Err(ZarrError::Store(StoreError::NotFound { .. })) => {
                        Ok(Entry::new(Value::Missing, None))
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(match &entry.value {
            Value::Index(i) => Some(i.clone()),
            _ => None,
        })
    }

    async fn inner_chunks(
        &self,
        array: &Array,
        key: &StoreKey,
        index: &Arc<ShardIndex>,
        wanted: &[(usize, Range<u64>)],
    ) -> Result<Vec<Arc<ArrayBytes>>> {
        // Inner chunks not cached yet are fetched together in one vectored
        // read, which reads wanting them meanwhile wait for.
        let cache = &self.0;
        let gen = cache.generation(key.as_str());
        // Keyed by the index's version, not only the generation: that is
        // read after the index, so a write in between would otherwise keep
        // chunks read at the old index's ranges under the new generation.
        let version = index.version();
        let id = |i: usize| (key.as_str().to_string(), gen, Part::Inner(i, version));
        let find = |k: Key| async move {
            let entry = cache.chunks.get(&k).await?;
            match &entry.value {
                Value::Chunk(c) => Some(c.clone()),
                _ => None,
            }
        };
        let keep = |k: Key, chunk: Arc<ArrayBytes>| async move {
            cache.keep(k, Entry::new(Value::Chunk(chunk), None)).await;
        };
        let loaded = AtomicU64::new(0);
        let (array, key, index) = (array.clone(), key.clone(), index.clone());
        let load = |ranges: Vec<(usize, Range<u64>)>| {
            loaded.store(ranges.len() as u64, Ordering::Relaxed);
            let misses = &cache.counters.misses;
            misses.fetch_add(ranges.len() as u64, Ordering::Relaxed);
            futures::FutureExt::boxed(async move {
                fetch_inner_chunks(&array, &key, &index, &ranges).await
            })
        };
        let chunks = cache
            .inner_loads
            .inner_chunks(wanted, id, find, load, keep)
            .await?;
        // Chunks another read was loading count as found (a cache that
        // keeps nothing finds nothing: they were misses of that read).
        let others = wanted.len() as u64 - loaded.load(Ordering::Relaxed);
        let counter = if cache.capacity > 0 {
            &cache.counters.hits
        } else {
            &cache.counters.misses
        };
        counter.fetch_add(others, Ordering::Relaxed);
        Ok(chunks)
    }

    fn invalidate(&self, key: &StoreKey) {
        self.0.invalidate_key(key.as_str());
    }

    fn keeps(&self, _bytes: usize) -> bool {
        // Even chunks too large to keep are loaded through the cache: it
        // shares one load among concurrent readers and remembers chunks
        // that are not stored.
        self.0.capacity > 0
    }

    fn read_past(&self, chunks: usize) {
        self.0
            .counters
            .misses
            .fetch_add(chunks as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
pub(super) mod tests;
