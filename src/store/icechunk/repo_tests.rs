//! An Icechunk repository written with the icechunk crate (two commits, a
//! tag, a branch), read through zarrd's store at every version.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::RwLock;

use crate::store::{Store, StoreError, StoreKey};

fn key(k: &str) -> StoreKey {
    StoreKey::new(k).unwrap()
}

const GROUP: &str = r#"{"zarr_format":3,"node_type":"group","attributes":{"title":"t"}}"#;
const ARRAY: &str = r#"{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}]}"#;

/// A repository whose `main` has two commits (chunk `a/c/0` is `[1, 2]`,
/// then `[9, 9]`), tag `v1` and branch `dev` at the first; and the first
/// snapshot's id.
async fn repository(dir: &std::path::Path) -> String {
    let storage = icechunk::new_local_filesystem_storage(dir).await.unwrap();
    let repo = icechunk::Repository::create(storage)
        .execute()
        .await
        .unwrap();
    let commit = |value: &'static [u8], message: &'static str, first: bool| {
        let repo = &repo;
        async move {
            let session = repo.writable_session("main").await.unwrap();
            let store = icechunk::Store::from_session(Arc::new(RwLock::new(session))).await;
            if first {
                store
                    .set("zarr.json", Bytes::from_static(GROUP.as_bytes()))
                    .await
                    .unwrap();
                store
                    .set("a/zarr.json", Bytes::from_static(ARRAY.as_bytes()))
                    .await
                    .unwrap();
            }
            store.set("a/c/0", Bytes::from_static(value)).await.unwrap();
            let session = store.session();
            let mut session = session.write().await;
            session.commit(message).execute().await.unwrap()
        }
    };
    let first = commit(&[1, 2], "first", true).await;
    commit(&[9, 9], "second", false).await;
    repo.create_tag("v1", &first).await.unwrap();
    repo.create_branch("dev", &first).await.unwrap();
    first.to_string()
}

async fn mounted(dir: &std::path::Path) -> Store {
    let repo = Store::icechunk(dir.to_str().unwrap(), &[]).await.unwrap();
    Store::with_mounts(Store::memory(), vec![("repo".into(), repo, true)]).unwrap()
}

#[tokio::test]
async fn every_version_reads_its_own_values() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = mounted(dir.path()).await;
    let get = |k: String| {
        let s = s.clone();
        async move { s.get(&key(&k)).await.unwrap().unwrap().to_vec() }
    };
    assert_eq!(
        get("repo/a/c/0".into()).await,
        vec![9, 9],
        "main by default"
    );
    assert_eq!(get("repo@main/a/c/0".into()).await, vec![9, 9]);
    assert_eq!(get("repo@v1/a/c/0".into()).await, vec![1, 2], "a tag");
    assert_eq!(get("repo@dev/a/c/0".into()).await, vec![1, 2], "a branch");
    assert_eq!(
        get(format!("repo@{first}/a/c/0")).await,
        vec![1, 2],
        "a snapshot"
    );
    assert_eq!(get("repo/a/zarr.json".into()).await, ARRAY.as_bytes());
    assert_eq!(
        s.get_range(&key("repo/a/c/0"), 1..2)
            .await
            .unwrap()
            .to_vec(),
        vec![9]
    );
    let missing = s.get(&key("repo/a/c/1")).await;
    assert!(
        matches!(missing, Ok(None)),
        "a chunk never written: {missing:?}"
    );
    // Keys the snapshot does not hold, or that only other Zarr versions
    // use, are missing, not failures.
    for k in [
        "repo/nothing/meta",
        "repo@v1/a/meta",
        "repo/nothing/c/0",
        "repo/a/zarr.json/x",
    ] {
        let got = s.get(&key(k)).await;
        assert!(matches!(got, Ok(None)), "{k}: {got:?}");
    }
    // Listings of a version name its keys as the version's.
    let sizes = s.list_sizes(&key("repo@v1/a")).await.unwrap();
    let names: Vec<&str> = sizes.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["repo@v1/a/zarr.json", "repo@v1/a/c/0"]);
    let listing = s.list_dir(&key("repo@v1")).await.unwrap();
    assert_eq!(
        (listing.keys, listing.prefixes),
        (vec!["zarr.json".to_string()], vec!["a".to_string()])
    );
}

#[tokio::test]
async fn only_snapshot_ids_are_immutable_and_validators_follow_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = mounted(dir.path()).await;
    let head = |k: String| {
        let s = s.clone();
        async move { s.head(&key(&k)).await.unwrap().unwrap() }
    };
    let pinned = head(format!("repo@{first}/a/c/0")).await;
    assert!(pinned.immutable());
    assert_eq!(pinned.size, 2);
    let tag = head("repo@v1/a/c/0".into()).await;
    assert!(!tag.immutable(), "a tag can be deleted and made again");
    assert_eq!(
        tag.version.e_tag, pinned.version.e_tag,
        "the same snapshot, the same validator"
    );
    let main = head("repo/a/c/0".into()).await;
    assert!(!main.immutable());
    assert_ne!(main.version.e_tag, pinned.version.e_tag);
}

#[tokio::test]
async fn versions_list_branches_tags_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = mounted(dir.path()).await;
    let v = s.versions(&key("repo"), 10).await.unwrap();
    let names: Vec<&str> = v.branches.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["dev", "main"]);
    assert_eq!(v.tags, vec![("v1".to_string(), first.clone())]);
    let messages: Vec<&str> = v.snapshots.iter().map(|s| s.message.as_str()).collect();
    assert_eq!(&messages[..2], ["second", "first"], "newest first");
    assert_eq!(v.snapshots[1].id, first);
    assert!(matches!(
        s.versions(&StoreKey::root(), 10).await,
        Err(StoreError::NotSupported { .. })
    ));
}

#[tokio::test]
async fn unknown_versions_and_writes_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path()).await;
    let s = mounted(dir.path()).await;
    let err = s.get(&key("repo@nope/a/c/0")).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::UnknownVersion(m) if m.contains("'nope'")),
        "{err}"
    );
    let err = s
        .put(&key("repo/a/c/1"), Bytes::from_static(&[1, 1]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ReadOnly { what } if what.contains("transactions")),
        "{err}"
    );
    let err = Store::icechunk(dir.path().join("a").to_str().unwrap(), &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not an Icechunk repository"),
        "{err}"
    );
}

/// The repository of [`repository`], mounted writable.
async fn writable(dir: &std::path::Path) -> Store {
    let repo = Store::icechunk(dir.to_str().unwrap(), &[]).await.unwrap();
    Store::with_mounts(Store::memory(), vec![("repo".into(), repo, false)]).unwrap()
}

async fn value(s: &Store, k: &str) -> Option<Vec<u8>> {
    s.get(&key(k)).await.unwrap().map(|b| b.to_vec())
}

#[tokio::test]
async fn a_transaction_becomes_one_commit_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = writable(dir.path()).await;

    let p = s.begin(&key("repo@dev/a")).await.unwrap().unwrap();
    assert_eq!(p.roots, [key("repo@dev")]);
    p.store
        .put(&key("repo@dev/a/c/1"), Bytes::from_static(&[7, 7]))
        .await
        .unwrap();
    assert_eq!(
        value(&p.store, "repo@dev/a/c/1").await,
        Some(vec![7, 7]),
        "the transaction reads its own write"
    );
    assert_eq!(
        value(&s, "repo@dev/a/c/1").await,
        None,
        "readers see nothing yet"
    );
    let id = p.transaction.commit("seven").await.unwrap().unwrap();
    assert_eq!(value(&s, "repo@dev/a/c/1").await, Some(vec![7, 7]));
    assert_eq!(
        value(&s, &format!("repo@{id}/a/c/1")).await,
        Some(vec![7, 7])
    );
    assert_eq!(value(&s, "repo@v1/a/c/1").await, None, "the tag stays");
    assert_eq!(
        value(&s, "repo/a/c/0").await,
        Some(vec![9, 9]),
        "main stays"
    );
    let v = s.versions(&key("repo"), 10).await.unwrap();
    assert!(v.branches.contains(&("dev".to_string(), id.clone())));

    // Dropped, a transaction leaves nothing; with no change, no commit.
    let p = s.begin(&key("repo@dev/a")).await.unwrap().unwrap();
    p.store
        .put(&key("repo@dev/a/c/0"), Bytes::from_static(&[5, 5]))
        .await
        .unwrap();
    drop(p);
    assert_eq!(value(&s, "repo@dev/a/c/0").await, Some(vec![1, 2]));
    let p = s.begin(&key("repo@dev/a")).await.unwrap().unwrap();
    assert_eq!(p.transaction.commit("nothing").await.unwrap(), None);

    // No version: branch main, cached both as `repo` and `repo@main`.
    let p = s.begin(&key("repo/a")).await.unwrap().unwrap();
    assert_eq!(p.roots, [key("repo@main"), key("repo")]);
    p.store.delete(&key("repo/a/c/0")).await.unwrap();
    p.transaction.commit("delete").await.unwrap().unwrap();
    assert_eq!(value(&s, "repo/a/c/0").await, None);
    assert_eq!(
        value(&s, &format!("repo@{first}/a/c/0")).await,
        Some(vec![1, 2])
    );
    assert!(s.begin(&key("elsewhere/x")).await.unwrap().is_none());
}

#[tokio::test]
async fn tags_snapshots_v2_and_read_only_mounts_refuse_writes() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = writable(dir.path()).await;
    for at in ["repo@v1/a".to_string(), format!("repo@{first}/a")] {
        let err = s.begin(&key(&at)).await.err().unwrap();
        assert!(
            matches!(&err, StoreError::ReadOnly { what } if what.contains("only branches")),
            "{at}: {err}"
        );
    }
    let err = s.begin(&key("repo@nope/a")).await.err().unwrap();
    assert!(matches!(err, StoreError::UnknownVersion(_)), "{err}");
    let err = mounted(dir.path())
        .await
        .begin(&key("repo/a"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    let p = s.begin(&key("repo/b")).await.unwrap().unwrap();
    let err = p
        .store
        .put(
            &key("repo/b/.zgroup"),
            Bytes::from_static(b"{\"zarr_format\":2}"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidKey { reason, .. } if reason.contains("v3 only")),
        "{err}"
    );
}

/// Another process's commit to the branch after the transaction began.
async fn commit_elsewhere(dir: &std::path::Path, chunk: &str, value: &'static [u8]) {
    let storage = icechunk::new_local_filesystem_storage(dir).await.unwrap();
    let repo = icechunk::Repository::open(storage).execute().await.unwrap();
    let session = repo.writable_session("dev").await.unwrap();
    let store = icechunk::Store::from_session(Arc::new(RwLock::new(session))).await;
    store.set(chunk, Bytes::from_static(value)).await.unwrap();
    let session = store.session();
    let mut session = session.write().await;
    session.commit("elsewhere").execute().await.unwrap();
}

#[tokio::test]
async fn a_commit_rebases_over_other_writers_or_names_the_conflict() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path()).await;
    let s = writable(dir.path()).await;

    let p = s.begin(&key("repo@dev/a")).await.unwrap().unwrap();
    p.store
        .put(&key("repo@dev/a/c/0"), Bytes::from_static(&[3, 3]))
        .await
        .unwrap();
    commit_elsewhere(dir.path(), "a/c/1", &[4, 4]).await;
    p.transaction.commit("other chunk").await.unwrap().unwrap();
    assert_eq!(value(&s, "repo@dev/a/c/0").await, Some(vec![3, 3]));
    assert_eq!(
        value(&s, "repo@dev/a/c/1").await,
        Some(vec![4, 4]),
        "rebased"
    );

    let p = s.begin(&key("repo@dev/a")).await.unwrap().unwrap();
    p.store
        .put(&key("repo@dev/a/c/0"), Bytes::from_static(&[6, 6]))
        .await
        .unwrap();
    commit_elsewhere(dir.path(), "a/c/0", &[8, 8]).await;
    let err = p.transaction.commit("same chunk").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Diverged(m) if m.contains("'dev'")),
        "{err}"
    );
    assert_eq!(value(&s, "repo@dev/a/c/0").await, Some(vec![8, 8]));
}

#[tokio::test]
async fn reads_pin_a_ref_to_its_snapshot_and_versions_are_named_with_at() {
    let dir = tempfile::tempdir().unwrap();
    let first = repository(dir.path()).await;
    let s = writable(dir.path()).await;
    assert_eq!(
        s.pin(&key("repo@v1/a")).await.unwrap(),
        key(&format!("repo@{first}/a"))
    );
    assert_eq!(
        s.pin(&key("repo@dev")).await.unwrap(),
        key(&format!("repo@{first}"))
    );
    let main = s.pin(&key("repo/a/c/0")).await.unwrap();
    assert_ne!(main, key("repo/a/c/0"));
    assert_eq!(value(&s, main.as_str()).await, Some(vec![9, 9]));
    assert_eq!(
        s.pin(&key("elsewhere/a")).await.unwrap(),
        key("elsewhere/a")
    );
    assert!(matches!(
        s.pin(&key("repo@nope/a")).await,
        Err(StoreError::UnknownVersion(_))
    ));
    for bad in [
        "repo@/a/c/0",
        "repo/__version/dev/a/c/0",
        "repo@main/__zarrd/x",
    ] {
        let err = s.get(&key(bad)).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidKey { .. }), "{bad}: {err}");
    }
    // A whole version lists under its own name.
    let sizes = s.list_sizes(&key("repo@v1")).await.unwrap();
    let names: Vec<&str> = sizes.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["repo@v1/zarr.json", "repo@v1/a/zarr.json", "repo@v1/a/c/0"]
    );
}

#[tokio::test]
async fn mounts_of_one_repository_take_turns_on_a_branch() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path()).await;
    let a = Store::icechunk(dir.path().to_str().unwrap(), &[])
        .await
        .unwrap();
    let b = Store::icechunk(&format!("file://{}", dir.path().display()), &[])
        .await
        .unwrap();
    let s = Store::with_mounts(
        Store::memory(),
        vec![("a".into(), a, false), ("b".into(), b, false)],
    )
    .unwrap();
    let first = s.begin(&key("a@dev/a")).await.unwrap().unwrap();
    let waiting = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        s.begin(&key("b@dev/a")),
    )
    .await;
    assert!(
        waiting.is_err(),
        "the other mount's writer waits for its turn"
    );
    assert!(
        s.begin(&key("b@main/a")).await.unwrap().is_some(),
        "another branch does not"
    );
    // Deleting a branch's whole tree in a transaction empties it.
    first.store.delete_prefix(&key("a@dev")).await.unwrap();
    first.transaction.commit("empty").await.unwrap().unwrap();
    assert!(s.list_sizes(&key("a@dev")).await.unwrap().is_empty());
    assert!(s.begin(&key("b@dev/a")).await.unwrap().is_some());
}
