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
/// - `climate/`: a dataset as xarray writes it: `t2m` float32 (time, lat, lon)
///   of a year of days on a 4-degree grid, with CF time (`days since
///   2024-01-01`), descending `lat` and `lon` coordinates
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
    climate(&h).await?;
    Ok(store)
}

/// `climate/`: labelled by its coordinates, for selections by label,
/// reductions and the formats that carry coordinates.
async fn climate(h: &Hierarchy) -> Result<()> {
    h.create_group(
        &node_path("climate")?,
        3,
        attrs(json!({"title": "a year of daily 2 m temperature", "Conventions": "CF-1.8"})),
        false,
    )
    .await?;
    let (days, lats, lons) = (366u64, 45u64, 90u64);
    let coordinate = |name: &str, n: u64, dtype: DataType, attributes: serde_json::Value| {
        let mut spec = ArraySpec::new(3, vec![n], dtype);
        spec.dimension_names = Some(vec![Some(name.into())]);
        spec.attributes = attrs(attributes);
        spec
    };
    let time = coordinate(
        "time",
        days,
        DataType::Int32,
        json!({"units": "days since 2024-01-01", "calendar": "standard", "standard_name": "time"}),
    );
    let values = (0..days as i32).flat_map(i32::to_le_bytes).collect();
    write(h, "climate/time", &time, ArrayBytes::Fixed(values)).await?;
    let lat = coordinate(
        "lat",
        lats,
        DataType::Float64,
        json!({"units": "degrees_north", "standard_name": "latitude"}),
    );
    let lat_of = |i: u64| 88.0 - 4.0 * i as f64;
    let values = (0..lats).flat_map(|i| lat_of(i).to_le_bytes()).collect();
    write(h, "climate/lat", &lat, ArrayBytes::Fixed(values)).await?;
    let lon = coordinate(
        "lon",
        lons,
        DataType::Float64,
        json!({"units": "degrees_east", "standard_name": "longitude"}),
    );
    let values = (0..lons)
        .flat_map(|i| (4.0 * i as f64).to_le_bytes())
        .collect();
    write(h, "climate/lon", &lon, ArrayBytes::Fixed(values)).await?;
    let mut t2m = ArraySpec::new(3, vec![days, lats, lons], DataType::Float32);
    t2m.chunks = Some(vec![61, lats, lons]);
    t2m.dimension_names = Some(vec![
        Some("time".into()),
        Some("lat".into()),
        Some("lon".into()),
    ]);
    t2m.fill_value = json!("NaN");
    t2m.attributes = attrs(json!({"units": "degC", "long_name": "air temperature at 2 m"}));
    let mut values = Vec::with_capacity((days * lats * lons * 4) as usize);
    for d in 0..days {
        let season = (2.0 * std::f64::consts::PI * (d as f64 - 105.0) / 366.0).sin();
        for i in 0..lats {
            let phi = lat_of(i).to_radians();
            for j in 0..lons {
                let wave = 3.0 * (4.0 * j as f64).to_radians().sin() * phi.cos();
                let v = 30.0 * phi.cos() - 10.0 + 12.0 * season * phi.sin() + wave;
                values.extend((v as f32).to_le_bytes());
            }
        }
    }
    write(h, "climate/t2m", &t2m, ArrayBytes::Fixed(values)).await
}

async fn write(h: &Hierarchy, path: &str, spec: &ArraySpec, data: ArrayBytes) -> Result<()> {
    let array = h.create_array(&node_path(path)?, spec, false).await?;
    array
        .write(&Selection::all().resolve(&spec.shape)?, data)
        .await?;
    Ok(())
}
