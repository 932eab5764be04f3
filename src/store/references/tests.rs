//! Reference stores over files in a temporary folder: each key's bytes are
//! the bytes its reference names, sizes and validators follow the targets,
//! and every way a reference can be wrong is a clear error.

use bytes::Bytes;
use serde_json::json;

use crate::store::read_only::Reads;
use crate::store::{Store, StoreError, StoreKey, StoreRange};

fn key(k: &str) -> StoreKey {
    StoreKey::new(k).unwrap()
}

struct Fixture {
    dir: tempfile::TempDir,
    store: Store,
}

/// `data.bin` holds bytes 0..=255; the set sits beside it.
async fn fixture(refs: serde_json::Value, targets: &[String]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.bin"), (0..=255u8).collect::<Vec<_>>()).unwrap();
    let set = dir.path().join("refs.json");
    std::fs::write(&set, refs.to_string()).unwrap();
    let store = Store::references(set.to_str().unwrap(), targets)
        .await
        .unwrap();
    Fixture { dir, store }
}

#[tokio::test]
async fn keys_read_the_bytes_their_references_name() {
    let f = fixture(
        json!({
            ".zgroup": "{\"zarr_format\": 2}",
            "a/0": ["data.bin", 16, 8],
            "a/1": ["./data.bin", 250, 6],
            "a/whole": ["data.bin"],
            "a/b64": "base64:AQID",
            "a/empty": ["data.bin", 16, 0],
        }),
        &[],
    )
    .await;
    let s = &f.store;
    // A reference of no bytes is an empty value (not a read of an empty range).
    assert_eq!(s.get(&key("a/empty")).await.unwrap().unwrap().len(), 0);
    assert_eq!(
        s.get(&key(".zgroup")).await.unwrap().unwrap(),
        Bytes::from_static(b"{\"zarr_format\": 2}")
    );
    assert_eq!(
        s.get(&key("a/0")).await.unwrap().unwrap().to_vec(),
        (16..24u8).collect::<Vec<_>>()
    );
    assert_eq!(
        s.get(&key("a/1")).await.unwrap().unwrap().to_vec(),
        (250..=255u8).collect::<Vec<_>>()
    );
    assert_eq!(s.get(&key("a/whole")).await.unwrap().unwrap().len(), 256);
    assert_eq!(
        s.get(&key("a/b64")).await.unwrap().unwrap().to_vec(),
        vec![1, 2, 3]
    );
    assert!(s.get(&key("a/nothing")).await.unwrap().is_none());
    // Ranges are ranges within the key, not within the target.
    assert_eq!(
        s.get_range(&key("a/0"), 2..4).await.unwrap().to_vec(),
        vec![18, 19]
    );
    let parts = s.get_ranges(&key("a/0"), &[0..1, 6..8]).await.unwrap();
    assert_eq!(
        parts,
        vec![Bytes::from_static(&[16]), Bytes::from_static(&[22, 23])]
    );
    let suffix = s
        .get_with(
            &key("a/0"),
            crate::store::GetRequest {
                range: Some(StoreRange::Suffix(3)),
            },
        )
        .await
        .unwrap();
    assert_eq!(suffix.range, 5..8);
    // HEAD carries the key's exact length.
    assert_eq!(s.head(&key("a/0")).await.unwrap().unwrap().size, 8);
    assert_eq!(s.head(&key("a/whole")).await.unwrap().unwrap().size, 256);
    // Listings come from the set.
    let listing = s.list_dir(&key("a")).await.unwrap();
    assert_eq!(listing.keys, vec!["0", "1", "b64", "empty", "whole"]);
    assert_eq!(
        s.list_dir(&StoreKey::root()).await.unwrap().prefixes,
        vec!["a"]
    );
}

#[tokio::test]
async fn validators_change_with_the_target() {
    let f = fixture(json!({"k": ["data.bin", 0, 4]}), &[]).await;
    let before = f
        .store
        .head(&key("k"))
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag;
    assert!(before.is_some());
    // Not 32 hex digits, which S3 tools would check as the bytes' MD5.
    assert_eq!(before.as_deref().map(str::len), Some(40));
    assert_eq!(
        f.store
            .head(&key("k"))
            .await
            .unwrap()
            .unwrap()
            .version
            .e_tag,
        before
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(f.dir.path().join("data.bin"), vec![9u8; 300]).unwrap();
    let after = f
        .store
        .head(&key("k"))
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag;
    assert_ne!(after, before);
}

#[tokio::test]
async fn broken_references_are_clear_errors() {
    let f = fixture(
        json!({
            "missing": ["gone.nc", 0, 4],
            "short": ["data.bin", 250, 100],
            "outside": ["/etc/hostname", 0, 4],
            "upward": ["../elsewhere.bin", 0, 4],
        }),
        &[],
    )
    .await;
    let s = &f.store;
    let err = s.get(&key("missing")).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::BadReference(m) if m.contains("gone.nc") && m.contains("does not exist")),
        "{err}"
    );
    let err = s.get(&key("short")).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::BadReference(m) if m.contains("256 bytes")),
        "{err}"
    );
    let err = s.head(&key("short")).await.unwrap_err();
    assert!(matches!(&err, StoreError::BadReference(_)), "{err}");
    for k in ["outside", "upward"] {
        let err = s.get(&key(k)).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Forbidden { reason, .. } if reason.contains("targets")),
            "{k}: {err}"
        );
    }
}

#[tokio::test]
async fn allowed_locations_open_other_folders() {
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("x.bin"), b"abcdef").unwrap();
    let target = other.path().join("x.bin");
    let f = fixture(
        json!({"k": [target.to_str().unwrap(), 1, 3], "near": ["data.bin", 0, 1]}),
        &[other.path().to_str().unwrap().to_string()],
    )
    .await;
    assert_eq!(
        f.store.get(&key("k")).await.unwrap().unwrap(),
        Bytes::from_static(b"bcd")
    );
    assert!(
        matches!(
            f.store.get(&key("near")).await,
            Err(StoreError::Forbidden { .. })
        ),
        "naming locations replaces the default"
    );
}

#[tokio::test]
async fn writes_are_refused_saying_why() {
    let f = fixture(json!({"k": "v"}), &[]).await;
    assert!(f.store.is_read_only());
    let err = f
        .store
        .put(&key("k"), Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ReadOnly { what } if what.contains("references")),
        "{err}"
    );
    let err = f.store.delete(&key("k")).await.unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
}

#[tokio::test]
async fn a_malformed_set_or_a_missing_one_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("refs.json");
    std::fs::write(&set, "{\"a\": [1, 2]}").unwrap();
    let err = Store::references(set.to_str().unwrap(), &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("reference 'a'"), "{err}");
    let err = Store::references(dir.path().join("none.json").to_str().unwrap(), &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot be read"), "{err}");
}

#[tokio::test]
async fn a_range_starting_past_the_end_of_its_target_is_a_broken_reference() {
    let f = fixture(json!({"beyond": ["data.bin", 1000, 8]}), &[]).await;
    for err in [
        f.store.get(&key("beyond")).await.unwrap_err(),
        f.store.get_range(&key("beyond"), 0..4).await.unwrap_err(),
        f.store
            .get_ranges(&key("beyond"), &[0..2, 4..6])
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(&err, StoreError::BadReference(m) if m.contains("data.bin") && m.contains("256 bytes")),
            "{err}"
        );
    }
}

/// A target whose store gives no ETag (an HTTP server without them) is
/// told apart by its modification time and size: a key's validator
/// changes when either does, so a cache revalidating by it sees the change.
#[test]
fn validators_follow_targets_without_etags_by_time_and_size() {
    let refs = super::References::parse(
        json!({"version": 1, "refs": {"k": ["data.bin", 0, 4]}})
            .to_string()
            .as_bytes(),
        "file:///data/refs.json",
        &[],
    )
    .unwrap();
    let target = |seconds: i64, size: u64| object_store::ObjectMeta {
        location: object_store::path::Path::from("data/data.bin"),
        last_modified: chrono::DateTime::from_timestamp(seconds, 0).unwrap(),
        size,
        e_tag: None,
        version: None,
    };
    let tag = |t: &object_store::ObjectMeta| {
        let url = "file:///data/data.bin";
        refs.ranged_meta("k", url, 0, 4, t).unwrap().e_tag.unwrap()
    };
    let first = tag(&target(1_700_000_000, 300));
    assert_eq!(tag(&target(1_700_000_000, 300)), first);
    assert_ne!(tag(&target(1_700_000_001, 300)), first, "modified later");
    assert_ne!(tag(&target(1_700_000_000, 301)), first, "another size");
}

/// A folder of a set of many references is listed a page at a time from
/// the set's ordered index (what S3 listings with `delimiter=/` and
/// `/zarr/` folder listings read), resuming from the page's token, and the
/// whole set in key order a batch at a time: a page costs the page, not
/// the set.
#[tokio::test]
async fn listings_of_a_set_come_a_page_at_a_time_in_key_order() {
    use futures::TryStreamExt;
    use object_store::list::{PaginatedListOptions, PaginatedListStore};
    let mut refs = serde_json::Map::new();
    refs.insert(".zgroup".into(), json!("{\"zarr_format\": 2}"));
    for i in 0..2500 {
        refs.insert(format!("a/{i}"), json!(["data.bin", i % 256, 1]));
    }
    for k in ["a/sub/x", "a/sub/y", "b/.zattrs", "c"] {
        refs.insert(k.into(), json!("{}"));
    }
    let set = super::References::parse(
        json!({"version": 1, "refs": refs}).to_string().as_bytes(),
        "file:///data/refs.json",
        &[],
    )
    .unwrap();
    let page = |prefix: &'static str, token: Option<String>, offset: Option<&str>| {
        let opts = PaginatedListOptions {
            delimiter: Some("/".into()),
            max_keys: Some(1000),
            page_token: token,
            offset: offset.map(str::to_string),
            ..Default::default()
        };
        set.list_paginated(Some(prefix), opts)
    };
    let (mut names, mut token, mut pages) = (Vec::new(), None, 0);
    loop {
        let listed = page("a/", token, None).await.unwrap();
        pages += 1;
        assert!(listed.result.objects.len() + listed.result.common_prefixes.len() <= 1000);
        names.extend(listed.result.objects.iter().map(|m| m.location.to_string()));
        names.extend(
            listed
                .result
                .common_prefixes
                .iter()
                .map(|p| format!("{p}/")),
        );
        token = listed.page_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    let mut expected: Vec<String> = (0..2500).map(|i| format!("a/{i}")).collect();
    expected.push("a/sub/".into());
    names.sort();
    expected.sort();
    assert_eq!(names, expected);
    // After a key, and after a folder (past everything in it).
    let after = page("a/", None, Some("a/998")).await.unwrap();
    assert_eq!(after.result.objects[0].location.as_ref(), "a/999");
    let root = page("", None, Some("a/\u{10FFFF}")).await.unwrap();
    let folders: Vec<String> = root
        .result
        .common_prefixes
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(folders, ["b"]);
    assert_eq!(root.result.objects[0].location.as_ref(), "c");
    // The whole set in key order, from any key on.
    let all: Vec<String> = set
        .list_with_offset(None, &object_store::path::Path::from("a/999"))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all, ["a/sub/x", "a/sub/y", "b/.zattrs", "c"]);
}
