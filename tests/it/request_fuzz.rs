//! Whole HTTP requests, generated, against a directory store that holds a
//! link to a folder outside it and the server's own hidden folder: no panic,
//! no 5xx but for the overload answer, nothing outside the root read or
//! changed, and memory bounded whatever sizes the requests ask for.

use std::path::{Path, PathBuf};

use axum::body::{to_bytes, Body};
use axum::http::{Method, Request};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;
use zarrd::config::Config;
use zarrd::http::{router, AppState};
use zarrd::store::{node_path, Store};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

const CANARY: &[u8] = b"outside-the-root-canary";

struct Fixture {
    _root: tempfile::TempDir,
    _outside: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn fixture(rt: &tokio::runtime::Runtime) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), CANARY).unwrap();
    std::fs::create_dir(outside.path().join("g")).unwrap();
    std::fs::write(
        outside.path().join("g/zarr.json"),
        br#"{"zarr_format":3,"node_type":"group"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let store = Store::local(root.path()).unwrap();
    rt.block_on(async {
        let h = Hierarchy::new(store.clone());
        let mut spec = ArraySpec::new(3, vec![64, 64], DataType::Float32);
        spec.chunks = Some(vec![16, 16]);
        let a = h
            .create_array(&node_path("g/a").unwrap(), &spec, false)
            .await
            .unwrap();
        a.write(
            &Selection::all().resolve(&[64, 64]).unwrap(),
            ArrayBytes::Fixed(vec![1; 64 * 64 * 4]),
        )
        .await
        .unwrap();
        let mut sharded = ArraySpec::new(3, vec![1 << 20, 1 << 20], DataType::UInt8);
        sharded.chunks = Some(vec![64, 64]);
        sharded.shards = Some(vec![256, 256]);
        h.create_array(&node_path("g/s").unwrap(), &sharded, false)
            .await
            .unwrap();
        let mut text = ArraySpec::new(3, vec![1 << 30], DataType::String);
        text.chunks = Some(vec![1 << 20]);
        h.create_array(&node_path("g/t").unwrap(), &text, false)
            .await
            .unwrap();
    });
    // The lock folder exists once something was written.
    assert!(root.path().join("__zarrd").exists());
    Fixture {
        root: root.path().to_path_buf(),
        outside: outside.path().to_path_buf(),
        _root: root,
        _outside: outside,
    }
}

/// Every file below `dir` with its contents.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

const PATHS: [&str; 14] = [
    "/zarr/link/secret",
    "/zarr/link/g/zarr.json",
    "/zarr/link/",
    "/zarr/__zarrd/locks/",
    "/zarr/g/a/c/0/0",
    "/zarr/g/a/zarr.json",
    "/api/v1/meta/link/g",
    "/api/v1/meta/__zarrd/locks/x",
    "/api/v1/data/g/a",
    "/api/v1/data/g/s",
    "/api/v1/data/g/t",
    "/api/v1/tree",
    "/api/v1/meta/g",
    "/api/v1/append/g/a",
];

fn method(i: u8) -> Method {
    [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::POST,
        Method::PATCH,
        Method::DELETE,
    ][i as usize % 6]
        .clone()
}

/// Queries that ask for sizes from one element to far more than memory.
fn sized_query() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..1 << 40, 0u64..1 << 40).prop_map(|(a, b)| format!("select=0:{a},0:{b}")),
        (1u64..1 << 20).prop_map(|n| format!("select=0:{n}&format=json")),
        (1u64..1 << 30).prop_map(|n| format!("select=::{n}")),
        Just("format=json".to_string()),
        Just("overwrite=true".to_string()),
        "[ -~]{0,20}",
    ]
}

/// Range headers from one range to thousands of overlapping ones.
fn ranges() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..5000).prop_map(|n| format!("bytes={}", vec!["0-"; n].join(","))),
        (0u64..1 << 40, 0u64..1 << 40).prop_map(|(a, b)| format!("bytes={a}-{b},-{b}")),
        "bytes=[0-9,\\-]{0,30}",
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(json!({"data": 1}).to_string().into_bytes()),
        Just(json!({"node_type": "group"}).to_string().into_bytes()),
        Just(
            json!({"shape": [1u64 << 40, 1u64 << 40]})
                .to_string()
                .into_bytes()
        ),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn generated_requests_stay_inside_and_bounded(
        path in 0usize..PATHS.len(),
        m in any::<u8>(),
        query in sized_query(),
        range in ranges(),
        multipart in any::<bool>(),
        body in body(),
    ) {
        thread_local! {
            static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        }
        let uri = format!("{}?{}", PATHS[path], query.replace(' ', "%20"));
        let Ok(uri) = uri.parse::<axum::http::Uri>() else { return Ok(()) };
        // A fresh store per case: each request meets a healthy hierarchy.
        let f = RT.with(fixture);
        let (status, outside_before, outside_after, root) = {
            let before = snapshot(&f.outside);
            let app = router(AppState::new(
                Store::local(&f.root).unwrap(),
                Config { allow_anonymous_writes: true, json_limit: 1 << 20, ..Config::default() },
            ));
            let mut request = Request::builder().method(method(m)).uri(uri.clone()).header("range", &range);
            if multipart {
                request = request.header("accept", "multipart/byteranges");
            }
            let request = request.header("content-type", "application/json").body(Body::from(body.clone())).unwrap();
            let status = RT.with(|rt| rt.block_on(async {
                let resp = app.oneshot(request).await.unwrap();
                let status = resp.status();
                // Read at most 64 MiB: a body past that is itself a finding.
                let read = to_bytes(resp.into_body(), 64 << 20).await;
                let leaked = read
                    .as_ref()
                    .is_ok_and(|b| b.windows(CANARY.len()).any(|w| w == CANARY));
                (status, read.is_ok(), leaked)
            }));
            (status, before, snapshot(&f.outside), f.root.clone())
        };
        prop_assert!(status.1, "{} {uri}: a body over 64 MiB", method(m));
        prop_assert!(!status.2, "{} {uri}: the answer holds a file from outside the root", method(m));
        let status = status.0;
        prop_assert!(!status.is_server_error() || status.as_u16() == 503, "{} {uri} range={range}: {status}", method(m));
        prop_assert_eq!(outside_before, outside_after, "{} {} changed the outside folder", method(m), uri);
        prop_assert!(root.join("__zarrd").exists(), "the lock folder was removed");
        prop_assert!(rss_bytes() < 2 << 30, "RSS {} after {} {uri}", rss_bytes(), method(m));
    }
}
