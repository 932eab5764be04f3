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
    assert_eq!(first_of_chunk_3().await, 7.0);
    assert_eq!(cache.stats().misses, misses + 2);
}

#[tokio::test]
async fn cached_chunks_stay_near_the_capacity() {
    let source = CachedSource(ZarrCache::new(1 << 20, Recheck::Never));
    crate::zarr::array::source::tests::holds_near(&source, 1 << 20).await;
}
