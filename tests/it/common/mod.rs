//! What the tests share: one request through the router, and (`process`)
//! the zarrd binary started on a loopback port.

pub mod app;
pub mod process;

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use tower::ServiceExt;

/// Send one request to `app`; its status, headers and whole body.
pub async fn call(
    app: &zarrd::http::App,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(body.into()).unwrap())
        .await
        .unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let body = to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    (status, headers, body)
}

/// Store `value` at `key` directly, bypassing the server.
#[allow(dead_code)]
pub async fn put(store: &zarrd::store::Store, key: &str, value: impl Into<bytes::Bytes>) {
    store
        .put(&zarrd::store::StoreKey::new(key).unwrap(), value.into())
        .await
        .unwrap();
}
