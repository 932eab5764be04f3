//! The HTTP service in-process: raw keys and ranges (RFC 9110 edge cases),
//! validators, listings, CORS, the REST API's formats and errors, the cache,
//! and the route table against openapi.yaml.

use axum::body::{to_bytes, Body};
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};
use tower::ServiceExt;
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState, ROUTES};
use zarrd::store::{node_path, Store, StoreKey};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

async fn app_with(store: Store, config: Config) -> zarrd::http::App {
    router(AppState::new(store, config))
}

async fn fixture() -> (Store, zarrd::http::App) {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    h.create_group(&node_path("").unwrap(), 3, Default::default(), false)
        .await
        .unwrap();
    let mut spec = ArraySpec::new(3, vec![10, 8], DataType::Float32);
    spec.chunks = Some(vec![4, 4]);
    spec.fill_value = json!("NaN");
    let a = h
        .create_array(&node_path("g/a").unwrap(), &spec, false)
        .await
        .unwrap();
    let values: Vec<u8> = (0..80).flat_map(|i| (i as f32).to_le_bytes()).collect();
    a.write(
        &Selection::all().resolve(&[10, 8]).unwrap(),
        ArrayBytes::Fixed(values),
    )
    .await
    .unwrap();
    let mut s = ArraySpec::new(
        2,
        vec![3],
        DataType::from_v2_json(&json!([["x", "<i2"], ["y", "<f8", [2]]]))
            .unwrap()
            .0,
    );
    s.chunks = Some(vec![2]);
    let rec = h
        .create_array(&node_path("g/rec").unwrap(), &s, false)
        .await
        .unwrap();
    let mut bytes = Vec::new();
    for i in 0..3i16 {
        bytes.extend(i.to_le_bytes());
        bytes.extend((i as f64 + 0.5).to_le_bytes());
        bytes.extend((i as f64 - 0.5).to_le_bytes());
    }
    rec.write(
        &Selection::all().resolve(&[3]).unwrap(),
        ArrayBytes::Fixed(bytes),
    )
    .await
    .unwrap();
    let mut st = ArraySpec::new(3, vec![3], DataType::String);
    st.chunks = Some(vec![2]);
    let strings = h
        .create_array(&node_path("g/s").unwrap(), &st, false)
        .await
        .unwrap();
    strings
        .write(
            &Selection::all().resolve(&[3]).unwrap(),
            ArrayBytes::Variable(vec![
                b"a".to_vec(),
                b"bcd".to_vec(),
                "é".as_bytes().to_vec(),
            ]),
        )
        .await
        .unwrap();
    store
        .put(
            &StoreKey::new("blob").unwrap(),
            Bytes::from_static(b"0123456789"),
        )
        .await
        .unwrap();
    store
        .put(&StoreKey::new("empty").unwrap(), Bytes::new())
        .await
        .unwrap();
    let app = app_with(store.clone(), Config::default()).await;
    (store, app)
}

async fn send(app: &zarrd::http::App, request: Request<Body>) -> Response {
    app.clone().oneshot(request).await.unwrap()
}

async fn get(
    app: &zarrd::http::App,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Bytes) {
    let mut req = Request::builder().uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = send(app, req.body(Body::empty()).unwrap()).await;
    let status = resp.status();
    let headers = resp.headers().clone();
    (
        status,
        headers,
        to_bytes(resp.into_body(), usize::MAX).await.unwrap(),
    )
}

fn hdr<'a>(h: &'a axum::http::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn ranges_follow_rfc_9110() {
    let (_, app) = fixture().await;
    let (s, h, b) = get(&app, "/zarr/blob", &[("range", "bytes=2-4")]).await;
    assert_eq!(
        (s, &b[..], hdr(&h, "content-range")),
        (StatusCode::PARTIAL_CONTENT, &b"234"[..], "bytes 2-4/10")
    );
    let (s, h, b) = get(&app, "/zarr/blob", &[("range", "bytes=-3")]).await;
    assert_eq!(
        (s, &b[..], hdr(&h, "content-range")),
        (StatusCode::PARTIAL_CONTENT, &b"789"[..], "bytes 7-9/10")
    );
    // A suffix longer than the value is the whole value, still as 206.
    let (s, h, b) = get(&app, "/zarr/blob", &[("range", "bytes=-50")]).await;
    assert_eq!(
        (s, b.len(), hdr(&h, "content-range")),
        (StatusCode::PARTIAL_CONTENT, 10, "bytes 0-9/10")
    );
    let (s, _, b) = get(&app, "/zarr/blob", &[("range", "bytes=8-")]).await;
    assert_eq!((s, &b[..]), (StatusCode::PARTIAL_CONTENT, &b"89"[..]));
    // An end past the value is clamped.
    let (s, h, _) = get(&app, "/zarr/blob", &[("range", "bytes=5-100")]).await;
    assert_eq!(
        (s, hdr(&h, "content-range")),
        (StatusCode::PARTIAL_CONTENT, "bytes 5-9/10")
    );
    for unsatisfiable in ["bytes=10-", "bytes=20-30", "bytes=-0"] {
        let (s, h, b) = get(&app, "/zarr/blob", &[("range", unsatisfiable)]).await;
        assert_eq!(
            (s, hdr(&h, "content-range")),
            (StatusCode::RANGE_NOT_SATISFIABLE, "bytes */10"),
            "{unsatisfiable}"
        );
        assert!(
            serde_json::from_slice::<Value>(&b).unwrap()["error"]["code"]
                == "range_not_satisfiable"
        );
    }
    let (s, h, _) = get(&app, "/zarr/empty", &[("range", "bytes=-5")]).await;
    assert_eq!(
        (s, hdr(&h, "content-range")),
        (StatusCode::RANGE_NOT_SATISFIABLE, "bytes */0")
    );
    // Preconditions come before the range (RFC 9110 §13.2.2).
    let (_, h, _) = get(&app, "/zarr/blob", &[]).await;
    let etag = hdr(&h, "etag").to_string();
    for unsatisfiable in ["bytes=100-", "bytes=-0"] {
        let range = ("range", unsatisfiable);
        let (s, _, _) = get(&app, "/zarr/blob", &[range, ("if-none-match", &etag)]).await;
        assert_eq!(s, StatusCode::NOT_MODIFIED, "{unsatisfiable}");
        let (s, _, _) = get(&app, "/zarr/blob", &[range, ("if-match", "\"other\"")]).await;
        assert_eq!(s, StatusCode::PRECONDITION_FAILED, "{unsatisfiable}");
        let (s, _, _) = get(&app, "/zarr/blob", &[range, ("if-match", &etag)]).await;
        assert_eq!(s, StatusCode::RANGE_NOT_SATISFIABLE, "{unsatisfiable}");
    }
    // A malformed Range is ignored.
    let (s, _, b) = get(&app, "/zarr/blob", &[("range", "bytes=5-2")]).await;
    assert_eq!((s, b.len()), (StatusCode::OK, 10));
    // Several ranges: the whole value, or multipart when asked for.
    let (s, _, b) = get(&app, "/zarr/blob", &[("range", "bytes=0-1,4-5")]).await;
    assert_eq!((s, b.len()), (StatusCode::OK, 10));
    let (s, h, b) = get(
        &app,
        "/zarr/blob",
        &[
            ("range", "bytes=0-1,-2"),
            ("accept", "multipart/byteranges"),
        ],
    )
    .await;
    assert_eq!(s, StatusCode::PARTIAL_CONTENT);
    assert!(hdr(&h, "content-type").starts_with("multipart/byteranges; boundary="));
    let text = String::from_utf8_lossy(&b);
    assert!(
        text.contains("Content-Range: bytes 0-1/10\r\n\r\n01\r\n")
            && text.contains("Content-Range: bytes 8-9/10\r\n\r\n89\r\n"),
        "{text}"
    );
}

#[tokio::test]
async fn validators_and_heads() {
    let (_, app) = fixture().await;
    let (s, h, b) = get(&app, "/zarr/blob", &[]).await;
    assert_eq!(
        (
            s,
            b.len(),
            hdr(&h, "accept-ranges"),
            hdr(&h, "content-length")
        ),
        (StatusCode::OK, 10, "bytes", "10")
    );
    let etag = hdr(&h, "etag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong, quoted: {etag}"
    );
    assert!(!hdr(&h, "last-modified").is_empty());
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-none-match", &etag)]).await.0,
        StatusCode::NOT_MODIFIED
    );
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-none-match", "\"other\"")])
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-match", "\"other\"")])
            .await
            .0,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-match", &etag)]).await.0,
        StatusCode::OK
    );
    // If-Match compares strongly: the same tag marked weak does not match.
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-match", &format!("W/{etag}"))])
            .await
            .0,
        StatusCode::PRECONDITION_FAILED
    );
    let future = httpdate::fmt_http_date(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    );
    assert_eq!(
        get(&app, "/zarr/blob", &[("if-modified-since", &future)])
            .await
            .0,
        StatusCode::NOT_MODIFIED
    );
    // If-Range: the range applies only while the validator matches.
    assert_eq!(
        get(
            &app,
            "/zarr/blob",
            &[("range", "bytes=0-0"), ("if-range", &etag)]
        )
        .await
        .0,
        StatusCode::PARTIAL_CONTENT
    );
    let (s, _, b) = get(
        &app,
        "/zarr/blob",
        &[("range", "bytes=0-0"), ("if-range", "\"stale\"")],
    )
    .await;
    assert_eq!((s, b.len()), (StatusCode::OK, 10));
    let head = send(
        &app,
        Request::head("/zarr/g/a/zarr.json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(hdr(head.headers(), "content-type"), "application/json");
    let len: usize = hdr(head.headers(), "content-length").parse().unwrap();
    assert_eq!(len, get(&app, "/zarr/g/a/zarr.json", &[]).await.2.len());
    let head = send(
        &app,
        Request::head("/zarr/blob")
            .header("if-none-match", &etag)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(head.status(), StatusCode::NOT_MODIFIED);
    // Metadata keys are JSON; compressed only when not a stored value.
    let (_, h, _) = get(&app, "/zarr/g/a/zarr.json", &[("accept-encoding", "gzip")]).await;
    assert_eq!(
        hdr(&h, "content-encoding"),
        "",
        "stored values are never compressed"
    );
}

#[tokio::test]
async fn errors_are_json_with_cors() {
    let (_, app) = fixture().await;
    let (s, h, b) = get(
        &app,
        "/zarr/g/a/c/9/9",
        &[("origin", "https://example.org")],
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a missing chunk is 404");
    assert_eq!(hdr(&h, "access-control-allow-origin"), "*");
    let body: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(body["error"]["status"], 404);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("g/a/c/9/9"));
    for bad in ["/zarr/a/../../etc/passwd", "/zarr/a//b", "/zarr/%2Fetc"] {
        let (s, _, b) = get(&app, bad, &[]).await;
        assert!(
            s == StatusCode::BAD_REQUEST || s == StatusCode::NOT_FOUND,
            "{bad}: {s}"
        );
        assert!(serde_json::from_slice::<Value>(&b).is_ok(), "{bad}");
    }
    let pre = send(
        &app,
        Request::builder()
            .method(Method::OPTIONS)
            .uri("/zarr/blob")
            .header("origin", "https://example.org")
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "range, if-none-match")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert!(pre.status().is_success());
    let allowed = hdr(pre.headers(), "access-control-allow-headers").to_lowercase();
    assert!(
        allowed.contains("range")
            && allowed.contains("if-none-match")
            && allowed.contains("authorization"),
        "{allowed}"
    );
    let (_, h, _) = get(&app, "/zarr/blob", &[("origin", "https://example.org")]).await;
    assert!(hdr(&h, "access-control-expose-headers").contains("content-range"));
    assert_eq!(get(&app, "/nowhere", &[]).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn listings_html_and_json() {
    let (_, app) = fixture().await;
    let (s, h, b) = get(&app, "/zarr/g/", &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(hdr(&h, "content-type").starts_with("text/html"));
    let html = String::from_utf8_lossy(&b);
    assert!(
        html.contains("href=\"a/\"") && html.contains("href=\"zarr.json\""),
        "{html}"
    );
    let (_, _, b) = get(&app, "/zarr/g/a/", &[("accept", "application/json")]).await;
    let listing: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(listing["keys"], json!(["zarr.json"]));
    assert_eq!(listing["prefixes"], json!(["c"]));
    assert_eq!(
        get(&app, "/zarr/nothing/", &[]).await.0,
        StatusCode::NOT_FOUND
    );
    let (s, _, b) = get(&app, "/zarr/", &[("accept", "application/json")]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&b).unwrap()["prefixes"]
        .as_array()
        .unwrap()
        .contains(&json!("g")));
}

fn parse_npy(b: &[u8]) -> (String, Vec<u64>, Vec<u8>) {
    let h = zarrd::npy::parse_header(b).unwrap();
    (h.descr, h.shape, b[h.data_offset..].to_vec())
}

#[tokio::test]
async fn data_formats() {
    let (_, app) = fixture().await;
    let (s, h, b) = get(&app, "/api/v1/data/g/a?select=1:3,-2:", &[]).await;
    assert_eq!(
        (s, hdr(&h, "content-type")),
        (StatusCode::OK, "application/x-npy")
    );
    let (descr, shape, data) = parse_npy(&b);
    assert_eq!((descr.as_str(), shape), ("'<f4'", vec![2, 2]));
    let vals: Vec<f32> = data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, vec![14.0, 15.0, 22.0, 23.0]);
    assert_eq!(hdr(&h, "content-length").parse::<usize>().unwrap(), b.len());
    let (_, h, b) = get(&app, "/api/v1/data/g/a?select=0,[7,0]&format=raw", &[]).await;
    assert_eq!(
        (hdr(&h, "x-zarr-shape"), hdr(&h, "x-zarr-dtype")),
        ("2", "<f4")
    );
    assert_eq!(b.len(), 8);
    let (_, _, b) = get(
        &app,
        "/api/v1/data/g/a?points=[[0,0],[9,7]]",
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap(),
        json!({"shape": [2], "dtype": "float32", "data": [0.0, 79.0]})
    );
    let (_, _, b) = get(&app, "/api/v1/data/g/rec?field=y&format=json", &[]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!([[0.5, -0.5], [1.5, 0.5], [2.5, 1.5]])
    );
    let (_, _, b) = get(&app, "/api/v1/data/g/rec?select=1&format=json", &[]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!({"x": 1, "y": [1.5, 0.5]})
    );
    let (_, _, b) = get(&app, "/api/v1/data/g/rec?select=1:", &[]).await;
    assert_eq!(parse_npy(&b).0, "[('x', '<i2'), ('y', '<f8', (2,))]");
    let (_, _, b) = get(&app, "/api/v1/data/g/s?format=json", &[]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!(["a", "bcd", "é"])
    );
    let (_, _, b) = get(&app, "/api/v1/data/g/s", &[]).await;
    let (descr, _, data) = parse_npy(&b);
    assert_eq!((descr.as_str(), data.len()), ("'<U3'", 36));
    let post = send(
        &app,
        Request::post("/api/v1/data/g/a")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"points": [[1,1],[2,2]], "format": "json"}"#))
            .unwrap(),
    )
    .await;
    let body: Value =
        serde_json::from_slice(&to_bytes(post.into_body(), usize::MAX).await.unwrap()).unwrap();
    assert_eq!(body["data"], json!([9.0, 18.0]));
    // Points that are not integer coordinates say what points are.
    let post = send(
        &app,
        Request::post("/api/v1/data/g/a")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"points": [[1.5, 1]]}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(post.status(), StatusCode::BAD_REQUEST);
    let body = to_bytes(post.into_body(), usize::MAX).await.unwrap();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("list of coordinate lists of integers"),
        "{text}"
    );
}

#[tokio::test]
async fn data_errors_say_what_is_wrong() {
    let (store, _) = fixture().await;
    let small_json = Config {
        json_limit: 100,
        ..Config::default()
    };
    let app = app_with(store, small_json).await;
    for (uri, status, needle) in [
        ("/api/v1/data/g/a?select=::0", 400, "must not be zero"),
        ("/api/v1/data/g/a?select=99", 400, "out of bounds"),
        ("/api/v1/data/g/a?select=0,0,0", 400, "3 dimensions"),
        ("/api/v1/data/g/a?points=[[1]]", 400, "coordinates"),
        ("/api/v1/data/g/a?format=tsv", 400, "format"),
        ("/api/v1/data/g/a?format=csv", 413, "limit"),
        ("/api/v1/data/g/a?field=x", 400, "no fields"),
        ("/api/v1/data/g/rec?field=z", 400, "fields are x, y"),
        ("/api/v1/data/g/nope", 404, "g/nope"),
        ("/api/v1/data/g", 400, "group"),
        ("/api/v1/data/g/a?format=json", 413, "limit"),
        ("/api/v1/data/g/s?format=raw", 406, "fixed-size"),
        ("/api/v1/data/g/a?bogus=1", 400, ""),
    ] {
        let (s, _, b) = get(&app, uri, &[]).await;
        assert_eq!(s.as_u16(), status, "{uri}: {}", String::from_utf8_lossy(&b));
        let text = String::from_utf8_lossy(&b);
        assert!(text.contains(needle), "{uri}: {text}");
    }
}

#[tokio::test]
async fn meta_and_tree() {
    let (_, app) = fixture().await;
    let (_, _, b) = get(&app, "/api/v1/meta/g/a", &[]).await;
    let meta: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(meta["shape"], json!([10, 8]));
    assert_eq!(meta["dtype"]["numpy"], "<f4");
    assert_eq!(meta["fill_value"], "NaN");
    assert_eq!(meta["chunks_initialized"], 6);
    assert_eq!(meta["chunks_total"], 6);
    let grid: Vec<u64> = serde_json::from_value(meta["chunk_grid"].clone()).unwrap();
    assert_eq!(grid.iter().product::<u64>(), 6);
    let present: Vec<Vec<u64>> = serde_json::from_value(meta["chunks_present"].clone()).unwrap();
    assert_eq!(present.len(), 6, "which chunks are stored, in order");
    assert_eq!(present[0], [0, 0]);
    assert!(present.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(meta["nbytes"], 320);
    let (_, _, b) = get(&app, "/api/v1/meta/g", &[]).await;
    let group: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(group["members"].as_array().unwrap().len(), 3);
    let (_, _, b) = get(&app, "/api/v1/tree", &[]).await;
    let tree: Value = serde_json::from_slice(&b).unwrap();
    let paths: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["", "g", "g/a", "g/rec", "g/s"]);
    assert_eq!(get(&app, "/healthz", &[]).await.0, StatusCode::OK);
    assert_eq!(get(&app, "/readyz", &[]).await.0, StatusCode::OK);
}

#[tokio::test]
async fn cache_hits_and_revalidates_external_writes() {
    let (store, _) = fixture().await;
    // Values changed less than 2 s before they are read are read again at
    // every recheck until they settle; the fixture was written just now.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let app = app_with(
        store.clone(),
        Config {
            recheck_cached: Recheck::Always,
            ..Config::default()
        },
    )
    .await;
    let uri = "/api/v1/data/g/a?select=0,0&format=json";
    assert_eq!(
        serde_json::from_slice::<Value>(&get(&app, uri, &[]).await.2).unwrap()["data"],
        json!(0.0)
    );
    let (_, _, b) = get(&app, uri, &[]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!(0.0)
    );
    let stats: Value = serde_json::from_slice(&get(&app, "/api/v1/stats", &[]).await.2).unwrap();
    assert!(stats["cache"]["hits"].as_u64().unwrap() >= 1, "{stats}");
    // Another writer replaces the chunk behind the server's back.
    let other = Hierarchy::new(store.clone());
    let a = other.array(&node_path("g/a").unwrap()).await.unwrap();
    a.write(
        &Selection::parse("0,0").unwrap().resolve(&[10, 8]).unwrap(),
        ArrayBytes::Fixed(42f32.to_le_bytes().to_vec()),
    )
    .await
    .unwrap();
    let (_, _, b) = get(&app, uri, &[]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!(42.0),
        "revalidation by ETag sees the new chunk"
    );
    // With `never`, the cache keeps serving what it has.
    let (store2, _) = fixture().await;
    let app = app_with(
        store2.clone(),
        Config {
            recheck_cached: Recheck::Never,
            ..Config::default()
        },
    )
    .await;
    get(&app, uri, &[]).await;
    let a = Hierarchy::new(store2)
        .array(&node_path("g/a").unwrap())
        .await
        .unwrap();
    a.write(
        &Selection::parse("0,0").unwrap().resolve(&[10, 8]).unwrap(),
        ArrayBytes::Fixed(42f32.to_le_bytes().to_vec()),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&get(&app, uri, &[]).await.2).unwrap()["data"],
        json!(0.0)
    );
}

#[tokio::test]
async fn small_values_come_from_the_cache_until_a_write_or_a_recheck() {
    let key = |k: &str| StoreKey::new(k).unwrap();
    let store = Store::memory();
    let config = |recheck| Config {
        recheck_cached: recheck,
        allow_anonymous_writes: true,
        ..Config::default()
    };
    let app = app_with(store.clone(), config(Recheck::Never)).await;
    store
        .put(&key("blob"), Bytes::from_static(b"one"))
        .await
        .unwrap();
    let big = vec![7u8; (zarrd::service::cache::STORED_MAX + 1) as usize];
    store
        .put(&key("big"), Bytes::from(big.clone()))
        .await
        .unwrap();
    let (status, h, body) = get(&app, "/zarr/blob", &[]).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"one"[..]));
    let etag = hdr(&h, "etag").to_string();
    assert_eq!(get(&app, "/zarr/big", &[]).await.2.len(), big.len());

    // Changed behind the server's back: with `never`, the cached value stays.
    store
        .put(&key("blob"), Bytes::from_static(b"two"))
        .await
        .unwrap();
    store
        .put(&key("big"), Bytes::from_static(b"small now"))
        .await
        .unwrap();
    assert_eq!(&get(&app, "/zarr/blob", &[]).await.2[..], b"one");
    let (status, _, _) = get(&app, "/zarr/blob", &[("if-none-match", &etag)]).await;
    assert_eq!(
        status,
        StatusCode::NOT_MODIFIED,
        "validators hold for cached values"
    );
    assert_eq!(
        &get(&app, "/zarr/big", &[]).await.2[..],
        b"small now",
        "values over the limit are never held"
    );
    // Ranges are read from the store.
    let (status, _, body) = get(&app, "/zarr/blob", &[("range", "bytes=0-1")]).await;
    assert_eq!(
        (status, &body[..]),
        (StatusCode::PARTIAL_CONTENT, &b"tw"[..])
    );

    // A write through the server invalidates at once.
    let put = Request::builder()
        .method(Method::PUT)
        .uri("/zarr/blob")
        .body(Body::from("three"))
        .unwrap();
    assert!(send(&app, put).await.status().is_success());
    assert_eq!(&get(&app, "/zarr/blob", &[]).await.2[..], b"three");
    let stats: Value = serde_json::from_slice(&get(&app, "/api/v1/stats", &[]).await.2).unwrap();
    assert!(stats["cache"]["hits"].as_u64().unwrap() >= 2, "{stats}");

    // With `always`, every hit is revalidated by ETag.
    let app = app_with(store.clone(), config(Recheck::Always)).await;
    assert_eq!(&get(&app, "/zarr/blob", &[]).await.2[..], b"three");
    store
        .put(&key("blob"), Bytes::from_static(b"four"))
        .await
        .unwrap();
    assert_eq!(&get(&app, "/zarr/blob", &[]).await.2[..], b"four");
}

#[tokio::test]
async fn request_ids_are_unique_unless_the_client_sends_one() {
    let (_, app) = fixture().await;
    let id = |h: &axum::http::HeaderMap| hdr(h, "x-request-id").to_string();
    let first = id(&get(&app, "/healthz", &[]).await.1);
    let second = id(&get(&app, "/healthz", &[]).await.1);
    assert_ne!(first, second);
    for made in [&first, &second] {
        assert_eq!(made.len(), 32, "{made}");
        assert!(made.chars().all(|c| c.is_ascii_hexdigit()), "{made}");
    }
    let kept = get(&app, "/healthz", &[("x-request-id", "trace-42")])
        .await
        .1;
    assert_eq!(id(&kept), "trace-42");
}

#[tokio::test]
async fn oversized_headers_are_refused_with_431() {
    let (store, _) = fixture().await;
    let app = app_with(
        store,
        Config {
            max_header_bytes: 2048,
            ..Config::default()
        },
    )
    .await;
    let (status, _, _) = get(
        &app,
        "/zarr/g/a/zarr.json",
        &[("x-note", &"a".repeat(1000))],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, h, body) = get(
        &app,
        "/zarr/g/a/zarr.json",
        &[("x-note", &"a".repeat(3000))],
    )
    .await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(hdr(&h, "content-type"), "application/json");
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["code"], "headers_too_large");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("2048"),
        "{error}"
    );
    // A long query string counts too.
    let long = format!("/api/v1/data/g/a?select=0,0&pad={}", "b".repeat(3000));
    assert_eq!(
        get(&app, &long, &[]).await.0,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
}

#[test]
fn openapi_documents_exactly_the_routes() {
    let doc: serde_norway::Value =
        serde_norway::from_str(include_str!("../../openapi.yaml")).unwrap();
    let paths = doc["paths"].as_mapping().unwrap();
    let mut documented: Vec<(String, Vec<String>)> = paths
        .iter()
        .map(|(p, ops)| {
            let mut methods: Vec<String> = ops
                .as_mapping()
                .unwrap()
                .keys()
                .filter_map(|k| k.as_str())
                .filter(|k| {
                    [
                        "get",
                        "head",
                        "post",
                        "put",
                        "patch",
                        "delete",
                        "x-propfind",
                    ]
                    .contains(k)
                })
                // PROPFIND is no OpenAPI method: an extension documents it.
                .map(|k| k.trim_start_matches("x-").to_string())
                .collect();
            methods.sort();
            (p.as_str().unwrap().to_string(), methods)
        })
        .collect();
    let mut routed: Vec<(String, Vec<String>)> = ROUTES
        .iter()
        .map(|r| {
            let mut m: Vec<String> = r.methods.iter().map(|op| op.method.to_string()).collect();
            m.sort();
            (r.path.to_string(), m)
        })
        .collect();
    documented.sort();
    routed.sort();
    assert_eq!(documented, routed);
}

/// Each output format, its parameters and the colormaps are documented
/// where clients read them: a new format is its file, its registration
/// and these lines of `openapi.yaml`.
#[test]
fn openapi_documents_every_format_and_its_parameters() {
    use zarrd::http::output::{image::colormaps, FORMATS};
    let doc: serde_norway::Value =
        serde_norway::from_str(include_str!("../../openapi.yaml")).unwrap();
    let data = &doc["paths"]["/api/v1/data/{path}"];
    let strings = |v: &serde_norway::Value| -> Vec<String> {
        v.as_sequence()
            .unwrap_or_else(|| panic!("not a list: {v:?}"))
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let query: Vec<&serde_norway::Value> = data["get"]["parameters"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|p| p["in"].as_str() == Some("query"))
        .collect();
    let query_param = |name: &str| {
        query
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("GET /api/v1/data does not document {name}"))
    };
    let body = &data["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"];
    let names: Vec<String> = FORMATS.iter().map(|f| f.name().to_string()).collect();
    assert_eq!(strings(&query_param("format")["schema"]["enum"]), names);
    assert_eq!(strings(&body["format"]["enum"]), names);
    let cmaps: Vec<String> = colormaps().map(|(n, _)| n.to_string()).collect();
    assert_eq!(strings(&query_param("cmap")["schema"]["enum"]), cmaps);
    assert_eq!(strings(&body["cmap"]["enum"]), cmaps);
    let mut read_or_format: Vec<String> = ["select", "points", "field", "format", "level"]
        .iter()
        .chain(FORMATS.iter().flat_map(|f| f.params()))
        .chain(zarrd::http::input::labels::NAMES)
        .map(|s| s.to_string())
        .collect();
    read_or_format.sort();
    // The families of the label grammar, in the query only (a body gives
    // them as further properties).
    let mut in_query_expected = read_or_format.clone();
    in_query_expected.extend(["sel.{dim}", "isel.{dim}", "tolerance.{dim}"].map(String::from));
    in_query_expected.sort();
    let mut in_query: Vec<String> = query
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    in_query.sort();
    let mut in_body: Vec<String> = body
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    in_body.sort();
    assert_eq!(in_query, in_query_expected, "the query parameters");
    assert_eq!(in_body, read_or_format, "the body's properties");
    // Each format's media type is a documented answer, or a contract
    // checker rejects the answer as undocumented.
    let mut documented: Vec<String> = doc["components"]["responses"]["Data"]["content"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    documented.sort();
    let mut served: Vec<String> = FORMATS
        .iter()
        .map(|f| f.content_type().to_string())
        .collect();
    served.sort();
    assert_eq!(documented, served, "the media types of the answers");
}

#[tokio::test]
async fn served_openapi_is_the_file() {
    let (_, app) = fixture().await;
    let (s, _, b) = get(&app, "/openapi.yaml", &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(&b[..], include_bytes!("../../openapi.yaml"));
}

#[tokio::test]
async fn cors_origins_are_configurable() {
    let config = Config {
        cors: zarrd::config::Cors {
            origins: vec!["https://viewer.example".into()],
            ..Default::default()
        },
        ..Config::default()
    };
    let app = app_with(Store::memory(), config).await;
    let (_, h, _) = get(&app, "/healthz", &[("origin", "https://viewer.example")]).await;
    assert_eq!(
        hdr(&h, "access-control-allow-origin"),
        "https://viewer.example"
    );
    let (_, h, _) = get(&app, "/healthz", &[("origin", "https://elsewhere.example")]).await;
    assert_eq!(hdr(&h, "access-control-allow-origin"), "");
}

/// Clients that send no `Origin` (all but browsers) get the CORS headers
/// such a request gets, so a shared cache that stores their answer hands
/// browsers a usable one: the allowed origin when any is, what it exposes,
/// and `Vary: origin` (beside what else the response varies by) when the
/// answer depends on the origin.
#[tokio::test]
async fn requests_without_origin_get_the_cors_headers_of_such_a_request() {
    let vary = |h: &axum::http::HeaderMap| -> Vec<String> {
        h.get_all("vary")
            .iter()
            .flat_map(|v| v.to_str().unwrap().split(','))
            .map(|v| v.trim().to_ascii_lowercase())
            .collect()
    };
    let (_, app) = fixture().await;
    let (s, h, _) = get(&app, "/api/v1/tree", &[("accept-encoding", "gzip")]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(hdr(&h, "access-control-allow-origin"), "*");
    assert!(hdr(&h, "access-control-expose-headers").contains("x-request-id"));
    // A `*` answer does not vary by origin; what compression varies by stays.
    assert_eq!(vary(&h), ["accept-encoding"]);
    let (_, with_origin, _) = get(
        &app,
        "/zarr/g/a/zarr.json",
        &[("origin", "https://a.example")],
    )
    .await;
    let (_, without, _) = get(&app, "/zarr/g/a/zarr.json", &[]).await;
    for name in [
        "access-control-allow-origin",
        "access-control-expose-headers",
        "vary",
    ] {
        assert_eq!(hdr(&with_origin, name), hdr(&without, name), "{name}");
    }

    let listed = Config {
        cors: zarrd::config::Cors {
            origins: vec!["https://viewer.example".into()],
            ..Default::default()
        },
        ..Config::default()
    };
    let app = app_with(Store::memory(), listed).await;
    let (_, h, _) = get(&app, "/api/v1/tree", &[("accept-encoding", "gzip")]).await;
    assert_eq!(hdr(&h, "access-control-allow-origin"), "");
    assert_eq!(vary(&h), ["accept-encoding", "origin"]);
}

#[tokio::test]
async fn stored_values_carry_the_cache_control_of_their_mount() {
    let (store, _) = fixture().await;
    let archive = Store::memory();
    archive
        .put(
            &StoreKey::new("zarr.json").unwrap(),
            Bytes::from_static(br#"{"zarr_format":3,"node_type":"group"}"#),
        )
        .await
        .unwrap();
    let mounted = Store::with_mounts(store, vec![("archive".into(), archive, true)]).unwrap();
    let mount = zarrd::config::Mount {
        name: "archive".into(),
        source: zarrd::config::Source::Store("memory://".into()),
        read_only: true,
        cache_control: Some("public, max-age=31536000, immutable".into()),
    };
    let default = app_with(
        mounted.clone(),
        Config {
            mounts: vec![mount.clone()],
            ..Config::default()
        },
    )
    .await;
    let (status, h, _) = get(&default, "/zarr/g/a/zarr.json", &[]).await;
    assert_eq!(
        (status, hdr(&h, "cache-control")),
        (StatusCode::OK, "no-cache"),
        "revalidate by default"
    );
    let (status, h, _) = get(&default, "/zarr/archive/zarr.json", &[]).await;
    assert_eq!(
        (status, hdr(&h, "cache-control")),
        (StatusCode::OK, "public, max-age=31536000, immutable")
    );
    let etag = hdr(&h, "etag").to_string();
    let (status, h, _) = get(
        &default,
        "/zarr/archive/zarr.json",
        &[("If-None-Match", &etag)],
    )
    .await;
    assert_eq!(
        (status, hdr(&h, "cache-control")),
        (
            StatusCode::NOT_MODIFIED,
            "public, max-age=31536000, immutable"
        )
    );

    let config = Config {
        cache_control: "public, max-age=600".into(),
        mounts: vec![mount],
        ..Config::default()
    };
    let app = app_with(mounted, config).await;
    for (uri, method) in [
        ("/zarr/g/a/zarr.json", Method::GET),
        ("/zarr/g/a/zarr.json", Method::HEAD),
        ("/zarr/g/", Method::GET),
    ] {
        let resp = send(
            &app,
            Request::builder()
                .method(method.clone())
                .uri(uri)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(
            hdr(resp.headers(), "cache-control"),
            "public, max-age=600",
            "{method} {uri}"
        );
    }
    let (status, h, _) = get(&app, "/zarr/g/a/zarr.json", &[("Range", "bytes=0-3")]).await;
    assert_eq!(
        (status, hdr(&h, "cache-control")),
        (StatusCode::PARTIAL_CONTENT, "public, max-age=600")
    );
    // Errors are never kept.
    let (status, h, _) = get(&app, "/zarr/g/nothing", &[]).await;
    assert_eq!(
        (status, hdr(&h, "cache-control")),
        (StatusCode::NOT_FOUND, "no-store")
    );
}
