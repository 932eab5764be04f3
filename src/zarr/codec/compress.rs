//! Compressors: gzip, zlib, zstd, bz2, lzma (xz, alone and raw with filter
//! chains) and lz4 with numcodecs' size-prefixed framing.

use std::io::{Read, Write};

use serde_json::{json, Value};

use super::{too_large, v3_entry, BytesToBytesCodec};
use crate::zarr::error::{Result, ZarrError};

/// How a codec names itself in v3 metadata: a core name, or `numcodecs.<id>`.
#[derive(Debug, Clone)]
pub struct V3Name(pub &'static str);

fn read_all(codec: &str, mut reader: impl Read, size_hint: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(size_hint);
    reader
        .read_to_end(&mut out)
        .map_err(|e| ZarrError::codec(codec, format!("corrupt input: {e}")))?;
    Ok(out)
}

/// A decoder's output, but never more than `limit` bytes: the stream is
/// read one byte past the limit to tell "exactly full" from "too much".
fn read_bounded(codec: &str, reader: impl Read, limit: usize, size_hint: usize) -> Result<Vec<u8>> {
    let out = read_all(codec, reader.take(limit as u64 + 1), size_hint.min(limit))?;
    if out.len() > limit {
        return Err(too_large(codec, limit));
    }
    Ok(out)
}

fn level(
    config: Option<&Value>,
    key: &str,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
    codec: &str,
) -> Result<i64> {
    let level = match config.and_then(|c| c.get(key)) {
        None | Some(Value::Null) => default,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ZarrError::codec(codec, format!("{key} {v} is not an integer")))?,
    };
    if !range.contains(&level) {
        return Err(ZarrError::codec(
            codec,
            format!("{key} {level} is outside {range:?}"),
        ));
    }
    Ok(level)
}

/// gzip (RFC 1952) or zlib (RFC 1950) deflate streams.
#[derive(Debug, Clone)]
pub struct Deflate {
    pub gzip: bool,
    pub level: u32,
    pub name: V3Name,
}

impl Deflate {
    pub fn new(gzip: bool, config: Option<&Value>, name: &'static str) -> Result<Self> {
        let level = level(config, "level", if gzip { 5 } else { 1 }, -1..=9, name)?;
        Ok(Deflate {
            gzip,
            level: if level < 0 { 6 } else { level as u32 },
            name: V3Name(name),
        })
    }
}

impl BytesToBytesCodec for Deflate {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let level = flate2::Compression::new(self.level);
        let out = if self.gzip {
            let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 2), level);
            enc.write_all(&bytes).and_then(|_| enc.finish())
        } else {
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::with_capacity(bytes.len() / 2), level);
            enc.write_all(&bytes).and_then(|_| enc.finish())
        };
        out.map_err(|e| ZarrError::codec(self.name.0, e.to_string()))
    }

    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_bounded(bytes, usize::MAX - 1)
    }

    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let hint = bytes.len().saturating_mul(4);
        if self.gzip {
            let reader = flate2::read::MultiGzDecoder::new(&bytes[..]);
            read_bounded(self.name.0, reader, limit, hint)
        } else {
            let reader = flate2::read::ZlibDecoder::new(&bytes[..]);
            read_bounded(self.name.0, reader, limit, hint)
        }
    }

    fn to_v3(&self) -> Value {
        v3_entry(self.name.0, json!({"level": self.level}))
    }
}

thread_local! {
    /// One decompression context per decoding thread, reused chunk after chunk.
    static ZSTD_CONTEXT: std::cell::RefCell<std::io::Result<zstd::bulk::Decompressor<'static>>> =
        std::cell::RefCell::new(zstd::bulk::Decompressor::new());
}

/// Zstandard frames; decoding also accepts frames without a content size.
#[derive(Debug, Clone)]
pub struct Zstd {
    pub level: i32,
    pub checksum: bool,
    pub name: V3Name,
}

impl Zstd {
    pub fn new(config: Option<&Value>, name: &'static str) -> Result<Self> {
        let level = level(config, "level", 0, -131072..=22, name)? as i32;
        let checksum = config
            .and_then(|c| c.get("checksum"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Zstd {
            level,
            checksum,
            name: V3Name(name),
        })
    }
}

impl BytesToBytesCodec for Zstd {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let err = |e: std::io::Error| ZarrError::codec("zstd", e.to_string());
        let mut compressor = zstd::bulk::Compressor::new(self.level).map_err(err)?;
        compressor.include_checksum(self.checksum).map_err(err)?;
        compressor.include_contentsize(true).map_err(err)?;
        compressor.compress(&bytes).map_err(err)
    }

    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_bounded(bytes, 1 << 30)
    }

    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let size = zstd::zstd_safe::get_frame_content_size(&bytes)
            .ok()
            .flatten()
            .unwrap_or(0);
        if size > limit as u64 {
            return Err(too_large("zstd", limit));
        }
        let size = size as usize;
        if size > 0 {
            // One shot into a buffer of the stated size, with this thread's
            // context: no window buffer, no context set-up per chunk. Several
            // frames, or a size that lies, fall back to streaming.
            let single = ZSTD_CONTEXT.with(|dctx| {
                let mut dctx = dctx.borrow_mut();
                let dctx = dctx.as_mut().ok()?;
                dctx.decompress(&bytes, size).ok()
            });
            if let Some(out) = single.filter(|out| out.len() == size) {
                return Ok(out);
            }
        }
        let decoder = zstd::stream::read::Decoder::new(&bytes[..])
            .map_err(|e| ZarrError::codec("zstd", e.to_string()))?;
        read_bounded("zstd", decoder, limit, size)
    }

    fn to_v3(&self) -> Value {
        v3_entry(
            self.name.0,
            json!({"level": self.level, "checksum": self.checksum}),
        )
    }
}

/// bzip2.
#[derive(Debug, Clone)]
pub struct Bz2 {
    pub level: u32,
}

impl Bz2 {
    pub fn new(config: Option<&Value>) -> Result<Self> {
        Ok(Bz2 {
            level: level(config, "level", 1, 1..=9, "bz2")? as u32,
        })
    }
}

impl BytesToBytesCodec for Bz2 {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(self.level));
        enc.write_all(&bytes)
            .and_then(|_| enc.finish())
            .map_err(|e| ZarrError::codec("bz2", e.to_string()))
    }
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_bounded(bytes, usize::MAX - 1)
    }
    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        let reader = bzip2::read::MultiBzDecoder::new(&bytes[..]);
        read_bounded("bz2", reader, limit, bytes.len().saturating_mul(4))
    }
    fn to_v3(&self) -> Value {
        v3_entry("numcodecs.bz2", json!({"level": self.level}))
    }
}

/// lz4 block with numcodecs' 4-byte little-endian uncompressed-size prefix.
#[derive(Debug, Clone)]
pub struct Lz4 {
    pub acceleration: i64,
}

impl BytesToBytesCodec for Lz4 {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let len =
            u32::try_from(bytes.len()).map_err(|_| ZarrError::codec("lz4", "input over 4 GiB"))?;
        let mut out = len.to_le_bytes().to_vec();
        out.extend(lz4_flex::block::compress(&bytes));
        Ok(out)
    }
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_bounded(bytes, u32::MAX as usize)
    }
    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        if bytes.len() < 4 {
            return Err(ZarrError::codec(
                "lz4",
                "input shorter than its size header",
            ));
        }
        let size = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if size > limit {
            return Err(too_large("lz4", limit));
        }
        lz4_flex::block::decompress(&bytes[4..], size)
            .map_err(|e| ZarrError::codec("lz4", e.to_string()))
    }
    fn to_v3(&self) -> Value {
        v3_entry("numcodecs.lz4", json!({"acceleration": self.acceleration}))
    }
}

/// Python `lzma` module formats as numcodecs names them.
const FORMAT_XZ: i64 = 1;
const FORMAT_ALONE: i64 = 2;
const FORMAT_RAW: i64 = 3;
const FILTER_LZMA1: u64 = 0x4000000000000001;
const FILTER_LZMA2: u64 = 0x21;
const FILTER_DELTA: u64 = 0x03;

/// lzma in numcodecs' configuration (`format`, `check`, `preset`, `filters`).
#[derive(Debug, Clone)]
pub struct Lzma {
    pub format: i64,
    pub check: i64,
    pub preset: Option<u32>,
    pub filters: Option<Value>,
}

fn lzma_err(e: impl std::fmt::Display) -> ZarrError {
    ZarrError::codec("lzma", e.to_string())
}

impl Lzma {
    pub fn new(config: Option<&Value>) -> Result<Self> {
        let get = |k: &str| config.and_then(|c| c.get(k)).filter(|v| !v.is_null());
        let format = get("format").and_then(Value::as_i64).unwrap_or(FORMAT_XZ);
        if ![FORMAT_XZ, FORMAT_ALONE, FORMAT_RAW].contains(&format) {
            return Err(lzma_err(format!(
                "format {format} is not 1 (xz), 2 (alone) or 3 (raw)"
            )));
        }
        let lzma = Lzma {
            format,
            check: get("check").and_then(Value::as_i64).unwrap_or(-1),
            preset: get("preset").and_then(Value::as_u64).map(|p| p as u32),
            filters: get("filters").cloned(),
        };
        if format == FORMAT_RAW && lzma.filters.is_none() {
            return Err(lzma_err("the raw format needs a filter chain"));
        }
        lzma.filter_chain()?;
        Ok(lzma)
    }

    fn options(spec: &Value) -> Result<liblzma::stream::LzmaOptions> {
        let preset = spec.get("preset").and_then(Value::as_u64).unwrap_or(6) as u32;
        let mut opts = liblzma::stream::LzmaOptions::new_preset(preset).map_err(lzma_err)?;
        if let Some(d) = spec.get("dict_size").and_then(Value::as_u64) {
            opts.dict_size(d as u32);
        }
        if let Some(v) = spec.get("lc").and_then(Value::as_u64) {
            opts.literal_context_bits(v as u32);
        }
        if let Some(v) = spec.get("lp").and_then(Value::as_u64) {
            opts.literal_position_bits(v as u32);
        }
        if let Some(v) = spec.get("pb").and_then(Value::as_u64) {
            opts.position_bits(v as u32);
        }
        if let Some(v) = spec.get("nice_len").and_then(Value::as_u64) {
            opts.nice_len(v as u32);
        }
        Ok(opts)
    }

    fn filter_chain(&self) -> Result<Option<liblzma::stream::Filters>> {
        let Some(list) = &self.filters else {
            return Ok(None);
        };
        let list = list
            .as_array()
            .ok_or_else(|| lzma_err("filters must be a list"))?;
        let mut filters = liblzma::stream::Filters::new();
        for spec in list {
            match spec.get("id").and_then(Value::as_u64) {
                Some(FILTER_LZMA2) => {
                    filters.lzma2(&Self::options(spec)?);
                }
                Some(FILTER_LZMA1) => {
                    filters.lzma1(&Self::options(spec)?);
                }
                Some(FILTER_DELTA) => {
                    let dist = spec.get("dist").and_then(Value::as_u64).unwrap_or(1);
                    if !(1..=256).contains(&dist) {
                        return Err(lzma_err(format!("delta dist {dist} is outside 1..=256")));
                    }
                    filters
                        .delta_properties(&[(dist - 1) as u8])
                        .map_err(lzma_err)?;
                }
                _ => {
                    return Err(lzma_err(format!(
                        "filter {spec} is not delta, lzma1 or lzma2"
                    )))
                }
            }
        }
        Ok(Some(filters))
    }

    fn check(&self) -> liblzma::stream::Check {
        use liblzma::stream::Check;
        match self.check {
            0 => Check::None,
            1 => Check::Crc32,
            10 => Check::Sha256,
            _ => Check::Crc64,
        }
    }
}

impl BytesToBytesCodec for Lzma {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        use liblzma::stream::{LzmaOptions, Stream};
        let preset = self.preset.unwrap_or(6);
        let stream = match (self.format, self.filter_chain()?) {
            (FORMAT_XZ, None) => Stream::new_easy_encoder(preset, self.check()),
            (FORMAT_XZ, Some(f)) => Stream::new_stream_encoder(&f, self.check()),
            (FORMAT_ALONE, _) => {
                Stream::new_lzma_encoder(&LzmaOptions::new_preset(preset).map_err(lzma_err)?)
            }
            (_, Some(f)) => Stream::new_raw_encoder(&f),
            (_, None) => return Err(lzma_err("the raw format needs a filter chain")),
        }
        .map_err(lzma_err)?;
        read_all(
            "lzma",
            liblzma::read::XzEncoder::new_stream(&bytes[..], stream),
            bytes.len() / 2,
        )
    }

    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_bounded(bytes, usize::MAX - 1)
    }

    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        use liblzma::stream::{Stream, CONCATENATED};
        let stream = match self.format {
            FORMAT_RAW => {
                let filters = self
                    .filter_chain()?
                    .ok_or_else(|| lzma_err("raw format needs filters"))?;
                Stream::new_raw_decoder(&filters)
            }
            _ => Stream::new_auto_decoder(u64::MAX, CONCATENATED),
        }
        .map_err(lzma_err)?;
        let reader = liblzma::read::XzDecoder::new_stream(&bytes[..], stream);
        read_bounded("lzma", reader, limit, bytes.len().saturating_mul(4))
    }

    fn to_v3(&self) -> Value {
        v3_entry(
            "numcodecs.lzma",
            json!({"format": self.format, "check": self.check, "preset": self.preset, "filters": self.filters}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-shot decoder trusts a frame's stated size only as far as it
    /// goes: several frames, or a frame without a size, take the streaming path.
    #[test]
    fn zstd_decodes_concatenated_frames_and_frames_without_a_size() {
        let codec = Zstd::new(None, "zstd").unwrap();
        let a = vec![7u8; 1000];
        let b: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut joined = codec.encode(a.clone()).unwrap();
        joined.extend(codec.encode(b.clone()).unwrap());
        assert_eq!(codec.decode(joined).unwrap(), [a, b.clone()].concat());
        // A frame that states no size, as streaming writers make them.
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, &b).unwrap();
        let unsized_frame = encoder.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&unsized_frame).unwrap(),
            None
        );
        assert_eq!(codec.decode(unsized_frame).unwrap(), b);
    }
}
