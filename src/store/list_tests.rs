//! Pages of listings: the behaviour every writable backend runs (called
//! from the store conformance suite), mounts, and what directory stores
//! leave out.

use bytes::Bytes;

use crate::store::{KeyMeta, LevelEntry, Store, StoreKey};

/// Pages of a listing: keys in byte order of whole keys, strictly after
/// the offset (a key, a folder, or anything between), at most the limit,
/// whatever order the backend lists in.
pub(in crate::store) async fn pages_conform(store: &Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    // `p/a.b` sorts before `p/a/x` ('.' < '/'), `p/a0` after.
    let keys = [
        "p/a.b",
        "p/a/x",
        "p/a/y/z",
        "p/a0",
        "p/b",
        "p/c/d/e/f",
        "p/c/d0",
    ];
    for (i, key) in keys.iter().enumerate() {
        let value = Bytes::from(vec![b'v'; i + 1]);
        store.put(&k(key), value).await.unwrap();
    }
    let page = |offset: Option<String>, limit: usize| async move {
        let page = store.list_page(&k("p"), offset.as_deref(), limit).await;
        let page = page.unwrap();
        assert!(page.len() <= limit);
        for (key, meta) in &page {
            let i = keys.iter().position(|k| *k == key.as_str()).unwrap();
            assert_eq!(meta.size, i as u64 + 1, "{key}'s size");
        }
        page.into_iter()
            .map(|(key, _)| key.to_string())
            .collect::<Vec<_>>()
    };
    for limit in [1, 2, 3, 7, 100] {
        let (mut got, mut offset) = (Vec::new(), None);
        loop {
            let next = page(offset, limit).await;
            let end = next.len() < limit;
            offset = next.last().cloned();
            got.extend(next);
            if end {
                break;
            }
        }
        assert_eq!(got, keys, "pages of {limit}");
    }
    for (offset, from) in [
        ("p/a/", 1),
        ("p/a/xx", 2),
        ("p/a/z", 3),
        ("p/c/", 5),
        ("p/c/d/e/g", 6),
        ("p/", 0),
        ("o", 0),
        ("q", 7),
        // Offsets that are no valid path, or one `parse` would raise.
        ("/x", 0),
        ("p//x", 0),
        ("p/a/./x", 1),
    ] {
        let got = page(Some(offset.to_string()), 100).await;
        assert_eq!(got, keys[from..], "after {offset}");
    }
    assert!(page(None, 0).await.is_empty());
    levels_conform(store, &keys).await;
    for key in keys {
        store.delete(&k(key)).await.unwrap();
    }
}

/// Pages of one level of `pages_conform`'s keys: values and the folders
/// holding any, named relative to the level, after an offset that is a
/// whole key (an entry of an earlier page, or anything between entries).
async fn levels_conform(store: &Store, keys: &[&str]) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let level = |folder: &'static str, offset: Option<String>, limit: usize| async move {
        let folder_key = k(folder);
        let page = store.list_level_page(&folder_key, offset.as_deref(), limit);
        let page = page.await.unwrap();
        assert!(page.len() <= limit);
        for entry in &page {
            if let LevelEntry::Value(name, meta) = entry {
                let key = format!("{folder}/{name}");
                let i = keys.iter().position(|k| *k == key).unwrap();
                assert_eq!(meta.size, i as u64 + 1, "{key}'s size");
            }
        }
        page.iter()
            .map(|e| e.name().to_string())
            .collect::<Vec<_>>()
    };
    let whole = ["a.b", "a/", "a0", "b", "c/"];
    for limit in [1, 2, 3, 100] {
        let (mut got, mut offset) = (Vec::new(), None);
        loop {
            let next = level("p", offset, limit).await;
            let end = next.len() < limit;
            offset = next.last().map(|name| format!("p/{name}"));
            got.extend(next);
            if end {
                break;
            }
        }
        assert_eq!(got, whole, "level pages of {limit}");
    }
    for (offset, from) in [
        ("p/a", 0),
        ("p/a.b", 1),
        ("p/a/", 2),
        // Inside a folder: the folder comes before the offset.
        ("p/a/x", 2),
        ("p/a/y/zz", 2),
        ("p/b0", 4),
        ("p/c/", 5),
        ("o", 0),
        ("q", 5),
        ("p/", 0),
    ] {
        let got = level("p", Some(offset.to_string()), 100).await;
        assert_eq!(got, whole[from..], "level after {offset}");
    }
    assert_eq!(level("p/c", None, 100).await, ["d/", "d0"]);
    assert_eq!(level("p/c/d", None, 100).await, ["e/"]);
    assert!(level("p/nothing", None, 100).await.is_empty());
}

#[tokio::test]
async fn read_only_directory_mounts_page_in_order() {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    for row in 0..12 {
        for col in 0..12 {
            let path = dir.path().join(format!("arr/c/{row}/{col}"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
            want.push(format!("ro/arr/c/{row}/{col}"));
        }
    }
    want.sort();
    let root = Store::memory();
    // A key of the root under the mount's name is hidden by the mount.
    root.put(&k("ro/shadow"), Bytes::new()).await.unwrap();
    root.put(&k("z"), Bytes::new()).await.unwrap();
    let store = Store::local(dir.path()).unwrap();
    let mounted = Store::with_mounts(root, vec![("ro".into(), store, true)]).unwrap();
    for (prefix, limit) in [("", 1), ("", 5), ("ro", 7), ("ro/arr/c", 13)] {
        let (mut got, mut offset) = (Vec::<String>::new(), None);
        loop {
            let page = mounted
                .list_page(&k(prefix), offset.as_deref(), limit)
                .await;
            let page: Vec<String> = page
                .unwrap()
                .into_iter()
                .map(|(key, _)| key.to_string())
                .collect();
            let end = page.len() < limit;
            offset = page.last().cloned();
            got.extend(page);
            if end {
                break;
            }
        }
        let mut want = want.clone();
        if prefix.is_empty() {
            want.push("z".to_string());
        }
        assert_eq!(got, want, "{prefix:?} in pages of {limit}");
    }
}

#[tokio::test]
async fn directory_listings_hide_only_the_roots_reserved_folder_and_names_no_key_holds() {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "__zarrd/locks/x",
        "b/__zarrd",
        "c/__zarrd/x",
        "ok",
        "bs\\x",
        "d\\x/y",
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }
    let store = Store::local(dir.path()).unwrap();
    let keys = |page: Vec<(StoreKey, KeyMeta)>| {
        page.into_iter()
            .map(|(key, _)| key.to_string())
            .collect::<Vec<_>>()
    };
    let names = |level: Vec<LevelEntry>| {
        level
            .iter()
            .map(|e| e.name().to_string())
            .collect::<Vec<_>>()
    };
    let all = store.list_page(&StoreKey::root(), None, 100).await.unwrap();
    assert_eq!(keys(all), ["b/__zarrd", "c/__zarrd/x", "ok"]);
    let root = store.list_level_page(&StoreKey::root(), None, 100).await;
    assert_eq!(names(root.unwrap()), ["b/", "c/", "ok"]);
    let b = store.list_level_page(&k("b"), None, 100).await.unwrap();
    assert_eq!(names(b), ["__zarrd"]);
    let c = store.list_level_page(&k("c"), None, 100).await.unwrap();
    assert_eq!(names(c), ["__zarrd/"]);
}

#[tokio::test]
async fn a_deep_tree_is_listed_without_recursion() {
    let dir = tempfile::tempdir().unwrap();
    let deep: std::path::PathBuf = std::iter::repeat_n("d", 1900).collect();
    std::fs::create_dir_all(dir.path().join(&deep)).unwrap();
    std::fs::write(dir.path().join("x"), b"").unwrap();
    let store = Store::local(dir.path()).unwrap();
    // A folder holding only folders is no prefix: finding that out goes
    // all the way down.
    let root = store.list_level_page(&StoreKey::root(), None, 100).await;
    let root = root.unwrap();
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].name(), "x");
    assert_eq!(store.list_sizes(&StoreKey::root()).await.unwrap().len(), 1);
}
