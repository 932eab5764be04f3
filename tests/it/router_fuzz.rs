//! Malformed URLs, selections, headers and bodies thrown at the router find
//! no panic and no 5xx other than 503.

use axum::body::{to_bytes, Body};
use axum::http::{Method, Request};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;
use zarrd::config::Config;
use zarrd::http::{router, AppState};
use zarrd::store::node_path;
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

fn app() -> zarrd::http::App {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(async {
        let store = zarrd::store::Store::memory();
        let h = Hierarchy::new(store.clone());
        let mut spec = ArraySpec::new(3, vec![12, 9], DataType::Int16);
        spec.chunks = Some(vec![5, 4]);
        let a = h
            .create_array(&node_path("g/a").unwrap(), &spec, false)
            .await
            .unwrap();
        a.write(
            &Selection::all().resolve(&[12, 9]).unwrap(),
            ArrayBytes::Fixed(vec![3; 216]),
        )
        .await
        .unwrap();
        let mut rec = ArraySpec::new(
            2,
            vec![4],
            DataType::from_v2_json(&json!([["x", "<f4"], ["y", "|S3"]]))
                .unwrap()
                .0,
        );
        rec.chunks = Some(vec![3]);
        h.create_array(&node_path("g/r").unwrap(), &rec, false)
            .await
            .unwrap();
        store
    });
    router(AppState::new(
        store,
        Config {
            allow_anonymous_writes: true,
            json_limit: 1 << 16,
            ..Config::default()
        },
    ))
}

const PATHS: [&str; 12] = [
    "/zarr/",
    "/zarr/g/a/",
    "/zarr/g/a/zarr.json",
    "/zarr/g/a/c/0/0",
    "/api/v1/data/g/a",
    "/api/v1/data/g/r",
    "/api/v1/meta/g",
    "/api/v1/tree/g",
    "/api/v1/append/g/a",
    "/api/v1/meta/g/a",
    "/api/v1/data/g",
    "/zarr/g",
];

fn method(i: u8) -> Method {
    [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::POST,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ][i as usize % 7]
        .clone()
}

fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,30}",
        "(select|points|field|format|axis|overwrite)=[0-9:,\\[\\]\\-. a-z%]{0,20}",
        Just("select=::-1".to_string()),
        Just("points=[[1,2],[3]]".to_string()),
        Just("%ff%fe".to_string()),
        Just("select=99999999999999999999".to_string()),
        Just("axis=-1".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn no_panic_no_5xx(
        path in 0usize..PATHS.len(),
        suffix in "[ -~]{0,12}",
        query in noise(),
        m in any::<u8>(),
        header_value in "[ -~]{0,24}",
        header_pick in 0usize..6,
        content_type in prop_oneof![Just("application/json"), Just("application/x-npy"), Just("application/octet-stream"), Just("text/plain")],
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        thread_local! {
            static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        }
        // A fresh store per case: each request meets a healthy hierarchy
        // (a write of garbage into a chunk makes later reads of it 500, rightly).
        let app = app();
        let suffix: String = suffix.chars().filter(|c| !c.is_whitespace() && *c != '#' && *c != '?').collect();
        let uri = format!("{}{}?{}", PATHS[path], suffix, query.replace(' ', "%20"));
        let Ok(uri) = uri.parse::<axum::http::Uri>() else { return Ok(()) };
        let header = ["range", "if-match", "if-none-match", "if-range", "accept", "authorization"][header_pick];
        let mut request = Request::builder().method(method(m)).uri(uri.clone()).header("content-type", content_type);
        if let Ok(v) = axum::http::HeaderValue::from_str(&header_value) {
            request = request.header(header, v);
        }
        let request = request.body(Body::from(body)).unwrap();
        let status = RT.with(|rt| rt.block_on(async {
            let resp = app.clone().oneshot(request).await.unwrap();
            let status = resp.status();
            let _ = to_bytes(resp.into_body(), usize::MAX).await;
            status
        }));
        prop_assert!(!status.is_server_error() || status.as_u16() == 503, "{} {uri} {header}: {header_value:?} -> {status}", method(m));
    }
}
