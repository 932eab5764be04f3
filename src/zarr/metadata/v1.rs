//! v1 `meta` documents (read only): compression by name, chunks beside `meta`.

use serde_json::{json, Value};

use super::{attributes, field, format_of, object, u64_list, ArrayMetadata, CodecSpec, Order};
use crate::zarr::chunk_key::ChunkKeyEncoding;
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::fill::parse_fill;

/// v1 `compression` + `compression_opts` as a numcodecs compressor.
fn compressor(key: &str, name: &Value, opts: &Value) -> Result<Value> {
    Ok(match name.as_str() {
        None | Some("none") => Value::Null,
        Some("blosc") => {
            let mut c = json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1});
            if let Some(o) = opts.as_object() {
                for (k, v) in o {
                    c[k] = v.clone();
                }
            }
            c
        }
        Some(id @ ("zlib" | "bz2")) => json!({"id": id, "level": opts.as_u64().unwrap_or(1)}),
        Some(other) => {
            return Err(ZarrError::metadata(
                key,
                format!("v1 compression '{other}' is not supported"),
            ))
        }
    })
}

/// Parse a v1 `meta` document with its `attrs`.
pub fn parse(key: &str, doc: &Value, attrs: Option<&Value>) -> Result<ArrayMetadata> {
    let obj = object(key, doc)?;
    format_of(key, obj, 1)?;
    let shape = u64_list(key, field(key, obj, "shape")?, "shape")?;
    let chunk_shape = u64_list(key, field(key, obj, "chunks")?, "chunks")?;
    let (dtype, endian) = DataType::from_v2_json(field(key, obj, "dtype")?)
        .map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    if dtype.is_variable() {
        return Err(ZarrError::metadata(
            key,
            "v1 object arrays are not supported",
        ));
    }
    let order = match obj.get("order").and_then(Value::as_str) {
        Some("F") => Order::F,
        _ => Order::C,
    };
    let fill_json = obj.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill_value =
        parse_fill(&dtype, &fill_json).map_err(|e| ZarrError::metadata(key, e.to_string()))?;
    let compressor = compressor(
        key,
        obj.get("compression").unwrap_or(&Value::Null),
        obj.get("compression_opts").unwrap_or(&Value::Null),
    )?;
    let meta = ArrayMetadata {
        zarr_format: 1,
        shape,
        chunk_shape,
        dtype,
        fill_value,
        fill_value_json: fill_json,
        order,
        chunk_key_encoding: ChunkKeyEncoding::V2 { separator: '.' },
        codecs: CodecSpec::V2 {
            filters: Value::Null,
            compressor,
            endian,
        },
        attributes: attributes(key, attrs)?,
        dimension_names: None,
    };
    meta.validate(key)?;
    Ok(meta)
}
