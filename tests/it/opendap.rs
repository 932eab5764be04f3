//! OPeNDAP over the demo's `climate` dataset: the DDS declares a grid
//! with its maps, `.dods` is XDR after the DDS, DAP4's `.dap` is chunked
//! with checksums, errors are DAP's, and a token limited to an array
//! reads it as a dataset without the coordinates it may not read.

use crate::common::app::{demo_config, reader_within, TestApp};
use zarrd::config::Config;

fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

#[tokio::test]
async fn dods_is_the_dds_then_xdr_values_of_the_hyperslab() {
    let app = TestApp::demo(demo_config()).await;
    let dds = app.get("/opendap/climate.dds").await;
    assert_eq!(dds.status, 200);
    assert_eq!(dds.headers["content-description"], "dods-dds");
    let dds = text(&dds.body);
    assert!(
        dds.contains("Grid {\n      ARRAY:\n        Float32 t2m[time = 366][lat = 45][lon = 90];"),
        "{dds}"
    );
    let dods = app.get("/opendap/climate.dods?lat%5B0:2:6%5D").await;
    assert_eq!(dods.status, 200);
    let body = &dods.body;
    let at = body.windows(6).position(|w| w == b"Data:\n").unwrap() + 6;
    assert!(text(&body[..at]).contains("Float64 lat[lat = 4];"));
    let values = &body[at..];
    assert_eq!(&values[..8], [0, 0, 0, 4, 0, 0, 0, 4]);
    let lats: Vec<f64> = values[8..]
        .chunks_exact(8)
        .map(|b| f64::from_be_bytes(b.try_into().unwrap()))
        .collect();
    let stored = app
        .get("/api/v1/data/climate/lat?select=0:7:2&format=json")
        .await
        .json();
    assert_eq!(serde_json::json!(lats), stored["data"]);
}

#[tokio::test]
async fn dap_is_chunked_little_endian_with_a_crc_per_variable() {
    let app = TestApp::demo(demo_config()).await;
    let dap = app
        .get("/opendap/climate.dap?dap4.ce=/time%5B0:1:2%5D")
        .await;
    assert_eq!(dap.status, 200);
    assert_eq!(
        dap.headers["content-type"],
        "application/vnd.opendap.dap4.data"
    );
    let b = &dap.body;
    assert_eq!(b[0], 0x04);
    let dmr_len = u32::from_be_bytes([0, b[1], b[2], b[3]]) as usize;
    let dmr = text(&b[4..4 + dmr_len]);
    assert!(
        dmr.contains("<Int32 name=\"time\">") && dmr.contains("<Dim size=\"3\"/>"),
        "{dmr}"
    );
    let rest = &b[4 + dmr_len..];
    let len = u32::from_be_bytes([0, rest[1], rest[2], rest[3]]) as usize;
    let (values, crc) = rest[4..4 + len].split_at(12);
    assert_eq!(crc, crc32fast::hash(values).to_le_bytes());
    assert_eq!(&rest[4 + len..], [0x05, 0, 0, 0], "the last chunk");
}

#[tokio::test]
async fn errors_are_dap_documents() {
    let app = TestApp::demo(demo_config()).await;
    let e = app
        .get("/opendap/climate.dods?t2m%5B0:1:400%5D%5B0%5D%5B0%5D")
        .await;
    assert_eq!(e.status, 400);
    assert_eq!(e.headers["content-description"], "dods-error");
    assert!(text(&e.body).contains("past the last index 365 of 'time'"));
    let e = app.get("/opendap/climate/nothing.dmr").await;
    assert_eq!(e.status, 404);
    assert!(text(&e.body).starts_with("<?xml"));
    let e = app.get("/opendap/climate.dap?dap4.ce=t2m.t2m").await;
    assert_eq!(e.status, 400, "DAP4 has no grids: {}", text(&e.body));
}

#[tokio::test]
async fn a_token_for_an_array_reads_it_without_the_coordinates_beside_it() {
    let app = TestApp::demo(Config {
        tokens: vec![
            reader_within("array", "climate/t2m"),
            reader_within("group", "climate"),
        ],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let array = app.get_as("array", "/opendap/climate/t2m.dds").await;
    assert_eq!(array.status, 200);
    assert!(!text(&array.body).contains("Grid"), "{}", text(&array.body));
    assert_eq!(
        app.get_as("array", "/opendap/climate.dds").await.status,
        404,
        "a group it may read only part of has no dataset for it"
    );
    let group = app.get_as("group", "/opendap/climate/t2m.dds").await;
    assert!(text(&group.body).contains("Grid"));
    assert_eq!(
        app.get_as("group", "/opendap/climate.das").await.status,
        200
    );
}

#[tokio::test]
async fn an_answer_over_the_limit_is_refused_before_anything_is_sent() {
    let app = TestApp::demo(Config {
        json_limit: 1 << 20,
        ..demo_config()
    })
    .await;
    // t2m is 5.9 MB: refused whole, with DAP's error, never a cut-off 200.
    let dods = app.get("/opendap/climate.dods?t2m").await;
    assert_eq!(dods.status, 413, "{}", text(&dods.body));
    assert!(text(&dods.body).starts_with("Error {"));
    let dap = app.get("/opendap/climate.dap?dap4.ce=/t2m").await;
    assert_eq!(dap.status, 413);
    assert!(text(&dap.body).contains("<Error httpcode=\"413\">"));
    let ascii = app.get("/opendap/climate.ascii?t2m").await;
    assert_eq!(ascii.status, 413);
    // The coordinates alone fit.
    let small = app.get("/opendap/climate.dods?lat,lon,time").await;
    assert_eq!(small.status, 200);
}

#[tokio::test]
async fn a_stride_past_the_end_takes_the_start_alone() {
    let app = TestApp::demo(demo_config()).await;
    let huge = app
        .get("/opendap/climate.dods?lat%5B3:18446744073709551615:44%5D")
        .await;
    assert_eq!(huge.status, 200);
    let body = &huge.body;
    let at = body.windows(6).position(|w| w == b"Data:\n").unwrap() + 6;
    assert_eq!(&body[at..at + 8], [0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(body.len(), at + 16, "one float64 after the two counts");
}
