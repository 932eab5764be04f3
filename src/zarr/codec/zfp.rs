//! numcodecs' `zfpy`: ZFP's compressed streams with a full header (what
//! `zfpy.compress_numpy(..., write_header=True)` writes), as an array→bytes
//! codec for chunks of 1 to 4 dimensions of int32, int64, float32 and
//! float64. ZFP itself is the reference C library (`vendor/zfp`), called
//! through the few functions declared here.

use std::ffi::{c_double, c_int, c_uint, c_void};

use serde_json::Value;

use super::numeric::Le;
use super::{v3_entry, ArrayBytes, ArrayToBytesCodec, ChunkRepr};
use crate::zarr::dtype::DataType;
use crate::zarr::error::{Result, ZarrError};

const NAME: &str = "zfpy";

/// ZFP's own opaque types, only ever handled by pointer.
#[repr(C)]
struct Bitstream {
    _private: [u8; 0],
}
#[repr(C)]
struct ZfpStream {
    _private: [u8; 0],
}
#[repr(C)]
struct ZfpField {
    _private: [u8; 0],
}

// `zfp_type`: a C enum, an int.
const ZFP_TYPE_INT32: c_int = 1;
const ZFP_TYPE_INT64: c_int = 2;
const ZFP_TYPE_FLOAT: c_int = 3;
const ZFP_TYPE_DOUBLE: c_int = 4;
/// The header parts zfpy writes and reads: magic, field and mode.
const ZFP_HEADER_FULL: c_uint = 0x7;

extern "C" {
    fn stream_open(buffer: *mut c_void, bytes: usize) -> *mut Bitstream;
    fn stream_close(stream: *mut Bitstream);
    fn zfp_stream_open(stream: *mut Bitstream) -> *mut ZfpStream;
    fn zfp_stream_close(zfp: *mut ZfpStream);
    fn zfp_stream_set_bit_stream(zfp: *mut ZfpStream, stream: *mut Bitstream);
    fn zfp_stream_rewind(zfp: *mut ZfpStream);
    fn zfp_stream_maximum_size(zfp: *const ZfpStream, field: *const ZfpField) -> usize;
    fn zfp_stream_set_accuracy(zfp: *mut ZfpStream, tolerance: c_double) -> c_double;
    fn zfp_stream_set_rate(
        zfp: *mut ZfpStream,
        rate: c_double,
        kind: c_int,
        dims: c_uint,
        align: c_int,
    ) -> c_double;
    fn zfp_stream_set_precision(zfp: *mut ZfpStream, precision: c_uint) -> c_uint;
    fn zfp_stream_set_reversible(zfp: *mut ZfpStream);
    fn zfp_field_alloc() -> *mut ZfpField;
    fn zfp_field_1d(pointer: *mut c_void, kind: c_int, nx: usize) -> *mut ZfpField;
    fn zfp_field_2d(pointer: *mut c_void, kind: c_int, nx: usize, ny: usize) -> *mut ZfpField;
    fn zfp_field_3d(
        pointer: *mut c_void,
        kind: c_int,
        nx: usize,
        ny: usize,
        nz: usize,
    ) -> *mut ZfpField;
    fn zfp_field_4d(
        pointer: *mut c_void,
        kind: c_int,
        nx: usize,
        ny: usize,
        nz: usize,
        nw: usize,
    ) -> *mut ZfpField;
    fn zfp_field_free(field: *mut ZfpField);
    fn zfp_field_type(field: *const ZfpField) -> c_int;
    fn zfp_field_dimensionality(field: *const ZfpField) -> c_uint;
    fn zfp_field_size(field: *const ZfpField, size: *mut usize) -> usize;
    fn zfp_field_set_pointer(field: *mut ZfpField, pointer: *mut c_void);
    fn zfp_write_header(zfp: *mut ZfpStream, field: *const ZfpField, mask: c_uint) -> usize;
    fn zfp_read_header(zfp: *mut ZfpStream, field: *mut ZfpField, mask: c_uint) -> usize;
    fn zfp_compress(zfp: *mut ZfpStream, field: *const ZfpField) -> usize;
    #[cfg(test)]
    fn zfp_stream_flush(zfp: *mut ZfpStream) -> usize;
    fn zfp_decompress(zfp: *mut ZfpStream, field: *mut ZfpField) -> usize;
}

/// A ZFP stream over a buffer, its field, and the bit stream under both;
/// freed together whatever path leaves.
struct Session {
    bits: *mut Bitstream,
    zfp: *mut ZfpStream,
    field: *mut ZfpField,
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or was returned by its allocator
        // here, and is freed once.
        unsafe {
            if !self.field.is_null() {
                zfp_field_free(self.field);
            }
            if !self.zfp.is_null() {
                zfp_stream_close(self.zfp);
            }
            if !self.bits.is_null() {
                stream_close(self.bits);
            }
        }
    }
}

/// How zfpy was asked to compress (numcodecs' `mode` and its argument).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Accuracy(f64),
    Rate(f64),
    Precision(u32),
    Reversible,
}

#[derive(Debug, Clone)]
pub struct Zfpy {
    mode: Mode,
    config: Value,
}

fn err(reason: impl Into<String>) -> ZarrError {
    ZarrError::codec(NAME, reason)
}

fn zfp_type(dtype: &DataType) -> Result<c_int> {
    Ok(match dtype {
        DataType::Int32 => ZFP_TYPE_INT32,
        DataType::Int64 => ZFP_TYPE_INT64,
        DataType::Float32 => ZFP_TYPE_FLOAT,
        DataType::Float64 => ZFP_TYPE_DOUBLE,
        other => {
            return Err(err(format!(
                "takes int32, int64, float32 and float64, not {}",
                other.name()
            )))
        }
    })
}

impl Zfpy {
    /// From numcodecs' configuration: `mode` 2 (fixed rate, `rate`), 3
    /// (fixed precision, `precision`), 4 (fixed accuracy, `tolerance`, the
    /// default) or 5 (reversible); as zfpy does, the first of tolerance,
    /// rate and precision that is not negative decides.
    pub fn new(config: &Value, repr: &ChunkRepr) -> Result<Self> {
        zfp_type(&repr.dtype)?;
        if !(1..=4).contains(&repr.shape.len()) {
            return Err(err(format!(
                "codes chunks of 1 to 4 dimensions, not {}",
                repr.shape.len()
            )));
        }
        let number = |name: &str| -> Result<f64> {
            match config.get(name) {
                None | Some(Value::Null) => Ok(-1.0),
                Some(v) => v
                    .as_f64()
                    .filter(|f| f.is_finite())
                    .ok_or_else(|| err(format!("{name} {v} is not a number"))),
            }
        };
        let (tolerance, rate, precision) =
            (number("tolerance")?, number("rate")?, number("precision")?);
        // Past 64 bits a value, a rate or precision only pads blocks (and
        // ZFP would size its buffer by it).
        if rate > 64.0 {
            return Err(err(format!("rate {rate} is more than 64 bits a value")));
        }
        if precision > 64.0 {
            return Err(err(format!("precision {precision} is more than 64 bits")));
        }
        let mode = match config.get("mode").and_then(Value::as_u64).unwrap_or(4) {
            // What numcodecs passes zfpy for each mode.
            2 if rate >= 0.0 => Mode::Rate(rate),
            3 if precision >= 0.0 => Mode::Precision(precision as u32),
            4 if tolerance >= 0.0 => Mode::Accuracy(tolerance),
            2..=5 => Mode::Reversible,
            other => return Err(err(format!("mode {other} is not 2, 3, 4 or 5"))),
        };
        Ok(Zfpy {
            mode,
            config: config.clone(),
        })
    }
}

/// A field of `repr`'s shape over `data` (ZFP names the fastest dimension x).
///
/// # Safety
/// `data` must hold the field's elements for as long as the field is used.
unsafe fn field_over(data: *mut c_void, kind: c_int, shape: &[usize]) -> *mut ZfpField {
    // SAFETY: ZFP keeps `data` in the field without reading it here; the
    // caller keeps it alive for as long as the field is used.
    unsafe {
        match *shape {
            [x] => zfp_field_1d(data, kind, x),
            [y, x] => zfp_field_2d(data, kind, x, y),
            [z, y, x] => zfp_field_3d(data, kind, x, y, z),
            [w, z, y, x] => zfp_field_4d(data, kind, x, y, z, w),
            _ => std::ptr::null_mut(),
        }
    }
}

fn encode_typed<T: Le>(codec: &Zfpy, bytes: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
    let mut values = T::read_all(bytes);
    let kind = zfp_type(&repr.dtype)?;
    // SAFETY: the field points into `values` and the stream into `out`,
    // both alive until the session is dropped at the end of this block;
    // the output is sized by ZFP's own bound for the field and mode.
    unsafe {
        let mut session = Session {
            bits: std::ptr::null_mut(),
            zfp: zfp_stream_open(std::ptr::null_mut()),
            field: field_over(values.as_mut_ptr().cast(), kind, &repr.shape),
        };
        if session.zfp.is_null() || session.field.is_null() {
            return Err(err("could not set up a stream"));
        }
        match codec.mode {
            Mode::Accuracy(t) => {
                zfp_stream_set_accuracy(session.zfp, t);
            }
            Mode::Rate(r) => {
                zfp_stream_set_rate(session.zfp, r, kind, repr.shape.len() as c_uint, 0);
            }
            Mode::Precision(p) => {
                zfp_stream_set_precision(session.zfp, p);
            }
            Mode::Reversible => zfp_stream_set_reversible(session.zfp),
        }
        let capacity = zfp_stream_maximum_size(session.zfp, session.field);
        let limit = repr.nbytes().unwrap_or(0).saturating_mul(2) + (1 << 16);
        if capacity > limit {
            return Err(err(format!(
                "this configuration may take {capacity} bytes for a chunk of {} bytes",
                repr.nbytes().unwrap_or(0)
            )));
        }
        let mut out = vec![0u64; capacity.div_ceil(8)];
        session.bits = stream_open(out.as_mut_ptr().cast(), out.len() * 8);
        if session.bits.is_null() {
            return Err(err("could not open a bit stream"));
        }
        zfp_stream_set_bit_stream(session.zfp, session.bits);
        zfp_stream_rewind(session.zfp);
        if zfp_write_header(session.zfp, session.field, ZFP_HEADER_FULL) == 0 {
            return Err(err("could not write the header"));
        }
        let size = zfp_compress(session.zfp, session.field);
        if size == 0 || size > out.len() * 8 {
            return Err(err("compression failed"));
        }
        let mut bytes: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(size);
        Ok(bytes)
    }
}

/// A stream's bytes as the 64-bit words ZFP reads and writes, aligned for
/// them, zero-padded to a whole word.
fn words_of(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut eight = [0u8; 8];
        eight[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(eight);
    }
    words
}

fn decode_typed<T: Le>(bytes: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
    let kind = zfp_type(&repr.dtype)?;
    let n = repr.num_elements();
    // This copy of ZFP reads a word past the end of its stream as zero
    // (vendor/zfp/PATCHES.md): a truncated or hostile stream decodes to
    // garbage or fails, and never reads beyond `input`.
    let mut input = words_of(bytes);
    let mut values = vec![T::default(); n];
    // SAFETY: the stream reads `input` (its length in bytes given) and the
    // field writes `values`, both alive until the session is dropped at
    // the end of this block; the field is checked against the chunk (type,
    // dimensions, sizes) before decompressing into `values`, which holds
    // exactly the chunk's elements.
    unsafe {
        let mut session = Session {
            bits: stream_open(input.as_mut_ptr().cast(), input.len() * 8),
            zfp: std::ptr::null_mut(),
            field: zfp_field_alloc(),
        };
        if session.bits.is_null() || session.field.is_null() {
            return Err(err("could not set up a stream"));
        }
        session.zfp = zfp_stream_open(session.bits);
        if session.zfp.is_null() {
            return Err(err("could not set up a stream"));
        }
        if zfp_read_header(session.zfp, session.field, ZFP_HEADER_FULL) == 0 {
            return Err(err("the chunk does not start with a ZFP header"));
        }
        let mut size = [0usize; 4];
        let dims = zfp_field_dimensionality(session.field) as usize;
        zfp_field_size(session.field, size.as_mut_ptr());
        let mut stored: Vec<usize> = size[..dims.min(4)].to_vec();
        stored.reverse();
        if zfp_field_type(session.field) != kind || stored != repr.shape {
            return Err(err(format!(
                "the stream holds a field of shape {stored:?} (type {}), the chunk is {:?} of {}",
                zfp_field_type(session.field),
                repr.shape,
                repr.dtype.name()
            )));
        }
        zfp_field_set_pointer(session.field, values.as_mut_ptr().cast());
        if zfp_decompress(session.zfp, session.field) == 0 {
            return Err(err("decompression failed"));
        }
    }
    Ok(T::write_all(&values))
}

impl ArrayToBytesCodec for Zfpy {
    fn encode(&self, data: ArrayBytes, repr: &ChunkRepr) -> Result<Vec<u8>> {
        let bytes = data.into_fixed()?;
        match repr.dtype {
            DataType::Int32 => encode_typed::<i32>(self, &bytes, repr),
            DataType::Int64 => encode_typed::<i64>(self, &bytes, repr),
            DataType::Float32 => encode_typed::<f32>(self, &bytes, repr),
            DataType::Float64 => encode_typed::<f64>(self, &bytes, repr),
            ref other => zfp_type(other).map(|_| Vec::new()),
        }
    }

    fn decode(&self, bytes: Vec<u8>, repr: &ChunkRepr) -> Result<ArrayBytes> {
        let decoded = match repr.dtype {
            DataType::Int32 => decode_typed::<i32>(&bytes, repr),
            DataType::Int64 => decode_typed::<i64>(&bytes, repr),
            DataType::Float32 => decode_typed::<f32>(&bytes, repr),
            DataType::Float64 => decode_typed::<f64>(&bytes, repr),
            ref other => zfp_type(other).map(|_| Vec::new()),
        }?;
        Ok(ArrayBytes::Fixed(decoded))
    }

    fn to_v3(&self) -> Value {
        v3_entry("numcodecs.zfpy", self.config.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::fill::FillValue;
    use serde_json::json;

    fn repr(dtype: DataType, shape: Vec<usize>) -> ChunkRepr {
        ChunkRepr {
            shape,
            dtype,
            fill: FillValue(vec![0; 8]),
        }
    }

    #[test]
    fn reversible_round_trips_exactly_and_accuracy_within_tolerance() {
        let r = repr(DataType::Float64, vec![6, 10]);
        let values: Vec<f64> = (0..60).map(|i| (i as f64 * 0.37).sin() * 100.0).collect();
        let bytes = f64::write_all(&values);
        let lossless = Zfpy::new(&json!({"mode": 5}), &r).unwrap();
        let encoded = lossless
            .encode(ArrayBytes::Fixed(bytes.clone()), &r)
            .unwrap();
        let decoded = lossless.decode(encoded, &r).unwrap().into_fixed().unwrap();
        assert_eq!(decoded, bytes);
        let lossy = Zfpy::new(&json!({"mode": 4, "tolerance": 0.01}), &r).unwrap();
        let encoded = lossy.encode(ArrayBytes::Fixed(bytes), &r).unwrap();
        let decoded = f64::read_all(&lossy.decode(encoded, &r).unwrap().into_fixed().unwrap());
        for (a, b) in values.iter().zip(&decoded) {
            assert!((a - b).abs() <= 0.01, "{a} {b}");
        }
    }

    extern "C" {
        fn zfp_stream_set_params(
            zfp: *mut ZfpStream,
            minbits: c_uint,
            maxbits: c_uint,
            maxprec: c_uint,
            minexp: c_int,
        ) -> c_int;
    }

    /// A header whose `maxbits` is below a float block's overhead (ZFP's
    /// budget then wraps around), then bytes that say "nonzero block" for
    /// ever: without the bound on reads, decoding it read past the buffer
    /// and returned whatever lay there, different on every read.
    #[test]
    fn a_header_that_unbounds_the_decoder_reads_zeros_past_its_stream() {
        let r = repr(DataType::Float32, vec![4096]);
        let mut words = vec![u64::MAX; 64];
        let header_bits = unsafe {
            let bits = stream_open(words.as_mut_ptr().cast(), words.len() * 8);
            let zfp = zfp_stream_open(bits);
            let field = zfp_field_1d(std::ptr::null_mut(), ZFP_TYPE_FLOAT, 4096);
            zfp_stream_set_params(zfp, 1, 1, 32, -149);
            zfp_stream_rewind(zfp);
            let n = zfp_write_header(zfp, field, ZFP_HEADER_FULL);
            // The header's last word is flushed as written.
            super::zfp_stream_flush(zfp);
            zfp_field_free(field);
            zfp_stream_close(zfp);
            stream_close(bits);
            n
        };
        assert!(header_bits > 0);
        let stream: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let codec = Zfpy::new(&json!({"mode": 5}), &r).unwrap();
        let first = codec
            .decode(stream.clone(), &r)
            .map(|a| a.into_fixed().unwrap());
        for _ in 0..8 {
            let again = codec
                .decode(stream.clone(), &r)
                .map(|a| a.into_fixed().unwrap());
            assert_eq!(again.is_ok(), first.is_ok());
            if let (Ok(a), Ok(b)) = (&again, &first) {
                assert!(
                    a == b,
                    "the same bytes decoded differently: memory past the stream was read"
                );
            }
        }
    }

    #[test]
    fn rates_and_precisions_past_64_bits_are_refused() {
        let r = repr(DataType::Int32, vec![16]);
        assert!(Zfpy::new(&json!({"mode": 2, "rate": 1e9}), &r).is_err());
        assert!(Zfpy::new(&json!({"mode": 3, "precision": 65}), &r).is_err());
        let codec = Zfpy::new(&json!({"mode": 2, "rate": 64}), &r).unwrap();
        let encoded = codec.encode(ArrayBytes::Fixed(vec![1u8; 64]), &r).unwrap();
        assert!(encoded.len() <= 64 * 2 + 64);
    }

    #[test]
    fn streams_of_another_shape_or_type_and_garbage_are_refused() {
        let r = repr(DataType::Int32, vec![16]);
        let codec = Zfpy::new(&json!({"mode": 5}), &r).unwrap();
        let encoded = codec.encode(ArrayBytes::Fixed(vec![7u8; 64]), &r).unwrap();
        let other = repr(DataType::Int32, vec![4, 4]);
        assert!(codec.decode(encoded.clone(), &other).is_err());
        let other = repr(DataType::Float32, vec![16]);
        assert!(codec.decode(encoded.clone(), &other).is_err());
        // Truncated: reads padding, never past it.
        let _ = codec.decode(encoded[..encoded.len() / 2].to_vec(), &r);
        assert!(codec.decode(b"not zfp at all".to_vec(), &r).is_err());
        assert!(Zfpy::new(&json!({}), &repr(DataType::UInt8, vec![4])).is_err());
        assert!(Zfpy::new(&json!({}), &repr(DataType::Int32, vec![1; 5])).is_err());
    }
}
