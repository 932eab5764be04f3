//! `format=png`: selections drawn through a colormap (or as RGB), the
//! colormap's ends at vmin/vmax, clipping, transparency, and every refusal.

use crate::common::call;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState};
use zarrd::store::{node_path, Store};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

async fn app(max_image_pixels: u64) -> zarrd::http::App {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![3, 4, 5], DataType::Float32);
    spec.chunks = Some(vec![1, 4, 5]);
    spec.fill_value = json!("NaN");
    let a = h
        .create_array(&node_path("f").unwrap(), &spec, false)
        .await
        .unwrap();
    // Step t holds t*100 + 0..20, with one NaN at (1, 2) of step 0.
    let mut values: Vec<f32> = (0..60).map(|i| ((i / 20) * 100 + i % 20) as f32).collect();
    values[7] = f32::NAN;
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.write(
        &Selection::all().resolve(&[3, 4, 5]).unwrap(),
        ArrayBytes::Fixed(bytes),
    )
    .await
    .unwrap();
    let mut rgb = ArraySpec::new(3, vec![2, 2, 3], DataType::UInt8);
    rgb.chunks = Some(vec![2, 2, 3]);
    let r = h
        .create_array(&node_path("rgb").unwrap(), &rgb, false)
        .await
        .unwrap();
    r.write(
        &Selection::all().resolve(&[2, 2, 3]).unwrap(),
        ArrayBytes::Fixed((0..12).map(|i| i * 20).collect()),
    )
    .await
    .unwrap();
    let mut c = ArraySpec::new(3, vec![2, 2], DataType::Complex64);
    c.chunks = Some(vec![2, 2]);
    h.create_array(&node_path("complex").unwrap(), &c, false)
        .await
        .unwrap();
    let mut s = ArraySpec::new(3, vec![2, 2], DataType::String);
    s.chunks = Some(vec![2, 2]);
    h.create_array(&node_path("text").unwrap(), &s, false)
        .await
        .unwrap();
    router(AppState::new(
        store,
        Config {
            recheck_cached: Recheck::Never,
            max_image_pixels,
            ..Config::default()
        },
    ))
}

/// (width, height, RGBA pixels) of a PNG.
fn decode(png: &[u8]) -> (u32, u32, Vec<[u8; 4]>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(4)
        .map(|p| [p[0], p[1], p[2], p[3]])
        .collect();
    (info.width, info.height, pixels)
}

fn rgba(c: colorous::Color) -> [u8; 4] {
    [c.r, c.g, c.b, 255]
}

async fn image(app: &zarrd::http::App, query: &str) -> (u32, u32, Vec<[u8; 4]>) {
    let (s, h, b) = call(
        app,
        Method::GET,
        &format!("/api/v1/data/f?{query}"),
        &[("origin", "https://page.example")],
        Body::empty(),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::OK,
        "{query}: {}",
        String::from_utf8_lossy(&b)
    );
    assert_eq!(h["content-type"], "image/png");
    assert!(
        h.contains_key("access-control-allow-origin"),
        "usable as <img src> from any page"
    );
    assert!(
        !h.contains_key("content-encoding"),
        "images are not compressed again"
    );
    decode(&b)
}

#[tokio::test]
async fn a_2d_selection_is_drawn_through_the_colormap() {
    let app = app(1 << 20).await;
    let (w, h, px) = image(&app, "select=0,:,:&format=png&vmin=0&vmax=19").await;
    assert_eq!((w, h), (5, 4));
    assert_eq!(
        px[0],
        rgba(colorous::VIRIDIS.eval_continuous(0.0)),
        "vmin is the colormap's start"
    );
    assert_eq!(
        px[19],
        rgba(colorous::VIRIDIS.eval_continuous(1.0)),
        "vmax is its end"
    );
    assert_eq!(px[10], rgba(colorous::VIRIDIS.eval_continuous(10.0 / 19.0)));
    assert_eq!(px[7][3], 0, "NaN is transparent");
    // Clipping: values outside the range take the end colours.
    let (_, _, px) = image(&app, "select=0,:,:&format=png&vmin=5&vmax=10").await;
    assert_eq!(px[0], rgba(colorous::VIRIDIS.eval_continuous(0.0)));
    assert_eq!(px[19], rgba(colorous::VIRIDIS.eval_continuous(1.0)));
    // Other colormaps; gray runs from black.
    let (_, _, px) = image(&app, "select=0,:,:&format=png&vmin=0&vmax=19&cmap=gray").await;
    assert_eq!(px[0], [0, 0, 0, 255]);
    let (_, _, px) = image(&app, "select=0,:,:&format=png&vmin=0&vmax=19&cmap=magma").await;
    assert_eq!(px[19], rgba(colorous::MAGMA.eval_continuous(1.0)));
    // Without a range: the 2nd to 98th percentile of what is drawn.
    let (_, _, px) = image(&app, "select=2,:,:&format=png").await;
    assert_eq!(px[0], rgba(colorous::VIRIDIS.eval_continuous(0.0)));
    assert_eq!(px[19], rgba(colorous::VIRIDIS.eval_continuous(1.0)));
    // Log scale: zero cannot be drawn.
    let (_, _, px) = image(&app, "select=0,:,:&format=png&scale=log&vmin=1&vmax=19").await;
    assert_eq!(px[0][3], 0);
    assert_eq!(px[1], rgba(colorous::VIRIDIS.eval_continuous(0.0)));
    // Strided selections draw at lower resolution.
    let (w, h, _) = image(&app, "select=1,::2,::2&format=png").await;
    assert_eq!((w, h), (3, 2));
}

#[tokio::test]
async fn three_uint8_channels_are_rgb() {
    let app = app(1 << 20).await;
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/rgb?format=png",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (w, h, px) = decode(&b);
    assert_eq!((w, h), (2, 2));
    assert_eq!(px[0], [0, 20, 40, 255]);
    assert_eq!(px[3], [180, 200, 220, 255]);
}

#[tokio::test]
async fn what_cannot_be_drawn_is_refused_clearly() {
    let app = app(10).await;
    for (uri, status, code) in [
        (
            "/api/v1/data/f?format=png",
            StatusCode::BAD_REQUEST,
            "not_an_image",
        ),
        (
            "/api/v1/data/f?select=0,0,:&format=png",
            StatusCode::BAD_REQUEST,
            "not_an_image",
        ),
        (
            "/api/v1/data/f?select=0,0:0,:&format=png",
            StatusCode::BAD_REQUEST,
            "not_an_image",
        ),
        (
            "/api/v1/data/f?select=0,:,:&format=png",
            StatusCode::UNPROCESSABLE_ENTITY,
            "too_large",
        ),
        (
            "/api/v1/data/f?select=0,0:2,0:2&format=png&cmap=rainbow",
            StatusCode::BAD_REQUEST,
            "bad_cmap",
        ),
        (
            "/api/v1/data/f?select=0,0:2,0:2&format=png&scale=cubic",
            StatusCode::BAD_REQUEST,
            "bad_scale",
        ),
        (
            "/api/v1/data/f?select=0,0:2,0:2&format=png&vmin=-1&vmax=5&scale=log",
            StatusCode::BAD_REQUEST,
            "bad_range",
        ),
        (
            "/api/v1/data/f?select=0,0:2,0:2&format=png&vmin=x",
            StatusCode::BAD_REQUEST,
            "bad_query",
        ),
        (
            "/api/v1/data/complex?format=png",
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_drawable",
        ),
        (
            "/api/v1/data/text?format=png",
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_drawable",
        ),
    ] {
        let (s, _, b) = call(&app, Method::GET, uri, &[], Body::empty()).await;
        let doc: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        assert_eq!(
            (s, doc["error"]["code"].as_str().unwrap_or("")),
            (status, code),
            "{uri}: {doc}"
        );
    }
}

#[tokio::test]
async fn an_image_names_the_range_it_was_drawn_with() {
    let app = app(1 << 20).await;
    let range = |h: &axum::http::HeaderMap| -> (f64, f64) {
        let v = |n: &str| h[n].to_str().unwrap().parse::<f64>().unwrap();
        (v("x-zarr-vmin"), v("x-zarr-vmax"))
    };
    let get = |q: &'static str| {
        let app = app.clone();
        async move {
            let (s, h, _) = call(
                &app,
                Method::GET,
                &format!("/api/v1/data/f?{q}"),
                &[("origin", "https://page.example")],
                Body::empty(),
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{q}");
            let exposed = h["access-control-expose-headers"].to_str().unwrap();
            assert!(exposed.contains("x-zarr-vmin") && exposed.contains("x-zarr-vmax"));
            h
        }
    };
    assert_eq!(
        range(&get("select=0,:,:&format=png&vmin=2&vmax=9").await),
        (2.0, 9.0)
    );
    // Step 2 holds 200..220: its 2nd and 98th percentiles.
    assert_eq!(range(&get("select=2,:,:&format=png").await), (200.0, 219.0));
    // On a log scale the range is still in values, not in their logarithms.
    let (lo, hi) = range(&get("select=0,:,:&format=png&scale=log&vmin=1&vmax=19").await);
    assert!(
        (lo - 1.0).abs() < 1e-9 && (hi - 19.0).abs() < 1e-9,
        "{lo} {hi}"
    );
    // RGB has no range.
    let (_, h, _) = call(
        &app,
        Method::GET,
        "/api/v1/data/rgb?format=png",
        &[],
        Body::empty(),
    )
    .await;
    assert!(!h.contains_key("x-zarr-vmin"));
}

/// A format reads its own parameters, from a query or a POST body alike,
/// and checks them before anything is read; a parameter no format reads
/// is refused by name.
#[tokio::test]
async fn formats_read_their_own_parameters_from_query_and_body() {
    let app = app(1 << 20).await;
    let post = |body: Value| {
        let app = app.clone();
        async move {
            let (s, h, b) = call(
                &app,
                Method::POST,
                "/api/v1/data/f",
                &[("content-type", "application/json")],
                Body::from(body.to_string()),
            )
            .await;
            let doc: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
            (s, h, doc)
        }
    };
    let (s, h, _) = post(json!({"select": "0,:,:", "format": "png", "vmin": 2, "vmax": 9})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["x-zarr-vmin"], "2");
    assert_eq!(h["x-zarr-vmax"], "9");
    let (s, _, doc) = post(json!({"format": "png", "cmap": "rainbow"})).await;
    assert_eq!(
        (s, doc["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_cmap"))
    );
    let (s, _, doc) = post(json!({"format": "png", "vmin": "low"})).await;
    assert_eq!(
        (s, doc["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("bad_body")),
        "{doc}"
    );
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("'vmin'"),
        "the parameter is named: {doc}"
    );
    // A name given twice is refused, in a query as in a body.
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/f?select=0,:,:&format=png&cmap=gray&cmap=magma",
        &[],
        Body::empty(),
    )
    .await;
    let doc: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        (s, doc["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_query"))
    );
    let (s, _, b) = call(
        &app,
        Method::POST,
        "/api/v1/data/f",
        &[("content-type", "application/json")],
        Body::from(r#"{"format": "json", "select": "0", "format": "png"}"#),
    )
    .await;
    let doc: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        (s, doc["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("bad_body")),
        "{doc}"
    );
    for (status, uri_or_body) in [
        (
            StatusCode::BAD_REQUEST,
            Err("/api/v1/data/f?select=0&vmni=2"),
        ),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Ok(json!({"select": "0", "vmni": 2})),
        ),
    ] {
        let doc = match uri_or_body {
            Err(uri) => {
                let (s, _, b) = call(&app, Method::GET, uri, &[], Body::empty()).await;
                assert_eq!(s, status);
                serde_json::from_slice::<Value>(&b).unwrap()
            }
            Ok(body) => {
                let (s, _, doc) = post(body).await;
                assert_eq!(s, status);
                doc
            }
        };
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("'vmni'") && message.contains("vmin"),
            "{message}"
        );
    }
    // Another format's parameters are read by that format only: JSON
    // answers the values whatever `cmap` says.
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/f?select=2,0,0&format=json&cmap=gray",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["data"],
        json!(200.0)
    );
}

/// A thumbnail: status, headers and, when it is an image, its pixels.
async fn preview(
    app: &zarrd::http::App,
    path: &str,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    call(
        app,
        Method::GET,
        &format!("/api/v1/preview/{path}"),
        &[],
        Body::empty(),
    )
    .await
}

#[tokio::test]
async fn a_thumbnail_is_a_small_strided_picture_of_the_first_step() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![2, 300, 600], DataType::UInt16);
    spec.chunks = Some(vec![1, 100, 100]);
    let a = h
        .create_array(&node_path("wide").unwrap(), &spec, false)
        .await
        .unwrap();
    // Step 0 rises from left to right (from 1: 0 is the fill value, which
    // is transparent); step 1 is all high.
    let values: Vec<u16> = (0..2 * 300 * 600)
        .map(|i| {
            if i < 300 * 600 {
                (i % 600) as u16 + 1
            } else {
                1000
            }
        })
        .collect();
    a.write(
        &Selection::all().resolve(&[2, 300, 600]).unwrap(),
        ArrayBytes::Fixed(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
    )
    .await
    .unwrap();
    let mut line = ArraySpec::new(3, vec![1000], DataType::Float64);
    line.chunks = Some(vec![100]);
    let l = h
        .create_array(&node_path("series").unwrap(), &line, false)
        .await
        .unwrap();
    l.write(
        &Selection::all().resolve(&[1000]).unwrap(),
        ArrayBytes::Fixed((0..1000).flat_map(|i| (i as f64).to_le_bytes()).collect()),
    )
    .await
    .unwrap();
    let mut rgb = ArraySpec::new(3, vec![4, 4, 3], DataType::UInt8);
    rgb.chunks = Some(vec![4, 4, 3]);
    h.create_array(&node_path("rgb").unwrap(), &rgb, false)
        .await
        .unwrap();
    let mut text = ArraySpec::new(3, vec![4], DataType::String);
    text.chunks = Some(vec![4]);
    h.create_array(&node_path("g/text").unwrap(), &text, false)
        .await
        .unwrap();
    let app = router(AppState::new(
        store,
        Config {
            recheck_cached: Recheck::Never,
            allow_anonymous_writes: true,
            ..Config::default()
        },
    ));

    // At most 128 pixels on the long side, the aspect kept: 600 / 5 = 120.
    let (s, headers, b) = preview(&app, "wide").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(headers["content-type"], "image/png");
    let (w, hgt, px) = decode(&b);
    assert_eq!((w, hgt), (120, 60));
    assert_eq!(px[0], rgba(colorous::VIRIDIS.eval_continuous(0.0)));
    assert_eq!(
        px[119],
        rgba(colorous::VIRIDIS.eval_continuous(1.0)),
        "step 0, robust range"
    );

    // Unchanged: the browser's copy is still good.
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/preview/wide",
        &[("if-none-match", &etag)],
        Body::empty(),
    )
    .await;
    assert_eq!((s, b.len()), (StatusCode::NOT_MODIFIED, 0));

    // A write through the server shows in the next thumbnail.
    let (s, _, _) = call(
        &app,
        Method::PUT,
        "/api/v1/data/wide?select=0,:,0:300",
        &[("content-type", "application/json")],
        serde_json::to_vec(&json!({"data": vec![vec![999u16; 300]; 300]})).unwrap(),
    )
    .await;
    assert!(s.is_success(), "{s}");
    let (_, headers, b) = preview(&app, "wide").await;
    assert_ne!(headers["etag"].to_str().unwrap(), etag);
    let (_, _, px) = decode(&b);
    assert_eq!(
        px[0],
        rgba(colorous::VIRIDIS.eval_continuous(1.0)),
        "the left half now holds the highest value"
    );

    // A series is a line; RGB is drawn as its channels.
    let (s, _, b) = preview(&app, "series").await;
    assert_eq!(s, StatusCode::OK);
    let (w, hgt, px) = decode(&b);
    assert_eq!((w, hgt), (128, 48));
    assert!(px.iter().any(|p| p[3] == 255) && px.iter().any(|p| p[3] == 0));
    let (s, _, b) = preview(&app, "rgb").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(decode(&b).0, 4);

    // What has no picture says why.
    for (path, status, code) in [
        ("g", StatusCode::BAD_REQUEST, "not_an_array"),
        ("g/text", StatusCode::UNPROCESSABLE_ENTITY, "not_drawable"),
        ("nothing", StatusCode::NOT_FOUND, "not_found"),
    ] {
        let (s, _, b) = preview(&app, path).await;
        let doc: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
        assert_eq!(
            (s, doc["error"]["code"].as_str().unwrap_or("")),
            (status, code),
            "{path}: {doc}"
        );
    }
}

/// Drawing costs some 36 bytes a pixel beyond the data: an image reserves
/// that from the memory budget before it is drawn, and one that could never
/// fit is refused before anything is read; while the budget is held by
/// others, the next waits, then gets 503 with `Retry-After`.
#[tokio::test]
async fn images_reserve_their_drawing_from_the_memory_budget() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![4096, 4096], DataType::Float32);
    spec.chunks = Some(vec![1024, 1024]);
    h.create_array(&node_path("big").unwrap(), &spec, false)
        .await
        .unwrap();
    let app = router(AppState::new(
        store,
        Config {
            recheck_cached: Recheck::Never,
            // The smallest budget: 256 MiB.
            memory_budget: 0,
            ..Config::default()
        },
    ));
    // 16 Mpx: 64 MiB of data, as much again for its encoding and 512 MiB
    // of drawing, more than the budget: refused before it is read.
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/big?format=png",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let e: Value = serde_json::from_slice(&b).unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--memory-budget"),
        "{e}"
    );
    // 4 Mpx fits (32 MiB + 128 MiB), alone.
    let one = "/api/v1/data/big?format=png&select=0:2048,0:2048";
    let (s, h, _) = call(&app, Method::GET, one, &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["content-type"], "image/png");
    // Two at once: one of them may wait for the other; none fails.
    let both =
        futures::future::join_all((0..2).map(|_| call(&app, Method::GET, one, &[], Body::empty())))
            .await;
    for (s, h, _) in both {
        assert!(
            s == StatusCode::OK
                || (s == StatusCode::SERVICE_UNAVAILABLE && h.contains_key("retry-after")),
            "{s}"
        );
    }
}

/// With `--recheck-cached always` a thumbnail is kept by the ETags of its
/// array's document and the chunks it was drawn from: while they hold it is
/// not read and drawn again (a chunk rewritten in place at the same size and
/// time keeps its ETag, so the kept picture shows), and a chunk whose ETag
/// changes is drawn anew.
#[tokio::test]
async fn thumbnails_are_kept_while_their_chunks_keep_their_etags() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![64, 64], DataType::UInt8);
    spec.chunks = Some(vec![32, 32]);
    spec.codecs = Some(Value::Null);
    let a = h
        .create_array(&node_path("t").unwrap(), &spec, false)
        .await
        .unwrap();
    let values: Vec<u8> = (0..64 * 64).map(|i| (i % 64) as u8).collect();
    a.write(
        &Selection::all().resolve(&[64, 64]).unwrap(),
        ArrayBytes::Fixed(values),
    )
    .await
    .unwrap();
    // Old enough for their ETags to be trusted.
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    let set_time = |path: &std::path::Path, t: std::time::SystemTime| {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(t))
            .unwrap();
    };
    for file in ["t/zarr.json", "t/c/0/0", "t/c/0/1", "t/c/1/0", "t/c/1/1"] {
        set_time(&dir.path().join(file), long_ago);
    }
    let app = router(AppState::new(
        store,
        Config {
            recheck_cached: Recheck::Always,
            cache_size: 0,
            ..Config::default()
        },
    ));
    let (s, _, first) = preview(&app, "t").await;
    assert_eq!(s, StatusCode::OK);
    // Rewritten in place, same size, same time: the same ETag.
    let chunk = dir.path().join("t/c/0/0");
    std::fs::write(&chunk, vec![255u8; 32 * 32]).unwrap();
    set_time(&chunk, long_ago);
    let (_, _, kept) = preview(&app, "t").await;
    assert_eq!(
        kept, first,
        "drawn again although nothing it was drawn from changed"
    );
    // A new time: a new ETag, a new picture.
    set_time(&chunk, long_ago + std::time::Duration::from_secs(1));
    let (_, _, redrawn) = preview(&app, "t").await;
    assert_ne!(redrawn, first);
}

/// An answer built whole holds its memory until its body has been taken,
/// not until it was handed to the connection: a client that reads nothing
/// keeps it reserved, and what drawing took beyond the answer's own bytes
/// is given back once it is drawn.
#[tokio::test]
async fn answers_hold_their_memory_until_sent() {
    use tower::ServiceExt;
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![1024, 1024], DataType::Float32);
    spec.chunks = Some(vec![512, 512]);
    h.create_array(&node_path("a").unwrap(), &spec, false)
        .await
        .unwrap();
    let state = AppState::new(
        store,
        Config {
            recheck_cached: Recheck::Never,
            ..Config::default()
        },
    );
    let app = router(state.clone());
    let budget = state.service.budget();
    let get = |uri: &str| axum::http::Request::get(uri).body(Body::empty()).unwrap();
    // JSON of 4 MiB of data: its text stays reserved while unread.
    let response = app
        .clone()
        .oneshot(get("/api/v1/data/a?format=json"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = budget.reserved();
    assert!(text >= 2 << 20, "{text}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(body.len() as u64 <= text + (1 << 10));
    assert_eq!(budget.reserved(), 0);
    // A PNG: drawing took 32 bytes a pixel; the file alone is kept.
    let response = app
        .clone()
        .oneshot(get("/api/v1/data/a?format=png"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(budget.reserved() < 1 << 20, "{}", budget.reserved());
    drop(response);
    assert_eq!(budget.reserved(), 0);
}
