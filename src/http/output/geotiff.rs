//! GeoTIFF: a 2-D selection as a one-band TIFF, georeferenced when its
//! coordinates are a regular grid: geographic (latitude/longitude,
//! EPSG:4326) or projected (the EPSG code the CF `grid_mapping`'s
//! `crs_wkt`, `spatial_ref` or `epsg_code` names). Pixels are areas
//! centred on the coordinates. Otherwise, or without coordinates, a plain
//! TIFF. Rows are the latitude (y) dimension; a selection ordered
//! (lon, lat) is transposed. Missing values are declared as GDAL's nodata.

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::{Built, File};
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Axis, Content, Data};
use crate::zarr::{ArrayBytes, DataType};

pub const GEOTIFF: File = File {
    name: "geotiff",
    content_type: "image/tiff",
    expansion: 1,
    build: encode,
};

/// TIFF's SampleFormat and bits of a dtype.
fn sample(dtype: &DataType) -> Option<(u16, u16)> {
    Some(match dtype {
        DataType::UInt8 | DataType::Bool => (1, 8),
        DataType::UInt16 => (1, 16),
        DataType::UInt32 => (1, 32),
        DataType::UInt64 => (1, 64),
        DataType::Int8 => (2, 8),
        DataType::Int16 => (2, 16),
        DataType::Int32 => (2, 32),
        DataType::Int64 => (2, 64),
        DataType::Float32 => (3, 32),
        DataType::Float64 => (3, 64),
        _ => return None,
    })
}

fn text(attrs: &Map<String, Value>, key: &str) -> String {
    attrs
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// Whether an axis is the x (longitude) or y (latitude) one.
fn role(axis: &Axis) -> Option<char> {
    let name = axis.name.to_ascii_lowercase();
    let attrs = axis.coordinate.as_ref().map(|c| &c.attributes);
    let empty = Map::new();
    let attrs = attrs.unwrap_or(&empty);
    let (units, standard, ax) = (
        text(attrs, "units"),
        text(attrs, "standard_name"),
        text(attrs, "axis"),
    );
    if ax == "x"
        || ["lon", "longitude", "x"].contains(&name.as_str())
        || units.starts_with("degrees_east")
        || standard == "longitude"
        || standard == "projection_x_coordinate"
    {
        Some('x')
    } else if ax == "y"
        || ["lat", "latitude", "y"].contains(&name.as_str())
        || units.starts_with("degrees_north")
        || standard == "latitude"
        || standard == "projection_y_coordinate"
    {
        Some('y')
    } else {
        None
    }
}

/// The first coordinate and the step of a regularly spaced axis.
fn regular(axis: &Axis) -> Option<(f64, f64)> {
    let v = &axis.coordinate.as_ref()?.values;
    let (&first, &last) = (v.first()?, v.last()?);
    if v.len() < 2 {
        return None;
    }
    let step = (last - first) / (v.len() - 1) as f64;
    let ok = step != 0.0
        && v.windows(2)
            .all(|w| ((w[1] - w[0]) - step).abs() <= step.abs() * 1e-6);
    ok.then_some((first, step))
}

/// The EPSG code a grid mapping names: `epsg_code`, or the outermost
/// authority of its WKT (the last one written).
fn epsg(grid: &Map<String, Value>) -> Option<u16> {
    if let Some(code) = grid.get("epsg_code").and_then(Value::as_str) {
        return code.trim_start_matches("EPSG:").parse().ok();
    }
    for key in ["crs_wkt", "spatial_ref"] {
        let Some(wkt) = grid.get(key).and_then(Value::as_str) else {
            continue;
        };
        for marker in ["AUTHORITY[\"EPSG\",\"", "ID[\"EPSG\","] {
            if let Some(i) = wkt.rfind(marker) {
                let rest = &wkt[i + marker.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(code) = digits.parse() {
                    return Some(code);
                }
            }
        }
    }
    None
}

/// An IFD entry's value.
enum Field {
    Short(Vec<u16>),
    Long(Vec<u32>),
    Double(Vec<f64>),
    Ascii(String),
}

fn tiff(
    width: u32,
    height: u32,
    (format, bits): (u16, u16),
    pixels: &[u8],
    geo: Vec<(u16, Field)>,
) -> Vec<u8> {
    let mut tags: Vec<(u16, Field)> = vec![
        (256, Field::Long(vec![width])),
        (257, Field::Long(vec![height])),
        (258, Field::Short(vec![bits])),
        (259, Field::Short(vec![1])),
        (262, Field::Short(vec![1])),
        (273, Field::Long(vec![8])),
        (277, Field::Short(vec![1])),
        (278, Field::Long(vec![height])),
        (279, Field::Long(vec![pixels.len() as u32])),
        (284, Field::Short(vec![1])),
        (339, Field::Short(vec![format])),
    ];
    tags.extend(geo);
    tags.sort_by_key(|(t, _)| *t);
    let mut out = Vec::with_capacity(pixels.len() + 1024);
    out.extend(b"II*\0");
    let ifd = (8 + pixels.len()).next_multiple_of(4);
    out.extend((ifd as u32).to_le_bytes());
    out.extend(pixels);
    out.resize(ifd, 0);
    // Values longer than four bytes follow the IFD.
    let mut extra_at = ifd + 2 + tags.len() * 12 + 4;
    let mut extra = Vec::new();
    out.extend((tags.len() as u16).to_le_bytes());
    for (tag, field) in &tags {
        let (kind, count, bytes): (u16, usize, Vec<u8>) = match field {
            Field::Short(v) => (3, v.len(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Field::Long(v) => (4, v.len(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Field::Double(v) => (
                12,
                v.len(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            Field::Ascii(s) => {
                let mut b = s.as_bytes().to_vec();
                b.push(0);
                (2, b.len(), b)
            }
        };
        out.extend(tag.to_le_bytes());
        out.extend(kind.to_le_bytes());
        out.extend((count as u32).to_le_bytes());
        if bytes.len() <= 4 {
            let mut inline = bytes.clone();
            inline.resize(4, 0);
            out.extend(inline);
        } else {
            out.extend((extra_at as u32).to_le_bytes());
            extra_at += bytes.len().next_multiple_of(2);
            extra.extend(&bytes);
            if extra.len() % 2 == 1 {
                extra.push(0);
            }
        }
    }
    out.extend(0u32.to_le_bytes());
    out.extend(extra);
    out
}

/// The georeferencing tags of a grid, `None` when it is not a regular one.
fn georeference(x: &Axis, y: &Axis, grid: &Map<String, Value>) -> Option<Vec<(u16, Field)>> {
    let (x0, dx) = regular(x)?;
    let (y0, dy) = regular(y)?;
    let geographic = text(grid, "grid_mapping_name") == "latitude_longitude"
        || (grid.is_empty()
            && x.coordinate
                .as_ref()
                .is_some_and(|c| text(&c.attributes, "units").starts_with("degrees")))
        || ["lon", "longitude"].contains(&x.name.to_ascii_lowercase().as_str());
    // Pixel-is-area: the corner is half a step before the first centre.
    let (left, top) = (x0 - dx / 2.0, y0 - dy / 2.0);
    let mut tags = if dx > 0.0 && dy < 0.0 {
        vec![
            (33550, Field::Double(vec![dx, -dy, 0.0])),
            (33922, Field::Double(vec![0.0, 0.0, 0.0, left, top, 0.0])),
        ]
    } else {
        // Any other orientation as a full transformation.
        vec![(
            34264,
            Field::Double(vec![
                dx, 0.0, 0.0, left, 0.0, dy, 0.0, top, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
            ]),
        )]
    };
    let mut keys: Vec<[u16; 4]> = vec![[1025, 0, 1, 1]];
    match (geographic, epsg(grid)) {
        (false, Some(code)) => {
            keys.push([1024, 0, 1, 1]);
            keys.push([3072, 0, 1, code]);
        }
        (true, code) => {
            keys.push([1024, 0, 1, 2]);
            keys.push([2048, 0, 1, code.unwrap_or(4326)]);
        }
        (false, None) => {}
    }
    keys.sort();
    let mut directory = vec![1, 1, 0, keys.len() as u16];
    directory.extend(keys.iter().flatten());
    tags.push((34735, Field::Short(directory)));
    Some(tags)
}

fn encode(data: Data) -> ApiResult<Built> {
    let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "GeoTIFF carries fixed-size numbers",
        ));
    };
    let Some(sample) = sample(&data.dtype) else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            format!(
                "GeoTIFF carries numbers; {} values cannot be written (use format=npy)",
                data.dtype.name()
            ),
        ));
    };
    let [rows, cols] = data.shape[..] else {
        return Err(ApiError::bad_request(
            "bad_query",
            format!(
                "a GeoTIFF is of a 2-D selection; this one has {} dimensions (select one value of the others, as sel.time=…, or reduce them)",
                data.shape.len()
            ),
        ));
    };
    let size = data.dtype.size().unwrap_or(1).max(1);
    let (mut height, mut width) = (rows as usize, cols as usize);
    let mut pixels = bytes.clone();
    let mut geo = Vec::new();
    if data.axes.len() == 2 {
        let (mut y, mut x) = (&data.axes[0], &data.axes[1]);
        if role(y) == Some('x') && role(x) == Some('y') {
            // (lon, lat): rows must be the y dimension.
            std::mem::swap(&mut x, &mut y);
            let mut t = vec![0u8; pixels.len()];
            for r in 0..height {
                for c in 0..width {
                    let (from, to) = ((r * width + c) * size, (c * height + r) * size);
                    t[to..to + size].copy_from_slice(&pixels[from..from + size]);
                }
            }
            pixels = t;
            std::mem::swap(&mut height, &mut width);
        }
        if let Some(tags) = georeference(x, y, &data.grid_mapping) {
            geo = tags;
        }
    }
    let nodata = match data.dtype {
        DataType::Float32 | DataType::Float64 => Some("nan".to_string()),
        _ => data
            .attributes
            .get("_FillValue")
            .and_then(crate::zarr::cf::attr_number)
            .map(|v| v.to_string()),
    };
    if let Some(nodata) = nodata {
        geo.push((42113, Field::Ascii(nodata)));
    }
    if u32::try_from(pixels.len()).is_err() {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "a classic TIFF holds at most 4 GiB; select less",
        ));
    }
    let out = tiff(width as u32, height as u32, sample, &pixels, geo);
    Ok(Built {
        bytes: out,
        filename: None,
    })
}
