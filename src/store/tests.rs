//! The store suites: `conformance` for writable backends (which runs the
//! read behaviours too), `reads_conform` for every backend, read-only ones
//! declaring what they lack.

use super::suite::{self, bytes_of, filled, reads, Lacks, PLAIN};
#[cfg(feature = "icechunk")]
use super::suite::{filled_with, ZARR};
use super::*;

#[tokio::test]
async fn memory_store_conforms() {
    suite::writable(Store::memory()).await;
}

#[tokio::test]
async fn local_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    suite::writable(Store::local(dir.path()).unwrap()).await;
}

#[tokio::test]
async fn a_directory_reads_no_file_past_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(Store::local(dir.path()).unwrap()).await;
    let k = |s: &str| StoreKey::new(s).unwrap();
    // a/b holds 10 bytes, a/c/d one; a miss weighs nothing.
    let within = |budget| {
        let keys = [k("a/b"), k("a/nope"), k("a/c/d"), k("a/b")];
        let store = store.clone();
        async move { store.get_many(&keys, budget).await.unwrap().len() }
    };
    assert_eq!(
        within(0).await,
        2,
        "the first value, however large, and the miss"
    );
    assert_eq!(within(10).await, 2);
    assert_eq!(within(11).await, 3);
    assert_eq!(within(21).await, 4);
    // Past the files read on the async thread, the pool's reads keep to
    // the same budget.
    let ones = vec![k("a/c/d"); 40];
    let len = |budget| {
        let (store, keys) = (store.clone(), ones.clone());
        async move { store.get_many(&keys, budget).await.unwrap().len() }
    };
    assert_eq!(len(0).await, 1);
    assert_eq!(len(16).await, 16);
    assert_eq!(len(17).await, 17);
    assert_eq!(len(30).await, 30);
    assert_eq!(len(100).await, 40);
}

#[tokio::test]
async fn local_store_with_files_kept_open_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    store.keep_files_open(Some(std::time::Duration::from_secs(60)));
    suite::writable(store.clone()).await;
    no_lost_updates(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_sharing_a_file_kept_open_each_get_their_own_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    store.keep_files_open(Some(std::time::Duration::from_secs(60)));
    let key = StoreKey::new("shard").unwrap();
    // Larger than one in-place read, so ranges also go to the blocking pool.
    let value: Vec<u8> = (0..6_000_000u32).map(|i| (i % 251) as u8).collect();
    store.put(&key, Bytes::from(value.clone())).await.unwrap();
    let e_tag = store
        .head(&key)
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag
        .unwrap();
    let reads = (0..64u64).map(|i| {
        let (store, key, e_tag) = (store.clone(), key.clone(), e_tag.clone());
        tokio::spawn(async move {
            let start = i * 70_001;
            let ranges = [start..start + 1_500_000, start + 7..start + 9];
            let got = store
                .get_ranges_at(&key, &ranges, Some(&e_tag))
                .await
                .unwrap();
            (ranges, got)
        })
    });
    for read in futures::future::join_all(reads).await {
        let (ranges, got) = read.unwrap();
        for (r, bytes) in ranges.iter().zip(got) {
            assert_eq!(bytes, &value[r.start as usize..r.end as usize]);
        }
    }
}

/// A raw read, which may use a file kept open.
async fn raw(store: &Store, key: &StoreKey) -> Option<Bytes> {
    match store.get_with(key, GetRequest::default()).await {
        Ok(got) => {
            use futures::TryStreamExt;
            let parts: Vec<Bytes> = got.body.try_collect().await.unwrap();
            Some(parts.concat().into())
        }
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => panic!("{e}"),
    }
}

/// Replace the file of `key` as another process would: a rename over it.
fn replace_behind(dir: &std::path::Path, name: &str, value: &[u8]) {
    let other = dir.join("upload-by-someone-else");
    std::fs::write(&other, value).unwrap();
    std::fs::rename(&other, dir.join(name)).unwrap();
}

#[tokio::test]
async fn files_kept_open_follow_writes_here_at_once_and_elsewhere_after_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    store.keep_files_open(Some(std::time::Duration::from_millis(300)));
    let key = StoreKey::new("a/0.0").unwrap();
    store.put(&key, Bytes::from_static(b"one")).await.unwrap();
    assert_eq!(raw(&store, &key).await.unwrap(), "one");
    // Through the store: seen by the next read.
    store.put(&key, Bytes::from_static(b"two")).await.unwrap();
    assert_eq!(raw(&store, &key).await.unwrap(), "two");
    let e_tag = store
        .head(&key)
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag
        .unwrap();
    let pinned = store.get_range_at(&key, 0..3, Some(&e_tag)).await.unwrap();
    assert_eq!(pinned, "two");
    store.delete(&key).await.unwrap();
    assert!(raw(&store, &key).await.is_none());
    store.put(&key, Bytes::from_static(b"six")).await.unwrap();
    assert_eq!(raw(&store, &key).await.unwrap(), "six");
    // By another process: raw reads see it once the time is up ...
    replace_behind(&dir.path().join("a"), "0.0", b"ten");
    assert_eq!(raw(&store, &key).await.unwrap(), "six");
    // ... reads that load caches or decide writes at once ...
    assert_eq!(store.get(&key).await.unwrap().unwrap(), "ten");
    let fresh = store
        .head(&key)
        .await
        .unwrap()
        .unwrap()
        .version
        .e_tag
        .unwrap();
    // ... and so does a read pinned to the new version.
    assert_eq!(
        store.get_range_at(&key, 0..3, Some(&fresh)).await.unwrap(),
        "ten"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(raw(&store, &key).await.unwrap(), "ten");
}

/// A directory store keeping files open, with `name` written and read raw
/// once (so its file is kept open).
async fn kept_open_with(name: &str, value: &'static [u8]) -> (tempfile::TempDir, Store, StoreKey) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    store.keep_files_open(None);
    let key = StoreKey::new(name).unwrap();
    store.put(&key, Bytes::from_static(value)).await.unwrap();
    assert_eq!(raw(&store, &key).await.unwrap(), value);
    (dir, store, key)
}

#[tokio::test]
async fn read_modify_writes_start_from_the_file_as_it_is_now() {
    // Two servers on one directory: the other one's write must not be lost
    // because this one still has the old file open.
    let (dir, store, key) = kept_open_with("counter", b"1").await;
    replace_behind(dir.path(), "counter", b"2");
    increment(&store, &key).await;
    assert_eq!(raw(&store, &key).await.unwrap(), "3");
}

#[tokio::test]
async fn deleting_a_file_someone_else_removed_stops_serving_it() {
    let (dir, store, key) = kept_open_with("gone", b"x").await;
    std::fs::remove_file(dir.path().join("gone")).unwrap();
    store.delete(&key).await.unwrap();
    assert!(raw(&store, &key).await.is_none());
}

#[tokio::test]
async fn memory_store_compare_and_swap() {
    let store = Store::memory();
    let key = StoreKey::new("k").unwrap();
    let v1 = store.put(&key, Bytes::from_static(b"1")).await.unwrap();
    let v2 = store
        .put_with(
            &key,
            Bytes::from_static(b"2"),
            PutCondition::Update(v1.clone()),
        )
        .await
        .unwrap();
    let stale = store
        .put_with(&key, Bytes::from_static(b"3"), PutCondition::Update(v1))
        .await
        .unwrap_err();
    assert!(matches!(stale, StoreError::Precondition { .. }));
    assert_ne!(v2.e_tag, None);
}

#[test]
fn urls_open_or_fail_clearly() {
    assert!(Store::open("memory://").is_ok());
    let err = Store::open("ftp://x").unwrap_err();
    assert!(err.to_string().contains("ftp://x"));
}

/// Add one to the decimal counter at `key`, as a read-modify-write.
async fn increment(store: &Store, key: &StoreKey) {
    store
        .update(key, false, |current: Option<Versioned>| async move {
            let n: u64 = current
                .map(|v| String::from_utf8_lossy(&v.bytes).parse().unwrap())
                .unwrap_or(0);
            Ok::<_, StoreError>(Replacement {
                bytes: (n + 1).to_string().into_bytes(),
                removable: false,
            })
        })
        .await
        .unwrap();
}

/// Many tasks incrementing one counter through the updater lose no increment.
async fn no_lost_updates(store: Store) {
    let key = StoreKey::new("counter").unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    increment(&store, &key).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(store.get(&key).await.unwrap().unwrap(), &b"320"[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_compare_and_swap_loses_nothing() {
    no_lost_updates(Store::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_store_file_locks_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    assert!(matches!(
        store.updater().coordination(),
        Coordination::FileLocks { .. }
    ));
    no_lost_updates(store.clone()).await;
    // Lock files live under the hidden internal prefix.
    assert!(dir.path().join("__zarrd/locks").is_dir());
    assert_eq!(
        store.list_dir(&StoreKey::root()).await.unwrap().keys,
        vec!["counter".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compare_and_swap_alone_keeps_every_increment() {
    // Two stores over one backend share nothing but the backend: compare-and-swap
    // alone must still keep every increment.
    let backend: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let a = Store::new(backend.clone(), "a");
    let b = Store::new(backend, "b");
    let key = StoreKey::new("counter").unwrap();
    let run = |store: Store| {
        let key = key.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                increment(&store, &key).await;
            }
        })
    };
    let (x, y) = (run(a.clone()), run(b));
    x.await.unwrap();
    y.await.unwrap();
    assert_eq!(a.get(&key).await.unwrap().unwrap(), &b"100"[..]);
}

#[tokio::test]
async fn mounts_route_keys_by_their_first_segment() {
    let k = |s: &str| StoreKey::new(s).unwrap();
    let root = Store::memory();
    let era5 = Store::memory();
    let dir = tempfile::tempdir().unwrap();
    let archive = Store::local(dir.path()).unwrap();
    archive
        .put(&k("old/x"), Bytes::from_static(b"kept"))
        .await
        .unwrap();
    let store = Store::with_mounts(
        root.clone(),
        vec![
            ("era5".into(), era5.clone(), false),
            ("archive".into(), archive, true),
        ],
    )
    .unwrap();
    store
        .put(&k("era5/t/zarr.json"), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(
        era5.get(&k("t/zarr.json")).await.unwrap().unwrap(),
        &b"{}"[..],
        "written into the mount"
    );
    assert!(root.get(&k("era5/t/zarr.json")).await.unwrap().is_none());
    assert_eq!(
        store.get_range(&k("archive/old/x"), 1..3).await.unwrap(),
        &b"ep"[..]
    );
    // Several keys across mounts, local or not, in the order asked; the
    // keys of one local mount are read in its directory.
    assert_eq!(
        bytes_of(
            store
                .get_many(
                    &[k("archive/old/x"), k("era5/t/zarr.json"), k("archive/no")],
                    u64::MAX
                )
                .await
                .unwrap()
        ),
        vec![
            Some(Bytes::from_static(b"kept")),
            Some(Bytes::from_static(b"{}")),
            None
        ]
    );
    assert_eq!(
        bytes_of(
            store
                .get_many(&[k("archive/no"), k("archive/old/x")], u64::MAX)
                .await
                .unwrap()
        ),
        vec![None, Some(Bytes::from_static(b"kept"))]
    );
    let err = store
        .put(&k("archive/old/x"), Bytes::new())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    let listing = store.list_dir(&StoreKey::root()).await.unwrap();
    assert_eq!(
        listing.prefixes,
        vec!["archive".to_string(), "era5".to_string()]
    );
    assert_eq!(
        store.list_recursive(&k("era5")).await.unwrap(),
        vec![k("era5/t/zarr.json")]
    );
    assert_eq!(
        store.list_dir(&k("archive/old")).await.unwrap().keys,
        vec!["x".to_string()]
    );
    // Lock and CAS counters of the mounts add up to the server's totals.
    use std::sync::atomic::Ordering::Relaxed;
    era5.updater().stats.cas_retries.fetch_add(3, Relaxed);
    root.updater().stats.cas_retries.fetch_add(1, Relaxed);
    era5.updater().stats.lock_waits.fetch_add(2, Relaxed);
    let totals = store.update_totals();
    assert_eq!((totals.cas_retries, totals.lock_waits), (4, 2));
    let outcome = store
        .update(
            &k("era5/counter"),
            false,
            |current: Option<Versioned>| async move {
                assert!(current.is_none());
                Ok::<_, StoreError>(Replacement {
                    bytes: b"1".to_vec(),
                    removable: false,
                })
            },
        )
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Stored(_)));
    assert!(Store::with_mounts(
        Store::memory(),
        vec![("a/b".into(), Store::memory(), false)]
    )
    .is_err());
}

#[tokio::test]
async fn read_only_mounts_read_conform() {
    let root = Store::memory();
    let mounted = Store::with_mounts(
        root,
        vec![("m".into(), filled(Store::memory()).await, true)],
    )
    .unwrap();
    // The suite's keys live below the mount; a prefixed view of it is what
    // clients see, so check the mount's own behaviours through its name.
    let k = |s: &str| StoreKey::new(s).unwrap();
    assert_eq!(
        mounted.get(&k("m/a/b")).await.unwrap().unwrap(),
        &b"0123456789"[..]
    );
    assert!(matches!(
        mounted.put(&k("m/a/new"), Bytes::new()).await,
        Err(StoreError::ReadOnly { .. })
    ));
    assert!(matches!(
        mounted.get(&k("m/__zarrd/locks/x")).await,
        Err(StoreError::InvalidKey { .. })
    ));
    // Pages at the root take in the mounts' keys, in order.
    mounted.put(&k("l"), Bytes::new()).await.unwrap();
    mounted.put(&k("n"), Bytes::new()).await.unwrap();
    let page = |offset: Option<&'static str>, limit: usize| {
        let mounted = mounted.clone();
        async move {
            let page = mounted.list_page(&StoreKey::root(), offset, limit).await;
            page.unwrap()
                .into_iter()
                .map(|(key, _)| key.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, 10).await, ["l", "m/a/b", "m/a/c/d", "n"]);
    assert_eq!(page(None, 2).await, ["l", "m/a/b"]);
    assert_eq!(page(Some("m/a/b"), 2).await, ["m/a/c/d", "n"]);
    assert_eq!(page(Some("m0"), 10).await, ["n"]);
    let below = mounted.list_page(&k("m/a"), Some("m/a/b"), 10).await;
    assert_eq!(below.unwrap()[0].0.as_str(), "m/a/c/d");
}

/// A zip file with stored (uncompressed) entries, as zarr-python's ZipStore
/// writes small ones.
fn write_zip(path: &std::path::Path, entries: &[(&str, &[u8])]) {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let mut local = vec![0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        local.extend(crc.to_le_bytes());
        local.extend((data.len() as u32).to_le_bytes());
        local.extend((data.len() as u32).to_le_bytes());
        local.extend((name.len() as u16).to_le_bytes());
        local.extend(0u16.to_le_bytes());
        local.extend(name.as_bytes());
        out.extend(&local);
        out.extend(*data);
        let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c.extend(crc.to_le_bytes());
        c.extend((data.len() as u32).to_le_bytes());
        c.extend((data.len() as u32).to_le_bytes());
        c.extend((name.len() as u16).to_le_bytes());
        c.extend([0u8; 12]);
        c.extend(offset.to_le_bytes());
        c.extend(name.as_bytes());
        central.extend(c);
    }
    let start = out.len() as u32;
    out.extend(&central);
    let mut end = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    end.extend((entries.len() as u16).to_le_bytes());
    end.extend((entries.len() as u16).to_le_bytes());
    end.extend((central.len() as u32).to_le_bytes());
    end.extend(start.to_le_bytes());
    end.extend(0u16.to_le_bytes());
    out.extend(end);
    std::fs::write(path, out).unwrap();
}

#[tokio::test]
async fn zip_store_reads_conform() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.zip");
    write_zip(&path, &[("a/b", b"0123456789"), ("a/c/d", b"x")]);
    let store = Store::open(path.to_str().unwrap()).unwrap();
    let lacks = Lacks {
        listing: false,
        writes: true,
    };
    reads(&store, &PLAIN, lacks).await;
}

/// zarrd itself, serving a memory store on loopback through `app`'s
/// changes to it, as the HTTP server of an `http://` store.
async fn reads_conform_over_http(app: impl FnOnce(axum::Router) -> axum::Router) {
    let served = filled(Store::memory()).await;
    let zarrd = crate::http::router(crate::http::AppState::new(
        served,
        crate::config::Config::default(),
    ));
    let app = app(axum::Router::new().fallback_service(zarrd));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let store = Store::open(&format!("http://{addr}/zarr/")).unwrap();
    let lacks = Lacks {
        listing: true,
        writes: true,
    };
    reads(&store, &PLAIN, lacks).await;
    server.abort();
}

#[tokio::test]
async fn http_store_reads_conform() {
    reads_conform_over_http(|app| app).await;
}

#[tokio::test]
async fn http_store_without_suffix_ranges_reads_conform() {
    // A server that answers suffix ranges with the whole value, as some
    // do: suffixes fall back to the size and a bounded range.
    reads_conform_over_http(|app| {
        app.layer(axum::middleware::map_request(
            |mut req: axum::http::Request<axum::body::Body>| async move {
                let suffix = req
                    .headers()
                    .get(axum::http::header::RANGE)
                    .is_some_and(|r| r.as_bytes().starts_with(b"bytes=-"));
                if suffix {
                    req.headers_mut().remove(axum::http::header::RANGE);
                }
                req
            },
        ))
    })
    .await;
}

#[tokio::test]
async fn http_store_refusing_suffix_ranges_reads_conform() {
    // A server that answers every suffix range with 416, as some do:
    // suffixes fall back to the size and a bounded range.
    reads_conform_over_http(|app| {
        app.layer(axum::middleware::from_fn(
            |req: axum::http::Request<axum::body::Body>, next: axum::middleware::Next| async move {
                let suffix = req
                    .headers()
                    .get(axum::http::header::RANGE)
                    .is_some_and(|r| r.as_bytes().starts_with(b"bytes=-"));
                if suffix {
                    return axum::response::IntoResponse::into_response(
                        axum::http::StatusCode::RANGE_NOT_SATISFIABLE,
                    );
                }
                next.run(req).await
            },
        ))
    })
    .await;
}

/// The object-store emulators the interop tests use (moto for S3, Azurite
/// for Azure), started here from the paths `scripts/test` exports. Without
/// them (a bare `cargo test`) these backends are skipped, saying so; under
/// CI they must be there.
mod emulators {
    use super::*;
    use std::process::{Child, Command, Stdio};

    struct Emulator(Child);

    impl Drop for Emulator {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn tool(var: &str) -> Option<String> {
        match std::env::var(var) {
            Ok(path) if !path.is_empty() => Some(path),
            _ if std::env::var("CI").is_ok() => panic!("{var} is not set; scripts/test sets it"),
            _ => {
                eprintln!("skipped: {var} is not set (scripts/test sets it)");
                None
            }
        }
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    async fn wait_for(port: u16) {
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the emulator on port {port} did not start");
    }

    const AZURITE_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    const MOTO: &str = "import sys\nfrom werkzeug.serving import run_simple\nfrom moto.server import DomainDispatcherApplication, create_backend_app\nrun_simple('127.0.0.1', int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False, use_reloader=False)\n";

    #[tokio::test]
    async fn s3_store_conforms() {
        let Some(python) = tool("ZARRD_PYTHON") else {
            return;
        };
        let port = free_port();
        let _moto = Emulator(
            Command::new(python)
                .args(["-c", MOTO, &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for(port).await;
        let endpoint = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        client
            .put(format!("{endpoint}/suite"))
            .send()
            .await
            .unwrap();
        let s3_bucket = |name: &str| {
            object_store::aws::AmazonS3Builder::new()
                .with_endpoint(&endpoint)
                .with_allow_http(true)
                .with_bucket_name(name)
                .with_region("us-east-1")
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .build()
                .unwrap()
        };
        let s3 = |name: &str, root: &str| {
            let bucket = backends::Bucket::paged(s3_bucket(name));
            let root = object_store::path::Path::from(root);
            backends::store_below(bucket, &root, &format!("s3://{name}/{root}"))
        };
        suite::writable(s3("suite", "")).await;
        // Below a folder of the bucket, as `s3://bucket/folder` opens it.
        suite::writable(s3("suite", "deep/er")).await;
        a_level_page_is_one_listing_call(s3_bucket("suite")).await;
    }

    #[tokio::test]
    async fn azure_store_conforms() {
        let (Some(azurite), Some(python)) = (tool("ZARRD_AZURITE"), tool("ZARRD_PYTHON")) else {
            return;
        };
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let _azurite = Emulator(
            Command::new(azurite)
                .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .args(["--location", data.path().to_str().unwrap()])
                .args(["--skipApiVersionCheck", "--silent"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for(port).await;
        let endpoint = format!("http://127.0.0.1:{port}");
        // Creating a container needs a signed request; the Azure SDK signs it.
        let create = format!(
            "from azure.storage.blob import BlobServiceClient\nc = BlobServiceClient.from_connection_string('DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/devstoreaccount1;')\nc.create_container('suite')\n"
        );
        let status = Command::new(python).args(["-c", &create]).status().unwrap();
        assert!(status.success(), "could not create the containers");
        let azure = |container: &str| {
            // Azurite's account, addressed path-style on the port it was given.
            let inner = object_store::azure::MicrosoftAzureBuilder::new()
                .with_account("devstoreaccount1")
                .with_access_key(AZURITE_KEY)
                .with_endpoint(format!("{endpoint}/devstoreaccount1"))
                .with_allow_http(true)
                .with_container_name(container)
                .build()
                .unwrap();
            let bucket = backends::Bucket::paged(inner);
            backends::store_below(bucket, &Default::default(), &format!("az://{container}"))
        };
        suite::writable(azure("suite")).await;
    }

    /// A bucket's paged listing, counting its calls.
    struct Counted {
        inner: object_store::aws::AmazonS3,
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl object_store::list::PaginatedListStore for Counted {
        async fn list_paginated(
            &self,
            prefix: Option<&str>,
            opts: object_store::list::PaginatedListOptions,
        ) -> object_store::Result<object_store::list::PaginatedListResult> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.inner.list_paginated(prefix, opts).await
        }
    }

    /// A page of a level costs one call of the bucket's own paged listing,
    /// however many values the level holds (listing the level whole would
    /// take two calls of a thousand here, and none through `Counted`).
    async fn a_level_page_is_one_listing_call(s3: object_store::aws::AmazonS3) {
        use futures::StreamExt;
        let counted = Arc::new(Counted {
            inner: s3.clone(),
            calls: Default::default(),
        });
        let bucket = backends::Bucket {
            store: Arc::new(s3),
            pages: Some(counted.clone()),
        };
        let store = backends::store_below(bucket, &"flat".into(), "s3://suite/flat");
        let names: Vec<String> = (0..1050).map(|i| format!("k{i:04}")).collect();
        let puts = names.iter().map(|name| {
            let store = &store;
            async move {
                let key = StoreKey::new(name).unwrap();
                store.put(&key, Bytes::from_static(b"1")).await.unwrap();
            }
        });
        futures::stream::iter(puts)
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        let calls = || counted.calls.load(std::sync::atomic::Ordering::SeqCst);
        let root = StoreKey::root();
        let first = store.list_level_page(&root, None, 10).await.unwrap();
        let first: Vec<&str> = first.iter().map(|e| e.name()).collect();
        assert_eq!(first, names[..10]);
        assert_eq!(calls(), 1);
        let last = store
            .list_level_page(&root, Some("k1040"), 100)
            .await
            .unwrap();
        let last: Vec<&str> = last.iter().map(|e| e.name()).collect();
        assert_eq!(last, names[1041..]);
        assert_eq!(calls(), 2);
    }
}

/// A kerchunk reference set: `a/b` a range of a file beside the set, `a/c/d`
/// a value inline.
#[tokio::test]
async fn kerchunk_references_read_conform() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.bin"), b"..0123456789..").unwrap();
    let set = dir.path().join("refs.json");
    let refs =
        serde_json::json!({"version": 1, "refs": {"a/b": ["data.bin", 2, 10], "a/c/d": "x"}});
    std::fs::write(&set, refs.to_string()).unwrap();
    let store = Store::references(set.to_str().unwrap(), &[]).await.unwrap();
    let lacks = Lacks {
        listing: false,
        writes: true,
    };
    reads(&store, &PLAIN, lacks).await;
}

/// An Icechunk repository whose `main` holds the suite's values, written
/// through zarrd's own transaction.
#[cfg(feature = "icechunk")]
async fn icechunk_repository(dir: &std::path::Path) -> Store {
    let storage = ::icechunk::new_local_filesystem_storage(dir).await.unwrap();
    ::icechunk::Repository::create(storage)
        .execute()
        .await
        .unwrap();
    let repo = Store::icechunk(dir.to_str().unwrap(), &[]).await.unwrap();
    let pending = repo.begin(&StoreKey::root()).await.unwrap().unwrap();
    filled_with(pending.store.clone(), &ZARR).await;
    pending
        .transaction
        .commit("the suite's values")
        .await
        .unwrap();
    repo
}

/// Icechunk: a branch read through the repository, and the suite's
/// writes in a transaction on a branch, committed.
#[cfg(feature = "icechunk")]
#[tokio::test]
async fn icechunk_reads_and_branch_writes_conform() {
    let dir = tempfile::tempdir().unwrap();
    let repo = icechunk_repository(dir.path()).await;
    let lacks = Lacks {
        listing: false,
        writes: true,
    };
    // Reads of `main` pin it to the commit they start at.
    reads(&repo, &ZARR, lacks).await;
    // Writes go through a transaction: a store over the branch's session.
    let pending = repo.begin(&StoreKey::root()).await.unwrap().unwrap();
    let session = pending.store.clone();
    reads(&session, &ZARR, suite::WRITABLE).await;
    suite::create_only_puts(&session, &ZARR).await;
    pending.transaction.commit("suite").await.unwrap();
    // The commit is what the repository reads now.
    let new = StoreKey::new(ZARR.new).unwrap();
    assert!(repo.get(&new).await.unwrap().is_some());
}

#[cfg(feature = "parquet")]
/// A Parquet reference set as fsspec's `LazyReferenceMapper` writes it:
/// `.zmetadata` and `a/refs.0.parq` with chunk `a/0` a range of a file
/// beside the set and chunk `a/1` inline.
fn write_parquet_set(dir: &std::path::Path) -> std::path::PathBuf {
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    std::fs::write(dir.join("data.bin"), b"..0123456789..").unwrap();
    let set = dir.join("refs.parq");
    std::fs::create_dir_all(set.join("a")).unwrap();
    let zarray = serde_json::json!({"zarr_format": 2, "shape": [20], "chunks": [10], "dtype": "|u1",
        "compressor": null, "filters": null, "fill_value": 0, "order": "C"});
    let zmetadata = serde_json::json!({"record_size": 10, "metadata": {
        ".zgroup": {"zarr_format": 2}, "a/.zarray": zarray}});
    std::fs::write(set.join(".zmetadata"), zmetadata.to_string()).unwrap();
    let schema = parquet::schema::parser::parse_message_type(
        "message refs { OPTIONAL BYTE_ARRAY path (UTF8); REQUIRED INT64 offset; REQUIRED INT64 size; OPTIONAL BYTE_ARRAY raw; }",
    )
    .unwrap();
    let mut out = Vec::new();
    let properties = std::sync::Arc::new(WriterProperties::builder().build());
    let mut writer =
        SerializedFileWriter::new(&mut out, std::sync::Arc::new(schema), properties).unwrap();
    let mut rows = writer.next_row_group().unwrap();
    let target = format!("{}", dir.join("data.bin").display());
    let mut column = rows.next_column().unwrap().unwrap();
    column
        .typed::<ByteArrayType>()
        .write_batch(&[ByteArray::from(target.as_str())], Some(&[1, 0]), None)
        .unwrap();
    column.close().unwrap();
    for values in [[2i64, 0], [10, 0]] {
        let mut column = rows.next_column().unwrap().unwrap();
        column
            .typed::<Int64Type>()
            .write_batch(&values, None, None)
            .unwrap();
        column.close().unwrap();
    }
    let mut column = rows.next_column().unwrap().unwrap();
    column
        .typed::<ByteArrayType>()
        .write_batch(&[ByteArray::from("x")], Some(&[0, 1]), None)
        .unwrap();
    column.close().unwrap();
    rows.close().unwrap();
    writer.close().unwrap();
    std::fs::write(set.join("a/refs.0.parq"), out).unwrap();
    set
}

#[cfg(feature = "parquet")]
#[tokio::test]
async fn parquet_references_read_conform() {
    let dir = tempfile::tempdir().unwrap();
    let set = write_parquet_set(dir.path());
    let store = Store::references(set.to_str().unwrap(), &[]).await.unwrap();
    let lacks = Lacks {
        listing: false,
        writes: true,
    };
    reads(&store, &suite::PARQUET, lacks).await;
}
