//! One conformance suite for codecs: every codec round-trips sample chunks
//! and turns corrupt input into an error, never a panic.

use serde_json::json;

use super::*;
use crate::zarr::dtype::DataType;
use crate::zarr::fill::FillValue;

fn repr(shape: Vec<usize>, dtype: DataType) -> ChunkRepr {
    let fill = FillValue::zero(&dtype);
    ChunkRepr { shape, dtype, fill }
}

fn sample(repr: &ChunkRepr) -> ArrayBytes {
    match repr.dtype.size() {
        Some(size) => ArrayBytes::Fixed(
            (0..repr.num_elements() * size)
                .map(|i| ((i * 7 + i / 5) % 251) as u8)
                .collect(),
        ),
        None => ArrayBytes::Variable(
            (0..repr.num_elements())
                .map(|i| format!("s{i}é").into_bytes())
                .collect(),
        ),
    }
}

/// Round-trip, then check truncation and bit flips give errors or different data, not panics.
fn conforms(codecs: serde_json::Value, repr: &ChunkRepr, data: ArrayBytes) {
    let chain = build_v3_chain(&codecs, repr).unwrap_or_else(|e| panic!("{codecs}: {e}"));
    let encoded = chain.encode(data.clone(), repr).unwrap();
    assert_eq!(
        chain.decode(encoded.clone(), repr).unwrap(),
        data,
        "{codecs}"
    );
    for cut in [0, 1, encoded.len() / 2, encoded.len().saturating_sub(1)] {
        let _ = chain.decode(encoded[..cut].to_vec(), repr);
    }
    for i in (0..encoded.len()).step_by(encoded.len() / 16 + 1) {
        let mut bad = encoded.clone();
        bad[i] ^= 0x5a;
        let _ = chain.decode(bad, repr);
    }
}

#[test]
fn every_bytes_to_bytes_codec_conforms() {
    let r = repr(vec![17, 9], DataType::Int32);
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    for codec in [
        json!({"name": "gzip", "configuration": {"level": 5}}),
        json!({"name": "zstd", "configuration": {"level": 3, "checksum": true}}),
        json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}),
        json!({"name": "blosc", "configuration": {"cname": "zstd", "clevel": 1, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}}),
        json!({"name": "crc32c"}),
        json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}),
        json!({"name": "numcodecs.bz2", "configuration": {"level": 9}}),
        json!({"name": "numcodecs.lzma", "configuration": {"format": 1, "preset": 1}}),
        json!({"name": "numcodecs.lzma", "configuration": {"format": 2}}),
        json!({"name": "numcodecs.lzma", "configuration": {"format": 3, "filters": [{"id": 3, "dist": 4}, {"id": 33, "preset": 1}]}}),
        json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
        json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}),
        json!({"name": "numcodecs.crc32"}),
        json!({"name": "numcodecs.adler32"}),
        json!({"name": "numcodecs.fletcher32"}),
        json!({"name": "numcodecs.crc32c"}),
        json!({"name": "numcodecs.jenkins_lookup3", "configuration": {"initval": 5, "prefix": [1, 2]}}),
    ] {
        conforms(json!([bytes, codec]), &r, sample(&r));
    }
}

#[test]
fn every_array_codec_conforms() {
    let f8 = repr(vec![6, 5], DataType::Float64);
    let floats = ArrayBytes::Fixed(
        (0..30)
            .flat_map(|i| (i as f64 * 0.25 - 3.0).to_le_bytes())
            .collect(),
    );
    let bytes = json!({"name": "bytes", "configuration": {"endian": "big"}});
    for codec in [
        json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
        json!({"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}}),
        json!({"name": "numcodecs.fixedscaleoffset", "configuration": {"offset": 1, "scale": 4, "dtype": "<f8", "astype": "<i4"}}),
        json!({"name": "numcodecs.astype", "configuration": {"encode_dtype": "<f4", "decode_dtype": "<f8"}}),
    ] {
        conforms(json!([codec, bytes]), &f8, floats.clone());
    }
    let i2 = repr(vec![40], DataType::Int16);
    conforms(
        json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i2", "astype": "<i2"}}, bytes]),
        &i2,
        sample(&i2),
    );
    let b = repr(vec![13], DataType::Bool);
    let bits = ArrayBytes::Fixed((0..13).map(|i| (i % 3 == 0) as u8).collect());
    conforms(
        json!([{"name": "numcodecs.packbits"}, {"name": "bytes"}]),
        &b,
        bits,
    );
    let s = repr(vec![5], DataType::String);
    conforms(
        json!([{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": 0, "checksum": false}}]),
        &s,
        sample(&s),
    );
    let vb = repr(vec![4], DataType::Bytes);
    conforms(json!([{"name": "vlen-bytes"}]), &vb, sample(&vb));
    // categorize: labels to small integers and back, for text of the labels.
    let text = repr(vec![6], DataType::String);
    let labels = ArrayBytes::Variable(
        ["red", "green", "red", "blue", "", "green"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
    );
    conforms(
        json!([{"name": "numcodecs.categorize", "configuration": {"labels": ["red", "green", "blue"], "dtype": "<U5", "astype": "|u1"}}, {"name": "bytes"}]),
        &text,
        labels,
    );
    // The numeric serializers: pcodec on every type it takes, zfpy
    // reversible (lossless) on every type and rank it takes.
    for (shape, dtype) in [
        (vec![40], DataType::Int16),
        (vec![7, 9], DataType::UInt32),
        (vec![3, 4, 5], DataType::Int64),
        (vec![33], DataType::Float16),
        (vec![6, 5], DataType::Float32),
        (vec![10], DataType::Float64),
    ] {
        let r = repr(shape, dtype);
        conforms(
            json!([{"name": "numcodecs.pcodec", "configuration": {"level": 4, "delta_spec": "try_consecutive", "delta_encoding_order": 1}}]),
            &r,
            sample(&r),
        );
    }
    for (shape, dtype) in [
        (vec![13], DataType::Int32),
        (vec![5, 7], DataType::Int64),
        (vec![3, 4, 5], DataType::Float32),
        (vec![2, 3, 4, 5], DataType::Float64),
    ] {
        let r = repr(shape, dtype);
        conforms(
            json!([{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": -1}}, {"name": "crc32c"}]),
            &r,
            sample(&r),
        );
    }
    // bitround keeping every mantissa bit is lossless.
    let f4 = repr(vec![5], DataType::Float32);
    let exact = ArrayBytes::Fixed(
        [1.5f32, -0.1, 3.25e7, 0.0, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    );
    conforms(
        json!([{"name": "numcodecs.bitround", "configuration": {"keepbits": 23}}, {"name": "bytes", "configuration": {"endian": "little"}}]),
        &f4,
        exact,
    );
}

#[test]
fn sharding_conforms() {
    let r = repr(vec![8, 6], DataType::UInt16);
    for location in ["start", "end"] {
        let codecs = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 3],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": location}}]);
        conforms(codecs, &r, sample(&r));
    }
    // Nested: shards of shards.
    let nested = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [4, 6],
        "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}]);
    conforms(nested, &r, sample(&r));
}

#[test]
fn lossy_filters_match_numcodecs_semantics() {
    // quantize(digits=1) keeps values within 0.1; bitround(0) keeps exponent only.
    let r = repr(vec![4], DataType::Float32);
    let data = ArrayBytes::Fixed(
        [1.234f32, -5.5, 0.0, 100.01]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    );
    let chain = build_v3_chain(&json!([{"name": "numcodecs.quantize", "configuration": {"digits": 1, "dtype": "<f4"}}, {"name": "bytes", "configuration": {"endian": "little"}}]), &r).unwrap();
    let out = chain
        .decode(chain.encode(data, &r).unwrap(), &r)
        .unwrap()
        .into_fixed()
        .unwrap();
    let vals: Vec<f32> = out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (v, want) in vals.iter().zip([1.234f32, -5.5, 0.0, 100.01]) {
        assert!((v - want).abs() <= 0.1, "{v} vs {want}");
    }
}

#[test]
fn invalid_chains_are_errors() {
    let r = repr(vec![4], DataType::Int32);
    for codecs in [
        json!([]),
        json!([{"name": "zstd"}]),
        json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "transpose", "configuration": {"order": [0]}}]),
        json!([{"name": "bytes", "configuration": {"endian": "middle"}}]),
        json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "no-such-codec"}]),
        json!([{"name": "vlen-utf8"}]),
    ] {
        let built = build_v3_chain(&codecs, &r);
        let usable = built.and_then(|c| c.encode(ArrayBytes::Fixed(vec![0; 16]), &r).map(|_| ()));
        assert!(usable.is_err(), "{codecs} was accepted");
    }
}
