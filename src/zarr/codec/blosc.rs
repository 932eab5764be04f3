//! Blosc (c-blosc 1.x, built by `blosc-src`) behind a small safe layer:
//! compress and decompress with a context (no global state, so chunks can be
//! coded on many threads), buffer sizes, and `getitem` for partial decodes.

use std::ffi::{c_int, c_void, CString};
use std::ops::Range;

use serde_json::{json, Value};

use super::{v3_entry, BytesToBytesCodec};
use crate::zarr::error::{Result, ZarrError};

const COMPRESSORS: [&str; 6] = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"];
const MAX_OVERHEAD: usize = blosc_src::BLOSC_MAX_OVERHEAD as usize;
const MIN_HEADER: usize = 16;

/// Shuffle filter applied before compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    None,
    Byte,
    Bit,
    /// numcodecs' `-1`: bit shuffle for 1-byte items, byte shuffle otherwise.
    Auto,
}

#[derive(Debug, Clone)]
pub struct BloscCodec {
    pub cname: String,
    pub clevel: u8,
    pub shuffle: Shuffle,
    pub blocksize: usize,
    /// Item size the shuffle works on; v2 takes it from the data type.
    pub typesize: usize,
}

fn err(reason: impl Into<String>) -> ZarrError {
    ZarrError::codec("blosc", reason)
}

/// Uncompressed, compressed and block sizes from a Blosc header, after
/// checking the buffer is safe to decompress.
pub fn cbuffer_sizes(src: &[u8]) -> Result<(usize, usize, usize)> {
    if src.len() < MIN_HEADER {
        return Err(err(format!(
            "{} bytes is shorter than a Blosc header",
            src.len()
        )));
    }
    let mut nbytes = 0usize;
    // SAFETY: `src` is a live slice of `src.len()` bytes and validate reads at most that.
    let rc = unsafe {
        blosc_src::blosc_cbuffer_validate(src.as_ptr() as *const c_void, src.len(), &mut nbytes)
    };
    if rc != 0 {
        return Err(err("not a valid Blosc buffer (header and length disagree)"));
    }
    let (mut n, mut cbytes, mut block) = (0usize, 0usize, 0usize);
    // SAFETY: validated above; the call reads only the 16-byte header.
    unsafe {
        blosc_src::blosc_cbuffer_sizes(
            src.as_ptr() as *const c_void,
            &mut n,
            &mut cbytes,
            &mut block,
        )
    };
    Ok((n, cbytes, block))
}

/// Decoded bytes from which one buffer's blocks are decoded on several
/// threads: one request for a window over a few large chunks then uses
/// every core, not one per chunk.
const PARALLEL_BYTES: usize = 1 << 20;

/// Decompress a Blosc buffer with a private context.
pub fn decompress(src: &[u8]) -> Result<Vec<u8>> {
    let (nbytes, _, _) = cbuffer_sizes(src)?;
    if let Some(parts) = Parts::of(src, nbytes) {
        return parts.items(src, 0, nbytes / parts.typesize);
    }
    // Not zeroed first: for a multi-megabyte chunk that costs as much as the
    // decompression. Only the bytes Blosc reports written become visible.
    let mut out: Vec<u8> = Vec::with_capacity(nbytes);
    if nbytes == 0 {
        return Ok(out);
    }
    // SAFETY: `out` has capacity for `nbytes` bytes, the size the validated
    // header promises and the destination size Blosc is told; Blosc writes
    // no more than that.
    let rc = unsafe {
        blosc_src::blosc_decompress_ctx(
            src.as_ptr() as *const c_void,
            out.as_mut_ptr() as *mut c_void,
            nbytes,
            1,
        )
    };
    if rc < 0 || rc as usize != nbytes {
        return Err(err(format!("decompression failed (code {rc})")));
    }
    // SAFETY: Blosc reported all `nbytes` bytes written.
    unsafe { out.set_len(nbytes) };
    Ok(out)
}

/// Decode `nitems` items of `typesize` bytes starting at item `start`,
/// touching only the Blosc blocks that hold them.
pub fn get_items(src: &[u8], start: usize, nitems: usize, typesize: usize) -> Result<Vec<u8>> {
    let (nbytes, _, _) = cbuffer_sizes(src)?;
    let stored = stored_typesize(src);
    if stored != typesize {
        return Err(err(format!("buffer typesize is {stored}, not {typesize}")));
    }
    get_items_checked(src, nbytes, start, nitems, typesize)
}

/// Header flags: the buffer holds its bytes uncompressed.
const MEMCPYED: c_int = 0x02;
/// Header flags: reserved for a future format.
const RESERVED: c_int = 0x08;

/// The item size a validated Blosc buffer was shuffled with: what
/// `blosc_getitem` counts in.
fn stored_typesize(src: &[u8]) -> usize {
    let (mut typesize, mut flags) = (0usize, 0 as c_int);
    // SAFETY: the caller validated the header; this reads only its first bytes.
    unsafe {
        blosc_src::blosc_cbuffer_metainfo(src.as_ptr() as *const c_void, &mut typesize, &mut flags)
    };
    typesize
}

/// How a large buffer is decoded in parts, a run of whole blocks each, by
/// `blosc_getitem` on the decoding pool's threads (c-blosc's own threads
/// would be started and joined for every buffer).
struct Parts {
    typesize: usize,
    blocksize: usize,
    nbytes: usize,
}

impl Parts {
    /// `None` where one thread should decode it: small buffers, a pool of
    /// one thread, and what getitem reads less carefully than a whole
    /// decode (see [`BloscCodec::decode_range`]) or needs no decoding.
    fn of(src: &[u8], nbytes: usize) -> Option<Parts> {
        let (typesize, flags) = (stored_typesize(src), c_int::from(src[2]));
        let blocksize = u32::from_le_bytes([src[8], src[9], src[10], src[11]]) as usize;
        let usable = nbytes >= PARALLEL_BYTES
            && rayon::current_num_threads() > 1
            && typesize > 0
            && blocksize > 0
            && flags & (RESERVED | MEMCPYED) == 0
            && blocksize.is_multiple_of(typesize)
            && nbytes.is_multiple_of(typesize)
            && nbytes > blocksize;
        usable.then_some(Parts {
            typesize,
            blocksize,
            nbytes,
        })
    }

    /// Items `start..start + nitems`, the blocks holding them decoded in
    /// parallel runs into one buffer.
    fn items(&self, src: &[u8], start: usize, nitems: usize) -> Result<Vec<u8>> {
        use rayon::prelude::*;
        let (first, len) = (start * self.typesize, nitems * self.typesize);
        if len < PARALLEL_BYTES || first + len > self.nbytes {
            return get_items_checked(src, self.nbytes, start, nitems, self.typesize);
        }
        // Runs that end on block boundaries, so no block is decoded twice.
        let blocks = (first + len).div_ceil(self.blocksize) - first / self.blocksize;
        let runs = rayon::current_num_threads().min(blocks);
        let per_run = blocks.div_ceil(runs) * self.blocksize;
        let mut out: Vec<u8> = Vec::with_capacity(len);
        // Cut where the array's byte offsets cross a run boundary.
        let head = (per_run - first % per_run) % per_run;
        let spare = &mut out.spare_capacity_mut()[..len];
        let (lead, rest) = spare.split_at_mut(head.min(len));
        let mut pieces: Vec<(usize, &mut [std::mem::MaybeUninit<u8>])> = Vec::new();
        let mut at = first + lead.len();
        if !lead.is_empty() {
            pieces.push((first, lead));
        }
        for piece in rest.chunks_mut(per_run) {
            let n = piece.len();
            pieces.push((at, piece));
            at += n;
        }
        pieces.into_par_iter().try_for_each(|(offset, piece)| {
            let n = piece.len() / self.typesize;
            let (s, count) = (
                c_int::try_from(offset / self.typesize).map_err(|_| err("start too large"))?,
                c_int::try_from(n).map_err(|_| err("too many items"))?,
            );
            // SAFETY: `piece` has room for `n` items; getitem writes no more
            // than the items asked for, which lie inside the validated
            // buffer (checked above against `nbytes`).
            let rc = unsafe {
                blosc_src::blosc_getitem(
                    src.as_ptr() as *const c_void,
                    s,
                    count,
                    piece.as_mut_ptr() as *mut c_void,
                )
            };
            if rc < 0 || rc as usize != piece.len() {
                return Err(err(format!("decompression failed (code {rc})")));
            }
            Ok(())
        })?;
        // SAFETY: every piece of the first `len` bytes was written whole.
        unsafe { out.set_len(len) };
        Ok(out)
    }
}

/// `get_items` on a buffer already validated to hold `nbytes` bytes.
fn get_items_checked(
    src: &[u8],
    nbytes: usize,
    start: usize,
    nitems: usize,
    typesize: usize,
) -> Result<Vec<u8>> {
    let end = start
        .checked_add(nitems)
        .and_then(|e| e.checked_mul(typesize));
    if end.is_none_or(|e| e > nbytes) || typesize == 0 {
        return Err(err(format!(
            "items {start}..{} are outside the buffer",
            start.saturating_add(nitems)
        )));
    }
    let len = nitems * typesize;
    // Not zeroed first, as in `decompress`: only written bytes become visible.
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let (s, n) = (
        c_int::try_from(start).map_err(|_| err("start too large"))?,
        c_int::try_from(nitems).map_err(|_| err("too many items"))?,
    );
    // SAFETY: `out` has capacity for nitems*typesize bytes, and getitem
    // writes no more than the items asked for, whose range was checked
    // against the validated header.
    let rc = unsafe {
        blosc_src::blosc_getitem(
            src.as_ptr() as *const c_void,
            s,
            n,
            out.as_mut_ptr() as *mut c_void,
        )
    };
    if rc < 0 || rc as usize != len {
        return Err(err(format!("getitem failed (code {rc})")));
    }
    // SAFETY: getitem reported all `len` bytes written.
    unsafe { out.set_len(len) };
    Ok(out)
}

impl BloscCodec {
    pub fn new(
        cname: &str,
        clevel: i64,
        shuffle: Shuffle,
        blocksize: usize,
        typesize: usize,
    ) -> Result<Self> {
        if !COMPRESSORS.contains(&cname) || cname == "snappy" {
            return Err(err(format!(
                "cname '{cname}' is not one of blosclz, lz4, lz4hc, zlib, zstd"
            )));
        }
        if !(0..=9).contains(&clevel) {
            return Err(err(format!("clevel {clevel} is not in 0..=9")));
        }
        Ok(BloscCodec {
            cname: cname.to_string(),
            clevel: clevel as u8,
            shuffle,
            blocksize,
            typesize: typesize.max(1),
        })
    }

    /// numcodecs configuration (v2 `compressor`, v3 `numcodecs.blosc`).
    pub fn from_numcodecs(config: &Value, typesize: usize) -> Result<Self> {
        let cname = config.get("cname").and_then(Value::as_str).unwrap_or("lz4");
        let clevel = config.get("clevel").and_then(Value::as_i64).unwrap_or(5);
        let shuffle = match config.get("shuffle").and_then(Value::as_i64).unwrap_or(1) {
            -1 => Shuffle::Auto,
            0 => Shuffle::None,
            1 => Shuffle::Byte,
            2 => Shuffle::Bit,
            other => return Err(err(format!("shuffle {other} is not -1, 0, 1 or 2"))),
        };
        let blocksize = config.get("blocksize").and_then(Value::as_u64).unwrap_or(0) as usize;
        let typesize = config
            .get("typesize")
            .and_then(Value::as_u64)
            .map(|t| t as usize)
            .unwrap_or(typesize);
        BloscCodec::new(cname, clevel, shuffle, blocksize, typesize)
    }

    /// v3 `blosc` configuration.
    pub fn from_v3(config: Option<&Value>, default_typesize: usize) -> Result<Self> {
        let config = config.ok_or_else(|| err("configuration is required"))?;
        let cname = config
            .get("cname")
            .and_then(Value::as_str)
            .ok_or_else(|| err("cname is required"))?;
        let clevel = config
            .get("clevel")
            .and_then(Value::as_i64)
            .ok_or_else(|| err("clevel is required"))?;
        let shuffle = match config.get("shuffle").and_then(Value::as_str) {
            Some("noshuffle") => Shuffle::None,
            Some("shuffle") => Shuffle::Byte,
            Some("bitshuffle") => Shuffle::Bit,
            other => {
                return Err(err(format!(
                    "shuffle {other:?} is not noshuffle, shuffle or bitshuffle"
                )))
            }
        };
        let typesize = match config.get("typesize") {
            Some(Value::Number(n)) => n.as_u64().unwrap_or(1) as usize,
            _ => default_typesize,
        };
        let blocksize = config.get("blocksize").and_then(Value::as_u64).unwrap_or(0) as usize;
        BloscCodec::new(cname, clevel, shuffle, blocksize, typesize)
    }

    fn shuffle_code(&self) -> c_int {
        match self.shuffle {
            Shuffle::None => 0,
            Shuffle::Byte => 1,
            Shuffle::Bit => 2,
            Shuffle::Auto if self.typesize == 1 => 2,
            Shuffle::Auto => 1,
        }
    }

    /// The codec as numcodecs writes it in v2 metadata.
    pub fn to_numcodecs(&self) -> Value {
        let shuffle = match self.shuffle {
            Shuffle::None => 0,
            Shuffle::Byte => 1,
            Shuffle::Bit => 2,
            Shuffle::Auto => -1,
        };
        json!({"id": "blosc", "cname": self.cname, "clevel": self.clevel, "shuffle": shuffle, "blocksize": self.blocksize})
    }
}

impl BytesToBytesCodec for BloscCodec {
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes.len() + MAX_OVERHEAD];
        let cname = CString::new(self.cname.as_str()).map_err(|_| err("bad cname"))?;
        // SAFETY: `out` has len+MAX_OVERHEAD bytes, which Blosc guarantees is enough.
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                self.clevel as c_int,
                self.shuffle_code(),
                self.typesize,
                bytes.len(),
                bytes.as_ptr() as *const c_void,
                out.as_mut_ptr() as *mut c_void,
                out.len(),
                cname.as_ptr(),
                self.blocksize,
                1,
            )
        };
        if n <= 0 {
            return Err(err(format!("compression failed (code {n})")));
        }
        out.truncate(n as usize);
        Ok(out)
    }

    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        decompress(&bytes)
    }

    fn decode_bounded(&self, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>> {
        // The header states the decoded size; refuse it before allocating.
        if cbuffer_sizes(&bytes)?.0 > limit {
            return Err(super::too_large("blosc", limit));
        }
        decompress(&bytes)
    }

    fn decodes_ranges(&self) -> bool {
        true
    }

    fn decode_range(
        &self,
        bytes: &[u8],
        range: Range<usize>,
        decoded_len: usize,
    ) -> Option<Result<Vec<u8>>> {
        // Anything unexpected is left to a whole decode, which either
        // succeeds or says what is wrong: a part never fails where the
        // whole chunk would decode.
        let (nbytes, _, _) = cbuffer_sizes(bytes).ok()?;
        // getitem counts in the stored item size: a range that splits an
        // item is decoded whole. So are buffers getitem reads less carefully
        // than a whole decode: flags reserved for future formats (a whole
        // decode refuses them), and blocks split into streams per byte of
        // an item whose size does not divide the block size (a whole decode
        // sees the bytes left unwritten and fails; getitem would return
        // them). No Blosc writes either.
        // Flags from the header itself: blosc_cbuffer_metainfo masks them.
        let (typesize, flags) = (stored_typesize(bytes), c_int::from(bytes[2]));
        let blocksize = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let memcpyed = flags & MEMCPYED != 0;
        if nbytes != decoded_len
            || nbytes == 0
            || typesize == 0
            || flags & RESERVED != 0
            || (!memcpyed && !blocksize.is_multiple_of(typesize))
            || !range.start.is_multiple_of(typesize)
            || !range.end.is_multiple_of(typesize)
        {
            return None;
        }
        let items = range.end.saturating_sub(range.start) / typesize;
        let decoded = match Parts::of(bytes, nbytes) {
            Some(parts) => parts.items(bytes, range.start / typesize, items),
            None => get_items_checked(bytes, nbytes, range.start / typesize, items, typesize),
        };
        decoded.ok().map(Ok)
    }

    fn to_v3(&self) -> Value {
        let shuffle = match self.shuffle_code() {
            0 => "noshuffle",
            1 => "shuffle",
            _ => "bitshuffle",
        };
        v3_entry(
            "blosc",
            json!({"cname": self.cname, "clevel": self.clevel, "shuffle": shuffle, "typesize": self.typesize, "blocksize": self.blocksize}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getitem_reads_a_slice() {
        let data: Vec<u8> = (0..4000u32).flat_map(|i| i.to_le_bytes()).collect();
        let codec = BloscCodec::new("lz4", 5, Shuffle::Byte, 0, 4).unwrap();
        let packed = codec.encode(data.clone()).unwrap();
        assert_eq!(cbuffer_sizes(&packed).unwrap().0, data.len());
        assert_eq!(get_items(&packed, 10, 3, 4).unwrap(), data[40..52]);
        assert!(get_items(&packed, 3999, 2, 4).is_err());
        assert!(decompress(&packed[..packed.len() - 1]).is_err());
    }

    #[test]
    fn large_buffers_are_decoded_in_parallel_runs_of_blocks() {
        // 3 MiB of float32 in 64 KiB blocks: 48 blocks, over 4 threads.
        let data: Vec<u8> = (0..(3u32 << 18))
            .flat_map(|i| ((i as f32 * 0.01).sin()).to_le_bytes())
            .collect();
        let codec = BloscCodec::new("lz4", 5, Shuffle::Byte, 1 << 16, 4).unwrap();
        let packed = codec.encode(data.clone()).unwrap();
        let n = data.len();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            assert!(Parts::of(&packed, n).is_some());
            assert_eq!(decompress(&packed).unwrap(), data);
            // Ranges that start and end inside blocks, and at their edges.
            for range in [4..(n - 8), (1 << 16)..(n - (1 << 16)), 12..(1 << 20) + 20] {
                let part = codec
                    .decode_range(&packed, range.clone(), n)
                    .unwrap()
                    .unwrap();
                assert!(part == data[range.clone()], "range {range:?}");
            }
            // A truncated buffer fails as a whole decode does.
            assert!(decompress(&packed[..packed.len() - 100]).is_err());
        });
    }

    #[test]
    fn ranges_are_decoded_whole_where_getitem_is_less_careful() {
        let data: Vec<u8> = (0..40_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        let codec = BloscCodec::new("lz4", 5, Shuffle::Byte, 4096, 4).unwrap();
        let packed = codec.encode(data.clone()).unwrap();
        let n = data.len();
        let part = codec.decode_range(&packed, 4096..8192, n).unwrap().unwrap();
        assert_eq!(part, data[4096..8192]);
        // A range splitting an item.
        assert!(codec.decode_range(&packed, 2..8192, n).is_none());
        // A block size the item size does not divide: getitem would hand
        // back bytes it never wrote.
        let mut odd = packed.clone();
        odd[8..12].copy_from_slice(&4097u32.to_le_bytes());
        assert!(codec.decode_range(&odd, 4096..8192, n).is_none());
        // Flags reserved for a future format.
        let mut future = packed.clone();
        future[2] |= 0x08;
        assert!(codec.decode_range(&future, 4096..8192, n).is_none());
        // A header that promises another size than the chunk's.
        assert!(codec.decode_range(&packed, 0..4, n + 4).is_none());
        // Nothing to decode (items of size 0).
        let empty = BloscCodec::new("lz4", 5, Shuffle::Byte, 0, 1)
            .unwrap()
            .encode(Vec::new())
            .unwrap();
        assert!(codec.decode_range(&empty, 0..0, 0).is_none());
    }
}
