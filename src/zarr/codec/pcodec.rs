//! numcodecs' `pcodec` (Pcodec, "pco"): an array→bytes codec for numeric
//! chunks, through `pco`, Pcodec's own Rust implementation, in its
//! standalone format (what numcodecs writes with `simple_compress`).

use pco::data_types::Number;
use pco::{ChunkConfig, DeltaSpec, ModeSpec, PagingSpec};
use serde_json::Value;

use super::numeric::Le;
use super::{v3_entry, ArrayBytes, ArrayToBytesCodec, ChunkRepr};
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};

const NAME: &str = "pcodec";

#[derive(Debug, Clone)]
pub struct Pcodec {
    level: usize,
    mode: Mode,
    delta: Delta,
    page: usize,
    /// The configuration as given, written back as it came.
    config: Value,
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Auto,
    Classic,
}

#[derive(Debug, Clone, Copy)]
enum Delta {
    Auto,
    None,
    Consecutive(usize),
    Lookback,
}

fn err(reason: impl Into<String>) -> ZarrError {
    ZarrError::codec(NAME, reason)
}

impl Pcodec {
    /// From numcodecs' configuration (`level`, `mode_spec`, `delta_spec`,
    /// `paging_spec`, `delta_encoding_order`, `equal_pages_up_to`), with
    /// numcodecs' defaults, for chunks of `dtype`.
    pub fn new(config: &Value, dtype: &DataType) -> Result<Self> {
        supported(dtype)?;
        let text = |name: &str, default: &'static str| -> Result<String> {
            match config.get(name) {
                None | Some(Value::Null) => Ok(default.to_string()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(err(format!("{name} {other} is not a string"))),
            }
        };
        let number = |name: &str| -> Result<Option<usize>> {
            match config.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| err(format!("{name} {v} is not a non-negative integer"))),
            }
        };
        let level = number("level")?.unwrap_or(8);
        if level > 12 {
            return Err(err(format!("level {level} is not from 0 to 12")));
        }
        let mode = match text("mode_spec", "auto")?.as_str() {
            "auto" => Mode::Auto,
            "classic" => Mode::Classic,
            other => return Err(err(format!("mode_spec '{other}' is not auto or classic"))),
        };
        let order = number("delta_encoding_order")?;
        if order.is_some_and(|o| o > 7) {
            return Err(err("delta_encoding_order must be from 0 to 7"));
        }
        let delta = match (text("delta_spec", "auto")?.as_str(), order) {
            // numcodecs reads an order with `auto` as consecutive deltas.
            ("auto", Some(o)) | ("try_consecutive", Some(o)) => Delta::Consecutive(o),
            ("auto", None) => Delta::Auto,
            ("none", None) => Delta::None,
            ("try_lookback", None) => Delta::Lookback,
            ("try_consecutive", None) => {
                return Err(err("delta_spec try_consecutive needs delta_encoding_order"))
            }
            (spec, Some(_)) if ["none", "try_lookback"].contains(&spec) => {
                return Err(err(
                    "delta_encoding_order is only for delta_spec auto or try_consecutive",
                ))
            }
            (other, _) => {
                return Err(err(format!(
                    "delta_spec '{other}' is not auto, none, try_consecutive or try_lookback"
                )))
            }
        };
        let paging = text("paging_spec", "equal_pages_up_to")?;
        if paging != "equal_pages_up_to" {
            return Err(err(format!(
                "paging_spec '{paging}' is not equal_pages_up_to"
            )));
        }
        let page = number("equal_pages_up_to")?.unwrap_or(pco::DEFAULT_MAX_PAGE_N);
        if page == 0 {
            return Err(err("equal_pages_up_to must be positive"));
        }
        Ok(Pcodec {
            level,
            mode,
            delta,
            page,
            config: config.clone(),
        })
    }

    fn chunk_config(&self) -> ChunkConfig {
        ChunkConfig::default()
            .with_compression_level(self.level)
            .with_mode_spec(match self.mode {
                Mode::Auto => ModeSpec::Auto,
                Mode::Classic => ModeSpec::Classic,
            })
            .with_delta_spec(match self.delta {
                Delta::Auto => DeltaSpec::Auto,
                Delta::None => DeltaSpec::NoOp,
                Delta::Consecutive(o) => DeltaSpec::TryConsecutive(o),
                Delta::Lookback => DeltaSpec::TryLookback,
            })
            .with_paging_spec(PagingSpec::EqualPagesUpTo(self.page))
    }
}

/// The types numcodecs' Pcodec takes.
fn supported(dtype: &DataType) -> Result<()> {
    use DataType::*;
    match dtype {
        Int16 | Int32 | Int64 | UInt16 | UInt32 | UInt64 | Float16 | Float32 | Float64 => Ok(()),
        other => Err(err(format!(
            "takes 16-, 32- and 64-bit integers and floats, not {}",
            other.name()
        ))),
    }
}

fn compress<T: Number + Le>(bytes: &[u8], config: &ChunkConfig) -> Result<Vec<u8>> {
    let nums = T::read_all(bytes);
    pco::standalone::simple_compress(&nums, config).map_err(|e| err(e.to_string()))
}

/// Exactly `n` numbers, never more: the destination is sized by the chunk,
/// not by what the stream claims.
fn decompress<T: Number + Le>(bytes: &[u8], n: usize) -> Result<Vec<u8>> {
    let mut nums = vec![T::default(); n];
    let progress = pco::standalone::simple_decompress_into(bytes, &mut nums)
        .map_err(|e| err(e.to_string()))?;
    if progress.n_processed != n || !progress.finished {
        return Err(err(format!(
            "holds {}{} numbers, the chunk {n}",
            progress.n_processed,
            if progress.finished { "" } else { " or more" }
        )));
    }
    Ok(T::write_all(&nums))
}

impl ArrayToBytesCodec for Pcodec {
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>> {
        let bytes = data.into_fixed()?;
        let config = self.chunk_config();
        use DataType::*;
        match repr.dtype {
            Int16 => compress::<i16>(&bytes, &config),
            Int32 => compress::<i32>(&bytes, &config),
            Int64 => compress::<i64>(&bytes, &config),
            UInt16 => compress::<u16>(&bytes, &config),
            UInt32 => compress::<u32>(&bytes, &config),
            UInt64 => compress::<u64>(&bytes, &config),
            Float16 => compress::<half::f16>(&bytes, &config),
            Float32 => compress::<f32>(&bytes, &config),
            Float64 => compress::<f64>(&bytes, &config),
            ref other => supported(other).map(|_| Vec::new()),
        }
    }

    fn decode(&self, bytes: Vec<u8>, repr: &ChunkRepr) -> Result<ArrayBytes> {
        let n = repr.num_elements();
        use DataType::*;
        let decoded = match repr.dtype {
            Int16 => decompress::<i16>(&bytes, n),
            Int32 => decompress::<i32>(&bytes, n),
            Int64 => decompress::<i64>(&bytes, n),
            UInt16 => decompress::<u16>(&bytes, n),
            UInt32 => decompress::<u32>(&bytes, n),
            UInt64 => decompress::<u64>(&bytes, n),
            Float16 => decompress::<half::f16>(&bytes, n),
            Float32 => decompress::<f32>(&bytes, n),
            Float64 => decompress::<f64>(&bytes, n),
            ref other => supported(other).map(|_| Vec::new()),
        }?;
        Ok(ArrayBytes::Fixed(decoded))
    }

    fn to_v3(&self) -> Value {
        v3_entry("numcodecs.pcodec", self.config.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::fill::FillValue;
    use serde_json::json;

    fn repr(dtype: DataType, n: usize) -> ChunkRepr {
        ChunkRepr {
            shape: vec![n],
            dtype,
            fill: FillValue(vec![0; 8]),
        }
    }

    #[test]
    fn round_trips_and_refuses_a_stream_of_another_length() {
        let codec = Pcodec::new(&json!({"level": 8}), &DataType::Int32).unwrap();
        let values: Vec<u8> = (0..1000i32).flat_map(|i| (i * 7).to_le_bytes()).collect();
        let r = repr(DataType::Int32, 1000);
        let encoded = codec.encode(ArrayBytes::Fixed(values.clone()), &r).unwrap();
        assert!(encoded.len() < values.len() / 4);
        let decoded = codec.decode(encoded.clone(), &r).unwrap();
        assert_eq!(decoded.into_fixed().unwrap(), values);
        let err = codec
            .decode(encoded, &repr(DataType::Int32, 999))
            .unwrap_err();
        assert!(err.to_string().contains("the chunk 999"), "{err}");
    }

    #[test]
    fn configurations_are_checked() {
        let int = DataType::Int32;
        assert!(Pcodec::new(&json!({"level": 13}), &int).is_err());
        assert!(Pcodec::new(&json!({"mode_spec": "try_float_mult"}), &int).is_err());
        assert!(Pcodec::new(
            &json!({"delta_spec": "none", "delta_encoding_order": 1}),
            &int
        )
        .is_err());
        assert!(Pcodec::new(&json!({}), &DataType::UInt8).is_err());
        assert!(Pcodec::new(
            &json!({"delta_spec": "auto", "delta_encoding_order": 2}),
            &int
        )
        .is_ok());
    }
}
