//! What an untrusted client must not be able to do: leave the root through
//! symbolic links, delete more than its scope allows, make the server
//! allocate without bound, touch the server's own folder, or store metadata
//! that breaks a node. One test per finding, each failing on the code that
//! had the hole. (What a stored node is, documents and key names, is
//! `documents.rs`.)

use crate::common::call;
use std::io::Write;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::auth::{Scope, TokenConfig};
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState};
use zarrd::store::{node_path, Store};
use zarrd::zarr::{ArraySpec, DataType, Hierarchy};

fn writable() -> Config {
    Config {
        allow_anonymous_writes: true,
        recheck_cached: Recheck::Always,
        ..Config::default()
    }
}

fn error_code(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body).unwrap_or(Value::Null)["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// A server on a new directory holding `path`, an int32 array of 4
/// elements (2 chunks) all `value`.
async fn local_with_array(path: &str, value: i32) -> (tempfile::TempDir, zarrd::http::App) {
    let root = tempfile::tempdir().unwrap();
    let app = router(AppState::new(
        Store::local(root.path()).unwrap(),
        writable(),
    ));
    let spec =
        json!({"node_type": "array", "shape": [4], "chunks": [2], "dtype": "int32"}).to_string();
    let (s, _, _) = call(
        &app,
        Method::PUT,
        &format!("/api/v1/meta/{path}"),
        &[],
        spec,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let data = json!({"data": value}).to_string();
    let json = [("content-type", "application/json")];
    let (s, _, _) = call(
        &app,
        Method::PUT,
        &format!("/api/v1/data/{path}"),
        &json,
        data,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    (root, app)
}

/// A directory store with a link to a folder outside it, plus that folder.
struct Linked {
    _root: tempfile::TempDir,
    outside: tempfile::TempDir,
    root_path: std::path::PathBuf,
}

fn linked() -> Linked {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"TOP-SECRET").unwrap();
    std::fs::create_dir(outside.path().join("g")).unwrap();
    std::fs::write(
        outside.path().join("g/zarr.json"),
        br#"{"zarr_format":3,"node_type":"group"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        root.path().join("secret-link"),
    )
    .unwrap();
    // A link that stays inside is followed.
    std::fs::create_dir(root.path().join("real")).unwrap();
    std::fs::write(root.path().join("real/value"), b"inside").unwrap();
    std::os::unix::fs::symlink(root.path().join("real"), root.path().join("alias")).unwrap();
    let root_path = root.path().to_path_buf();
    Linked {
        _root: root,
        outside,
        root_path,
    }
}

#[tokio::test]
async fn symlinks_out_of_the_root_are_refused_for_every_operation() {
    let l = linked();
    let app = router(AppState::new(
        Store::local(&l.root_path).unwrap(),
        writable(),
    ));
    for uri in ["/zarr/link/secret.txt", "/zarr/secret-link"] {
        let (s, _, b) = call(&app, Method::GET, uri, &[], Body::empty()).await;
        assert_eq!(
            s,
            StatusCode::FORBIDDEN,
            "GET {uri}: {}",
            String::from_utf8_lossy(&b)
        );
        assert!(
            !String::from_utf8_lossy(&b).contains("TOP-SECRET"),
            "{uri} leaked the file"
        );
        let (s, _, _) = call(&app, Method::HEAD, uri, &[], Body::empty()).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "HEAD {uri}");
    }
    let (s, _, _) = call(&app, Method::PUT, "/zarr/link/new.txt", &[], "x").await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(
        !l.outside.path().join("new.txt").exists(),
        "a write escaped"
    );
    let (s, _, _) = call(
        &app,
        Method::DELETE,
        "/zarr/link/secret.txt",
        &[],
        Body::empty(),
    )
    .await;
    assert!(s.is_client_error(), "DELETE through a link: {s}");
    let (s, _, _) = call(
        &app,
        Method::DELETE,
        "/api/v1/meta/link",
        &[],
        Body::empty(),
    )
    .await;
    assert!(s.is_client_error(), "DELETE node through a link: {s}");
    let (s, _, _) = call(
        &app,
        Method::DELETE,
        "/api/v1/meta/link/g",
        &[],
        Body::empty(),
    )
    .await;
    assert!(s.is_client_error(), "DELETE node below a link: {s}");
    assert!(
        l.outside.path().join("secret.txt").exists(),
        "a delete escaped"
    );
    assert!(
        l.outside.path().join("g/zarr.json").exists(),
        "a delete escaped"
    );
    // Listings neither show nor descend into the outside tree.
    let (_, _, b) = call(
        &app,
        Method::GET,
        "/zarr/",
        &[("accept", "application/json")],
        Body::empty(),
    )
    .await;
    let listing = String::from_utf8_lossy(&b);
    assert!(
        !listing.contains("link") && !listing.contains("secret"),
        "{listing}"
    );
    let (s, _, b) = call(&app, Method::GET, "/api/v1/tree", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        !String::from_utf8_lossy(&b).contains("link/g"),
        "tree descended into the link"
    );
    // A whole-root delete leaves the outside alone.
    let admin = router(AppState::new(
        Store::local(&l.root_path).unwrap(),
        writable(),
    ));
    let (s, _, _) = call(&admin, Method::DELETE, "/api/v1/meta", &[], Body::empty()).await;
    assert!(s.as_u16() < 500, "{s}");
    assert!(l.outside.path().join("secret.txt").exists());
    // Links that stay inside the root are not followed either: they would
    // let a token limited to one prefix reach another, and a delete of one
    // node reach another's files.
    let (s, _, _) = call(&app, Method::GET, "/zarr/alias/value", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, _) = call(&app, Method::PUT, "/zarr/alias/value", &[], "x").await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        std::fs::read(l.root_path.join("real/value")).unwrap(),
        b"inside"
    );
    let (s, _, b) = call(&app, Method::GET, "/zarr/real/value", &[], Body::empty()).await;
    assert_eq!((s, b.as_slice()), (StatusCode::OK, &b"inside"[..]));
}

#[tokio::test]
async fn links_to_the_root_do_not_reach_the_lock_folder_or_other_nodes() {
    // A write makes the lock folder; a node to protect; links an operator might leave.
    let (root, app) = local_with_array("b/arr", 5).await;
    std::fs::create_dir(root.path().join("x")).unwrap();
    std::os::unix::fs::symlink("..", root.path().join("x/up")).unwrap();
    std::os::unix::fs::symlink("../b", root.path().join("x/sub")).unwrap();
    std::fs::write(root.path().join("x/keep"), b"k").unwrap();
    for uri in [
        "/zarr/x/up/",
        "/zarr/x/up/__zarrd/locks/",
        "/zarr/x/sub/arr/zarr.json",
    ] {
        let (s, _, _) = call(&app, Method::GET, uri, &[], Body::empty()).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{uri}");
    }
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/zarr/x/up/__zarrd/locks/0030.lock",
        &[],
        "x",
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, _) = call(&app, Method::DELETE, "/api/v1/meta/x", &[], Body::empty()).await;
    assert!(s.as_u16() < 500, "{s}");
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/b/arr?format=json",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::OK,
        "deleting x reached b: {}",
        String::from_utf8_lossy(&b)
    );
    // Names LocalFileSystem keeps for uploads in progress are not keys there.
    let (s, _, b) = call(&app, Method::PUT, "/zarr/foo%231", &[], "x").await;
    assert_eq!(
        (s, error_code(&b).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_key")
    );
    let (s, _, _) = call(&app, Method::GET, "/zarr/foo%231", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn metadata_that_would_cost_without_bound_is_refused() {
    let app = router(AppState::new(Store::memory(), writable()));
    // Variable-length chunks of 2^31 elements: 48 GiB of handles to decode.
    let spec = json!({"node_type": "array", "shape": [2147483648u64], "chunks": [2147483648u64], "dtype": "string"});
    let (s, _, b) = call(&app, Method::PUT, "/api/v1/meta/vs", &[], spec.to_string()).await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        String::from_utf8_lossy(&b)
    );
    // A shard of 64 M inner chunks, each coded on its own.
    let spec = json!({"node_type": "array", "shape": [67108864], "chunks": [1], "shards": [67108864], "dtype": "int8"});
    let (s, _, b) = call(&app, Method::PUT, "/api/v1/meta/sh", &[], spec.to_string()).await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        String::from_utf8_lossy(&b)
    );
    // Attributes every reader must parse.
    let big = json!({"a": vec![0; 3 << 20]}).to_string();
    let (s, _, _) = call(&app, Method::PUT, "/zarr/g/.zattrs", &[], big.clone()).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/api/v1/meta/g",
        &[],
        json!({"node_type": "group"}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let patch = format!("{{\"attributes\": {big}}}");
    let (s, _, _) = call(&app, Method::PATCH, "/api/v1/meta/g", &[], patch).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    // Patches each under the bound do not add up past it.
    let chunk = "x".repeat(1_500_000);
    let mut last = StatusCode::OK;
    for i in 0..4 {
        let patch = json!({"attributes": {format!("a{i}"): chunk}}).to_string();
        last = call(&app, Method::PATCH, "/api/v1/meta/g", &[], patch)
            .await
            .0;
        if last != StatusCode::OK {
            break;
        }
    }
    assert_eq!(
        last,
        StatusCode::PAYLOAD_TOO_LARGE,
        "attributes grew past the bound"
    );
    // Parameters of POST /api/v1/data are parameters, not a bulk upload.
    let points: Vec<[u64; 1]> = vec![[0]; 8 << 20];
    let body = json!({"points": points}).to_string();
    let (s, _, _) = call(&app, Method::POST, "/api/v1/data/g", &[], body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    // Within that size, a list of more coordinates than one selection may
    // hold: each costs far more resolved than written.
    let spec = json!({"node_type": "array", "shape": [4], "chunks": [4], "dtype": "uint8"});
    let (s, _, _) = call(&app, Method::PUT, "/api/v1/meta/pts", &[], spec.to_string()).await;
    assert_eq!(s, StatusCode::CREATED);
    let points: Vec<[u64; 1]> = vec![[0]; (1 << 20) + 1];
    let body = json!({"points": points}).to_string();
    let (s, _, b) = call(&app, Method::POST, "/api/v1/data/pts", &[], body).await;
    let text = String::from_utf8_lossy(&b);
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(
        text.contains("too_large") && text.contains("more than 1048576"),
        "{text}"
    );
}

fn scoped(scopes: &[Scope]) -> Config {
    Config {
        tokens: vec![TokenConfig {
            name: Some("pipeline".into()),
            token: Some("pipeline-token-0123456789".into()),
            token_sha256: None,
            scopes: scopes.to_vec(),
            prefixes: vec![],
            access_key_id: None,
        }],
        recheck_cached: Recheck::Never,
        ..Config::default()
    }
}

const BEARER: (&str, &str) = ("authorization", "Bearer pipeline-token-0123456789");

#[tokio::test]
async fn a_write_token_cannot_delete_more_than_it_names() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![8], DataType::Int32);
    spec.chunks = Some(vec![4]);
    h.create_array(&node_path("b/a").unwrap(), &spec, false)
        .await
        .unwrap();
    let app = router(AppState::new(store.clone(), scoped(&[Scope::Write])));
    let group = json!({"node_type": "group"}).to_string();
    for uri in [
        "/api/v1/meta/b?overwrite=true",
        "/api/v1/meta/%2F?overwrite=true",
        "/api/v1/meta?overwrite=true",
    ] {
        let (s, _, b) = call(&app, Method::PUT, uri, &[BEARER], group.clone()).await;
        assert!(
            s == StatusCode::FORBIDDEN || s == StatusCode::METHOD_NOT_ALLOWED,
            "{uri}: {s} {}",
            String::from_utf8_lossy(&b)
        );
    }
    for uri in [
        "/zarr/b/a/zarr.json",
        "/zarr/b/a%2Fzarr.json",
        "/zarr/b%2Fa%2Fzarr.json",
    ] {
        let (s, _, _) = call(&app, Method::DELETE, uri, &[BEARER], Body::empty()).await;
        assert_eq!(
            s,
            StatusCode::FORBIDDEN,
            "{uri}: deleting a metadata document removes a node"
        );
    }
    let (s, _, b) = call(
        &app,
        Method::PATCH,
        "/api/v1/meta/b/a",
        &[BEARER],
        json!({"shape": [2]}).to_string(),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "shrinking deletes chunks: {}",
        String::from_utf8_lossy(&b)
    );
    assert!(store
        .head(&node_path("b/a/zarr.json").unwrap())
        .await
        .unwrap()
        .is_some());
    // What a write token may do still works: grow, write, create.
    let (s, _, _) = call(
        &app,
        Method::PATCH,
        "/api/v1/meta/b/a",
        &[BEARER],
        json!({"shape": [12]}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/api/v1/meta/c",
        &[BEARER],
        group.clone(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _, _) = call(
        &app,
        Method::DELETE,
        "/zarr/b/a/c/0",
        &[BEARER],
        Body::empty(),
    )
    .await;
    assert!(
        s == StatusCode::NOT_FOUND || s == StatusCode::NO_CONTENT,
        "{s}"
    );
    // An admin token may.
    let admin = router(AppState::new(store.clone(), scoped(&[Scope::Admin])));
    let (s, _, _) = call(
        &admin,
        Method::PUT,
        "/api/v1/meta/b?overwrite=true",
        &[BEARER],
        group,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
}

#[tokio::test]
async fn overlapping_multipart_ranges_do_not_amplify() {
    let store = Store::memory();
    store
        .put(&node_path("big").unwrap(), vec![7u8; 1 << 20].into())
        .await
        .unwrap();
    let app = router(AppState::new(store, writable()));
    let ranges = format!("bytes={}", vec!["0-"; 7000].join(","));
    let (s, h, b) = call(
        &app,
        Method::GET,
        "/zarr/big",
        &[("range", &ranges), ("accept", "multipart/byteranges")],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::PARTIAL_CONTENT);
    assert!(
        b.len() < (1 << 20) + 1024,
        "{} bytes for a 1 MiB value",
        b.len()
    );
    assert_eq!(h["content-length"].to_str().unwrap(), b.len().to_string());
    // Many distinct ranges: the whole value rather than a body of part headers.
    let many: Vec<String> = (0..1000).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
    let header = format!("bytes={}", many.join(","));
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/zarr/big",
        &[("range", &header), ("accept", "multipart/byteranges")],
        Body::empty(),
    )
    .await;
    assert_eq!((s, b.len()), (StatusCode::OK, 1 << 20));
    // Two ranges still come as two parts with their Content-Range.
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/zarr/big",
        &[
            ("range", "bytes=0-9,100-109"),
            ("accept", "multipart/byteranges"),
        ],
        Body::empty(),
    )
    .await;
    let text = String::from_utf8_lossy(&b);
    assert_eq!(s, StatusCode::PARTIAL_CONTENT);
    assert!(
        text.contains("bytes 0-9/1048576") && text.contains("bytes 100-109/1048576"),
        "{text}"
    );
}

async fn huge_array(store: &Store, path: &str, dtype: DataType, shape: Vec<u64>, chunks: Vec<u64>) {
    let mut spec = ArraySpec::new(3, shape, dtype);
    spec.chunks = Some(chunks);
    Hierarchy::new(store.clone())
        .create_array(&node_path(path).unwrap(), &spec, false)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_broadcast_write_works_chunk_by_chunk() {
    let store = Store::memory();
    huge_array(
        &store,
        "huge",
        DataType::Float64,
        vec![100_000, 100_000],
        vec![1000, 1000],
    )
    .await;
    huge_array(&store, "small", DataType::Int32, vec![10, 10], vec![4, 4]).await;
    let app = router(AppState::new(store.clone(), writable()));
    // A selection of 10^10 elements over 10^4 chunks: a scalar must not be
    // expanded (80 GB); here a window of it is written and read back.
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/huge?select=0:3000,0:2000",
        &[("content-type", "application/json")],
        json!({"data": 2.5}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/huge?select=2999:3001,1999:2001&format=json",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["data"], json!([[2.5, 0.0], [0.0, 0.0]]));
    // Past the chunk bound, a clear 413 rather than work without end.
    huge_array(
        &store,
        "tiny-chunks",
        DataType::UInt8,
        vec![1 << 20, 1 << 20],
        vec![1, 1],
    )
    .await;
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/tiny-chunks",
        &[("content-type", "application/json")],
        json!({"data": 1}).to_string(),
    )
    .await;
    assert_eq!(
        (s, error_code(&b).as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
    );
    // Broadcasts keep working on small arrays, points included.
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/api/v1/data/small?select=1:9,2:7",
        &[("content-type", "application/json")],
        json!({"data": 7}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (_, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/small?select=0:3,1:3&format=json",
        &[],
        Body::empty(),
    )
    .await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["data"], json!([[0, 0], [0, 7], [0, 7]]));
}

#[tokio::test]
async fn variable_length_reads_are_bounded_by_what_they_hold() {
    let store = Store::memory();
    huge_array(
        &store,
        "strings",
        DataType::String,
        vec![1_000_000_000],
        vec![1_000_000],
    )
    .await;
    huge_array(&store, "few", DataType::String, vec![40], vec![10]).await;
    let config = Config {
        json_limit: 1 << 20,
        ..writable()
    };
    let app = router(AppState::new(store, config));
    for format in ["npy", "json"] {
        let (s, _, b) = call(
            &app,
            Method::GET,
            &format!("/api/v1/data/strings?format={format}"),
            &[],
            Body::empty(),
        )
        .await;
        assert_eq!(
            (s, error_code(&b).as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            "{format}"
        );
    }
    // Each element 100 KB: 40 of them pass the per-element estimate but hold 4 MB.
    let long = "x".repeat(100_000);
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/api/v1/data/few",
        &[("content-type", "application/json")],
        json!({"data": long}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    for format in ["npy", "json"] {
        let (s, _, b) = call(
            &app,
            Method::GET,
            &format!("/api/v1/data/few?format={format}"),
            &[],
            Body::empty(),
        )
        .await;
        assert_eq!(
            (s, error_code(&b).as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            "{format}"
        );
        let (s, _, _) = call(
            &app,
            Method::GET,
            &format!("/api/v1/data/few?select=0:2&format={format}"),
            &[],
            Body::empty(),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{format}");
    }
}

#[tokio::test]
async fn decompression_bombs_stop_at_the_chunk_size() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    for (name, codec) in [
        (
            "z",
            json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
        ),
        ("g", json!({"name": "gzip", "configuration": {"level": 1}})),
    ] {
        let mut spec = ArraySpec::new(3, vec![8], DataType::Int16);
        spec.chunks = Some(vec![8]);
        spec.codecs =
            Some(json!([{"name": "bytes", "configuration": {"endian": "little"}}, codec]));
        h.create_array(&node_path(name).unwrap(), &spec, false)
            .await
            .unwrap();
    }
    // 64 MiB of zeros, compressed to a few KB, where the chunk holds 16 bytes.
    let zeros = vec![0u8; 64 << 20];
    let zbomb = zstd::bulk::compress(&zeros, 19).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&zeros).unwrap();
    let gbomb = gz.finish().unwrap();
    store
        .put(&node_path("z/c/0").unwrap(), zbomb.into())
        .await
        .unwrap();
    store
        .put(&node_path("g/c/0").unwrap(), gbomb.into())
        .await
        .unwrap();
    let app = router(AppState::new(store, writable()));
    for name in ["z", "g"] {
        let (s, _, b) = call(
            &app,
            Method::GET,
            &format!("/api/v1/data/{name}?format=json"),
            &[],
            Body::empty(),
        )
        .await;
        let text = String::from_utf8_lossy(&b);
        assert_eq!(
            (s, error_code(&b).as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_chunk"),
            "{text}"
        );
        assert!(
            text.contains(&format!("{name}/c/0")),
            "names the key: {text}"
        );
        let doc: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            doc["error"]["request_id"].as_str().unwrap_or("").len(),
            32,
            "a server error carries its request id: {text}"
        );
    }
}

#[tokio::test]
async fn the_servers_folder_is_reserved_on_every_route_and_mount() {
    let root = tempfile::tempdir().unwrap();
    let mounted = tempfile::tempdir().unwrap();
    let store = Store::with_mounts(
        Store::local(root.path()).unwrap(),
        vec![("m".into(), Store::local(mounted.path()).unwrap(), false)],
    )
    .unwrap();
    let app = router(AppState::new(store, writable()));
    // Take a lock file into existence by writing once.
    let (s, _, _) = call(&app, Method::PUT, "/zarr/m/x", &[], "1").await;
    assert_eq!(s, StatusCode::CREATED);
    let group = json!({"node_type": "group"}).to_string();
    for path in [
        "__zarrd/locks/0222.lock",
        "m/__zarrd/locks/0222.lock",
        "__zarrd",
        "m/__zarrd",
    ] {
        let (s, _, b) = call(
            &app,
            Method::PUT,
            &format!("/api/v1/meta/{path}"),
            &[],
            group.clone(),
        )
        .await;
        assert_eq!(
            s,
            StatusCode::BAD_REQUEST,
            "PUT meta {path}: {}",
            String::from_utf8_lossy(&b)
        );
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            let (s, _, _) = call(&app, method.clone(), &format!("/zarr/{path}"), &[], "x").await;
            assert!(
                s == StatusCode::FORBIDDEN || s == StatusCode::BAD_REQUEST,
                "{method} /zarr/{path}: {s}"
            );
        }
    }
    let (s, _, _) = call(
        &app,
        Method::GET,
        "/zarr/m/__zarrd/locks/",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Writes still work: no lock was replaced by a node.
    let (s, _, _) = call(&app, Method::PUT, "/zarr/m/x", &[], "2").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn smaller_findings() {
    let root = tempfile::tempdir().unwrap();
    let app = router(AppState::new(
        Store::local(root.path()).unwrap(),
        writable(),
    ));
    // Trailing slashes on API paths.
    let (s, _, _) = call(&app, Method::GET, "/api/v1/tree/", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    // Names the directory store cannot write: 400, not 502.
    let long = "n".repeat(254);
    let (s, _, b) = call(&app, Method::PUT, &format!("/zarr/{long}"), &[], "x").await;
    assert_eq!(
        (s, error_code(&b).as_str()),
        (StatusCode::BAD_REQUEST, "invalid_key")
    );
    // NaN with a payload is NaN in JSON data.
    let spec = json!({"node_type": "array", "shape": [2], "chunks": [2], "dtype": "float32", "fill_value": 0.0, "codecs": null}).to_string();
    call(&app, Method::PUT, "/api/v1/meta/f", &[], spec).await;
    let raw: Vec<u8> = [0x7fc0_0001u32, 0x3f80_0000]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    call(&app, Method::PUT, "/zarr/f/c/0", &[], raw).await;
    let (_, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/f?format=json",
        &[],
        Body::empty(),
    )
    .await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["data"], json!(["NaN", 1.0]));
    // Invalid UTF-32 in an .npy body is refused, not stored as U+FFFD.
    let spec =
        json!({"node_type": "array", "shape": [1], "chunks": [1], "dtype": "string"}).to_string();
    call(&app, Method::PUT, "/api/v1/meta/s", &[], spec).await;
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    npy.extend(0xD800u32.to_le_bytes());
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/s",
        &[("content-type", "application/x-npy")],
        npy,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        String::from_utf8_lossy(&b)
    );
    // One corrupt document does not take the tree down.
    std::fs::create_dir(root.path().join("bad")).unwrap();
    std::fs::write(root.path().join("bad/zarr.json"), b"{not json").unwrap();
    let (s, _, b) = call(&app, Method::GET, "/api/v1/tree", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let tree: Value = serde_json::from_slice(&b).unwrap();
    let nodes = tree["nodes"].as_array().unwrap();
    let bad = nodes
        .iter()
        .find(|n| n["path"] == "bad")
        .expect("the broken node is listed");
    assert_eq!(bad["error"]["code"], json!("invalid_metadata"));
    assert!(
        nodes.iter().any(|n| n["path"] == "f"),
        "its siblings are still listed"
    );
}

#[test]
fn a_shared_load_that_failed_on_the_store_stays_a_store_error() {
    use zarrd::http::error::ApiError;
    use zarrd::store::StoreError;
    use zarrd::zarr::ZarrError;
    let original = ZarrError::Store(StoreError::Backend {
        key: "a/c/0".into(),
        source: object_store::Error::Generic {
            store: "S3",
            source: "connection refused".into(),
        },
    });
    let copy = ApiError::from(original.shared_copy());
    assert_eq!(
        (copy.status, copy.code),
        (StatusCode::BAD_GATEWAY, "store_error")
    );
    assert!(
        copy.message.contains("connection refused"),
        "{}",
        copy.message
    );
}

#[tokio::test]
async fn sharded_reads_take_index_and_chunks_from_one_version() {
    use zarrd::zarr::array::{ChunkSource, Direct};
    use zarrd::zarr::{ArrayBytes, Selection};
    let dir = tempfile::tempdir().unwrap();
    for store in [Store::memory(), Store::local(dir.path()).unwrap()] {
        let h = Hierarchy::new(store.clone());
        let mut spec = ArraySpec::new(3, vec![8, 8], DataType::Int32);
        spec.chunks = Some(vec![4, 4]);
        spec.shards = Some(vec![8, 8]);
        let path = node_path("s").unwrap();
        let array = h.create_array(&path, &spec, true).await.unwrap();
        let all = Selection::all().resolve(&[8, 8]).unwrap();
        let values = |v: i32| ArrayBytes::Fixed((0..64).flat_map(|_| v.to_le_bytes()).collect());
        array.write(&all, values(1)).await.unwrap();
        let key = array.chunk_key(&[0, 0]).unwrap();
        let (index, _) = array.read_shard_index(&key).await.unwrap().unwrap();
        let index = std::sync::Arc::new(index);
        let wanted: Vec<_> = (0..4).map(|i| (i, index.range(i).unwrap())).collect();
        // A writer replaces the shard (its inner chunks now lie elsewhere).
        let mut mixed: Vec<u8> = Vec::new();
        for i in 0..64i32 {
            mixed.extend((i * 1000).to_le_bytes());
        }
        array
            .write(&all, ArrayBytes::Fixed(mixed.clone()))
            .await
            .unwrap();
        // Inner chunks by the old index are refused, not decoded from the new bytes.
        let err = Direct
            .inner_chunks(&array, &key, &index, &wanted)
            .await
            .unwrap_err();
        assert!(err.is_version_change(), "{err}");
        // A whole read starts over on the new version and sees it whole.
        assert_eq!(array.read(&all).await.unwrap(), ArrayBytes::Fixed(mixed));
    }
}

/// A stored value is whatever a client wrote: it is never sniffed into a
/// type a browser would run (a script under the viewer's `script-src
/// 'self'`), and names browsers render or run are downloads.
#[tokio::test]
async fn stored_values_are_never_sniffed_and_markup_is_a_download() {
    let store = Store::memory();
    let app = router(AppState::new(store.clone(), writable()));
    for (name, body) in [
        ("evil.js", "alert(document.cookie)"),
        ("g/page.html", "<script>alert(1)</script>"),
        ("g/pic.SVG", "<svg onload=alert(1)/>"),
        ("g/0.0", "\x01\x02"),
    ] {
        let (s, _, _) = call(
            &app,
            Method::PUT,
            &format!("/zarr/{name}"),
            &[],
            Body::from(body),
        )
        .await;
        assert!(s.is_success(), "{name}: {s}");
        for uri in [format!("/zarr/{name}"), format!("/s3/zarr/{name}")] {
            let (s, h, _) = call(&app, Method::GET, &uri, &[], Body::empty()).await;
            assert_eq!(s, StatusCode::OK, "{uri}");
            assert_eq!(h["x-content-type-options"], "nosniff", "{uri}");
            assert_eq!(h["content-type"], "application/octet-stream", "{uri}");
            let attachment = h
                .get("content-disposition")
                .map(|v| v.to_str().unwrap().to_string());
            if name == "g/0.0" {
                assert_eq!(attachment, None, "{uri}");
            } else {
                assert_eq!(attachment.as_deref(), Some("attachment"), "{uri}");
            }
        }
        let (s, h, _) = call(
            &app,
            Method::GET,
            &format!("/zarr/{name}"),
            &[("range", "bytes=0-0")],
            Body::empty(),
        )
        .await;
        assert_eq!(s, StatusCode::PARTIAL_CONTENT);
        assert_eq!(h["x-content-type-options"], "nosniff");
    }
}

/// A request body reserves its memory as it arrives: a declared length
/// that is never sent reserves nothing, and a body that could never fit in
/// the memory budget is refused with 413 naming it, not told to retry.
#[tokio::test]
async fn request_bodies_reserve_their_memory_as_they_arrive() {
    use tower::ServiceExt;
    let state = AppState::new(
        Store::memory(),
        Config {
            max_body_size: 1 << 30,
            memory_budget: 256 << 20,
            ..writable()
        },
    );
    let app = router(state.clone());
    let piece = bytes::Bytes::from(vec![1u8; 1 << 20]);
    let pieces =
        futures::stream::iter((0..300).map(move |_| Ok::<_, std::io::Error>(piece.clone())));
    let request = axum::http::Request::put("/zarr/big.bin")
        .body(Body::from_stream(pieces))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("--memory-budget"));
    assert_eq!(state.service.budget().reserved(), 0);
    // 32 MiB fits, and is stored.
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/zarr/ok.bin",
        &[],
        Body::from(vec![2u8; 32 << 20]),
    )
    .await;
    assert!(s.is_success(), "{s}");
    assert_eq!(state.service.budget().reserved(), 0);
}
