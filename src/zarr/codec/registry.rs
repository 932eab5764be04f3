//! Building codec chains from metadata: v3 `codecs` lists and v2
//! `filters` + `compressor`, both through one table of numcodecs ids.

use serde_json::Value;

use super::blosc::BloscCodec;
use super::bytes::{ByteOrder, BytesCodec};
use super::checksum::{Algorithm, Checksum};
use super::compress::{Bz2, Deflate, Lz4, Lzma, Zstd};
use super::pcodec::Pcodec;
use super::sharding::{IndexLocation, ShardingCodec};
use super::transform::{BitRound, Categorize, Elementwise, PackBits, Shuffle};
use super::transpose::TransposeCodec;
use super::vlen::VlenCodec;
use super::zfp::Zfpy;
use super::{ArrayToArrayCodec, ArrayToBytesCodec, BytesToBytesCodec, ChunkRepr, CodecChain};
use crate::zarr::dtype::{DataType, Endian};
use crate::zarr::error::{Result, ZarrError};

/// A codec of one of the three kinds.
enum Built {
    ArrayArray(Box<dyn ArrayToArrayCodec>),
    ArrayBytes(Box<dyn ArrayToBytesCodec>),
    BytesBytes(Box<dyn BytesToBytesCodec>),
}

/// The numcodecs ids zarrd implements, by the name v3 metadata gives them.
const NUMCODECS_V3: [(&str, &str); 18] = [
    ("numcodecs.delta", "delta"),
    ("numcodecs.fixedscaleoffset", "fixedscaleoffset"),
    ("numcodecs.quantize", "quantize"),
    ("numcodecs.astype", "astype"),
    ("numcodecs.bitround", "bitround"),
    ("numcodecs.packbits", "packbits"),
    ("numcodecs.categorize", "categorize"),
    ("numcodecs.shuffle", "shuffle"),
    ("numcodecs.zlib", "zlib"),
    ("numcodecs.gzip", "gzip"),
    ("numcodecs.bz2", "bz2"),
    ("numcodecs.lzma", "lzma"),
    ("numcodecs.lz4", "lz4"),
    ("numcodecs.zstd", "zstd"),
    ("numcodecs.blosc", "blosc"),
    ("numcodecs.crc32", "crc32"),
    ("numcodecs.crc32c", "crc32c"),
    ("numcodecs.adler32", "adler32"),
];

fn static_name(id: &str) -> &'static str {
    NUMCODECS_V3
        .iter()
        .find(|(_, i)| *i == id)
        .map(|(n, _)| *n)
        .unwrap_or("numcodecs")
}

/// A numcodecs codec from its id and configuration (v2 `{"id": ...}` or v3 `numcodecs.*`).
fn numcodec(id: &str, config: &Value, repr: &ChunkRepr) -> Result<Built> {
    let cfg = Some(config);
    let v3 = static_name(id);
    Ok(match id {
        "delta" => Built::ArrayArray(Box::new(Elementwise::new("delta", config, &repr.dtype)?)),
        "fixedscaleoffset" => Built::ArrayArray(Box::new(Elementwise::new(
            "fixedscaleoffset",
            config,
            &repr.dtype,
        )?)),
        "quantize" => {
            Built::ArrayArray(Box::new(Elementwise::new("quantize", config, &repr.dtype)?))
        }
        "astype" => Built::ArrayArray(Box::new(Elementwise::new("astype", config, &repr.dtype)?)),
        "bitround" => {
            let keepbits = config
                .get("keepbits")
                .and_then(Value::as_u64)
                .ok_or_else(|| ZarrError::codec(id, "keepbits is required"))?;
            Built::ArrayArray(Box::new(BitRound {
                keepbits: keepbits as u32,
            }))
        }
        "packbits" => Built::ArrayArray(Box::new(PackBits)),
        "categorize" => Built::ArrayArray(Box::new(Categorize::new(config)?)),
        "vlen-utf8" => Built::ArrayBytes(Box::new(VlenCodec { utf8: true })),
        "vlen-bytes" => Built::ArrayBytes(Box::new(VlenCodec { utf8: false })),
        "shuffle" => {
            let size = config
                .get("elementsize")
                .and_then(Value::as_u64)
                .map(|s| s as usize)
                .unwrap_or(repr.dtype.size().unwrap_or(1));
            Built::BytesBytes(Box::new(Shuffle { elementsize: size }))
        }
        "zlib" => Built::BytesBytes(Box::new(Deflate::new(false, cfg, v3)?)),
        "gzip" => Built::BytesBytes(Box::new(Deflate::new(true, cfg, v3)?)),
        "bz2" => Built::BytesBytes(Box::new(Bz2::new(cfg)?)),
        "lzma" => Built::BytesBytes(Box::new(Lzma::new(cfg)?)),
        "lz4" => Built::BytesBytes(Box::new(Lz4 {
            acceleration: config
                .get("acceleration")
                .and_then(Value::as_i64)
                .unwrap_or(1),
        })),
        "zstd" => Built::BytesBytes(Box::new(Zstd::new(cfg, v3)?)),
        "blosc" => Built::BytesBytes(Box::new(BloscCodec::from_numcodecs(
            config,
            repr.dtype.size().unwrap_or(1),
        )?)),
        "crc32" => Built::BytesBytes(Box::new(Checksum::numcodecs(Algorithm::Crc32, cfg, v3)?)),
        "crc32c" => Built::BytesBytes(Box::new(Checksum::numcodecs(Algorithm::Crc32c, cfg, v3)?)),
        "adler32" => Built::BytesBytes(Box::new(Checksum::numcodecs(
            Algorithm::Adler32,
            cfg,
            "numcodecs.adler32",
        )?)),
        "fletcher32" => Built::BytesBytes(Box::new(Checksum::numcodecs(
            Algorithm::Fletcher32,
            cfg,
            "numcodecs.fletcher32",
        )?)),
        "pcodec" => Built::ArrayBytes(Box::new(Pcodec::new(config, &repr.dtype)?)),
        "zfpy" => Built::ArrayBytes(Box::new(Zfpy::new(config, repr)?)),
        "jenkins_lookup3" => Built::BytesBytes(Box::new(Checksum::lookup3(
            cfg,
            "numcodecs.jenkins_lookup3",
        )?)),
        other => return Err(ZarrError::unsupported_codec(other)),
    })
}

fn name_and_config(entry: &Value) -> Result<(&str, Option<&Value>)> {
    match entry {
        Value::String(name) => Ok((name, None)),
        Value::Object(o) => {
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| ZarrError::codec("?", format!("codec {entry} has no name")))?;
            Ok((name, o.get("configuration")))
        }
        _ => Err(ZarrError::codec(
            "?",
            format!("codec {entry} is not a name or an object"),
        )),
    }
}

fn v3_codec(entry: &Value, repr: &ChunkRepr) -> Result<Built> {
    let (name, config) = name_and_config(entry)?;
    let empty = Value::Object(Default::default());
    Ok(match name {
        "bytes" => Built::ArrayBytes(Box::new(BytesCodec::from_v3(config)?)),
        "transpose" => {
            Built::ArrayArray(Box::new(TransposeCodec::from_v3(config, repr.shape.len())?))
        }
        "gzip" => Built::BytesBytes(Box::new(Deflate::new(true, config, "gzip")?)),
        "zstd" => Built::BytesBytes(Box::new(Zstd::new(config, "zstd")?)),
        "blosc" => Built::BytesBytes(Box::new(BloscCodec::from_v3(
            config,
            repr.dtype.size().unwrap_or(1),
        )?)),
        "crc32c" => Built::BytesBytes(Box::new(Checksum::crc32c())),
        "vlen-utf8" | "vlen-bytes" => numcodec(name, &empty, repr)?,
        "sharding_indexed" => Built::ArrayBytes(Box::new(sharding(config, repr)?)),
        other => match other.strip_prefix("numcodecs.") {
            Some(id) => numcodec(id, config.unwrap_or(&empty), repr)?,
            None => return Err(ZarrError::unsupported_codec(other)),
        },
    })
}

/// Inner chunks one shard may hold.
pub const MAX_INNER_CHUNKS: u64 = 1 << 16;

fn sharding(config: Option<&Value>, shard: &ChunkRepr) -> Result<ShardingCodec> {
    let err = |r: &str| ZarrError::codec("sharding_indexed", r);
    let config = config.ok_or_else(|| err("configuration is required"))?;
    let chunk_shape: Vec<usize> = config
        .get("chunk_shape")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(|v| v.as_u64().map(|n| n as usize)).collect())
        .ok_or_else(|| err("chunk_shape must be a list of integers"))?;
    let index_location = match config.get("index_location").and_then(Value::as_str) {
        None | Some("end") => IndexLocation::End,
        Some("start") => IndexLocation::Start,
        Some(other) => {
            return Err(err(&format!(
                "index_location '{other}' is not start or end"
            )))
        }
    };
    let inner = ChunkRepr {
        shape: chunk_shape.clone(),
        ..shard.clone()
    };
    let codecs = build_v3_chain(
        config
            .get("codecs")
            .ok_or_else(|| err("codecs is required"))?,
        &inner,
    )?;
    let mut index_shape: Vec<usize> = Vec::new();
    for (&s, &c) in shard.shape.iter().zip(&chunk_shape) {
        if c == 0 || s % c != 0 {
            return Err(err(&format!(
                "shard shape {:?} is not a multiple of chunk_shape {chunk_shape:?}",
                shard.shape
            )));
        }
        index_shape.push(s / c);
    }
    if chunk_shape.len() != shard.shape.len() {
        return Err(err("chunk_shape has the wrong number of dimensions"));
    }
    // Every inner chunk is coded on its own and has an index entry: their
    // number, not the shard's bytes, is what a shard write costs.
    let inner: u64 = index_shape
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n as u64))
        .unwrap_or(u64::MAX);
    if inner > MAX_INNER_CHUNKS {
        return Err(err(&format!(
            "a shard of {:?} holds {inner} inner chunks of {chunk_shape:?}; at most {MAX_INNER_CHUNKS}",
            shard.shape
        )));
    }
    index_shape.push(2);
    let index_repr = ChunkRepr {
        shape: index_shape,
        dtype: DataType::UInt64,
        fill: crate::zarr::fill::FillValue(vec![0xff; 8]),
    };
    let default_index = serde_json::json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]);
    let index_codecs = build_v3_chain(
        config.get("index_codecs").unwrap_or(&default_index),
        &index_repr,
    )?;
    Ok(ShardingCodec {
        chunk_shape,
        codecs,
        index_codecs,
        index_location,
    })
}

/// Assemble the three kinds in order, checking the sequence is valid.
struct ChainBuilder {
    a2a: Vec<Box<dyn ArrayToArrayCodec>>,
    a2b: Option<Box<dyn ArrayToBytesCodec>>,
    b2b: Vec<Box<dyn BytesToBytesCodec>>,
    repr: ChunkRepr,
}

impl ChainBuilder {
    fn new(repr: &ChunkRepr) -> Self {
        ChainBuilder {
            a2a: vec![],
            a2b: None,
            b2b: vec![],
            repr: repr.clone(),
        }
    }

    fn push(&mut self, built: Built, name: &str) -> Result<()> {
        match built {
            Built::ArrayArray(c) => {
                if self.a2b.is_some() {
                    return Err(ZarrError::codec(
                        name,
                        "an array→array codec cannot follow the array→bytes codec",
                    ));
                }
                self.repr = c.encoded_repr(&self.repr)?;
                self.a2a.push(c);
            }
            Built::ArrayBytes(c) => {
                if self.a2b.is_some() {
                    return Err(ZarrError::codec(
                        name,
                        "only one array→bytes codec is allowed",
                    ));
                }
                self.a2b = Some(c);
            }
            Built::BytesBytes(c) => {
                if self.a2b.is_none() {
                    return Err(ZarrError::codec(
                        name,
                        "a bytes→bytes codec needs an array→bytes codec before it",
                    ));
                }
                self.b2b.push(c);
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<CodecChain> {
        let a2b = self.a2b.ok_or_else(|| {
            ZarrError::codec("codecs", "an array→bytes codec (such as bytes) is required")
        })?;
        Ok(CodecChain {
            array_to_array: self.a2a,
            array_to_bytes: a2b,
            bytes_to_bytes: self.b2b,
        })
    }
}

/// A chain from a v3 `codecs` list for chunks like `repr`.
pub fn build_v3_chain(codecs: &Value, repr: &ChunkRepr) -> Result<CodecChain> {
    let list = codecs
        .as_array()
        .ok_or_else(|| ZarrError::codec("codecs", "must be a list"))?;
    let mut builder = ChainBuilder::new(repr);
    for entry in list {
        let built = v3_codec(entry, &builder.repr)?;
        builder.push(built, name_and_config(entry)?.0)?;
    }
    builder.finish()
}

/// The parts of v2 metadata that make a chain.
pub struct V2Filters<'a> {
    pub filters: &'a Value,
    pub compressor: &'a Value,
    pub fortran_order: bool,
    pub endian: Endian,
}

fn codec_id(entry: &Value) -> Result<&str> {
    entry
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| ZarrError::codec("?", format!("{entry} has no id")))
}

/// A chain equivalent to v2 `order`, `filters` and `compressor`.
pub fn build_v2_chain(spec: &V2Filters, repr: &ChunkRepr) -> Result<CodecChain> {
    let mut builder = ChainBuilder::new(repr);
    if spec.fortran_order && repr.shape.len() > 1 {
        builder.push(
            Built::ArrayArray(Box::new(TransposeCodec::fortran(repr.shape.len()))),
            "order",
        )?;
    }
    let mut endian = spec.endian;
    let filters: &[Value] = match spec.filters {
        Value::Null => &[],
        Value::Array(list) => list,
        other => {
            return Err(ZarrError::codec(
                "filters",
                format!("{other} is not a list"),
            ))
        }
    };
    for filter in filters {
        let id = codec_id(filter)?;
        let built = numcodec(id, filter, &builder.repr)?;
        match &built {
            Built::BytesBytes(_) if builder.a2b.is_none() => {
                builder.a2b = Some(Box::new(BytesCodec {
                    order: ByteOrder::Declared(endian),
                }));
            }
            Built::ArrayArray(_) => {
                if let Some(Value::String(s)) =
                    filter.get("astype").or_else(|| filter.get("encode_dtype"))
                {
                    endian = DataType::from_v2_json(&Value::String(s.clone()))?.1;
                }
            }
            _ => {}
        }
        builder.push(built, id)?;
    }
    // numcodecs' array→bytes codecs (pcodec, zfpy) given as the v2
    // compressor serialize the array themselves, in native order.
    let compressor = match spec.compressor {
        Value::Null => None,
        c => Some((codec_id(c)?, numcodec(codec_id(c)?, c, &builder.repr)?)),
    };
    if let Some((id, Built::ArrayBytes(_))) = &compressor {
        if builder.a2b.is_some() {
            return Err(ZarrError::codec(id, "cannot follow a vlen filter"));
        }
        if endian == Endian::Big && builder.repr.dtype.size().is_some_and(|s| s > 1) {
            return Err(ZarrError::codec(
                id,
                "codes little-endian numbers; the dtype is big-endian",
            ));
        }
    }
    if builder.a2b.is_none() && !matches!(compressor, Some((_, Built::ArrayBytes(_)))) {
        if builder.repr.dtype.is_variable() {
            return Err(ZarrError::codec(
                "filters",
                "object arrays need a vlen-utf8 or vlen-bytes filter",
            ));
        }
        builder.a2b = Some(Box::new(BytesCodec {
            order: ByteOrder::Declared(endian),
        }));
    }
    if let Some((id, built)) = compressor {
        builder.push(built, id)?;
    }
    builder.finish()
}
