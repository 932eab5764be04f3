//! The web viewer's page and files: served from the binary, public, safe to
//! open from a browser (content types, a content security policy), cached
//! with validators, and the settings the page draws its colorbars from.

use crate::common::app::{token, TestApp};
use crate::common::call;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::Value;
use zarrd::auth::Scope;
use zarrd::config::Config;
use zarrd::store::Store;

/// A server that needs a token for everything but public routes.
fn app() -> zarrd::http::App {
    let reader = token("reader-token-0123456789", &[Scope::Read]);
    let config = Config {
        tokens: vec![reader],
        ..Config::default()
    };
    TestApp::with(Store::memory(), config).app
}

async fn get(app: &zarrd::http::App, uri: &str) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    call(app, Method::GET, uri, &[], Body::empty()).await
}

#[tokio::test]
async fn the_page_is_served_at_the_root_and_at_every_deep_link() {
    let app = app();
    let (s, h, root) = get(&app, "/").await;
    assert_eq!(s, StatusCode::OK, "public, even where data needs a token");
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(h["x-content-type-options"], "nosniff");
    let (s, _, deep) = get(&app, "/view/era5/t2m").await;
    assert_eq!((s, &deep), (StatusCode::OK, &root));
    // The data itself still needs the token.
    let (s, _, _) = get(&app, "/api/v1/tree").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_page_files_come_from_the_binary_with_validators() {
    let app = app();
    for (file, kind) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("viewer.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let (s, h, _) = get(&app, &format!("/viewer/{file}")).await;
        assert_eq!(
            (s, h["content-type"].to_str().unwrap()),
            (StatusCode::OK, kind)
        );
        assert_eq!(h["cache-control"], "no-cache");
        let etag = h["etag"].to_str().unwrap().to_string();
        let (s, _, b) = call(
            &app,
            Method::GET,
            &format!("/viewer/{file}"),
            &[("if-none-match", &etag)],
            Body::empty(),
        )
        .await;
        assert_eq!((s, b.len()), (StatusCode::NOT_MODIFIED, 0), "{file}");
    }
    // Scripts are text, so they are compressed; nothing outside the page is served.
    let (_, h, _) = call(
        &app,
        Method::GET,
        "/viewer/app.js",
        &[("accept-encoding", "gzip")],
        Body::empty(),
    )
    .await;
    assert_eq!(h["content-encoding"], "gzip");
    for uri in [
        "/viewer/nothing.js",
        "/viewer/..%2FCargo.toml",
        "/viewer/.hidden",
    ] {
        let (s, h, b) = get(&app, uri).await;
        let doc: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(doc["error"]["code"], "not_found");
        assert!(h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
    }
}

#[tokio::test]
async fn settings_give_the_colormaps_as_images_are_drawn() {
    let app = app();
    let (s, _, b) = get(&app, "/viewer/settings.json").await;
    assert_eq!(s, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&b).unwrap();
    let maps = doc["colormaps"].as_object().unwrap();
    let names: Vec<&str> = maps.keys().map(String::as_str).collect();
    assert_eq!(names[0], "viridis", "the default first");
    for name in ["magma", "gray", "rdbu"] {
        assert!(names.contains(&name), "{name}");
    }
    let hex = |c: colorous::Color| format!("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
    let viridis = maps["viridis"].as_array().unwrap();
    assert_eq!(viridis[0], hex(colorous::VIRIDIS.eval_continuous(0.0)));
    assert_eq!(
        viridis.last().unwrap(),
        &Value::from(hex(colorous::VIRIDIS.eval_continuous(1.0)))
    );
    assert_eq!(maps["gray"][0], "#000000", "gray runs from black");
    assert_eq!(doc["max_pixels"], Config::default().max_image_pixels);
}

#[tokio::test]
async fn a_directory_of_page_files_replaces_the_built_in_copy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<!doctype html><p>edited").unwrap();
    let config = Config {
        viewer_dir: Some(dir.path().to_path_buf()),
        ..Config::default()
    };
    let app = TestApp::with(Store::memory(), config).app;
    let (s, h, b) = get(&app, "/").await;
    assert_eq!(
        (s, b.as_slice()),
        (StatusCode::OK, &b"<!doctype html><p>edited"[..])
    );
    assert_eq!(h["cache-control"], "no-store", "edits show on reload");
    let (s, _, _) = get(&app, "/viewer/app.js").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "only the directory's files");
}
