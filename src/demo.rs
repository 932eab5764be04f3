//! The `--demo` hierarchy: an in-memory store with one of each kind of node,
//! so every endpoint can be tried without data of one's own.

use serde_json::json;

use crate::store::{node_path, Store};
use crate::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Result, Selection};

fn attrs(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// A store holding the example hierarchy:
///
/// - `/` (v3 group) with `v2/`, `v3/` and `groups/a/b/` below it
/// - `v2/temperature`: float32 (180, 360), v2, Blosc lz4
/// - `v2/stations`: structured records (id, lat, lon, name), v2
/// - `v3/elevation`: int16 (256, 256), v3, zstd
/// - `v3/sharded`: float32 (64, 128, 128), sharded, with dimension names and attributes
pub async fn store() -> Result<Store> {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    h.create_group(
        &node_path("")?,
        3,
        attrs(json!({"title": "zarrd demo", "about": "example arrays of every kind"})),
        false,
    )
    .await?;
    h.create_group(
        &node_path("v2")?,
        2,
        attrs(json!({"format": "zarr v2"})),
        false,
    )
    .await?;
    h.create_group(
        &node_path("groups/a/b")?,
        3,
        attrs(json!({"depth": 3})),
        false,
    )
    .await?;

    let mut temperature = ArraySpec::new(2, vec![180, 360], DataType::Float32);
    temperature.chunks = Some(vec![90, 90]);
    temperature.fill_value = json!("NaN");
    temperature.attributes = attrs(json!({"units": "degC", "long_name": "surface temperature"}));
    let values: Vec<u8> = (0..180 * 360)
        .flat_map(|i| {
            let (lat, lon) = ((i / 360) as f32 - 90.0, (i % 360) as f32);
            (30.0 * (lat.to_radians()).cos() - 10.0 + 5.0 * (lon.to_radians() * 2.0).sin())
                .to_le_bytes()
        })
        .collect();
    write(
        &h,
        "v2/temperature",
        &temperature,
        ArrayBytes::Fixed(values),
    )
    .await?;

    let record = DataType::from_v2_json(&json!([
        ["id", "<u4"],
        ["lat", "<f8"],
        ["lon", "<f8"],
        ["name", "|S8"]
    ]))?
    .0;
    let mut stations = ArraySpec::new(2, vec![4], record);
    stations.chunks = Some(vec![2]);
    let mut rows = Vec::new();
    for (id, lat, lon, name) in [
        (1u32, 51.5f64, -0.1f64, "london"),
        (2, 48.9, 2.35, "paris"),
        (3, 35.7, 139.7, "tokyo"),
        (4, -33.9, 151.2, "sydney"),
    ] {
        rows.extend(id.to_le_bytes());
        rows.extend(lat.to_le_bytes());
        rows.extend(lon.to_le_bytes());
        let mut n = name.as_bytes().to_vec();
        n.resize(8, 0);
        rows.extend(n);
    }
    write(&h, "v2/stations", &stations, ArrayBytes::Fixed(rows)).await?;

    let mut elevation = ArraySpec::new(3, vec![256, 256], DataType::Int16);
    elevation.chunks = Some(vec![64, 64]);
    let heights: Vec<u8> = (0..256 * 256)
        .flat_map(|i: i32| (((i / 256 - 128) * (i % 256 - 128)) as i16 / 8).to_le_bytes())
        .collect();
    write(&h, "v3/elevation", &elevation, ArrayBytes::Fixed(heights)).await?;

    let mut sharded = ArraySpec::new(3, vec![64, 128, 128], DataType::Float32);
    sharded.chunks = Some(vec![8, 32, 32]);
    sharded.shards = Some(vec![32, 128, 128]);
    sharded.dimension_names = Some(vec![
        Some("time".into()),
        Some("y".into()),
        Some("x".into()),
    ]);
    sharded.attributes = attrs(json!({"units": "m/s", "description": "a sharded v3 array"}));
    let wind: Vec<u8> = (0..64 * 128 * 128)
        .flat_map(|i: u32| ((i % 9973) as f32 / 100.0).to_le_bytes())
        .collect();
    write(&h, "v3/sharded", &sharded, ArrayBytes::Fixed(wind)).await?;
    Ok(store)
}

async fn write(h: &Hierarchy, path: &str, spec: &ArraySpec, data: ArrayBytes) -> Result<()> {
    let array = h.create_array(&node_path(path)?, spec, false).await?;
    array
        .write(&Selection::all().resolve(&spec.shape)?, data)
        .await?;
    Ok(())
}
