//! Writes over HTTP in-process: raw keys with conditions, node creation and
//! edits, region writes in every body format, appends, and their errors.

use crate::common::call;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState};
use zarrd::store::Store;

fn app(config: Config) -> zarrd::http::App {
    router(AppState::new(Store::memory(), config))
}

fn writable() -> Config {
    Config {
        allow_anonymous_writes: true,
        recheck_cached: Recheck::Never,
        ..Config::default()
    }
}

async fn json_of(
    app: &zarrd::http::App,
    method: Method,
    uri: &str,
    body: Value,
) -> (StatusCode, Value) {
    let (s, _, b) = call(
        app,
        method,
        uri,
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await;
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

async fn read_json(app: &zarrd::http::App, uri: &str) -> Value {
    let (s, _, b) = call(app, Method::GET, uri, &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK, "{uri}: {}", String::from_utf8_lossy(&b));
    serde_json::from_slice(&b).unwrap()
}

/// The preconditions of RFC 9110 on a raw PUT: `If-None-Match` with the
/// stored ETag, a weak `If-Match`, and `If-Unmodified-Since` each refuse.
#[tokio::test]
async fn raw_puts_heed_every_precondition() {
    let app = app(writable());
    let put = |headers: Vec<(&'static str, String)>, body: &'static str| {
        let app = app.clone();
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            call(&app, Method::PUT, "/zarr/p/blob", &headers, body)
                .await
                .0
        }
    };
    assert_eq!(put(vec![], "one").await, StatusCode::CREATED);
    let (_, h, _) = call(&app, Method::HEAD, "/zarr/p/blob", &[], Body::empty()).await;
    let etag = h["etag"].to_str().unwrap().to_string();
    for refused in [
        vec![("if-none-match", etag.clone())],
        vec![("if-none-match", format!("\"other\", W/{etag}"))],
        vec![("if-match", format!("W/{etag}"))],
        vec![(
            "if-unmodified-since",
            "Sun, 06 Nov 1994 08:49:37 GMT".to_string(),
        )],
    ] {
        assert_eq!(
            put(refused.clone(), "two").await,
            StatusCode::PRECONDITION_FAILED,
            "{refused:?}"
        );
    }
    // One that cannot be read is refused, not dropped.
    let mut req = axum::http::Request::builder()
        .method(Method::PUT)
        .uri("/zarr/p/blob");
    req = req.header(
        "if-match",
        axum::http::HeaderValue::from_bytes(b"\"\xff\"").unwrap(),
    );
    let resp = tower::ServiceExt::oneshot(app.clone(), req.body(Body::from("two")).unwrap());
    assert_eq!(resp.await.unwrap().status(), StatusCode::BAD_REQUEST);
    let (_, _, body) = call(&app, Method::GET, "/zarr/p/blob", &[], Body::empty()).await;
    assert_eq!(body, b"one");
    // Each changes the ETag: the one If-Match names goes first.
    for allowed in [
        vec![("if-match", etag)],
        vec![("if-none-match", "\"other\"".to_string())],
        vec![(
            "if-unmodified-since",
            "Fri, 01 Jan 2100 00:00:00 GMT".to_string(),
        )],
    ] {
        assert_eq!(
            put(allowed.clone(), "three").await,
            StatusCode::NO_CONTENT,
            "{allowed:?}"
        );
    }
}

#[tokio::test]
async fn raw_keys_conditional_writes() {
    let app = app(writable());
    let (s, h, _) = call(
        &app,
        Method::PUT,
        "/zarr/x/blob",
        &[("if-none-match", "*")],
        "one",
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let etag = h.get("etag").unwrap().to_str().unwrap().to_string();
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/x/blob",
            &[("if-none-match", "*")],
            "two"
        )
        .await
        .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/x/blob",
            &[("if-match", "\"stale\"")],
            "two"
        )
        .await
        .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/x/blob",
            &[("if-match", &etag)],
            "two"
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(&app, Method::GET, "/zarr/x/blob", &[], Body::empty())
            .await
            .2,
        b"two"
    );
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/zarr/x/blob",
            &[("if-match", &etag)],
            Body::empty()
        )
        .await
        .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        call(&app, Method::DELETE, "/zarr/x/blob", &[], Body::empty())
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(&app, Method::GET, "/zarr/x/blob", &[], Body::empty())
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&app, Method::DELETE, "/zarr/x/blob", &[], Body::empty())
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/zarr/x/zarr.json",
        &[],
        r#"{"zarr_format": 3, "node_type": "array"}"#,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a broken metadata document is refused"
    );
    assert!(String::from_utf8_lossy(&b).contains("missing field 'shape'"));
    assert_eq!(
        call(&app, Method::PUT, "/zarr/x/.zattrs", &[], "[1]")
            .await
            .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        call(&app, Method::PUT, "/zarr/x/.zattrs", &[], r#"{"a": 1}"#)
            .await
            .0,
        StatusCode::CREATED
    );
    for bad in ["/zarr/__zarrd/locks/x", "/zarr/a/../b"] {
        let (s, _, b) = call(&app, Method::PUT, bad, &[], "v").await;
        assert_eq!(
            s,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            String::from_utf8_lossy(&b)
        );
    }
}

#[tokio::test]
async fn writes_are_refused_when_not_allowed() {
    let read_only = app(Config {
        read_only: true,
        allow_anonymous_writes: true,
        ..Config::default()
    });
    let (s, _, b) = call(&read_only, Method::PUT, "/zarr/k", &[], "v").await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&b).contains("read-only"));
    let anonymous = app(Config::default());
    let (s, _, b) = call(
        &anonymous,
        Method::PUT,
        "/api/v1/meta/g",
        &[("content-type", "application/json")],
        r#"{"node_type":"group"}"#,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&b).contains("--allow-anonymous-writes"));
}

#[tokio::test]
async fn nodes_are_created_edited_and_deleted() {
    let app = app(writable());
    let (s, meta) = json_of(&app, Method::PUT, "/api/v1/meta/a/b/arr", json!({
        "node_type": "array", "zarr_format": 3, "shape": [10, 6], "chunks": [4, 4], "dtype": "int16",
        "fill_value": -1, "dimension_names": ["y", "x"], "attributes": {"units": "m", "keep": 1}})).await;
    assert_eq!(s, StatusCode::CREATED, "{meta}");
    assert_eq!(meta["shape"], json!([10, 6]));
    assert_eq!(
        read_json(&app, "/api/v1/meta/a/b").await["node_type"],
        "group",
        "parents are created"
    );
    let (s, err) = json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/a/b/arr",
        json!({"node_type": "group"}),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("overwrite=true"));
    let (s, _) = json_of(&app, Method::PUT, "/api/v1/meta/v2arr", json!({
        "node_type": "array", "zarr_format": 2, "shape": [5], "dtype": "<f8", "compressor": {"id": "zlib", "level": 1}, "order": "C"})).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = json_of(&app, Method::PUT, "/api/v1/meta/sharded", json!({
        "node_type": "array", "shape": [16, 16], "chunks": [4, 4], "shards": [8, 8], "dtype": "uint8"})).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(
        read_json(&app, "/api/v1/meta/sharded").await["shard_shape"],
        json!([8, 8])
    );
    let (s, meta) = json_of(
        &app,
        Method::PATCH,
        "/api/v1/meta/a/b/arr",
        json!({"attributes": {"units": "km", "keep": null, "new": [1]}, "shape": [12, 6]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{meta}");
    assert_eq!(meta["attributes"], json!({"units": "km", "new": [1]}));
    assert_eq!(meta["shape"], json!([12, 6]));
    let huge = 1u64 << 40;
    let (s, err) = json_of(&app, Method::PUT, "/api/v1/meta/huge", json!({"node_type": "array", "shape": [huge, huge, huge], "chunks": [1, 1, 1], "dtype": "uint8"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more elements"),
        "{err}"
    );
    // Resizing to such a shape is refused too, and the array stays readable.
    let (s, err) = json_of(
        &app,
        Method::PATCH,
        "/api/v1/meta/sharded",
        json!({"shape": [huge, huge]}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more elements"),
        "{err}"
    );
    assert_eq!(
        read_json(&app, "/api/v1/meta/sharded").await["shape"],
        json!([16, 16])
    );
    let (s, meta) = json_of(&app, Method::PUT, "/api/v1/meta/wide", json!({"node_type": "array", "shape": [1u64 << 31, 1u64 << 31], "chunks": [1024, 1024], "dtype": "float64"})).await;
    assert_eq!(s, StatusCode::CREATED, "{meta}");
    assert_eq!(
        meta["nbytes"],
        Value::Null,
        "a byte count past 64 bits is null, not a panic"
    );
    let (s, err) = json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/bad",
        json!({"node_type": "array", "shape": [3], "dtype": "int99"}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(
        call(&app, Method::DELETE, "/api/v1/meta/a", &[], Body::empty())
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/meta/a/b/arr",
            &[],
            Body::empty()
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&app, Method::DELETE, "/api/v1/meta/a", &[], Body::empty())
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

fn npy(descr: &str, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let mut out = zarrd::npy::header(descr, shape);
    out.extend_from_slice(data);
    out
}

#[tokio::test]
async fn regions_in_every_format() {
    let app = app(writable());
    json_of(&app, Method::PUT, "/api/v1/meta/a", json!({"node_type": "array", "shape": [6, 5], "chunks": [4, 4], "dtype": "float32", "fill_value": 0})).await;
    // npy, big-endian, F order.
    let vals: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let f_order: Vec<u8> = [0usize, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|&i| vals[i].to_be_bytes())
        .collect();
    let body = {
        let mut h = zarrd::npy::header("'>f4'", &[2, 3]);
        // Same length, so the header padding stays valid.
        let at = h.windows(5).position(|w| w == b"False").unwrap();
        h[at..at + 5].copy_from_slice(b"True ");
        h.extend(f_order);
        h
    };
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=1:3,2:5",
        &[("content-type", "application/x-npy")],
        body,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let got = read_json(&app, "/api/v1/data/a?select=1:3,2:5&format=json").await;
    assert_eq!(got["data"], json!([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]));
    // Raw bytes, then JSON with a NaN, then a broadcast scalar.
    let raw: Vec<u8> = [7f32, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/api/v1/data/a?select=0,0:2",
            &[("content-type", "application/octet-stream")],
            raw
        )
        .await
        .0,
        StatusCode::OK
    );
    let (s, w) = json_of(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=5,[0,4]",
        json!({"data": ["NaN", 1.5]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!(w["elements"], 2);
    json_of(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=4,:",
        json!({"data": 9}),
    )
    .await;
    let all = read_json(&app, "/api/v1/data/a?format=json").await;
    assert_eq!(all["data"][0], json!([7.0, 8.0, 0.0, 0.0, 0.0]));
    assert_eq!(all["data"][4], json!([9.0, 9.0, 9.0, 9.0, 9.0]));
    assert_eq!(all["data"][5], json!(["NaN", 0.0, 0.0, 0.0, 1.5]));
    // Nested lists whose first path implies more than 2^64 values are ragged, not a panic.
    let mut nested = json!(0);
    for _ in 0..8 {
        let mut level = vec![nested];
        level.extend(std::iter::repeat_n(json!(0), 299));
        nested = Value::Array(level);
    }
    assert_eq!(
        json_of(&app, Method::PUT, "/api/v1/data/a", json!({"data": nested}))
            .await
            .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // An npy header promising more elements than its body holds (overflowing 64 bits) is refused.
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/a",
        &[("content-type", "application/x-npy")],
        npy("'<f4'", &[1 << 40, 1 << 40], &[0; 8]),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        String::from_utf8_lossy(&b)
    );
    // An npy body with a different dtype, and mismatched shapes, are refused clearly.
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=0,0:2",
        &[("content-type", "application/x-npy")],
        npy("'<f8'", &[2], &[0; 16]),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(String::from_utf8_lossy(&b).contains("does not match"));
    let (s, err) = json_of(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=0:2,0:2",
        json!({"data": [1, 2, 3]}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(msg.contains("[3]") && msg.contains("[2, 2]"), "{msg}");
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/api/v1/data/a",
            &[("content-type", "text/csv")],
            "1,2"
        )
        .await
        .0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_eq!(
        json_of(
            &app,
            Method::PUT,
            "/api/v1/data/a?select=9",
            json!({"data": 1})
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    let small = app_with_limit();
    json_of(
        &small,
        Method::PUT,
        "/api/v1/meta/a",
        json!({"node_type": "array", "shape": [100], "dtype": "uint8"}),
    )
    .await;
    let (s, _, b) = call(
        &small,
        Method::PUT,
        "/api/v1/data/a",
        &[("content-type", "application/octet-stream")],
        vec![0u8; 100],
    )
    .await;
    assert_eq!(
        s,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        String::from_utf8_lossy(&b)
    );
    assert!(serde_json::from_slice::<Value>(&b).is_ok());
    // A body declared too large is refused before it is read.
    let declared = [
        ("content-type", "application/octet-stream"),
        ("content-length", "1073741824"),
    ];
    let (s, _, b) = call(
        &small,
        Method::PUT,
        "/api/v1/data/a",
        &declared,
        Body::empty(),
    )
    .await;
    let text = String::from_utf8_lossy(&b);
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(
        text.contains("1073741824") && text.contains("body_too_large"),
        "{text}"
    );
}

fn app_with_limit() -> zarrd::http::App {
    app(Config {
        max_body_size: 64,
        ..writable()
    })
}

#[tokio::test]
async fn appends_grow_and_raw_writes_invalidate() {
    let app = app(writable());
    json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/log",
        json!({"node_type": "array", "shape": [0, 2], "chunks": [3, 2], "dtype": "int32"}),
    )
    .await;
    let (s, r) = json_of(
        &app,
        Method::POST,
        "/api/v1/append/log?axis=0",
        json!({"data": [[1, 2], [3, 4]]}),
    )
    .await;
    assert_eq!(
        (s, r["shape"].clone()),
        (StatusCode::OK, json!([2, 2])),
        "{r}"
    );
    let raw: Vec<u8> = [5i32, 6, 7, 8]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let (s, _, b) = call(
        &app,
        Method::POST,
        "/api/v1/append/log",
        &[("content-type", "application/octet-stream")],
        raw,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    assert_eq!(
        read_json(&app, "/api/v1/data/log?format=json").await["data"],
        json!([[1, 2], [3, 4], [5, 6], [7, 8]])
    );
    let (s, _) = json_of(
        &app,
        Method::POST,
        "/api/v1/append/log?axis=1",
        json!({"data": [[1]]}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    // A raw write of the metadata document is seen at once, even with a trusting cache.
    let mut doc = read_json(&app, "/zarr/log/zarr.json").await;
    doc["attributes"] = json!({"edited": "raw"});
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/log/zarr.json",
            &[],
            doc.to_string()
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        read_json(&app, "/api/v1/meta/log").await["attributes"],
        json!({"edited": "raw"})
    );
    // A raw write of a chunk too.
    let chunk = call(&app, Method::GET, "/zarr/log/c/0/0", &[], Body::empty())
        .await
        .2;
    json_of(
        &app,
        Method::PUT,
        "/api/v1/data/log?select=0,0",
        json!({"data": 100}),
    )
    .await;
    assert_eq!(
        read_json(&app, "/api/v1/data/log?select=0,0&format=json").await["data"],
        json!(100)
    );
    call(&app, Method::PUT, "/zarr/log/c/0/0", &[], chunk).await;
    assert_eq!(
        read_json(&app, "/api/v1/data/log?select=0,0&format=json").await["data"],
        json!(1)
    );
}

#[tokio::test]
async fn bearer_tokens_scopes_and_prefixes() {
    use zarrd::auth::{Scope, TokenConfig};
    let token = |name: &str, secret: &str, scopes: &[Scope], prefixes: &[&str]| TokenConfig {
        name: Some(name.into()),
        token: Some(secret.into()),
        token_sha256: None,
        scopes: scopes.to_vec(),
        prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        access_key_id: None,
    };
    let config = Config {
        tokens: vec![
            token("reader", "reader-secret-0001", &[Scope::Read], &[]),
            token("writer", "writer-secret-0001", &[Scope::Write], &["era5"]),
            token("admin", "admin-secret-00001", &[Scope::Admin], &[]),
        ],
        ..Config::default()
    };
    let app = app(config);
    let bearer = |s: &str| format!("Bearer {s}");
    let (s, h, _) = call(&app, Method::GET, "/api/v1/tree", &[], Body::empty()).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "tokens configured: anonymous reads need --allow-anonymous-reads"
    );
    assert!(h.get("www-authenticate").is_some());
    assert_eq!(
        call(&app, Method::GET, "/healthz", &[], Body::empty())
            .await
            .0,
        StatusCode::OK
    );
    let wrong = bearer("not-a-real-token-123");
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/tree",
            &[("authorization", &wrong)],
            Body::empty()
        )
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    let reader = bearer("reader-secret-0001");
    let writer = bearer("writer-secret-0001");
    let admin = bearer("admin-secret-00001");
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/tree",
            &[("authorization", &reader)],
            Body::empty()
        )
        .await
        .0,
        StatusCode::OK
    );
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/era5/x",
            &[("authorization", &reader)],
            "v"
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/era5/x",
            &[("authorization", &writer)],
            "v"
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/zarr/other/x",
        &[("authorization", &writer)],
        "v",
    )
    .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "outside its prefixes, nothing is there for it"
    );
    assert!(!String::from_utf8_lossy(&b).contains("era5"));
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/zarr/era50/x",
            &[("authorization", &writer)],
            "v"
        )
        .await
        .0,
        StatusCode::NOT_FOUND,
        "prefixes match whole segments"
    );
    let body = r#"{"node_type": "group"}"#;
    assert_eq!(
        call(
            &app,
            Method::PUT,
            "/api/v1/meta/era5/g",
            &[
                ("authorization", &writer),
                ("content-type", "application/json")
            ],
            body
        )
        .await
        .0,
        StatusCode::CREATED
    );
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/api/v1/meta/era5/g",
            &[("authorization", &writer)],
            Body::empty()
        )
        .await
        .0,
        StatusCode::FORBIDDEN,
        "deleting nodes needs admin"
    );
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/api/v1/meta/era5/g",
            &[("authorization", &admin)],
            Body::empty()
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn overload_is_503_with_retry_after_and_metrics_count_it() {
    let app = app(Config {
        max_concurrency: 1,
        ..writable()
    });
    // Hold the only slot with a PUT whose body has not finished arriving.
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
    let slow = {
        let app = app.clone();
        tokio::spawn(async move {
            call(&app, Method::PUT, "/zarr/slow", &[], Body::from_stream(rx))
                .await
                .0
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let (s, h, b) = call(&app, Method::GET, "/zarr/", &[], Body::empty()).await;
    assert_eq!(
        s,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        String::from_utf8_lossy(&b)
    );
    assert_eq!(h.get("retry-after").unwrap(), "1");
    use futures::SinkExt;
    tx.send(Ok(bytes::Bytes::from_static(b"done")))
        .await
        .unwrap();
    drop(tx);
    assert_eq!(slow.await.unwrap(), StatusCode::CREATED);
    let (s, _, text) = call(&app, Method::GET, "/metrics", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("zarrd_load_shed_total"), "{text}");
    assert!(
        text.contains(
            "zarrd_http_requests_total{route=\"/zarr/{*key}\",method=\"PUT\",status=\"201\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("zarrd_cache_hits_total"));
    assert!(text.contains("zarrd_cas_retries_total"));
}

/// Dimensions past what a signed index reaches are refused, even in arrays
/// of no elements: as a shape, and as what an append would grow one to.
/// (They panicked: adding to the axis overflowed, slices clamped to a
/// negative length.)
#[tokio::test]
async fn no_dimension_grows_past_what_an_index_reaches() {
    let app = app(writable());
    let (s, r) = json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/huge",
        json!({"node_type": "array", "shape": [0, u64::MAX], "chunks": [1, 1], "dtype": "int8"}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("dimension 1"),
        "{r}"
    );
    json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/empty",
        json!({"node_type": "array", "shape": [5, 0], "chunks": [1, 1], "dtype": "int32"}),
    )
    .await;
    for rows in [u64::MAX, 1 << 63] {
        let body = npy("'<i4'", &[rows, 0], &[]);
        let (s, _, b) = call(
            &app,
            Method::POST,
            "/api/v1/append/empty?axis=0",
            &[("content-type", "application/x-npy")],
            body,
        )
        .await;
        let text = String::from_utf8_lossy(&b);
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{rows}: {text}");
        assert!(text.contains("longer than zarrd can address"), "{text}");
    }
    let (s, r) = json_of(
        &app,
        Method::PATCH,
        "/api/v1/meta/empty",
        json!({"shape": [u64::MAX, 0]}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    let got = read_json(&app, "/api/v1/meta/empty").await;
    assert_eq!(got["shape"], json!([5, 0]));
    let (s, _, _) = call(
        &app,
        Method::GET,
        "/api/v1/data/empty?select=-9223372036854775808:,0:5",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

/// A type Zarr v3 cannot spell is refused before anything is stored: a
/// structured type with a field of a shape was stored without it, and the
/// node could then be neither read nor created again.
#[tokio::test]
async fn a_type_the_format_cannot_spell_is_refused_before_it_is_stored() {
    let app = app(writable());
    let dtype = json!([["a", "<i4"], ["b", "<f8", [2]]]);
    let spec = |format: u8| json!({"node_type": "array", "shape": [4], "chunks": [2], "dtype": dtype, "zarr_format": format});
    let (s, r) = json_of(&app, Method::PUT, "/api/v1/meta/rec", spec(3)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("zarr_format 2"),
        "{r}"
    );
    let (s, _, _) = call(&app, Method::GET, "/api/v1/meta/rec", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, r) = json_of(&app, Method::PUT, "/api/v1/meta/rec", spec(2)).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let got = read_json(&app, "/api/v1/meta/rec").await;
    assert_eq!(got["shape"], json!([4]), "{got}");
}

/// A body in a content coding is refused, not stored as its coded bytes.
#[tokio::test]
async fn coded_bodies_are_refused() {
    let app = app(writable());
    for coding in ["gzip", "br, gzip"] {
        let headers = [("content-encoding", coding)];
        let (s, _, b) = call(&app, Method::PUT, "/zarr/x/blob", &headers, "abc").await;
        let text = String::from_utf8_lossy(&b);
        assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
        assert!(text.contains("unsupported_encoding"), "{text}");
    }
    let (s, _, _) = call(&app, Method::GET, "/zarr/x/blob", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing was stored");
    let identity = [("content-encoding", "identity")];
    let (s, _, _) = call(&app, Method::PUT, "/zarr/x/blob", &identity, "abc").await;
    assert!(s.is_success(), "{s}");
}

/// An append whose data is not the array's elements reserves no rows (its
/// reservation is not taken back, so the array grew by rows of fill values).
#[tokio::test]
async fn an_append_that_cannot_be_written_does_not_grow_the_array() {
    let app = app(writable());
    let (s, r) = json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/v0",
        json!({"node_type": "array", "shape": [10, 10], "chunks": [5, 5], "dtype": "|V0", "zarr_format": 2}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, _, b) = call(
        &app,
        Method::POST,
        "/api/v1/append/v0?axis=0",
        &[("content-type", "application/x-npy")],
        npy("'|V0'", &[5, 10], &[]),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        String::from_utf8_lossy(&b)
    );
    let got = read_json(&app, "/api/v1/meta/v0").await;
    assert_eq!(got["shape"], json!([10, 10]), "{got}");
}

/// Data of the right shape whose elements its type cannot hold: bool bytes
/// other than 0 and 1 (numpy reads them as True, yet they compare unequal
/// to True), JSON spellings only fill values use, record fields the type
/// does not have, and `.npy` bodies of pickled objects or empty text.
#[tokio::test]
async fn elements_a_type_cannot_hold_are_refused() {
    let app = app(writable());
    for (path, meta) in [
        (
            "b",
            json!({"node_type": "array", "shape": [4], "dtype": "bool", "fill_value": false}),
        ),
        (
            "i",
            json!({"node_type": "array", "shape": [2], "dtype": "int32", "fill_value": 0}),
        ),
        (
            "r",
            json!({"node_type": "array", "shape": [1], "dtype": [["x", "<i4"]], "zarr_format": 2, "fill_value": null}),
        ),
        (
            "s",
            json!({"node_type": "array", "shape": [2], "dtype": "string", "fill_value": ""}),
        ),
    ] {
        let (s, r) = json_of(&app, Method::PUT, &format!("/api/v1/meta/{path}"), meta).await;
        assert_eq!(s, StatusCode::CREATED, "{path}: {r}");
    }
    let refused = |s: StatusCode, b: &[u8], why: &str| {
        let text = String::from_utf8_lossy(b);
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{why}: {text}");
        assert!(text.contains("bad_data"), "{why}: {text}");
        text.to_string()
    };
    let octets = [("content-type", "application/octet-stream")];
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/b",
        &octets,
        vec![0u8, 1, 2, 1],
    )
    .await;
    assert!(refused(s, &b, "raw bool").contains("element 2"));
    let npy_type = [("content-type", "application/x-npy")];
    let body = npy("'|b1'", &[4], &[1, 0, 0, 255]);
    let (s, _, b) = call(&app, Method::PUT, "/api/v1/data/b", &npy_type, body).await;
    assert!(refused(s, &b, "npy bool").contains("element 3"));
    let (s, _, b) = call(
        &app,
        Method::POST,
        "/api/v1/append/b?axis=0",
        &octets,
        vec![7u8],
    )
    .await;
    refused(s, &b, "appended bool");
    let got = read_json(&app, "/api/v1/data/b?format=json").await;
    assert_eq!(got["data"], json!([false, false, false, false]), "{got}");
    assert_eq!(read_json(&app, "/api/v1/meta/b").await["shape"], json!([4]));

    for (path, data, says) in [
        ("i", json!([1, null]), "null is not"),
        ("i", json!([true, 2]), "a boolean is not"),
        ("r", json!([{"x": 1, "y": 2}]), "no field 'y'"),
    ] {
        let (s, _, b) = call(
            &app,
            Method::PUT,
            &format!("/api/v1/data/{path}"),
            &[("content-type", "application/json")],
            json!({ "data": data }).to_string(),
        )
        .await;
        assert!(refused(s, &b, says).contains(says), "{says}");
    }
    let (s, w) = json_of(
        &app,
        Method::PUT,
        "/api/v1/data/r",
        json!({"data": [{"x": 5}]}),
    )
    .await;
    assert!(s.is_success(), "{w}");

    for (descr, says) in [("'|O'", "pickled"), ("'<U0'", "no bytes")] {
        let body = npy(descr, &[2], b"\x80\x04N.");
        let (s, _, b) = call(&app, Method::PUT, "/api/v1/data/s", &npy_type, body).await;
        assert!(refused(s, &b, says).contains(says), "{descr}");
    }
}

/// A v2 array of 130 dimensions has chunk keys of 259 bytes joined by '.',
/// longer than a key's segment can be: refused when it is created, not at
/// its first write. Joined by '/', each index is a segment of its own.
#[tokio::test]
async fn arrays_of_more_dimensions_than_numpy_holds_are_refused() {
    let app = app(writable());
    let spec = |ndim: usize| {
        json!({"node_type": "array", "shape": vec![1; ndim], "chunks": vec![1; ndim], "dtype": "uint8",
               "zarr_format": 2})
    };
    let (s, r) = json_of(&app, Method::PUT, "/api/v1/meta/wide", spec(65)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    assert!(r.to_string().contains("65 dimensions"), "{r}");
    // A record's subarray fields count, as numpy counts them.
    let mut records = spec(60);
    records["dtype"] = json!([["a", "<u1", [1, 1, 1, 1, 1]]]);
    let (s, r) = json_of(&app, Method::PUT, "/api/v1/meta/wide", records).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    assert!(r.to_string().contains("65 dimensions"), "{r}");
    // At the limit, JSON data nests 64 deep both ways.
    let (s, r) = json_of(&app, Method::PUT, "/api/v1/meta/wide", spec(64)).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let nested = (0..64).fold(json!(7), |inner, _| json!([inner]));
    let (s, r) = json_of(
        &app,
        Method::PUT,
        "/api/v1/data/wide",
        json!({ "data": nested }),
    )
    .await;
    assert!(s.is_success(), "{r}");
    let (s, r) = json_of(
        &app,
        Method::GET,
        "/api/v1/data/wide?format=json",
        Value::Null,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert!(r.to_string().contains(&nested.to_string()), "{r}");
}

#[tokio::test]
async fn a_stored_array_of_too_many_dimensions_is_an_error_not_a_crash() {
    // Written by hand (or by another tool): reading it as JSON recursed
    // once per dimension, and 10,000 of them overflowed the stack.
    let dir = tempfile::tempdir().unwrap();
    let ndim = 10_000;
    let mut shape = vec![1; ndim - 1];
    shape.push(0);
    let meta = json!({"zarr_format": 2, "shape": shape, "chunks": vec![1; ndim], "dtype": "|u1",
                      "compressor": null, "filters": null, "fill_value": 0, "order": "C"});
    std::fs::create_dir(dir.path().join("deep")).unwrap();
    std::fs::write(dir.path().join("deep/.zarray"), meta.to_string()).unwrap();
    let app = router(AppState::new(
        Store::local(dir.path()).unwrap(),
        Config::default(),
    ));
    let (s, r) = json_of(
        &app,
        Method::GET,
        "/api/v1/data/deep?format=json",
        Value::Null,
    )
    .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{r}");
    assert_eq!(r["error"]["code"], "invalid_metadata", "{r}");
    assert!(r.to_string().contains("10000 dimensions"), "{r}");
}

#[tokio::test]
async fn json_answers_are_held_to_the_limit_by_their_text() {
    // 2^18 booleans pass the estimate of a 1 MiB limit (four bytes of text
    // an element), but `false,` is six.
    let app = app(Config {
        json_limit: 1 << 20,
        ..writable()
    });
    let (s, r) = json_of(
        &app,
        Method::PUT,
        "/api/v1/meta/flags",
        json!({"node_type": "array", "shape": [512, 512], "chunks": [256, 256], "dtype": "bool"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = json_of(
        &app,
        Method::GET,
        "/api/v1/data/flags?format=json",
        Value::Null,
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{r}");
    assert_eq!(r["error"]["code"], "too_large", "{r}");
    let (s, r) = json_of(
        &app,
        Method::GET,
        "/api/v1/data/flags?format=json&select=0:2,0:3",
        Value::Null,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        r,
        json!({"shape": [2, 3], "dtype": "bool", "data": [[false, false, false], [false, false, false]]})
    );
}
