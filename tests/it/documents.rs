//! What is stored as a node: metadata documents written as raw keys (checked
//! as the API checks them), key names beyond ASCII, a compressor or codec
//! list given as null, and nodes deleted for good.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::store::node_path;
use zarrd::zarr::DataType;

use crate::common::app::TestApp;

/// The JSON document stored at `key`.
async fn stored(t: &TestApp, key: &str) -> Value {
    let bytes = t
        .store
        .get(&node_path(key).unwrap())
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn unicode_keys_are_one_name_end_to_end() {
    let t = TestApp::directory();
    assert_eq!(
        t.put("/zarr/caf%C3%A9", "x").await.status,
        StatusCode::CREATED
    );
    assert!(t.dir().join("café").exists(), "stored under its real name");
    let listed = t
        .request(
            Method::GET,
            "/zarr/",
            &[("accept", "application/json")],
            Body::empty(),
        )
        .await;
    assert_eq!(listed.headers["content-type"], "application/json");
    let listing = listed.json().to_string();
    assert!(
        listing.contains("café") && !listing.contains("%C3"),
        "{listing}"
    );
    let spec = json!({"node_type": "array", "shape": [4], "chunks": [2], "dtype": "int32"});
    let created = t
        .put("/api/v1/meta/g%C3%A9o/t%C3%AA", spec.to_string())
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let written = t
        .request(
            Method::PUT,
            "/api/v1/data/g%C3%A9o/t%C3%AA",
            &[("content-type", "application/json")],
            json!({"data": [1, 2, 3, 4]}).to_string(),
        )
        .await;
    assert_eq!(written.status, StatusCode::OK);
    let tree = String::from_utf8_lossy(&t.get("/api/v1/tree").await.body).into_owned();
    assert!(tree.contains("géo/tê"), "{tree}");
    let meta = t.get("/api/v1/meta/g%C3%A9o/t%C3%AA").await.json();
    assert_eq!(meta["chunks_initialized"], json!(2), "{meta}");
    assert_eq!(
        t.delete("/api/v1/meta/g%C3%A9o").await.status,
        StatusCode::NO_CONTENT
    );
    assert!(
        !t.dir().join("géo").exists(),
        "the delete left files behind"
    );
}

#[tokio::test]
async fn raw_metadata_puts_are_validated_like_the_api() {
    let t = TestApp::memory();
    let v3 = |codecs: Value| {
        json!({"zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": codecs})
    };
    let bad = [
        (
            "b/zarr.json",
            v3(json!([{"name": "zstd", "configuration": {"level": 1}}])),
        ),
        (
            "c/zarr.json",
            v3(
                json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [3], "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}]}}]),
            ),
        ),
    ];
    for (key, doc) in bad {
        let answer = t.put(&format!("/zarr/{key}"), doc.to_string()).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, "bad_metadata"),
            "{key}: {}",
            answer.json()
        );
    }
    let ok = t
        .put(
            "/zarr/ok/zarr.json",
            v3(json!([{"name": "bytes"}])).to_string(),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    // Codecs zarrd does not implement are not a broken structure: the
    // array is stored (and served raw), only decoding it is refused.
    let unknown = [
        (
            "a/zarr.json",
            v3(json!([{"name": "bytes"}, {"name": "bogus"}])),
        ),
        (
            "d/.zarray",
            json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<i4", "compressor": {"id": "nonesuch"}, "fill_value": 0, "order": "C", "filters": null}),
        ),
    ];
    for (key, doc) in unknown {
        let answer = t.put(&format!("/zarr/{key}"), doc.to_string()).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{key}: {}",
            answer.json()
        );
        let node = key.split('/').next().unwrap();
        let read = t.get(&format!("/api/v1/data/{node}?format=json")).await;
        assert_eq!(
            (read.status, read.code().as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, "unsupported_codec"),
            "{key}"
        );
    }
}

#[tokio::test]
async fn explicit_null_compressor_means_none() {
    let t = TestApp::memory();
    let spec = json!({"node_type": "array", "zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<i4", "compressor": null, "filters": null});
    let created = t.put("/api/v1/meta/raw2", spec.to_string()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    assert_eq!(stored(&t, "raw2/.zarray").await["compressor"], Value::Null);
    // A client writes the chunk uncompressed, as zarr-python 2 does with compressor=None.
    let raw: Vec<u8> = [1i32, 2, 3, 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(t.put("/zarr/raw2/0", raw).await.status, StatusCode::CREATED);
    let read = t.get("/api/v1/data/raw2?format=json").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.json());
    let spec = json!({"node_type": "array", "shape": [4], "chunks": [4], "dtype": "int32", "codecs": null});
    assert_eq!(
        t.put("/api/v1/meta/raw3", spec.to_string()).await.status,
        StatusCode::CREATED
    );
    let doc = stored(&t, "raw3/zarr.json").await;
    assert_eq!(doc["codecs"].as_array().unwrap().len(), 1, "{doc}");
    // Absent still means the default.
    let spec = json!({"node_type": "array", "zarr_format": 2, "shape": [4], "dtype": "<i4"});
    t.put("/api/v1/meta/dflt", spec.to_string()).await;
    assert_eq!(
        stored(&t, "dflt/.zarray").await["compressor"]["id"],
        json!("blosc")
    );
}

#[tokio::test]
async fn deleted_nodes_do_not_come_back_as_implicit_groups() {
    let t = TestApp::directory();
    let threes = [3i32; 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    t.array("g/a", DataType::Int32, &[4], &[2], Some(threes))
        .await;
    assert_eq!(
        t.delete("/api/v1/meta/g/a").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        t.get("/api/v1/meta/g/a").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        t.get("/api/v1/data/g/a").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(
        !t.dir().join("g/a").exists(),
        "an emptied directory was left"
    );
    // An empty directory made by hand is no node either.
    std::fs::create_dir_all(t.dir().join("empty/deeper")).unwrap();
    assert_eq!(
        t.get("/api/v1/meta/empty").await.status,
        StatusCode::NOT_FOUND
    );
}
