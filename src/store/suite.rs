//! The store suite: named behaviours, each a function every backend's
//! test calls for what the backend supports (as object_store's
//! `integration.rs` does). Each takes a store holding `a/b` = "0123456789"
//! and `a/c/d` = "x" ([`filled`]).

use bytes::Bytes;

use super::*;

/// What a backend cannot do, declared by each backend's test.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lacks {
    /// No listings (plain HTTP servers have none).
    pub listing: bool,
    /// No writes (zip files, HTTP, reference sets, read-only mounts, tags).
    pub writes: bool,
}

/// The keys the suite reads: `value` holds "0123456789" and `small` "x",
/// both below `folder`, whose one level lists `level` (values, folders)
/// and which holds `below` values in all;
/// `missing` is not there and `new` is written. `documents` are put first
/// (the metadata a store of Zarr keys needs above them).
#[derive(Debug)]
pub struct Keys {
    pub value: &'static str,
    pub small: &'static str,
    pub missing: &'static str,
    pub new: &'static str,
    pub folder: &'static str,
    pub level: (&'static [&'static str], &'static [&'static str]),
    /// How many values lie below `folder`, at any depth.
    pub below: usize,
    pub documents: &'static [(&'static str, &'static [u8])],
}

/// Keys of any store.
pub const PLAIN: Keys = Keys {
    value: "a/b",
    small: "a/c/d",
    missing: "a/nope",
    new: "new",
    folder: "a",
    level: (&["b"], &["c"]),
    below: 2,
    documents: &[],
};

/// Keys of a store that holds Zarr keys only (Icechunk): chunks of a 1-D
/// array `a` in a root group.
#[cfg(feature = "icechunk")]
pub const ZARR: Keys = Keys {
    value: "a/c/0",
    small: "a/c/1",
    missing: "a/c/9",
    new: "a/c/2",
    folder: "a",
    level: (&["zarr.json"], &["c"]),
    below: 3,
    documents: &[
        ("zarr.json", br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#),
        ("a/zarr.json", br#"{"zarr_format":3,"node_type":"array","shape":[100],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[10]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}]}"#),
    ],
};

/// Keys of a Parquet reference set: chunks of a Zarr v2 array `a`.
#[cfg(feature = "parquet")]
pub const PARQUET: Keys = Keys {
    value: "a/0",
    small: "a/1",
    missing: "a/9",
    new: "a/2",
    folder: "a",
    level: (&[".zarray", "0", "1"], &[]),
    below: 3,
    documents: &[],
};

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Writable backends lack nothing.
pub const WRITABLE: Lacks = Lacks {
    listing: false,
    writes: false,
};

/// Every read behaviour, in order: what read-only backends run whole.
pub async fn reads(store: &Store, keys: &Keys, lacks: Lacks) {
    whole_values_and_misses(store, keys).await;
    several_values_in_order(store, keys).await;
    several_values_within_a_budget(store, keys).await;
    changes_since_versions(store, keys).await;
    ranges_and_suffixes(store, keys).await;
    ranges_pinned_to_a_version(store, keys).await;
    streamed_ranges(store, keys).await;
    reserved_folder_refused_on_reads(store, keys).await;
    if !lacks.listing {
        one_level_listing(store, keys).await;
    }
    if lacks.writes {
        writes_refused(store, keys).await;
    }
}

/// Whole values, and misses as `None`.
pub async fn whole_values_and_misses(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert_eq!(
        store.get(&k(keys.value)).await.unwrap().unwrap(),
        &b"0123456789"[..]
    );
    assert!(store.get(&k(keys.missing)).await.unwrap().is_none());
    assert!(store.head(&k(keys.missing)).await.unwrap().is_none());
}

/// Several values at once, in the order asked, misses as `None`, each with the version a single read reports.
pub async fn several_values_in_order(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let many = store
        .get_many(
            &[k(keys.small), k(keys.missing), k(keys.value), k(keys.small)],
            u64::MAX,
        )
        .await
        .unwrap();
    // each with the version a single read reports
    let single = store.get_versioned(&k(keys.value)).await.unwrap().unwrap();
    assert_eq!(many[2].as_ref().unwrap().meta.version, single.meta.version);
    assert_eq!(
        bytes_of(many),
        vec![
            Some(Bytes::from_static(b"x")),
            None,
            Some(Bytes::from_static(b"0123456789")),
            Some(Bytes::from_static(b"x")),
        ]
    );
}

/// Several values stop once past a byte budget, at least one value answered, the rest left for the next call.
pub async fn several_values_within_a_budget(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let asks = [
        k(keys.value),
        k(keys.missing),
        k(keys.small),
        k(keys.value),
        k(keys.value),
        k(keys.value),
    ];
    let all = bytes_of(store.get_many(&asks, u64::MAX).await.unwrap());
    assert_eq!(all.len(), asks.len());
    let some = bytes_of(store.get_many(&asks, 0).await.unwrap());
    assert!(
        (1..asks.len()).contains(&some.len()),
        "{} values",
        some.len()
    );
    let rest = bytes_of(store.get_many(&asks[some.len()..], 0).await.unwrap());
    assert_eq!(&all[..some.len()], &some[..]);
    assert_eq!(&all[some.len()..][..rest.len()], &rest[..]);
    assert!(store.get_many(&[], 0).await.unwrap().is_empty());
    assert!(matches!(
        store
            .get_many(&[k(keys.value), k("__zarrd/locks/x")], u64::MAX)
            .await,
        Err(StoreError::InvalidKey { .. })
    ));
}

/// Whether values changed since a version, several at once.
pub async fn changes_since_versions(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let now = store.head(&k(keys.value)).await.unwrap().unwrap();
    let e_tag = now.version.e_tag.clone();
    if e_tag.is_some() {
        let asks = [
            (k(keys.value), e_tag.clone()),
            (k(keys.value), Some("\"other\"".to_string())),
            (k(keys.missing), None),
            (k(keys.value), None),
            (k(keys.missing), e_tag),
        ];
        let changes = store.changed_since_many(&asks).await.unwrap();
        assert!(
            matches!(
                &changes[..],
                [
                    Change::Unchanged,
                    Change::Changed(m),
                    Change::Missing,
                    Change::Changed(_),
                    Change::Missing
                ] if m.version == now.version
            ),
            "{changes:?}"
        );
    }
    assert!(store.changed_since_many(&[]).await.unwrap().is_empty());
}

/// Ranges, suffixes and vectored ranges.
pub async fn ranges_and_suffixes(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert_eq!(
        store.get_range(&k(keys.value), 2..5).await.unwrap(),
        &b"234"[..]
    );
    let (suffix, meta) = store.get_suffix(&k(keys.value), 3).await.unwrap().unwrap();
    assert_eq!((suffix.as_ref(), meta.size), (&b"789"[..], 10));
    let head = store.head(&k(keys.value)).await.unwrap().unwrap();
    assert_eq!(
        meta.version, head.version,
        "a suffix says which version it is of"
    );
    let (all, _) = store.get_suffix(&k(keys.value), 30).await.unwrap().unwrap();
    assert_eq!(all.as_ref(), &b"0123456789"[..]);
    assert!(store
        .get_suffix(&k(keys.missing), 3)
        .await
        .unwrap()
        .is_none());
    let parts = store
        .get_ranges(&k(keys.value), &[0..1, 8..10])
        .await
        .unwrap();
    assert_eq!(
        parts,
        vec![Bytes::from_static(b"0"), Bytes::from_static(b"89")]
    );
}

/// Ranges pinned to the ETag a head reported, refused for another.
pub async fn ranges_pinned_to_a_version(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let head = store.head(&k(keys.value)).await.unwrap().unwrap();
    assert_eq!(head.size, 10);
    let etag = head.version.e_tag.clone().expect("backends report ETags");
    let pinned = store
        .get_ranges_at(&k(keys.value), &[3..6, 9..10], Some(&etag))
        .await;
    assert_eq!(
        pinned.unwrap(),
        vec![Bytes::from_static(b"345"), Bytes::from_static(b"9")]
    );
    let stale = store
        .get_ranges_at(&k(keys.value), &[3..6, 9..10], Some("\"not-the-version\""))
        .await;
    assert!(
        matches!(stale, Err(StoreError::Precondition { .. })),
        "{stale:?}"
    );
}

/// Streamed reads of a suffix agree with `head`.
pub async fn streamed_ranges(store: &Store, keys: &Keys) {
    let (got, body) = read_all(store, keys.value, Some(StoreRange::Suffix(4)))
        .await
        .unwrap();
    assert_eq!((body.as_slice(), got.range), (&b"6789"[..], 6..10));
}

/// The server's own folder is refused on reads too.
pub async fn reserved_folder_refused_on_reads(store: &Store, _: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert!(matches!(
        store.get(&k("__zarrd/locks/x")).await,
        Err(StoreError::InvalidKey { .. })
    ));
}

/// One level of a folder: its values and its folders.
pub async fn one_level_listing(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let level = store.list_dir(&k(keys.folder)).await.unwrap();
    let (values, folders) = keys.level;
    assert_eq!(
        (level.keys, level.prefixes),
        (strings(values), strings(folders))
    );
    assert_eq!(
        store.list_sizes(&k(keys.folder)).await.unwrap().len(),
        keys.below
    );
}

/// A read-only store refuses writes, saying so.
pub async fn writes_refused(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert!(matches!(
        store.put(&k(keys.new), Bytes::from_static(b"v")).await,
        Err(StoreError::ReadOnly { .. }) | Err(StoreError::NotSupported { .. })
    ));
}

/// `store` holding what the suite reads.
pub async fn filled(store: Store) -> Store {
    filled_with(store, &PLAIN).await
}

/// `store` holding what the suite reads under `keys`.
pub async fn filled_with(store: Store, keys: &Keys) -> Store {
    let k = |s: &str| StoreKey::new(s).unwrap();
    for (key, value) in keys.documents {
        store.put(&k(key), Bytes::from_static(value)).await.unwrap();
    }
    store
        .put(&k(keys.value), Bytes::from_static(b"0123456789"))
        .await
        .unwrap();
    store
        .put(&k(keys.small), Bytes::from_static(b"x"))
        .await
        .unwrap();
    store
}

/// The values of a [`Store::get_many`] answer.
pub fn bytes_of(values: Vec<Option<Versioned>>) -> Vec<Option<Bytes>> {
    values.into_iter().map(|v| v.map(|v| v.bytes)).collect()
}

pub async fn read_all(
    store: &Store,
    key: &str,
    range: Option<StoreRange>,
) -> Result<(GetResponse, Vec<u8>), StoreError> {
    let key = StoreKey::new(key).unwrap();
    let mut got = store.get_with(&key, GetRequest { range }).await?;
    let mut body = Vec::new();
    while let Some(part) = futures::StreamExt::next(&mut got.body).await {
        body.extend_from_slice(&part?);
    }
    Ok((got, body))
}

/// Every behaviour of a writable backend, on an empty `store`: the reads,
/// then what only writable stores show.
pub async fn writable(store: Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert!(store.get(&k("a/b")).await.unwrap().is_none());
    assert!(store.head(&k("a/b")).await.unwrap().is_none());
    let store = filled(store).await;
    reserved_folder_hidden(&store).await;
    reads(&store, &PLAIN, WRITABLE).await;
    versions_of_what_is_stored(&store).await;
    listings_in_key_order(&store).await;
    create_only_puts(&store, &PLAIN).await;
    overwrites_and_deletes(&store).await;
}

/// The server's own folder exists (lock files are made beside the
/// store), but no operation through the store reaches it.
pub async fn reserved_folder_hidden(store: &Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    store
        .backend()
        .put(
            &path_of(&k("__zarrd/locks/x")),
            Bytes::from_static(b"").into(),
        )
        .await
        .unwrap();
    for refused in [
        store.put(&k("__zarrd/locks/x"), Bytes::new()).await.err(),
        store.get(&k("__zarrd/locks/x")).await.err(),
        store.delete(&k("__zarrd/locks/x")).await.err(),
    ] {
        assert!(
            matches!(refused, Some(StoreError::InvalidKey { .. })),
            "{refused:?}"
        );
    }
}

/// A suffix longer than the value is the value; streamed reads agree with
/// `head`; whether a value changed since its version.
pub async fn versions_of_what_is_stored(store: &Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let (all, _) = store.get_suffix(&k("a/b"), 30).await.unwrap().unwrap();
    assert_eq!(all.len(), 10);
    let head = store.head(&k("a/b")).await.unwrap().unwrap();
    assert_eq!(head.size, 10);
    let etag = head.version.e_tag.clone().expect("backends report ETags");
    streamed_reads(store, &head).await;
    assert!(matches!(
        store.changed_since(&k("a/b"), &etag).await.unwrap(),
        Change::Unchanged
    ));
    assert!(matches!(
        store.changed_since(&k("nope"), &etag).await.unwrap(),
        Change::Missing
    ));
}

/// Listings of a level and of everything below, in key order, and pages.
pub async fn listings_in_key_order(store: &Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let root = store.list_dir(&StoreKey::root()).await.unwrap();
    assert_eq!(
        root.prefixes,
        vec!["a".to_string()],
        "internal prefix must be hidden"
    );
    let all = store.list_recursive(&k("a")).await.unwrap();
    assert_eq!(all, vec![k("a/b"), k("a/c/d")]);
    super::list::tests::pages_conform(store).await;
}

/// Create-only puts refuse an existing key.
pub async fn create_only_puts(store: &Store, keys: &Keys) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let err = store
        .put_with(&k(keys.value), Bytes::new(), PutCondition::Create)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    store
        .put_with(&k(keys.new), Bytes::from_static(b"1"), PutCondition::Create)
        .await
        .unwrap();
}

/// An overwrite changes the version; deletes of prefixes and of keys that
/// are not there.
pub async fn overwrites_and_deletes(store: &Store) {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let etag = store
        .head(&k("a/b"))
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag
        .expect("backends report ETags");
    store
        .put(&k("a/b"), Bytes::from_static(b"changed!!!!"))
        .await
        .unwrap();
    assert!(matches!(
        store.changed_since(&k("a/b"), &etag).await.unwrap(),
        Change::Changed(_)
    ));
    assert_eq!(store.delete_prefix(&k("a")).await.unwrap(), 2);
    assert!(store.get(&k("a/c/d")).await.unwrap().is_none());
    store.delete(&k("never-there")).await.unwrap();
}

/// Streamed reads (what raw GETs use) agree with `head` on the version and
/// with each other on ranges, on every backend.
pub async fn streamed_reads(store: &Store, head: &KeyMeta) {
    let (got, body) = read_all(store, "a/b", None).await.unwrap();
    assert_eq!(body, b"0123456789");
    assert_eq!(
        got.meta.version, head.version,
        "streamed read and head disagree on the version"
    );
    assert_eq!(
        got.meta.last_modified.seconds(),
        head.last_modified.seconds()
    );
    let versioned = store
        .get_versioned(&StoreKey::new("a/b").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(versioned.meta.version, head.version);
    for (range, want, span) in [
        (StoreRange::Bounded(2..5), &b"234"[..], 2..5),
        (StoreRange::Bounded(8..50), b"89", 8..10),
        (StoreRange::From(7), b"789", 7..10),
        (StoreRange::Suffix(4), b"6789", 6..10),
        (StoreRange::Suffix(40), b"0123456789", 0..10),
    ] {
        let (got, body) = read_all(store, "a/b", Some(range.clone())).await.unwrap();
        assert_eq!(body, want, "{range:?}");
        assert_eq!(got.range, span, "{range:?}");
    }
    for range in [StoreRange::Bounded(10..12), StoreRange::From(10)] {
        let err = read_all(store, "a/b", Some(range)).await.err().unwrap();
        assert!(
            matches!(err, StoreError::RangeNotSatisfiable { size: 10, .. }),
            "{err}"
        );
    }
    for missing in ["nope", "a/b/below-a-value", "a"] {
        let err = read_all(store, missing, None).await.err().unwrap();
        assert!(
            matches!(err, StoreError::NotFound { .. }),
            "{missing}: {err}"
        );
    }
    // Longer than one read block: streamed in pieces, all of it, in order.
    let big: Vec<u8> = (0..(5u32 << 19)).map(|i| (i % 251) as u8).collect();
    let key = StoreKey::new("big").unwrap();
    store.put(&key, Bytes::from(big.clone())).await.unwrap();
    assert_eq!(read_all(store, "big", None).await.unwrap().1, big);
    let (_, tail) = read_all(store, "big", Some(StoreRange::From(1_000_000)))
        .await
        .unwrap();
    assert_eq!(tail, &big[1_000_000..]);
    store.delete(&key).await.unwrap();
}
