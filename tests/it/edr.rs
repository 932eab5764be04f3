//! OGC API – EDR over the demo's `climate` dataset: its collection, a
//! position query equal to the stored values, answers in every format,
//! and EDR's errors; a token limited to the group reads its collection.

use crate::common::app::{demo_config, reader_within, TestApp};
use zarrd::config::Config;

#[tokio::test]
async fn a_position_is_the_stored_series_of_the_nearest_cell() {
    let app = TestApp::demo(demo_config()).await;
    let c = app.get("/edr/collections/climate").await;
    assert_eq!(c.status, 200);
    let c = c.json();
    assert_eq!(c["id"], "climate");
    assert!(c["parameter_names"]["t2m"]["unit"]["symbol"] == "degC");
    let p = app
        .get("/edr/collections/climate/position?coords=POINT(41%2061)&datetime=2024-01-01/2024-01-03")
        .await;
    assert_eq!(p.status, 200, "{}", String::from_utf8_lossy(&p.body));
    assert_eq!(p.headers["content-type"], "application/prs.coverage+json");
    let p = p.json();
    assert_eq!(p["domain"]["domainType"], "PointSeries");
    // 41 E, 61 N: nearest lon 40 (index 10), lat 60 (index 7).
    assert_eq!(p["domain"]["axes"]["x"]["values"][0], 40.0);
    let stored = app
        .get("/api/v1/data/climate/t2m?select=0:3,7,10&format=json")
        .await
        .json();
    assert_eq!(p["ranges"]["t2m"]["values"], stored["data"]);
    for (f, media) in [
        ("GeoJSON", "application/geo+json"),
        ("CSV", "text/csv; charset=utf-8"),
        ("NetCDF", "application/x-netcdf"),
    ] {
        let a = app
            .get(&format!(
                "/edr/collections/climate/cube?bbox=0,0,10,10&datetime=2024-02-01&f={f}"
            ))
            .await;
        assert_eq!(a.status, 200, "{f}");
        assert_eq!(a.headers["content-type"], media);
    }
}

#[tokio::test]
async fn errors_are_edr_exceptions() {
    let app = TestApp::demo(demo_config()).await;
    let e = app
        .get("/edr/collections/climate/area?coords=POINT(1%202)")
        .await;
    assert_eq!(e.status, 400);
    let doc = e.json();
    assert_eq!(doc["code"], "bad_coords");
    assert!(doc["description"].as_str().unwrap().contains("POLYGON"));
    let e = app
        .get("/edr/collections/climate/position?coords=POINT(0%2091)")
        .await;
    assert_eq!(e.status, 404);
    // A year of the whole grid is more than one answer may hold: refused
    // before anything is read, saying how to ask.
    let e = app
        .get("/edr/collections/climate/cube?bbox=-180,-90,180,90")
        .await;
    assert_eq!(e.status, 413);
    assert_eq!(e.json()["code"], "too_large");
    let one_day = app
        .get("/edr/collections/climate/cube?bbox=-180,-90,180,90&datetime=2024-03-01")
        .await;
    assert_eq!(one_day.status, 200);
    let conf = app.get("/edr/conformance").await.json();
    assert!(conf["conformsTo"].as_array().unwrap().len() >= 5);
}

#[tokio::test]
async fn a_token_for_the_group_reads_its_collection_not_every_collection() {
    let app = TestApp::demo(Config {
        tokens: vec![reader_within("group", "climate")],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let position = "/edr/collections/climate/position?coords=POINT(41%2061)&datetime=2024-01-01";
    assert_eq!(app.get_as("group", position).await.status, 200);
    assert_eq!(
        app.get_as("group", "/edr/collections/climate").await.status,
        200
    );
    // The collections the token may read whole, and no others.
    let all = app.get_as("group", "/edr/collections").await;
    assert_eq!(all.status, 200);
    let ids: Vec<String> = all.json()["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["climate"]);
    assert_eq!(app.get(position).await.status, 401);
}
