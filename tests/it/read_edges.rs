//! Reads at the edges of what answers hold: selections of many small
//! chunks built in memory, dtypes too long for a header, colour ranges at
//! the ends of float64, and names HTML reads as markup.

use crate::common::call;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use zarrd::config::Config;
use zarrd::http::{router, AppState};
use zarrd::store::{node_path, Store, StoreKey};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

#[tokio::test]
async fn in_memory_answers_of_many_small_chunks_agree_with_the_stream() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    // 1 x 1 chunks: each slab of the read holds a few thousand of them.
    let mut spec = ArraySpec::new(3, vec![300, 200], DataType::UInt16);
    spec.chunks = Some(vec![1, 1]);
    let a = h
        .create_array(&node_path("tiny").unwrap(), &spec, false)
        .await
        .unwrap();
    let values: Vec<u16> = (0..60_000).map(|i| (i * 7 % 65_521) as u16).collect();
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.write(
        &Selection::all().resolve(&[300, 200]).unwrap(),
        ArrayBytes::Fixed(bytes),
    )
    .await
    .unwrap();
    let app = router(AppState::new(store, Config::default()));
    for select in ["", "?select=5:290:3,[199,0,7,7,150]", "?select=::2,10"] {
        let sep = if select.is_empty() { "?" } else { "&" };
        let uri = format!("/api/v1/data/tiny{select}{sep}format=raw");
        let (s, _, raw) = call(&app, Method::GET, &uri, &[], Body::empty()).await;
        assert_eq!(s, StatusCode::OK, "{uri}");
        let uri = format!("/api/v1/data/tiny{select}{sep}format=json");
        let (s, _, body) = call(&app, Method::GET, &uri, &[], Body::empty()).await;
        assert_eq!(s, StatusCode::OK, "{uri}");
        let doc: Value = serde_json::from_slice(&body).unwrap();
        let mut flat = Vec::new();
        flatten(&doc["data"], &mut flat);
        let streamed: Vec<u64> = raw
            .chunks(2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
            .collect();
        assert_eq!(flat, streamed, "{select}");
    }
}

fn flatten(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| flatten(i, out)),
        other => out.push(other.as_u64().unwrap()),
    }
}

#[tokio::test]
async fn a_dtype_too_long_for_a_header_is_left_to_the_npy_header() {
    let store = Store::memory();
    let fields: Vec<Value> = (0..600)
        .map(|i| json!([format!("field{i}"), "<i2"]))
        .collect();
    let zarray = json!({"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": fields,
                        "compressor": null, "fill_value": null, "order": "C", "filters": null});
    store
        .put(
            &StoreKey::new("many/.zarray").unwrap(),
            zarray.to_string().into(),
        )
        .await
        .unwrap();
    let app = router(AppState::new(store, Config::default()));
    let (s, h, body) = call(&app, Method::GET, "/api/v1/data/many", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        h.get("x-zarr-dtype").is_none(),
        "a {}-byte header",
        body.len()
    );
    assert!(String::from_utf8_lossy(&body[..body.len().min(20_000)]).contains("'field599'"));
    assert_eq!(h["x-zarr-shape"], "3");
    // A short one is still sent.
    let (_, h, _) = call(
        &app,
        Method::GET,
        "/api/v1/data/many?field=field3",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(h["x-zarr-dtype"], "<i2");
}

#[tokio::test]
async fn colours_span_the_whole_float64_range() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![1, 3], DataType::Float64);
    spec.chunks = Some(vec![1, 3]);
    let a = h
        .create_array(&node_path("wide").unwrap(), &spec, false)
        .await
        .unwrap();
    let values = [-1.7e308f64, 1.0, 1.7e308];
    a.write(
        &Selection::all().resolve(&[1, 3]).unwrap(),
        ArrayBytes::Fixed(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
    )
    .await
    .unwrap();
    let app = router(AppState::new(store, Config::default()));
    let uri = "/api/v1/data/wide?format=png&cmap=gray&vmin=-1.7e308&vmax=1.7e308";
    let (s, _, png) = call(&app, Method::GET, uri, &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(4).collect();
    // The colormap's ends and its middle, all opaque (the middle was
    // black when the span overflowed to infinity).
    assert_eq!(px[0], [0, 0, 0, 255]);
    let mid = px[1];
    assert!(
        mid[3] == 255 && mid[0] == mid[1] && (100..200).contains(&mid[0]),
        "{mid:?}"
    );
    assert_eq!(px[2], [255, 255, 255, 255]);
}

#[tokio::test]
async fn listing_links_keep_names_that_read_as_markup_or_schemes() {
    let store = Store::memory();
    for key in ["d/x&lt;y", "d/a&amp;b/c", "d/javascript:alert(1)"] {
        store
            .put(&StoreKey::new(key).unwrap(), "1".into())
            .await
            .unwrap();
    }
    let app = router(AppState::new(store, Config::default()));
    let (s, h, html) = call(
        &app,
        Method::GET,
        "/zarr/d/",
        &[("accept", "text/html")],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["content-security-policy"], "default-src 'none'");
    let html = String::from_utf8(html).unwrap();
    // A name that reads as a URL scheme stays a relative link.
    assert!(html.contains("href=\"javascript%3Aalert(1)\""), "{html}");
    assert!(html.contains("href=\"x%26lt;y\""), "{html}");
    assert!(html.contains("href=\"a%26amp;b/\""), "{html}");
    assert!(html.contains(">x&amp;lt;y<"), "{html}");
}

#[tokio::test]
async fn a_method_a_route_lacks_is_a_json_405_naming_the_allowed_ones() {
    let app = router(AppState::new(Store::memory(), Config::default()));
    let (s, h, body) = call(&app, Method::PATCH, "/zarr/a/b", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["error"]["code"], "method_not_allowed");
    let allow = h["allow"].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("PUT"), "{allow}");
}

/// An OME-Zarr image `img` of two levels, and a group `odd` whose
/// declaration names a level no key can hold.
async fn images() -> Store {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let image = |paths: &[&str]| {
        let datasets: Vec<Value> = paths
            .iter()
            .map(|p| json!({"path": p, "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0]}]}))
            .collect();
        let attrs = json!({"multiscales": [{"version": "0.4", "axes": [{"name": "y"}, {"name": "x"}], "datasets": datasets}]});
        attrs.as_object().unwrap().clone()
    };
    h.create_group(&node_path("img").unwrap(), 3, image(&["0", "1"]), false)
        .await
        .unwrap();
    for (level, size) in [("img/0", 8), ("img/1", 4)] {
        let spec = ArraySpec::new(3, vec![size, size], DataType::UInt8);
        h.create_array(&node_path(level).unwrap(), &spec, false)
            .await
            .unwrap();
    }
    let odd = image(&["0", "a\\b"]);
    h.create_group(&node_path("odd").unwrap(), 3, odd, false)
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn an_image_level_describes_its_image_to_callers_who_may_read_it() {
    use zarrd::auth::{Scope, TokenConfig};
    let token = |secret: &str, prefixes: &[&str]| TokenConfig {
        name: Some(secret.into()),
        token: Some(secret.into()),
        token_sha256: None,
        scopes: vec![Scope::Read],
        prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
        access_key_id: None,
    };
    let config = Config {
        tokens: vec![
            token("whole-image-reader", &["img"]),
            token("one-level-reader-0", &["img/0"]),
        ],
        ..Config::default()
    };
    let app = router(AppState::new(images().await, config));
    let meta = |secret: &'static str, path: &'static str| {
        let app = app.clone();
        async move {
            let bearer = format!("Bearer {secret}");
            let (s, _, b) = call(
                &app,
                Method::GET,
                path,
                &[("authorization", &bearer)],
                Body::empty(),
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
            serde_json::from_slice::<Value>(&b).unwrap()
        }
    };
    let level = meta("whole-image-reader", "/api/v1/meta/img/0").await;
    assert_eq!(level["multiscale"]["level"], 0);
    assert_eq!(level["multiscale"]["group"], "img");
    // A token limited to the level sees the array, not the image around it
    // (its group, the other levels' paths and shapes).
    let level = meta("one-level-reader-0", "/api/v1/meta/img/0").await;
    assert!(level.get("multiscale").is_none(), "{level}");
}

#[tokio::test]
async fn a_declaration_naming_a_level_no_key_can_hold_leaves_a_group() {
    let app = router(AppState::new(images().await, Config::default()));
    let (s, _, b) = call(&app, Method::GET, "/api/v1/meta/odd", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let group: Value = serde_json::from_slice(&b).unwrap();
    assert!(group.get("multiscales").is_none(), "{group}");
    let (s, _, b) = call(&app, Method::GET, "/api/v1/meta/img", &[], Body::empty()).await;
    assert_eq!(s, StatusCode::OK);
    let group: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        group["multiscales"][0]["levels"].as_array().unwrap().len(),
        2,
        "{group}"
    );
}

#[tokio::test]
async fn fixed_bytes_are_text_or_byte_values_never_both_as_strings() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(2, vec![3], DataType::FixedBytes(4));
    spec.chunks = Some(vec![3]);
    let a = h
        .create_array(&node_path("b").unwrap(), &spec, false)
        .await
        .unwrap();
    // Text that reads as base64, bytes that are not UTF-8, and text again.
    let values: Vec<u8> = [&b"/w=="[..], b"\xff\0\0\0", b"AA=="].concat();
    a.write(
        &Selection::all().resolve(&[3]).unwrap(),
        ArrayBytes::Fixed(values),
    )
    .await
    .unwrap();
    let app = router(AppState::new(store, writable_config()));
    let (s, _, body) = call(
        &app,
        Method::GET,
        "/api/v1/data/b?format=json",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["data"], json!(["/w==", [255], "AA=="]));
    // What a read answers, a write takes back unchanged.
    let body = json!({"data": doc["data"]}).to_string();
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/b",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert!(s.is_success(), "{s}: {}", String::from_utf8_lossy(&b));
    let (_, _, again) = call(
        &app,
        Method::GET,
        "/api/v1/data/b?format=json",
        &[],
        Body::empty(),
    )
    .await;
    let again: Value = serde_json::from_slice(&again).unwrap();
    assert_eq!(again["data"], doc["data"]);
}

fn writable_config() -> Config {
    Config {
        allow_anonymous_writes: true,
        ..Config::default()
    }
}

/// Parts of chunks that are not stored read as the fill value whichever
/// way a read goes: chunk by chunk (parts large enough to be filled on the
/// blocking pool too), small chunks loaded together, rows decoded out of
/// Blosc chunks, and sharded (a shard not stored, inner chunks a shard
/// does not hold), from the store and through the cache, for ranges,
/// steps, index lists and points. The output is not filled before the
/// copies, so each of these writes the fill value itself.
#[tokio::test]
async fn chunks_not_stored_read_as_the_fill_value_whichever_way_the_read_goes() {
    use std::sync::Arc;
    use zarrd::config::Recheck;
    use zarrd::service::cache::CachedSource;
    use zarrd::service::ZarrCache;

    let dir = tempfile::tempdir().unwrap();
    let h = Hierarchy::new(Store::local(dir.path()).unwrap());
    let cached = h.clone().with_source(Arc::new(CachedSource(ZarrCache::new(
        64 << 20,
        Recheck::Always,
    ))));
    let (rows, cols) = (640u64, 256u64);
    let spec = |format: u8, chunks: [u64; 2], shards: Option<[u64; 2]>| {
        let mut s = ArraySpec::new(format, vec![rows, cols], DataType::Int32);
        s.chunks = Some(chunks.to_vec());
        s.shards = shards.map(|s| s.to_vec());
        s.fill_value = json!(-7);
        s
    };
    let cases = [
        // Chunks past the size loaded together, one at a time; a missing
        // one's 320 KiB part is filled on the blocking pool.
        ("large", spec(3, [320, 256], None), [320u64, 256u64]),
        // Small chunks, loaded several at a time.
        ("small", spec(2, [8, 8], None), [8, 8]),
        // Blosc (v2's default): a window of a few rows decodes only those.
        ("rows", spec(2, [64, 256], None), [64, 256]),
        ("sharded", spec(3, [40, 64], Some([160, 128])), [40, 64]),
    ];
    let value = |r: u64, c: u64| (r * 1000 + c) as i32;
    // Each selection with the coordinates it reads, in order.
    let range = |a: u64, b: u64, step: usize| (a..b).step_by(step).collect::<Vec<u64>>();
    let orthogonal = |select: &str, r: Vec<u64>, c: Vec<u64>| {
        let cells = r
            .iter()
            .flat_map(|&r| c.iter().map(move |&c| (r, c)))
            .collect();
        (Selection::parse(select).unwrap(), cells)
    };
    let selections: Vec<(Selection, Vec<(u64, u64)>)> = vec![
        orthogonal(":,:", range(0, rows, 1), range(0, cols, 1)),
        orthogonal("3:600,5:250", range(3, 600, 1), range(5, 250, 1)),
        orthogonal("2:5,1:200", range(2, 5, 1), range(1, 200, 1)),
        orthogonal("330:331,:", vec![330], range(0, cols, 1)),
        orthogonal("1:630:7,3:250:5", range(1, 630, 7), range(3, 250, 5)),
        orthogonal(
            "[600,2,39,350],[7,200,0]",
            vec![600, 2, 39, 350],
            vec![7, 200, 0],
        ),
        (
            Selection::parse_points("[[0,0],[639,255],[5,63],[200,100],[5,63]]").unwrap(),
            vec![(0, 0), (639, 255), (5, 63), (200, 100), (5, 63)],
        ),
    ];
    for (name, spec, written) in cases {
        let path = node_path(name).unwrap();
        let array = h.create_array(&path, &spec, false).await.unwrap();
        // One chunk (one inner chunk of one shard) written; the rest not stored.
        let [wr, wc] = written;
        let region: Vec<u8> = (0..wr)
            .flat_map(|r| (0..wc).flat_map(move |c| value(r, c).to_le_bytes()))
            .collect();
        array
            .write(
                &Selection::parse(&format!("0:{wr},0:{wc}"))
                    .unwrap()
                    .resolve(&[rows, cols])
                    .unwrap(),
                ArrayBytes::Fixed(region),
            )
            .await
            .unwrap();
        for (selection, cells) in &selections {
            let want: Vec<u8> = cells
                .iter()
                .flat_map(|&(r, c)| {
                    let v = if r < wr && c < wc { value(r, c) } else { -7 };
                    v.to_le_bytes()
                })
                .collect();
            let resolved = selection.resolve(&[rows, cols]).unwrap();
            for (source, hierarchy) in [("store", &h), ("cache", &cached)] {
                let got = hierarchy
                    .array(&path)
                    .await
                    .unwrap()
                    .read(&resolved)
                    .await
                    .unwrap_or_else(|e| panic!("{name} {selection:?} {source}: {e}"));
                assert!(
                    got == ArrayBytes::Fixed(want.clone()),
                    "{name} {selection:?} from the {source}"
                );
            }
        }
    }
}

/// A selection whose bytes do not fit the machine's addresses (callers
/// bound sizes before reading; this is the engine's own guard) is an
/// error naming why, not an overflow: a panic, or an empty answer.
#[tokio::test]
async fn a_selection_past_the_address_space_is_refused_before_any_reserving() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hierarchy::new(Store::local(dir.path()).unwrap());
    // 2^62 elements of 16 bytes.
    let side = 1u64 << 31;
    let mut spec = ArraySpec::new(3, vec![side, side], DataType::Complex128);
    spec.chunks = Some(vec![1 << 12, 1 << 12]);
    let path = node_path("vast").unwrap();
    let array = h.create_array(&path, &spec, false).await.unwrap();
    let resolved = Selection::all().resolve(&[side, side]).unwrap();
    let e = array.read(&resolved).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("more bytes than this machine can address"),
        "{e}"
    );
}
