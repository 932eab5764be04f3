//! The cache's own behaviours: what it keeps, when it reloads, and its
//! byte bound.

use super::*;

#[test]
fn reads_decode_part_of_a_chunk_only_with_the_cache_off() {
    let on = CachedSource(ZarrCache::new(8 << 20, Recheck::Never));
    assert!(on.keeps(1 << 30));
    let off = CachedSource(ZarrCache::new(0, Recheck::Never));
    assert!(!off.keeps(1));
}

#[tokio::test]
async fn small_chunks_the_cache_misses_are_loaded_together_and_kept() {
    use crate::zarr::array::source::tests::array_of_chunks_in;
    use crate::zarr::Selection;
    let dir = tempfile::tempdir().unwrap();
    let array = array_of_chunks_in(Store::local(dir.path()).unwrap(), 48).await;
    // A chunk that was never written (removed) reads as the fill value.
    std::fs::remove_file(dir.path().join("a/7.0")).unwrap();
    let cache = ZarrCache::new(64 << 20, Recheck::Never);
    let source = CachedSource(cache.clone());
    assert!(source.loads_together());
    let array = array.with_source(Arc::new(source));
    // Rows 100..5000 touch chunks 0 to 39.
    let window = Selection::parse("100:5000,3:120")
        .unwrap()
        .resolve(&[128 * 48, 128])
        .unwrap();
    let read = |changed: Option<u64>| {
        let (array, window) = (array.clone(), window.clone());
        async move {
            let got = array.read(&window).await.unwrap().into_fixed().unwrap();
            for (n, row) in got.chunks_exact(117 * 4).enumerate() {
                let r = 100 + n as u64;
                let want = match r / 128 {
                    7 => 0.0,
                    c if Some(c) == changed => -1.0,
                    _ => r as f32 + 1.0,
                };
                let first = f32::from_le_bytes(row[..4].try_into().unwrap());
                let last = f32::from_le_bytes(row[row.len() - 4..].try_into().unwrap());
                assert_eq!((first, last), (want, want), "row {r}");
            }
        }
    };
    let counts = || {
        let s = cache.stats();
        (s.hits, s.misses, s.entries)
    };
    read(None).await;
    cache.chunks.run_pending_tasks().await;
    assert_eq!(counts(), (0, 40, 40), "every chunk loaded once and kept");
    read(None).await;
    assert_eq!(counts(), (40, 40, 40), "then every chunk found");
    // A write retires its chunk's entry: the next read loads it again.
    let chunk = Selection::parse("1280:1408,:")
        .unwrap()
        .resolve(&[128 * 48, 128])
        .unwrap();
    let ones = (-1.0f32).to_le_bytes().repeat(128 * 128);
    array.write(&chunk, ArrayBytes::Fixed(ones)).await.unwrap();
    read(Some(10)).await;
    assert_eq!(counts().0, 79);
    assert_eq!(counts().1, 41);
}

#[tokio::test]
async fn a_small_chunk_changed_behind_the_cache_is_reloaded_once() {
    use crate::zarr::array::source::tests::array_of_chunks_in;
    use crate::zarr::Selection;
    let dir = tempfile::tempdir().unwrap();
    let array = array_of_chunks_in(Store::local(dir.path()).unwrap(), 8).await;
    let cache = ZarrCache::new(64 << 20, Recheck::Always);
    let array = array.with_source(Arc::new(CachedSource(cache.clone())));
    let all = Selection::parse(":,:")
        .unwrap()
        .resolve(&[128 * 8, 128])
        .unwrap();
    // Files changed just now are read at every recheck until they settle
    // (`values_rewritten_within_their_etags_tick_are_seen`): these were
    // written long ago.
    let settled = |name: &str| {
        let file = std::fs::File::options()
            .write(true)
            .open(dir.path().join(name))
            .unwrap();
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        file.set_modified(long_ago).unwrap();
    };
    for c in 0..8 {
        settled(&format!("a/{c}.0"));
    }
    let first_of_chunk_3 = || {
        let array = array.clone();
        let all = all.clone();
        async move {
            let got = array.read(&all).await.unwrap().into_fixed().unwrap();
            let at = 3 * 128 * 128 * 4;
            f32::from_le_bytes(got[at..at + 4].try_into().unwrap())
        }
    };
    assert_eq!(first_of_chunk_3().await, 385.0);
    // Another process replaces chunk 3.
    let replaced = dir.path().join("a/3.0.new");
    std::fs::write(&replaced, (-1.0f32).to_le_bytes().repeat(128 * 128)).unwrap();
    std::fs::rename(&replaced, dir.path().join("a/3.0")).unwrap();
    settled("a/3.0");
    assert_eq!(first_of_chunk_3().await, -1.0);
    let misses = cache.stats().misses;
    assert_eq!(misses, 9, "eight first loads, then the changed chunk");
    // The reload was kept where the next read looks.
    assert_eq!(first_of_chunk_3().await, -1.0);
    assert_eq!(cache.stats().misses, misses);
    // A chunk removed behind the cache reads as the fill value, and
    // stays found (as missing) until it is written again.
    std::fs::remove_file(dir.path().join("a/3.0")).unwrap();
    assert_eq!(first_of_chunk_3().await, 0.0);
    assert_eq!(first_of_chunk_3().await, 0.0);
    assert_eq!(cache.stats().misses, misses + 1);
    std::fs::write(&replaced, 7.0f32.to_le_bytes().repeat(128 * 128)).unwrap();
    std::fs::rename(&replaced, dir.path().join("a/3.0")).unwrap();
    settled("a/3.0");
    assert_eq!(first_of_chunk_3().await, 7.0);
    assert_eq!(cache.stats().misses, misses + 2);
}

#[tokio::test]
async fn cached_chunks_stay_near_the_capacity() {
    let source = CachedSource(ZarrCache::new(1 << 20, Recheck::Never));
    crate::zarr::array::source::tests::holds_near(&source, 1 << 20).await;
}

#[tokio::test]
async fn a_cache_of_size_0_counts_the_chunks_reads_take_past_it() {
    use crate::zarr::Selection;
    let cache = ZarrCache::new(0, Recheck::Never);
    let misses = || cache.stats().misses;
    // Rows 100..110 of one Blosc chunk: only the blocks holding them are
    // decoded, past the cache.
    let doc = serde_json::json!({"zarr_format": 2, "shape": [512, 256], "chunks": [256, 256],
        "dtype": "<f4", "fill_value": 0, "order": "C", "filters": null,
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}});
    let meta = crate::zarr::metadata::v2::parse_array("a/.zarray", &doc, None).unwrap();
    let array = Array::new(Store::memory(), StoreKey::new("a").unwrap(), meta).unwrap();
    let all = Selection::parse(":,:")
        .unwrap()
        .resolve(&[512, 256])
        .unwrap();
    let values: Vec<u8> = (0..512 * 256u32)
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect();
    array.write(&all, ArrayBytes::Fixed(values)).await.unwrap();
    let array = array.with_source(Arc::new(CachedSource(cache.clone())));
    assert!(array.decodes_part_rows());
    let rows = Selection::parse("100:110,7")
        .unwrap()
        .resolve(&[512, 256])
        .unwrap();
    let got = array.read(&rows).await.unwrap().into_fixed().unwrap();
    let want: Vec<u8> = (100..110u32)
        .flat_map(|r| ((r * 256 + 7) as f32).to_le_bytes())
        .collect();
    assert_eq!(got, want);
    assert_eq!(misses(), 1, "the chunk decoded for part of its rows");
    // A shard's index and the four inner chunks a window crosses.
    let sharded = crate::zarr::array::source::tests::one_shard("s").await;
    let sharded = sharded.with_source(Arc::new(CachedSource(cache.clone())));
    let corner = Selection::parse("3:8,3:5")
        .unwrap()
        .resolve(&[8, 8])
        .unwrap();
    let got = sharded.read(&corner).await.unwrap().into_fixed().unwrap();
    let want: Vec<u8> = (3..8u8).flat_map(|r| [r * 8 + 3, r * 8 + 4]).collect();
    assert_eq!(got, want);
    assert_eq!(misses(), 1 + 1 + 4, "the index and four inner chunks");
}

#[tokio::test]
async fn reads_side_by_side_share_a_load_of_inner_chunks() {
    use crate::zarr::Selection;
    let cache = ZarrCache::new(64 << 20, Recheck::Never);
    let sharded = crate::zarr::array::source::tests::one_shard("t").await;
    let sharded = sharded.with_source(Arc::new(CachedSource(cache.clone())));
    let all = Selection::parse(":,:").unwrap().resolve(&[8, 8]).unwrap();
    let corner = Selection::parse("2:6,2:6")
        .unwrap()
        .resolve(&[8, 8])
        .unwrap();
    let (a, b) = futures::join!(sharded.read(&all), sharded.read(&corner));
    assert_eq!(
        a.unwrap().into_fixed().unwrap(),
        (0..64).collect::<Vec<u8>>()
    );
    let want: Vec<u8> = (2..6u8)
        .flat_map(|r| (2..6).map(move |c| r * 8 + c))
        .collect();
    assert_eq!(b.unwrap().into_fixed().unwrap(), want);
    let stats = cache.stats();
    assert_eq!(
        stats.misses,
        1 + 4,
        "the index and each inner chunk loaded once"
    );
    assert_eq!(
        stats.hits,
        1 + 4,
        "the second read found the index and waited for the chunks"
    );
    assert!(cache.inner_loads.is_empty());
}

#[tokio::test]
async fn inner_chunks_of_a_shard_without_etags_are_kept_per_index() {
    use crate::zarr::Selection;
    let cache = ZarrCache::new(64 << 20, Recheck::Never);
    let source = CachedSource(cache.clone());
    // Writes go around the cache, as a rewrite between the index's read
    // and the generation's would.
    let array = crate::zarr::array::source::tests::one_shard("n").await;
    let key = array.chunk_key(&[0, 0]).unwrap();
    let unpinned = |index: ShardIndex| Arc::new(index.pinned(None));
    let (old, _) = array.read_shard_index(&key).await.unwrap().unwrap();
    let old = unpinned(old);
    let want = |index: &ShardIndex| vec![(1, index.range(1).unwrap())];
    let first = source.inner_chunks(&array, &key, &old, &want(&old)).await;
    let row = |r: u8| (r * 8 + 4..r * 8 + 8).collect::<Vec<u8>>();
    assert_eq!(
        first.unwrap()[0].as_ref().clone().into_fixed().unwrap(),
        (0..4).flat_map(row).collect::<Vec<u8>>()
    );
    // Inner chunk 0 becomes fill (not stored), so chunk 1 moves, with new
    // values.
    let top = Selection::parse("0:4,:").unwrap().resolve(&[8, 8]).unwrap();
    let new_top: Vec<u8> = (0..32)
        .map(|i| if i % 8 < 4 { 0 } else { 200 + i })
        .collect();
    array
        .write(&top, ArrayBytes::Fixed(new_top.clone()))
        .await
        .unwrap();
    let (new, _) = array.read_shard_index(&key).await.unwrap().unwrap();
    let new = unpinned(new);
    assert_ne!(old.range(1), new.range(1), "chunk 1 moved");
    let second = source.inner_chunks(&array, &key, &new, &want(&new)).await;
    assert_eq!(
        second.unwrap()[0].as_ref().clone().into_fixed().unwrap(),
        (0..4)
            .flat_map(|r| new_top[r * 8 + 4..r * 8 + 8].to_vec())
            .collect::<Vec<u8>>(),
        "chunk 1 as the new index places it, not as the old one did"
    );
}

#[test]
fn small_and_missing_chunks_weigh_what_holding_them_costs() {
    // Four million one-byte chunks counted at 128 bytes each held five
    // times the cache's size.
    let key: Key = ("a/c/0/0".to_string(), 1, Part::Decoded);
    let missing = Entry::new(Value::Missing, None);
    assert!(missing.weight(&key) as usize >= ENTRY_OVERHEAD + key.0.len());
    let tagged = Entry::new(Value::Missing, Some("\"0123456789\"".to_string()));
    assert_eq!(tagged.weight(&key), missing.weight(&key) + 12);
}

/// A store counting the reads that return a value's bytes (not heads),
/// and the entries its listings return.
#[derive(Debug, Default)]
pub(crate) struct CountedReads {
    pub inner: object_store::memory::InMemory,
    pub reads: std::sync::atomic::AtomicUsize,
    pub listed: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Display for CountedReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CountedReads({})", self.inner)
    }
}

#[async_trait]
impl object_store::ObjectStore for CountedReads {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        if !options.head {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<
            'static,
            object_store::Result<object_store::path::Path>,
        >,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        use futures::StreamExt;
        let listed = self.listed.clone();
        self.inner
            .list(prefix)
            .inspect(move |_| {
                listed.fetch_add(1, Ordering::SeqCst);
            })
            .boxed()
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        let result = self.inner.list_with_delimiter(prefix).await?;
        self.listed.fetch_add(
            result.objects.len() + result.common_prefixes.len(),
            Ordering::SeqCst,
        );
        Ok(result)
    }

    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A v3 array's document (its shape `shape`).
fn v3_array(shape: u64) -> serde_json::Value {
    serde_json::json!({"zarr_format": 3, "node_type": "array", "shape": [shape],
        "data_type": "float32", "fill_value": 0.0, "attributes": {},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]})
}

fn shape_of(n: &Node) -> Vec<u64> {
    match &n.meta {
        NodeMetadata::Array(m) => m.shape.clone(),
        NodeMetadata::Group(_) => panic!("a group"),
    }
}

fn attrs_of(n: &Node) -> serde_json::Map<String, serde_json::Value> {
    match &n.meta {
        NodeMetadata::Array(m) => m.attributes.clone(),
        NodeMetadata::Group(g) => g.attributes.clone(),
    }
}

/// Long enough for a document to be trusted by its ETag.
async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
}

/// With `--recheck-cached always`, a cached node is rechecked by asking
/// about the documents it was found from: none is read again while all are
/// unchanged, and any change to one (a document replaced, removed, or
/// appearing where none was) reads the node again.
#[tokio::test]
async fn a_node_is_rechecked_by_the_versions_of_its_documents() {
    let counted = Arc::new(CountedReads::default());
    let store = Store::new(counted.clone(), "counted");
    let key = |k: &str| StoreKey::new(k).unwrap();
    let put = |k: &'static str, doc: serde_json::Value| {
        let store = store.clone();
        async move {
            let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap());
            store.put(&StoreKey::new(k).unwrap(), bytes).await.unwrap();
        }
    };
    let zarray = serde_json::json!({"zarr_format": 2, "shape": [4], "chunks": [2],
        "dtype": "<f4", "compressor": null, "fill_value": 0.0, "order": "C", "filters": null});
    let consolidated = |names: &[&str]| {
        let mut metadata = serde_json::Map::new();
        metadata.insert(".zgroup".into(), serde_json::json!({"zarr_format": 2}));
        for name in names {
            metadata.insert(format!("{name}/.zarray"), zarray.clone());
        }
        serde_json::json!({"zarr_consolidated_format": 1, "metadata": metadata})
    };
    put("a/zarr.json", v3_array(4)).await;
    put("b/.zarray", zarray.clone()).await;
    put("b/.zattrs", serde_json::json!({"units": "m"})).await;
    put("c/.zgroup", serde_json::json!({"zarr_format": 2})).await;
    put("c/.zmetadata", consolidated(&["x"])).await;
    put("g/x/zarr.json", v3_array(4)).await;
    put("h/y/zarr.json", v3_array(4)).await;
    settle().await;

    let hierarchy = Hierarchy::new(store.clone());
    let cache = ZarrCache::new(1 << 20, Recheck::Always);
    let reads = || counted.reads.swap(0, Ordering::SeqCst);
    let node = |path: &'static str| {
        let (cache, hierarchy) = (cache.clone(), hierarchy.clone());
        async move { cache.node(&hierarchy, &key(path)).await }
    };

    // v3: one document; rechecks read nothing while it stays.
    let first = node("a").await.unwrap();
    assert!(reads() > 0);
    for _ in 0..3 {
        assert!(Arc::ptr_eq(&node("a").await.unwrap(), &first));
    }
    assert_eq!(
        reads(),
        0,
        "an unchanged node's documents are not read again"
    );
    put("a/zarr.json", v3_array(6)).await;
    assert_eq!(shape_of(&node("a").await.unwrap()), vec![6]);
    // Just changed, it may change again within its ETag's tick: it is read
    // at every recheck until it has settled.
    reads();
    node("a").await.unwrap();
    assert!(reads() > 0, "a document changed just now is read again");

    // v2: the array's attributes are a document of their own.
    assert_eq!(attrs_of(&node("b").await.unwrap())["units"], "m");
    reads();
    node("b").await.unwrap();
    assert_eq!(reads(), 0);
    // `.zarray` wins over a `.zgroup` beside it, which is neither read
    // again on a recheck nor parsed on a read (a broken one fails neither).
    store
        .put(&key("b/.zgroup"), Bytes::from_static(b"{not json"))
        .await
        .unwrap();
    assert_eq!(shape_of(&node("b").await.unwrap()), vec![4]);
    assert_eq!(reads(), 0);
    put("b/.zattrs", serde_json::json!({"units": "km"})).await;
    assert_eq!(attrs_of(&node("b").await.unwrap())["units"], "km");
    store.delete(&key("b/.zattrs")).await.unwrap();
    assert!(attrs_of(&node("b").await.unwrap()).is_empty());
    // A v3 document appearing beside the v2 ones decides the node now.
    put("b/zarr.json", v3_array(8)).await;
    assert_eq!(shape_of(&node("b").await.unwrap()), vec![8]);
    // Gone: every document removed.
    for doc in ["b/zarr.json", "b/.zarray", "b/.zgroup"] {
        store.delete(&key(doc)).await.unwrap();
    }
    assert!(
        node("b").await.is_err(),
        "a node whose documents went is gone"
    );

    // A v2 group's consolidated metadata is one of its sources.
    let members = |n: &Node| match &n.meta {
        NodeMetadata::Group(g) => g.consolidated.as_ref().map_or(0, Vec::len),
        NodeMetadata::Array(_) => panic!("an array"),
    };
    assert_eq!(members(&node("c").await.unwrap()), 2);
    reads();
    node("c").await.unwrap();
    assert_eq!(reads(), 0);
    put("c/.zmetadata", consolidated(&["x", "y"])).await;
    assert_eq!(members(&node("c").await.unwrap()), 3);

    // An implicit group is found by listing, so it is looked up every time:
    // a document appearing, or its last child going, is seen.
    let g = node("g").await.unwrap();
    assert!(matches!(&g.meta, NodeMetadata::Group(m) if m.implicit));
    put(
        "g/zarr.json",
        serde_json::json!({"zarr_format": 3, "node_type": "group",
        "attributes": {"title": "G"}}),
    )
    .await;
    assert_eq!(attrs_of(&node("g").await.unwrap())["title"], "G");
    assert!(node("h").await.is_ok());
    store.delete(&key("h/y/zarr.json")).await.unwrap();
    assert!(
        node("h").await.is_err(),
        "an implicit group left empty is gone"
    );
}

/// The same rechecks on a directory, whose files' ETags hold their
/// modification times: a document replaced or rewritten in place is seen,
/// also when rewritten again at once (within its modification time's tick).
#[tokio::test]
async fn a_node_changed_in_a_directory_behind_the_cache_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, doc: &serde_json::Value| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec(doc).unwrap()).unwrap();
    };
    write("a/zarr.json", &v3_array(4));
    write(
        "b/.zarray",
        &serde_json::json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<f4",
            "compressor": null, "fill_value": 0.0, "order": "C", "filters": null}),
    );
    write("b/.zattrs", &serde_json::json!({"units": "m"}));
    settle().await;
    let hierarchy = Hierarchy::new(Store::local(dir.path()).unwrap());
    let cache = ZarrCache::new(1 << 20, Recheck::Always);
    let node = |path: &'static str| {
        let (cache, hierarchy) = (cache.clone(), hierarchy.clone());
        async move {
            let path = StoreKey::new(path).unwrap();
            cache.node(&hierarchy, &path).await.unwrap()
        }
    };
    assert_eq!(shape_of(&*node("a").await), vec![4]);
    // In place (same file, same size), then again straight away.
    write("a/zarr.json", &v3_array(5));
    assert_eq!(shape_of(&*node("a").await), vec![5]);
    write("a/zarr.json", &v3_array(6));
    assert_eq!(shape_of(&*node("a").await), vec![6]);
    // Replaced by a rename, as writers that never leave a file half
    // written do.
    let new = dir.path().join("a/zarr.json.new");
    std::fs::write(&new, serde_json::to_vec(&v3_array(7)).unwrap()).unwrap();
    std::fs::rename(&new, dir.path().join("a/zarr.json")).unwrap();
    assert_eq!(shape_of(&*node("a").await), vec![7]);

    assert_eq!(attrs_of(&*node("b").await)["units"], "m");
    std::fs::remove_file(dir.path().join("b/.zattrs")).unwrap();
    assert!(attrs_of(&*node("b").await).is_empty());
    write("b/.zattrs", &serde_json::json!({"units": "km"}));
    assert_eq!(attrs_of(&*node("b").await)["units"], "km");
}

/// A file rewritten in place (same inode, same size) within its
/// modification time's tick keeps its ETag, which holds those three. What
/// the cache keeps of a value changed that recently is read again at every
/// recheck until it has settled, whichever way it was kept: chunks loaded
/// together, a chunk loaded alone, a shard's index (and the inner chunks
/// read at it), a small stored value. Settled values are trusted by their
/// ETags as before.
#[tokio::test]
async fn values_rewritten_within_their_etags_tick_are_seen() {
    use crate::zarr::array::source::tests::{array_of_chunks_in, one_shard_in};
    use crate::zarr::Selection;
    use std::time::{Duration, SystemTime};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    let cache = ZarrCache::new(64 << 20, Recheck::Always);
    let source = Arc::new(CachedSource(cache.clone()));
    let path = |name: &str| dir.path().join(name);
    let mtime = |name: &str| std::fs::metadata(path(name)).unwrap().modified().unwrap();
    let touch = |name: &str, at: SystemTime| {
        let file = std::fs::File::options()
            .write(true)
            .open(path(name))
            .unwrap();
        file.set_modified(at).unwrap();
    };
    // Same inode, same size, and the modification time it had.
    let rewrite = |name: &str, bytes: &[u8]| {
        let at = mtime(name);
        assert_eq!(
            std::fs::metadata(path(name)).unwrap().len(),
            bytes.len() as u64
        );
        std::fs::write(path(name), bytes).unwrap();
        touch(name, at);
    };
    let e_tag = |name: &'static str| {
        let store = store.clone();
        async move {
            let key = StoreKey::new(name).unwrap();
            store.head(&key).await.unwrap().unwrap().version.e_tag
        }
    };
    let chunk_of = |v: f32| v.to_le_bytes().repeat(128 * 128);

    // Chunks of 64 KiB, loaded together by a read of several.
    let array = array_of_chunks_in(store.clone(), 8).await;
    let array = array.with_source(source.clone());
    let read = |select: &'static str, at: usize| {
        let array = array.clone();
        async move {
            let sel = Selection::parse(select)
                .unwrap()
                .resolve(&[128 * 8, 128])
                .unwrap();
            let got = array.read(&sel).await.unwrap().into_fixed().unwrap();
            f32::from_le_bytes(got[at * 4..at * 4 + 4].try_into().unwrap())
        }
    };
    // Each case modifies its file just before the read that keeps it, so
    // the value has not settled when it is rewritten.
    let fresh = |name: &str| touch(name, SystemTime::now());
    let chunk_3 = 3 * 128 * 128;
    fresh("a/3.0");
    assert_eq!(read(":,:", chunk_3).await, 385.0);
    let before = e_tag("a/3.0").await;
    rewrite("a/3.0", &chunk_of(-1.0));
    assert_eq!(e_tag("a/3.0").await, before, "the ETag did not change");
    assert_eq!(read(":,:", chunk_3).await, -1.0, "loaded together");
    fresh("a/3.0");
    assert_eq!(read(":,:", chunk_3).await, -1.0);
    rewrite("a/3.0", &chunk_of(-2.0));
    assert_eq!(read(":,:", chunk_3).await, -2.0, "reloaded together");
    // A chunk read alone is loaded alone.
    fresh("a/3.0");
    assert_eq!(read("384:512,:", 0).await, -2.0);
    rewrite("a/3.0", &chunk_of(-3.0));
    assert_eq!(read("384:512,:", 0).await, -3.0, "loaded alone");

    // Settled: trusted by the ETag, not read again.
    let long_ago = SystemTime::now() - Duration::from_secs(60);
    for c in 0..8 {
        touch(&format!("a/{c}.0"), long_ago);
    }
    assert_eq!(read(":,:", chunk_3).await, -3.0);
    assert_eq!(read("384:512,:", 0).await, -3.0);
    let misses = cache.stats().misses;
    assert_eq!(read(":,:", chunk_3).await, -3.0);
    assert_eq!(read("384:512,:", 0).await, -3.0);
    assert_eq!(cache.stats().misses, misses, "settled chunks are kept");

    // A shard: same index, new bytes in its first inner chunk.
    let shard = one_shard_in(store.clone(), "s")
        .await
        .with_source(source.clone());
    let whole = Selection::parse(":,:").unwrap().resolve(&[8, 8]).unwrap();
    let first = || async { shard.read(&whole).await.unwrap().into_fixed().unwrap()[0] };
    fresh("s/c/0/0");
    assert_eq!(first().await, 0);
    let mut bytes = std::fs::read(path("s/c/0/0")).unwrap();
    bytes[0] = 99;
    rewrite("s/c/0/0", &bytes);
    assert_eq!(
        first().await,
        99,
        "the inner chunk as the shard now holds it"
    );

    // A small stored value, as raw reads keep it.
    std::fs::write(path("v"), b"one").unwrap();
    fresh("v");
    let key = StoreKey::new("v").unwrap();
    let keep = || async {
        let value = store.get_versioned(&key).await.unwrap().unwrap();
        let generation = cache.read_generation(&key);
        cache
            .keep_stored(&key, generation, value.bytes, value.meta)
            .await;
    };
    keep().await;
    rewrite("v", b"two");
    assert!(
        cache.stored(&store, &key).await.unwrap().is_none(),
        "read again"
    );
    touch("v", long_ago);
    keep().await;
    let kept = cache.stored(&store, &key).await.unwrap();
    assert_eq!(kept.unwrap().0.as_ref(), b"two", "settled: kept");
}

/// Readers that share the load of a value changed just now take it as
/// loaded: it has no ETag to be trusted by yet, but it is as fresh as a
/// recheck would make it, so it is read once, not once per reader.
#[tokio::test]
async fn readers_sharing_the_load_of_a_fresh_chunk_read_it_once() {
    use crate::zarr::array::source::tests::array_of_chunks_in;
    use crate::zarr::Selection;
    let dir = tempfile::tempdir().unwrap();
    let array = array_of_chunks_in(Store::local(dir.path()).unwrap(), 8).await;
    let cache = ZarrCache::new(64 << 20, Recheck::Always);
    let array = array.with_source(Arc::new(CachedSource(cache.clone())));
    let chunk_3 = Selection::parse("384:512,:")
        .unwrap()
        .resolve(&[128 * 8, 128])
        .unwrap();
    let read = || array.read(&chunk_3);
    let (a, b, c) = tokio::join!(read(), read(), read());
    for got in [a, b, c] {
        assert_eq!(
            &got.unwrap().into_fixed().unwrap()[..4],
            &385f32.to_le_bytes()
        );
    }
    assert_eq!(cache.stats().misses, 1, "one load, shared");
    // A later read rechecks it: not settled, so it is read again.
    read().await.unwrap();
    assert_eq!(cache.stats().misses, 2);
}
