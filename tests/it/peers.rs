//! What other servers' clients rely on, in-process: folders without their
//! slash redirect (fsspec, GDAL), WebDAV listings (object_store, rclone),
//! S3 writes refused as S3 refuses an operation it lacks, GetObject's
//! `response-*` overrides, 201 for a put that creates, arrays of codecs
//! zarrd lacks stored and served raw, and the consolidation switches.

use crate::common::{call, put};
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::config::Config;
use zarrd::http::{router, App, AppState};
use zarrd::store::Store;

/// A v2 group `g` with an array `g/a` (two chunks) and a value `top`.
async fn fixture(config: Config) -> (Store, App) {
    let store = Store::memory();
    put(&store, "g/.zgroup", r#"{"zarr_format": 2}"#).await;
    put(
        &store,
        "g/a/.zarray",
        json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i2",
               "compressor": null, "fill_value": 0, "order": "C", "filters": null})
        .to_string(),
    )
    .await;
    put(&store, "g/a/0", vec![1u8, 0, 2, 0]).await;
    put(&store, "g/a/1", vec![3u8, 0, 4, 0]).await;
    put(&store, "top", "t").await;
    let app = router(AppState::new(store.clone(), config));
    (store, app)
}

fn writable() -> Config {
    Config {
        allow_anonymous_writes: true,
        ..Config::default()
    }
}

fn header<'a>(h: &'a axum::http::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn a_folder_without_its_slash_redirects_to_it() {
    let (_, app) = fixture(Config::default()).await;
    for method in [Method::GET, Method::HEAD] {
        let (s, h, _) = call(&app, method.clone(), "/zarr/g/a", &[], "").await;
        assert_eq!(s, StatusCode::MOVED_PERMANENTLY, "{method}");
        assert_eq!(header(&h, "location"), "/zarr/g/a/");
        // The redirect is a plain answer: browsers read it across origins.
        let (_, h, _) = call(
            &app,
            method,
            "/zarr/g",
            &[("origin", "https://x.example")],
            "",
        )
        .await;
        assert_eq!(header(&h, "access-control-allow-origin"), "*");
    }
    // Percent-encoding and the query are kept.
    let (s, h, _) = call(&app, Method::GET, "/zarr/g?x=1", &[], "").await;
    assert_eq!(s, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&h, "location"), "/zarr/g/?x=1");
    let (s, h, _) = call(&app, Method::GET, "/zarr", &[], "").await;
    assert_eq!(s, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&h, "location"), "/zarr/");
    // A value is itself; what holds nothing is 404; S3 has no folders.
    assert_eq!(
        call(&app, Method::GET, "/zarr/top", &[], "").await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, Method::GET, "/zarr/g/nothing", &[], "").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&app, Method::GET, "/s3/zarr/g/a", &[], "").await.0,
        StatusCode::NOT_FOUND
    );
}

/// The `(href, is folder, size)` of each `response` of a multistatus.
fn responses(body: &[u8]) -> Vec<(String, bool, Option<u64>)> {
    let text = std::str::from_utf8(body).unwrap();
    assert!(text.starts_with("<?xml"), "{text}");
    text.split("<response>")
        .skip(1)
        .map(|r| {
            let between = |open: &str, close: &str| {
                r.split_once(open)
                    .and_then(|(_, rest)| rest.split_once(close))
                    .map(|(v, _)| v.to_string())
            };
            (
                between("<href>", "</href>").unwrap(),
                r.contains("<collection/>"),
                between("<getcontentlength>", "</getcontentlength>").map(|n| n.parse().unwrap()),
            )
        })
        .collect()
}

async fn propfind(app: &App, uri: &str, depth: Option<&str>) -> (StatusCode, Vec<u8>) {
    let method = Method::from_bytes(b"PROPFIND").unwrap();
    let headers: Vec<(&str, &str)> = depth.map(|d| ("depth", d)).into_iter().collect();
    let body = r#"<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>"#;
    let (s, _, b) = call(app, method, uri, &headers, body).await;
    (s, b)
}

#[tokio::test]
async fn propfind_lists_levels_and_everything_below() {
    let (_, app) = fixture(Config::default()).await;
    let (s, body) = propfind(&app, "/zarr/g", Some("1")).await;
    assert_eq!(s, StatusCode::MULTI_STATUS);
    assert_eq!(
        responses(&body),
        vec![
            ("/zarr/g/".into(), true, None),
            ("/zarr/g/.zgroup".into(), false, Some(18)),
            ("/zarr/g/a/".into(), true, None),
        ]
    );
    // Depth infinity (the default) names every value and folder below.
    let (_, body) = propfind(&app, "/zarr/g/", None).await;
    let hrefs: Vec<String> = responses(&body).into_iter().map(|r| r.0).collect();
    assert_eq!(
        hrefs,
        [
            "/zarr/g/",
            "/zarr/g/.zgroup",
            "/zarr/g/a/",
            "/zarr/g/a/.zarray",
            "/zarr/g/a/0",
            "/zarr/g/a/1"
        ]
    );
    // Depth 0: the folder, or the value, itself.
    let (_, body) = propfind(&app, "/zarr/g", Some("0")).await;
    assert_eq!(responses(&body), vec![("/zarr/g/".into(), true, None)]);
    let (_, body) = propfind(&app, "/zarr/g/a/0", Some("1")).await;
    assert_eq!(
        responses(&body),
        vec![("/zarr/g/a/0".into(), false, Some(4))]
    );
    // The root, with or without its slash.
    for root in ["/zarr/", "/zarr"] {
        let (s, body) = propfind(&app, root, Some("1")).await;
        assert_eq!(s, StatusCode::MULTI_STATUS);
        let hrefs: Vec<String> = responses(&body).into_iter().map(|r| r.0).collect();
        assert_eq!(hrefs, ["/zarr/", "/zarr/g/", "/zarr/top"], "{root}");
    }
    // Nothing there, and a depth that is none.
    assert_eq!(
        propfind(&app, "/zarr/nope", Some("1")).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        propfind(&app, "/zarr/g", Some("2")).await.0,
        StatusCode::BAD_REQUEST
    );
    // Other methods the route lacks stay 405, and Allow names PROPFIND.
    let (s, h, _) = call(&app, Method::PATCH, "/zarr/g/a/0", &[], "").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&h, "allow"), "GET,HEAD,PUT,DELETE,PROPFIND");
}

#[tokio::test]
async fn propfind_pages_large_folders_and_escapes_names() {
    let store = Store::memory();
    for i in 0..2500 {
        put(&store, &format!("big/{i:05}"), "x").await;
    }
    put(&store, "odd/a b&<c>#", "y").await;
    let app = router(AppState::new(store, Config::default()));
    let (_, body) = propfind(&app, "/zarr/big", Some("1")).await;
    let listed = responses(&body);
    assert_eq!(
        listed.len(),
        2501,
        "the folder and each of its values, across pages"
    );
    assert_eq!(listed[2500].0, "/zarr/big/02499");
    let (_, body) = propfind(&app, "/zarr/odd", Some("infinity")).await;
    assert_eq!(responses(&body)[1].0, "/zarr/odd/a%20b%26%3Cc%3E%23");
}

#[tokio::test]
async fn propfind_lists_only_what_the_token_may_see() {
    let config = Config {
        tokens: vec![zarrd::auth::TokenConfig {
            name: Some("g-reader".into()),
            token: Some("g-only-token-0123456789".into()),
            token_sha256: None,
            scopes: vec![zarrd::auth::Scope::Read],
            prefixes: vec!["g".into()],
            access_key_id: None,
        }],
        allow_anonymous_reads: Some(false),
        ..Config::default()
    };
    let (_, app) = fixture(config).await;
    let method = Method::from_bytes(b"PROPFIND").unwrap();
    let auth = [
        ("authorization", "Bearer g-only-token-0123456789"),
        ("depth", "1"),
    ];
    assert_eq!(
        call(&app, method.clone(), "/zarr/g", &auth, "").await.0,
        StatusCode::MULTI_STATUS
    );
    // The root lists the way to g, and nothing else.
    let (status, _, body) = call(&app, method.clone(), "/zarr/", &auth, "").await;
    assert_eq!(status, StatusCode::MULTI_STATUS);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("/zarr/g/"), "{body}");
    assert_eq!(
        call(&app, method, "/zarr/g", &[("depth", "1")], "").await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn s3_writes_are_not_implemented() {
    let (_, app) = fixture(Config::default()).await;
    for (method, uri) in [
        (Method::PUT, "/s3/zarr/g/new"),
        (Method::DELETE, "/s3/zarr/g/a/0"),
        (Method::POST, "/s3/zarr?delete"),
    ] {
        let (s, h, body) = call(&app, method.clone(), uri, &[], "x").await;
        assert_eq!(s, StatusCode::NOT_IMPLEMENTED, "{method} {uri}");
        assert!(header(&h, "content-type").contains("xml"));
        assert!(String::from_utf8_lossy(&body).contains("<Code>NotImplemented</Code>"));
    }
    let (s, _, _) = call(&app, Method::PATCH, "/s3/zarr/g/a/0", &[], "").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}

fn reader_token() -> Config {
    Config {
        tokens: vec![zarrd::auth::TokenConfig {
            name: Some("reader".into()),
            token: Some("reader-token-0123456789".into()),
            token_sha256: None,
            scopes: vec![zarrd::auth::Scope::Read],
            prefixes: vec![],
            access_key_id: None,
        }],
        allow_anonymous_reads: Some(true),
        ..Config::default()
    }
}

#[tokio::test]
async fn get_object_takes_response_header_overrides_from_authenticated_requests() {
    let (_, app) = fixture(reader_token()).await;
    let uri = "/s3/zarr/g/a/0?response-content-type=text%2Fplain\
               &response-content-disposition=attachment%3B%20filename%3D%22c0.bin%22\
               &response-cache-control=no-store";
    let token = ("authorization", "Bearer reader-token-0123456789");
    for method in [Method::GET, Method::HEAD] {
        let (s, h, _) = call(&app, method, uri, &[token], "").await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(header(&h, "content-type"), "text/plain");
        assert_eq!(
            header(&h, "content-disposition"),
            "attachment; filename=\"c0.bin\""
        );
        assert_eq!(header(&h, "cache-control"), "no-store");
        // Whatever type it is given, a stored value runs nothing.
        assert!(header(&h, "content-security-policy").contains("sandbox"));
    }
    let (s, h, _) = call(&app, Method::GET, uri, &[token, ("range", "bytes=0-1")], "").await;
    assert_eq!(s, StatusCode::PARTIAL_CONTENT);
    assert_eq!(header(&h, "content-type"), "text/plain");
    // Anonymous links cannot choose how a browser takes stored bytes.
    let html = "/s3/zarr/g/a/0?response-content-type=text%2Fhtml";
    let (s, _, body) = call(&app, Method::GET, html, &[], "").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("<Code>InvalidRequest</Code>"));
    let (s, _, body) = call(
        &app,
        Method::GET,
        "/s3/zarr/g/a/0?response-content-type=a%0Ab",
        &[token],
        "",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("response-content-type"));
}

#[tokio::test]
async fn a_put_that_creates_answers_201() {
    let (_, app) = fixture(writable()).await;
    let (s, h, _) = call(&app, Method::PUT, "/zarr/g/new", &[], "1").await;
    assert_eq!(s, StatusCode::CREATED);
    assert!(!header(&h, "etag").is_empty());
    let (s, _, _) = call(&app, Method::PUT, "/zarr/g/new", &[], "2").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _, _) = call(&app, Method::PUT, "/zarr/g/new2", &[("if-match", "*")], "2").await;
    assert_eq!(s, StatusCode::PRECONDITION_FAILED);
    let conditional = [("if-none-match", "\"other\"")];
    let (s, _, _) = call(&app, Method::PUT, "/zarr/g/new3", &conditional, "3").await;
    assert_eq!(s, StatusCode::CREATED);
}

#[tokio::test]
async fn arrays_of_codecs_zarrd_lacks_are_stored_and_served_raw() {
    let (_, app) = fixture(writable()).await;
    let doc = json!({"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "someone.elses.codec", "configuration": {"level": 3}}]});
    let (s, _, body) = call(&app, Method::PUT, "/zarr/x/zarr.json", &[], doc.to_string()).await;
    assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
    let (s, _, _) = call(&app, Method::PUT, "/zarr/x/c/0", &[], "opaque").await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _, body) = call(&app, Method::GET, "/zarr/x/c/0", &[], "").await;
    assert_eq!((s, &body[..]), (StatusCode::OK, &b"opaque"[..]));
    let (s, _, body) = call(&app, Method::GET, "/api/v1/data/x?format=json", &[], "").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let err: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(err["error"]["code"], "unsupported_codec");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("someone.elses.codec") && message.contains("x/zarr.json"),
        "{message}"
    );
    // Its metadata is described, with why its data is not.
    let (s, _, body) = call(&app, Method::GET, "/api/v1/meta/x", &[], "").await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let meta: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(meta["shape"], json!([4]));
    assert!(meta["undecodable"]
        .as_str()
        .unwrap()
        .contains("someone.elses.codec"));
    // The rest of the hierarchy is unharmed.
    let (s, _, body) = call(&app, Method::GET, "/api/v1/tree", &[], "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(String::from_utf8_lossy(&body).contains("\"x\""));
    // A codec zarrd has, configured wrong, is still refused.
    let mut bad = doc.clone();
    bad["codecs"] =
        json!([{"name": "bytes"}, {"name": "zstd", "configuration": {"level": "high"}}]);
    let (s, _, _) = call(&app, Method::PUT, "/zarr/y/zarr.json", &[], bad.to_string()).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn v2_consolidation_can_be_switched_off() {
    let (_, on) = fixture(Config::default()).await;
    let (s, _, body) = call(&on, Method::GET, "/zarr/g/.zmetadata", &[], "").await;
    assert_eq!(s, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert!(doc["metadata"]["a/.zarray"].is_object());
    let config = Config {
        consolidated_v2: false,
        ..Config::default()
    };
    let (_, off) = fixture(config).await;
    let (s, _, _) = call(&off, Method::GET, "/zarr/g/.zmetadata", &[], "").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_tree_names_types_with_their_parameters() {
    let (store, app) = fixture(Config::default()).await;
    put(
        &store,
        "g/s/.zarray",
        json!({"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "|S7",
               "compressor": null, "fill_value": null, "order": "C", "filters": null})
        .to_string(),
    )
    .await;
    put(
        &store,
        "g/t/.zarray",
        json!({"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<M8[10ms]",
               "compressor": null, "fill_value": null, "order": "C", "filters": null})
        .to_string(),
    )
    .await;
    let (_, _, body) = call(&app, Method::GET, "/api/v1/tree/g", &[], "").await;
    let tree: Value = serde_json::from_slice(&body).unwrap();
    let dtype = |path: &str| {
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == path)
            .map(|n| n["dtype"].clone())
            .unwrap()
    };
    assert_eq!(dtype("g/s"), "null_terminated_bytes(length=7)");
    assert_eq!(dtype("g/t"), "numpy.datetime64[10ms]");
    assert_eq!(dtype("g/a"), "int16");
}
