//! Writes of whole nodes (creating, deleting, patching attributes, storing
//! a node's document raw) against each other and against scopes: two
//! creates of one node, a node below an array, a patch racing a delete, a
//! write token replacing a node through its document.

use crate::common::call;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::auth::{Scope, TokenConfig};
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState};
use zarrd::store::Store;

fn writable() -> Config {
    Config {
        allow_anonymous_writes: true,
        recheck_cached: Recheck::Always,
        ..Config::default()
    }
}

fn code(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body).unwrap_or(Value::Null)["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn array(shape: u64, dtype: &str) -> String {
    json!({"node_type": "array", "shape": [shape], "chunks": [4], "dtype": dtype}).to_string()
}

/// Every store writers share: a directory (file locks) and memory
/// (compare-and-swap).
fn stores() -> Vec<(tempfile::TempDir, Store)> {
    let dir = tempfile::tempdir().unwrap();
    let local = Store::local(dir.path()).unwrap();
    vec![
        (dir, local),
        (tempfile::tempdir().unwrap(), Store::memory()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_creates_racing_for_one_node_one_is_created() {
    for (_dir, store) in stores() {
        let app = router(AppState::new(store, writable()));
        for round in 0..10 {
            let path = format!("/api/v1/meta/race/n{round}");
            let creates = (0..8).map(|i| {
                let (app, path) = (app.clone(), path.clone());
                let spec = json!({"node_type": "group", "attributes": {"writer": i}});
                tokio::spawn(
                    async move { call(&app, Method::PUT, &path, &[], spec.to_string()).await },
                )
            });
            let mut created = Vec::new();
            for (i, done) in futures::future::join_all(creates)
                .await
                .into_iter()
                .enumerate()
            {
                let (s, _, b) = done.unwrap();
                match s {
                    StatusCode::CREATED => created.push(i),
                    StatusCode::CONFLICT => assert_eq!(code(&b), "exists"),
                    other => panic!("{other}: {}", String::from_utf8_lossy(&b)),
                }
            }
            assert_eq!(created.len(), 1, "round {round}: created by {created:?}");
            let (_, _, b) = call(&app, Method::GET, &path, &[], Body::empty()).await;
            let node: Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(
                node["attributes"]["writer"],
                json!(created[0]),
                "the one told 201 made it"
            );
        }
    }
}

#[tokio::test]
async fn no_node_is_created_below_an_array() {
    let (_dir, store) = stores().remove(0);
    let app = router(AppState::new(store, writable()));
    let spec = json!({"node_type": "array", "shape": [20, 20], "chunks": [2, 2], "dtype": "int8",
                      "zarr_format": 2, "chunk_key_separator": "/"});
    let (s, _, b) = call(&app, Method::PUT, "/api/v1/meta/q/a", &[], spec.to_string()).await;
    assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
    // `q/a/7` would share the keys `q/a/7/0`, ... with the array's chunks.
    for path in ["q/a/7", "q/a/x/y"] {
        let uri = format!("/api/v1/meta/{path}");
        let (s, _, b) = call(&app, Method::PUT, &uri, &[], array(4, "int8")).await;
        assert_eq!(
            s,
            StatusCode::CONFLICT,
            "{path}: {}",
            String::from_utf8_lossy(&b)
        );
        assert_eq!(code(&b), "inside_array");
        assert!(String::from_utf8_lossy(&b).contains("'q/a' is an array"));
    }
    let (s, _, _) = call(&app, Method::GET, "/api/v1/meta/q/a/x", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "no parent was made on the way");
    // Nor by storing a node's document raw.
    for (key, group) in [
        (
            "q/a/7/zarr.json",
            json!({"zarr_format": 3, "node_type": "group"}),
        ),
        ("q/a/x/y/.zgroup", json!({"zarr_format": 2})),
    ] {
        let uri = format!("/zarr/{key}");
        let (s, _, b) = call(&app, Method::PUT, &uri, &[], group.to_string()).await;
        assert_eq!(
            s,
            StatusCode::CONFLICT,
            "{key}: {}",
            String::from_utf8_lossy(&b)
        );
        assert_eq!(code(&b), "inside_array");
    }
    // A chunk below it is what the array is made of.
    let (s, _, _) = call(&app, Method::PUT, "/zarr/q/a/7/0", &[], vec![0u8; 4]).await;
    assert!(s.is_success());
    let (s, _, _) = call(&app, Method::PUT, "/api/v1/meta/q/b", &[], array(4, "int8")).await;
    assert_eq!(s, StatusCode::CREATED, "beside the array is fine");
    // Attributes a node left behind are not a new v2 array's.
    for (path, spec) in [
        (
            "q/c",
            json!({"node_type": "array", "shape": [4], "chunks": [2], "dtype": "int8", "zarr_format": 2}),
        ),
        ("q/g", json!({"node_type": "group", "zarr_format": 2})),
    ] {
        let stray = json!({"old": 1}).to_string();
        let (s, _, _) = call(
            &app,
            Method::PUT,
            &format!("/zarr/{path}/.zattrs"),
            &[],
            stray,
        )
        .await;
        assert!(s.is_success());
        let uri = format!("/api/v1/meta/{path}");
        let (s, _, _) = call(&app, Method::PUT, &uri, &[], spec.to_string()).await;
        assert_eq!(s, StatusCode::CREATED);
        let (_, _, b) = call(&app, Method::GET, &uri, &[], Body::empty()).await;
        let node: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(node["attributes"], json!({}), "{path}: {node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_patch_racing_a_delete_does_not_bring_the_node_back() {
    for (_dir, store) in stores() {
        let app = router(AppState::new(store, writable()));
        // A v2 node keeps its attributes beside its document, in `.zattrs`.
        let v2 = json!({"node_type": "array", "shape": [8], "chunks": [4], "dtype": "int32", "zarr_format": 2}).to_string();
        for round in 0..60 {
            let path = format!("/api/v1/meta/g{round}");
            let spec = if round % 2 == 0 {
                array(8, "int32")
            } else {
                v2.clone()
            };
            let (s, _, _) = call(&app, Method::PUT, &path, &[], spec.clone()).await;
            assert_eq!(s, StatusCode::CREATED);
            let patch = {
                let (app, path) = (app.clone(), path.clone());
                let body = json!({"attributes": {"x": 1}}).to_string();
                tokio::spawn(async move { call(&app, Method::PATCH, &path, &[], body).await })
            };
            let delete = {
                let (app, path) = (app.clone(), path.clone());
                tokio::spawn(
                    async move { call(&app, Method::DELETE, &path, &[], Body::empty()).await },
                )
            };
            let (patched, deleted) = (patch.await.unwrap(), delete.await.unwrap());
            assert_eq!(deleted.0, StatusCode::NO_CONTENT);
            // Either order is fine; what is left must be what that order leaves.
            assert!(
                patched.0 == StatusCode::OK || patched.0 == StatusCode::NOT_FOUND,
                "{}: {}",
                patched.0,
                String::from_utf8_lossy(&patched.2)
            );
            let (s, _, b) = call(&app, Method::GET, &path, &[], Body::empty()).await;
            assert_eq!(
                s,
                StatusCode::NOT_FOUND,
                "round {round}: {}",
                String::from_utf8_lossy(&b)
            );
            let (s, _, b) = call(
                &app,
                Method::GET,
                &format!("/zarr/g{round}/.zattrs"),
                &[],
                Body::empty(),
            )
            .await;
            assert_eq!(
                s,
                StatusCode::NOT_FOUND,
                "round {round}: the patch left attributes behind: {}",
                String::from_utf8_lossy(&b)
            );
            let (s, _, b) = call(&app, Method::PUT, &path, &[], spec).await;
            assert_eq!(
                s,
                StatusCode::CREATED,
                "round {round}: the path is free again"
            );
            let attributes = serde_json::from_slice::<Value>(&b).unwrap()["attributes"].clone();
            assert_eq!(
                attributes,
                json!({}),
                "round {round}: a new node's attributes"
            );
        }
        // A patch of a node deleted before it stores nothing.
        let (s, _, _) = call(
            &app,
            Method::PUT,
            "/api/v1/meta/gone",
            &[],
            array(8, "int32"),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED);
        let (s, _, _) = call(
            &app,
            Method::DELETE,
            "/api/v1/meta/gone",
            &[],
            Body::empty(),
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        let body = json!({"attributes": {"x": 1}}).to_string();
        let (s, _, _) = call(&app, Method::PATCH, "/api/v1/meta/gone", &[], body).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, _, _) = call(
            &app,
            Method::GET,
            "/zarr/gone/zarr.json",
            &[],
            Body::empty(),
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
}

const BEARER: (&str, &str) = ("authorization", "Bearer pipeline-token-0123456789");

fn scoped(scope: Scope) -> Config {
    Config {
        tokens: vec![TokenConfig {
            name: Some("pipeline".into()),
            token: Some("pipeline-token-0123456789".into()),
            token_sha256: None,
            scopes: vec![scope],
            prefixes: vec![],
            access_key_id: None,
        }],
        // Two servers on one store here: neither trusts what it cached.
        recheck_cached: Recheck::Always,
        ..Config::default()
    }
}

#[tokio::test]
async fn a_write_token_edits_a_node_through_its_document_but_does_not_replace_it() {
    let store = Store::memory();
    let admin = router(AppState::new(store.clone(), scoped(Scope::Admin)));
    let writer = router(AppState::new(store.clone(), scoped(Scope::Write)));
    for (path, spec) in [
        ("v3", array(8, "int32")),
        ("v2", json!({"node_type": "array", "shape": [8], "chunks": [4], "dtype": "int32", "zarr_format": 2}).to_string()),
        ("g", json!({"node_type": "group"}).to_string()),
        ("g2", json!({"node_type": "group", "zarr_format": 2}).to_string()),
    ] {
        let uri = format!("/api/v1/meta/{path}");
        let (s, _, _) = call(&admin, Method::PUT, &uri, &[BEARER], spec).await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let stored = |key: &'static str| {
        let app = admin.clone();
        async move {
            let (s, _, b) = call(
                &app,
                Method::GET,
                &format!("/zarr/{key}"),
                &[BEARER],
                Body::empty(),
            )
            .await;
            assert_eq!(s, StatusCode::OK);
            serde_json::from_slice::<Value>(&b).unwrap()
        }
    };
    let v3 = stored("v3/zarr.json").await;
    let v2 = stored("v2/.zarray").await;
    let edited = |doc: &Value, field: &str, value: Value| {
        let mut doc = doc.clone();
        doc[field] = value;
        doc.to_string()
    };
    let put = |app: &zarrd::http::App, key: &str, body: String| {
        let (app, uri) = (app.clone(), format!("/zarr/{key}"));
        async move { call(&app, Method::PUT, &uri, &[BEARER], body).await }
    };
    let replacing = [
        ("v3/zarr.json", edited(&v3, "shape", json!([2]))),
        ("v3/zarr.json", edited(&v3, "data_type", json!("int16"))),
        ("v3/zarr.json", edited(&v3, "fill_value", json!(7))),
        (
            "v3/zarr.json",
            json!({"zarr_format": 3, "node_type": "group"}).to_string(),
        ),
        ("v2/.zarray", edited(&v2, "dtype", json!("<i2"))),
        ("v2/.zarray", edited(&v2, "chunks", json!([2]))),
        // A document of another kind or format beside the node's own.
        ("v2/.zgroup", json!({"zarr_format": 2}).to_string()),
        ("v2/zarr.json", v3.to_string()),
        ("g2/.zarray", v2.to_string()),
        ("g/zarr.json", v3.to_string()),
    ];
    for (key, doc) in &replacing {
        let (s, _, b) = put(&writer, key, doc.clone()).await;
        assert_eq!(
            s,
            StatusCode::FORBIDDEN,
            "{key} {doc}: {}",
            String::from_utf8_lossy(&b)
        );
        assert!(String::from_utf8_lossy(&b).contains("admin scope"));
    }
    assert_eq!(stored("v3/zarr.json").await, v3, "nothing was stored");
    assert_eq!(stored("v2/.zarray").await, v2);
    // Edits: attributes, dimension names, a shape that grows, a new node.
    let mut doc = v3.clone();
    doc["attributes"] = json!({"units": "m"});
    doc["dimension_names"] = json!(["x"]);
    doc["shape"] = json!([12]);
    for (key, doc) in [
        ("v3/zarr.json", doc.to_string()),
        ("v2/.zarray", edited(&v2, "shape", json!([16]))),
        (
            "g/zarr.json",
            json!({"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}).to_string(),
        ),
        ("new/zarr.json", v3.to_string()),
    ] {
        let (s, _, b) = put(&writer, key, doc).await;
        assert!(s.is_success(), "{key}: {s} {}", String::from_utf8_lossy(&b));
    }
    assert_eq!(stored("v3/zarr.json").await["shape"], json!([12]));
    // An admin token replaces.
    for (key, doc) in &replacing[..2] {
        let (s, _, b) = put(&admin, key, doc.clone()).await;
        assert_eq!(
            s,
            StatusCode::NO_CONTENT,
            "{key}: {}",
            String::from_utf8_lossy(&b)
        );
    }
    // Deleting consolidated metadata removes every node to readers that open by it.
    let (s, _, _) = put(
        &admin,
        "g2/.zmetadata",
        json!({"zarr_consolidated_format": 1, "metadata": {}}).to_string(),
    )
    .await;
    assert!(s.is_success());
    let (s, _, _) = call(
        &writer,
        Method::DELETE,
        "/zarr/g2/.zmetadata",
        &[BEARER],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, _) = call(
        &admin,
        Method::DELETE,
        "/zarr/g2/.zmetadata",
        &[BEARER],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_document_rewritten_in_another_form_is_an_edit() {
    // zarr-python rewrites a whole document in its own form when it
    // updates attributes or appends: what it means decides, not its JSON.
    let store = Store::memory();
    let admin = router(AppState::new(store.clone(), scoped(Scope::Admin)));
    let writer = router(AppState::new(store, scoped(Scope::Write)));
    let v3 = |fill: Value, zstd: Value, shape: u64| {
        json!({"zarr_format": 3, "node_type": "array", "shape": [shape], "data_type": "float32",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
               "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
               "fill_value": fill, "attributes": {},
               "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                          {"name": "zstd", "configuration": zstd}]})
        .to_string()
    };
    let v2 = |fill: Value, filters: Value, compressor: Value, shape: u64| {
        json!({"zarr_format": 2, "shape": [shape], "chunks": [4], "dtype": "<f8", "order": "C",
               "fill_value": fill, "filters": filters, "compressor": compressor})
        .to_string()
    };
    let put = |app: &zarrd::http::App, key: &str, body: String| {
        let (app, uri) = (app.clone(), format!("/zarr/{key}"));
        async move { call(&app, Method::PUT, &uri, &[BEARER], body).await }
    };
    let (s, _, _) = put(&admin, "a/zarr.json", v3(json!(0), json!({"level": 1}), 8)).await;
    assert!(s.is_success());
    let (s, _, _) = put(&admin, "b/.zarray", v2(json!(0), json!([]), Value::Null, 8)).await;
    assert!(s.is_success());
    for (key, doc) in [
        (
            "a/zarr.json",
            v3(json!(0.0), json!({"level": 1, "checksum": false}), 12),
        ),
        ("b/.zarray", v2(json!(0.0), Value::Null, Value::Null, 16)),
    ] {
        let (s, _, b) = put(&writer, key, doc).await;
        assert_eq!(
            s,
            StatusCode::NO_CONTENT,
            "{key}: {}",
            String::from_utf8_lossy(&b)
        );
    }
    for (key, doc) in [
        (
            "a/zarr.json",
            v3(json!(0.0), json!({"level": 1, "checksum": true}), 12),
        ),
        ("a/zarr.json", v3(json!(1.5), json!({"level": 1}), 12)),
        (
            "b/.zarray",
            v2(json!(0), Value::Null, json!({"id": "zlib", "level": 1}), 16),
        ),
    ] {
        let (s, _, b) = put(&writer, key, doc.clone()).await;
        assert_eq!(
            s,
            StatusCode::FORBIDDEN,
            "{key} {doc}: {}",
            String::from_utf8_lossy(&b)
        );
    }
}

#[tokio::test]
async fn a_token_limited_to_a_prefix_creates_no_groups_above_it() {
    let store = Store::memory();
    let mut limited = scoped(Scope::Write);
    limited.tokens[0].prefixes = vec!["lab/alice".into()];
    let admin = router(AppState::new(store.clone(), scoped(Scope::Admin)));
    let alice = router(AppState::new(store.clone(), limited));
    let put = |app: &zarrd::http::App, uri: &str, body: String| {
        let (app, uri) = (app.clone(), uri.to_string());
        async move { call(&app, Method::PUT, &uri, &[BEARER], body).await }
    };
    let stored = |key: &str| {
        let (app, uri) = (admin.clone(), format!("/zarr/{key}"));
        async move {
            call(&app, Method::HEAD, &uri, &[BEARER], Body::empty())
                .await
                .0
        }
    };
    // The missing groups at and below the prefix are created; those above
    // it are not the token's to write.
    let (s, _, b) = put(&alice, "/api/v1/meta/lab/alice/run1/t", array(8, "int32")).await;
    assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
    for key in ["lab/alice/zarr.json", "lab/alice/run1/zarr.json"] {
        assert_eq!(stored(key).await, StatusCode::OK, "{key} was not created");
    }
    for key in ["zarr.json", "lab/zarr.json"] {
        assert_eq!(
            stored(key).await,
            StatusCode::NOT_FOUND,
            "{key} was created"
        );
    }
    // The node reads back, below a group the hierarchy implies.
    let (s, _, b) = call(
        &alice,
        Method::GET,
        "/api/v1/meta/lab/alice/run1/t",
        &[BEARER],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    // An unlimited write token creates what is missing anywhere.
    let writer = router(AppState::new(store.clone(), scoped(Scope::Write)));
    let (s, _, _) = put(
        &writer,
        "/api/v1/meta/x/y/z",
        json!({"node_type": "group"}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    for key in ["zarr.json", "x/zarr.json", "x/y/zarr.json"] {
        assert_eq!(stored(key).await, StatusCode::OK, "{key} was not created");
    }
}

/// A v2 node's attributes are written beside its document: a patch whose
/// write lands after a delete of the node finished takes it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_v2_patch_landing_after_a_delete_leaves_no_attributes() {
    use object_store::throttle::{ThrottleConfig, ThrottledStore};
    use std::time::Duration;
    // Writes take a while to land; reads and deletes do not.
    let slow_puts = ThrottleConfig {
        wait_put_per_call: Duration::from_millis(300),
        ..ThrottleConfig::default()
    };
    let backend = ThrottledStore::new(object_store::memory::InMemory::new(), slow_puts);
    let store = Store::new(std::sync::Arc::new(backend), "slow writes");
    let app = router(AppState::new(store, writable()));
    for (path, spec) in [
        (
            "/api/v1/meta/a",
            json!({"node_type": "array", "shape": [8], "chunks": [4], "dtype": "int32", "zarr_format": 2}),
        ),
        (
            "/api/v1/meta/g",
            json!({"node_type": "group", "zarr_format": 2}),
        ),
    ] {
        let (s, _, _) = call(&app, Method::PUT, path, &[], spec.to_string()).await;
        assert_eq!(s, StatusCode::CREATED);
        let patch = {
            let app = app.clone();
            let body = json!({"attributes": {"x": 1}}).to_string();
            tokio::spawn(async move { call(&app, Method::PATCH, path, &[], body).await })
        };
        // The patch has read the node and is storing `.zattrs` when the
        // delete runs, and ends before it lands.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (s, _, _) = call(&app, Method::DELETE, path, &[], Body::empty()).await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        let (s, _, b) = patch.await.unwrap();
        assert_eq!(s, StatusCode::NOT_FOUND, "{}", String::from_utf8_lossy(&b));
        let key = format!("/zarr/{}/.zattrs", path.rsplit('/').next().unwrap());
        let (s, _, b) = call(&app, Method::GET, &key, &[], Body::empty()).await;
        assert_eq!(
            s,
            StatusCode::NOT_FOUND,
            "{key} outlived its node: {}",
            String::from_utf8_lossy(&b)
        );
    }
}
