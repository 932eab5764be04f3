//! Maps over the demo's `climate/t2m` (descending latitudes, 0-360
//! longitudes): tiles and WMS answer its values where they are on Earth,
//! refuse what is not a map, and hold pictures to the memory budget.

use crate::common::app::{demo_config, reader_within, TestApp};
use zarrd::config::Config;

fn png_size(body: &[u8]) -> (u32, u32) {
    let reader = png::Decoder::new(std::io::Cursor::new(body))
        .read_info()
        .unwrap();
    (reader.info().width, reader.info().height)
}

#[tokio::test]
async fn a_tile_is_a_picture_and_feature_info_is_the_stored_value() {
    let app = TestApp::demo(demo_config()).await;
    let tile = app
        .get("/tiles/climate/t2m/WorldCRS84Quad/0/1/0.png?vmin=-40&vmax=40")
        .await;
    assert_eq!(tile.status, 200, "{}", String::from_utf8_lossy(&tile.body));
    assert_eq!(tile.headers["content-type"], "image/png");
    assert_eq!(png_size(&tile.body), (256, 256));
    // Pixel (40, 30) of 180 x 180 over 0..180 E, 90 S..90 N: 40.5 E,
    // 59.5 N, nearest the cell at lat 60 (index 7) and lon 40 (index 10).
    let info = app
        .get("/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&QUERY_LAYERS=climate/t2m&LAYERS=climate/t2m&CRS=CRS:84&BBOX=0,-90,180,90&WIDTH=180&HEIGHT=180&I=40&J=30&INFO_FORMAT=application/json")
        .await;
    assert_eq!(info.status, 200, "{}", String::from_utf8_lossy(&info.body));
    let feature = &info.json()["features"][0]["properties"];
    assert_eq!(
        feature["index"],
        serde_json::json!({"time": 0, "lat": 7, "lon": 10})
    );
    let stored = app
        .get("/api/v1/data/climate/t2m?select=0,7,10&format=json")
        .await
        .json();
    assert_eq!(feature["value"], stored["data"]);
    // The same place as -140 W... is 220 E on this 0-360 grid.
    let west = app
        .get("/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&QUERY_LAYERS=climate/t2m&LAYERS=climate/t2m&CRS=EPSG:4326&BBOX=0,-180,10,-170&WIDTH=10&HEIGHT=10&I=0&J=0&INFO_FORMAT=application/json")
        .await;
    let lon = &west.json()["features"][0]["properties"]["index"]["lon"];
    assert_eq!(lon, 45, "-179.5 is 180.5 E, nearest lon 180 (index 45)");
}

#[tokio::test]
async fn capabilities_list_georeferenced_arrays_with_their_times() {
    let app = TestApp::demo(demo_config()).await;
    let caps = app.get("/wms?service=wms&request=GetCapabilities").await;
    assert_eq!(caps.status, 200);
    let text = String::from_utf8(caps.body).unwrap();
    assert!(text.contains("<Name>climate/t2m</Name>"), "{text}");
    assert!(!text.contains("<Name>v3/elevation</Name>"));
    assert!(text.contains("<Dimension name=\"time\" units=\"ISO8601\" default=\"2024-01-01"));
    let tj = app
        .get("/tiles/climate/t2m/WebMercatorQuad/tilejson.json")
        .await
        .json();
    assert_eq!(
        tj["bounds"],
        serde_json::json!([-180.0, -90.0, 180.0, 90.0])
    );
}

#[tokio::test]
async fn what_is_not_a_map_is_refused_clearly() {
    let app = TestApp::demo(demo_config()).await;
    let not_map = app
        .get("/tiles/v3/elevation/WebMercatorQuad/0/0/0.png")
        .await;
    assert_eq!(
        (not_map.status.as_u16(), not_map.code().as_str()),
        (404, "not_georeferenced")
    );
    let outside = app
        .get("/tiles/climate/t2m/WebMercatorQuad/2/4/0.png")
        .await;
    assert_eq!(
        (outside.status.as_u16(), outside.code().as_str()),
        (404, "no_such_tile")
    );
    let wms = app
        .get("/wms?SERVICE=WMS&REQUEST=GetMap&LAYERS=v3/elevation&CRS=CRS:84&BBOX=0,0,1,1&WIDTH=1&HEIGHT=1&FORMAT=image/png")
        .await;
    // An exception report comes with a 400, where WMS clients look for one.
    assert_eq!(wms.status, 400);
    assert!(String::from_utf8_lossy(&wms.body).contains("code=\"LayerNotDefined\""));
    let post = app
        .request(
            axum::http::Method::POST,
            "/wms",
            &[],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(post.status, 405);
    assert!(String::from_utf8_lossy(&post.body).contains("<ServiceExceptionReport"));
    for (query, code) in [
        ("scale=log&vmin=-1&vmax=10", "bad_range"),
        ("vmin=10&vmax=1", "bad_range"),
    ] {
        let bad = app
            .get(&format!(
                "/tiles/climate/t2m/WebMercatorQuad/0/0/0.png?{query}"
            ))
            .await;
        assert_eq!(
            (bad.status.as_u16(), bad.code().as_str()),
            (400, code),
            "{query}"
        );
    }
    // TileJSON refuses what its tiles would refuse.
    let tj = app
        .get("/tiles/climate/t2m/WebMercatorQuad/tilejson.json?sel.time=1999-01-01")
        .await;
    assert_eq!((tj.status.as_u16(), tj.code().as_str()), (400, "bad_label"));
}

#[tokio::test]
async fn a_picture_holds_its_memory_from_the_budget() {
    let app = TestApp::demo(Config {
        memory_budget: 64 << 20,
        ..demo_config()
    })
    .await;
    let big = app
        .get("/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=climate/t2m&STYLES=&CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=2048&HEIGHT=2048&FORMAT=image/png")
        .await;
    assert_eq!(big.status, 400, "{}", String::from_utf8_lossy(&big.body));
    assert!(String::from_utf8_lossy(&big.body).contains("memory budget"));
    let small = app
        .get("/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=climate/t2m&STYLES=&CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=512&HEIGHT=256&FORMAT=image/png")
        .await;
    assert_eq!(small.status, 200);
    assert_eq!(png_size(&small.body), (512, 256));
}

#[tokio::test]
async fn a_token_that_may_not_read_the_coordinates_gets_no_map() {
    let app = TestApp::demo(Config {
        tokens: vec![
            reader_within("array", "climate/t2m"),
            reader_within("group", "climate"),
        ],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let tile = "/tiles/climate/t2m/WebMercatorQuad/0/0/0.png?vmin=-40&vmax=40";
    let refused = app.get_as("array", tile).await;
    assert_eq!(
        (refused.status.as_u16(), refused.code().as_str()),
        (403, "forbidden")
    );
    let legend = app.get_as("array", "/tiles/climate/t2m/legend.png").await;
    assert_eq!(legend.status, 403);
    assert_eq!(app.get_as("group", tile).await.status, 200);
    // WMS lists the layers the token may read, with their groups.
    let wms = app
        .get_as("group", "/wms?SERVICE=WMS&REQUEST=GetCapabilities")
        .await;
    assert_eq!(wms.status, 200);
    assert!(String::from_utf8_lossy(&wms.body).contains("<Name>climate/t2m</Name>"));
    let wms = app
        .get_as("array", "/wms?SERVICE=WMS&REQUEST=GetCapabilities")
        .await;
    assert!(!String::from_utf8_lossy(&wms.body).contains("<Name>climate/t2m</Name>"));
    let map = app
        .get_as("array", "/wms?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&LAYERS=climate/t2m&STYLES=&CRS=EPSG:4326&BBOX=-90,-180,90,180&WIDTH=8&HEIGHT=8&FORMAT=image/png")
        .await;
    assert!(String::from_utf8_lossy(&map.body).contains("LayerNotDefined"));
    assert!(wms.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/xml"));
    assert!(String::from_utf8_lossy(&map.body).contains("<ServiceExceptionReport"));
}
