//! Property tests: random and mutated metadata documents, chunk bytes and
//! selection strings never panic the engine (each property runs thousands
//! of cases; together well over 10,000).

use proptest::prelude::*;
use serde_json::{json, Value};
use zarrd::store::{Store, StoreKey};
use zarrd::zarr::codec::{build_v3_chain, ChunkRepr};
use zarrd::zarr::fill::FillValue;
use zarrd::zarr::metadata::{v1, v2, v3};
use zarrd::zarr::{Array, ArrayBytes, DataType, Selection};

fn seeds() -> Vec<Value> {
    vec![
        json!({"zarr_format": 3, "node_type": "array", "shape": [10, 7], "data_type": "float32",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
               "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
               "fill_value": "NaN", "dimension_names": ["y", null], "attributes": {"a": [1, {"b": null}]},
               "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
                    "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}}, {"name": "bytes", "configuration": {"endian": "big"}}, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}],
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}], "index_location": "start"}}]}),
        json!({"zarr_format": 3, "node_type": "array", "shape": [5], "data_type": {"name": "structured", "configuration": {"fields": [["a", "int8"], ["b", "float64"]]}},
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
               "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}}, "fill_value": "AAAAAAAAAAAA",
               "codecs": [{"name": "bytes"}, {"name": "numcodecs.lzma", "configuration": {"format": 3, "filters": [{"id": 3, "dist": 2}, {"id": 33, "preset": 0}]}}]}),
        json!({"zarr_format": 3, "node_type": "group", "attributes": {"x": 1},
               "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {"a": {"zarr_format": 3, "node_type": "group"}}}}),
    ]
}

fn v2_seed() -> Value {
    json!({"zarr_format": 2, "shape": [20, 3], "chunks": [6, 2], "dtype": [["a", "<i4"], ["b", ">f8", [2]]],
           "compressor": {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": -1, "blocksize": 0},
           "fill_value": null, "order": "F",
           "filters": [{"id": "delta", "dtype": "<i4"}, {"id": "fixedscaleoffset", "offset": 1, "scale": 2, "dtype": "<f8", "astype": "<i2"}],
           "dimension_separator": "/"})
}

fn random_value(seed: u64) -> Value {
    match seed % 9 {
        0 => Value::Null,
        1 => json!(seed.is_multiple_of(3)),
        2 => json!(seed as i64 - (1 << 40)),
        3 => json!(-(seed as f64) / 7.0),
        4 => json!(["x", 1, null]),
        5 => json!({"name": "bytes"}),
        6 => json!(u64::MAX),
        7 => json!("NaN"),
        _ => json!([seed % 5, 0, seed % 1000]),
    }
}

/// Apply one mutation at the `target`-th node of the document.
fn mutate(doc: &mut Value, target: &mut u64, seed: u64) -> bool {
    if *target == 0 {
        *doc = match seed % 4 {
            0 => random_value(seed / 4),
            1 => Value::Array(vec![doc.clone(), random_value(seed)]),
            _ => match doc {
                Value::Object(o) if !o.is_empty() => {
                    let key = o
                        .keys()
                        .nth((seed as usize) % o.len())
                        .cloned()
                        .unwrap_or_default();
                    let mut o = o.clone();
                    o.remove(&key);
                    Value::Object(o)
                }
                Value::Array(a) if !a.is_empty() => Value::Array(a[..a.len() - 1].to_vec()),
                _ => random_value(seed),
            },
        };
        return true;
    }
    *target -= 1;
    match doc {
        Value::Object(o) => o.values_mut().any(|v| mutate(v, target, seed)),
        Value::Array(a) => a.iter_mut().any(|v| mutate(v, target, seed)),
        _ => false,
    }
}

fn exercise(doc: &Value) {
    let store = Store::memory();
    let path = StoreKey::new("a").unwrap();
    for parsed in [
        v3::parse("a/zarr.json", doc).ok().and_then(|n| match n {
            zarrd::zarr::NodeMetadata::Array(a) => Some(*a),
            _ => None,
        }),
        v2::parse_array("a/.zarray", doc, None).ok(),
        v1::parse("a/meta", doc, None).ok(),
    ]
    .into_iter()
    .flatten()
    {
        if let Ok(array) = Array::new(store.clone(), path.clone(), parsed) {
            let repr = array.chunk_repr().clone();
            // Only decode small chunks: the point is parsing and codec setup.
            if repr.nbytes().is_some_and(|n| n < 1 << 16) {
                let _ = array.decode_chunk(&path, vec![0u8; 64]);
                let _ = array.encode_chunk(repr.filled());
            }
        }
    }
    let _ = v2::parse_consolidated("a/.zmetadata", doc);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_metadata_never_panics(which in 0usize..4, mutations in prop::collection::vec((0u64..64, any::<u64>()), 1..4)) {
        let mut doc = if which < 3 { seeds()[which].clone() } else { v2_seed() };
        for (target, seed) in mutations {
            let mut t = target;
            mutate(&mut doc, &mut t, seed);
        }
        exercise(&doc);
    }

    #[test]
    fn random_chunk_bytes_never_panic(which in 0usize..12, bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let b = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let chains = [
            json!([b, {"name": "gzip", "configuration": {"level": 1}}]),
            json!([b, {"name": "zstd", "configuration": {"level": 1, "checksum": true}}]),
            json!([b, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}]),
            json!([b, {"name": "numcodecs.bz2", "configuration": {"level": 1}}]),
            json!([b, {"name": "numcodecs.lzma", "configuration": {"format": 1}}]),
            json!([b, {"name": "numcodecs.lz4", "configuration": {}}]),
            json!([b, {"name": "numcodecs.zlib", "configuration": {"level": 1}}]),
            json!([{"name": "vlen-utf8"}]),
            json!([{"name": "numcodecs.packbits"}, {"name": "bytes"}]),
            json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [b], "index_codecs": [b]}}]),
            json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [4], "codecs": [b, {"name": "gzip", "configuration": {"level": 1}}], "index_codecs": [b, {"name": "crc32c"}], "index_location": "start"}}]),
            json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, b, {"name": "numcodecs.fletcher32"}]),
        ];
        let dtype = match which { 7 => DataType::String, 8 => DataType::Bool, _ => DataType::Int32 };
        let repr = ChunkRepr { shape: vec![8], fill: FillValue::zero(&dtype), dtype };
        let chain = build_v3_chain(&chains[which], &repr).unwrap();
        let _ = chain.decode(bytes.clone(), &repr);
        // Also a valid encoding with a few bytes flipped.
        let mut valid = chain.encode(repr.filled(), &repr).unwrap();
        for (i, b) in bytes.iter().enumerate().take(4) {
            if !valid.is_empty() {
                let at = (*b as usize * 31 + i) % valid.len();
                valid[at] ^= b | 1;
            }
        }
        let _ = chain.decode(valid, &repr);
    }

    #[test]
    fn selection_strings_never_panic(s in "[0-9:,\\-\\[\\]\\. ]{0,24}", shape in prop::collection::vec(0u64..50, 0..4)) {
        if let Ok(sel) = Selection::parse(&s) {
            if let Ok(resolved) = sel.resolve(&shape) {
                let chunks: Vec<u64> = shape.iter().map(|s| (s / 3).max(1)).collect();
                let _ = resolved.chunks(&chunks);
            }
        }
        let _ = Selection::parse_points(&s).map(|p| p.resolve(&shape));
    }
}

/// Values of a `rows` x `cols` array of `dtype_size`-byte elements, from `seed`.
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            // Runs of repeats and noise, so that Blosc both compresses and stores blocks.
            if (i / 97) % 3 == 0 {
                (i / 97) as u8
            } else {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A read of some outermost rows of a Blosc chunk decodes only the
    /// blocks holding them: the rows must be exactly those of the whole
    /// decode, for every compressor, shuffle, item size, block size and
    /// byte order, and a damaged chunk must fail or decode, never panic.
    #[test]
    fn partial_row_decodes_equal_whole_decodes(
        cname in 0usize..4, shuffle in 0usize..3, dtype in 0usize..5, blocksize in 0usize..4,
        rows in 1usize..40, cols in 1usize..9, a in 0usize..40, b in 0usize..40,
        seed in any::<u64>(), flip in any::<(u16, u8)>(),
    ) {
        let cname = ["lz4", "zstd", "blosclz", "zlib"][cname];
        let shuffle = ["noshuffle", "shuffle", "bitshuffle"][shuffle];
        let (dtype, endian) = [
            (DataType::Int8, "little"), (DataType::UInt16, "big"), (DataType::Float32, "little"),
            (DataType::Float64, "big"), (DataType::Int32, "little"),
        ][dtype].clone();
        let blocksize = [0, 64, 256, 1000][blocksize];
        let codecs = json!([{"name": "bytes", "configuration": {"endian": endian}},
            {"name": "blosc", "configuration": {"cname": cname, "clevel": 5, "shuffle": shuffle,
             "typesize": dtype.size().unwrap(), "blocksize": blocksize}}]);
        let repr = ChunkRepr { shape: vec![rows, cols], fill: FillValue::zero(&dtype), dtype };
        let chain = build_v3_chain(&codecs, &repr).unwrap();
        prop_assert!(chain.decodes_rows(&repr));
        let data = ArrayBytes::Fixed(pattern(repr.nbytes().unwrap(), seed));
        let encoded = chain.encode(data, &repr).unwrap();
        let whole = chain.decode(encoded.clone(), &repr).unwrap().into_fixed().unwrap();
        let (lo, hi) = (a.min(b) % rows, (a.max(b) % rows) + 1);
        let (lo, hi) = (lo.min(hi - 1), hi);
        let row = whole.len() / rows;
        let part = chain.decode_rows(&encoded, &repr, lo..hi).unwrap().unwrap().into_fixed().unwrap();
        prop_assert_eq!(&part[..], &whole[lo * row..hi * row]);
        // Rows past the chunk are refused, not read.
        prop_assert!(chain.decode_rows(&encoded, &repr, lo..rows + 1).is_none());
        let mut damaged = encoded;
        let at = flip.0 as usize % damaged.len();
        damaged[at] ^= flip.1 | 1;
        // A damaged chunk may fail or decode, but where both the part and
        // the whole decode, they agree (a part never hands back bytes Blosc
        // did not write). Damage outside the rows read can go unnoticed.
        let part = chain.decode_rows(&damaged, &repr, lo..hi);
        if let (Some(Ok(part)), Ok(whole)) = (part, chain.decode(damaged, &repr)) {
            let whole = whole.into_fixed().unwrap();
            prop_assert_eq!(&part.into_fixed().unwrap()[..], &whole[lo * row..hi * row]);
        }
    }

    /// A window read through the engine with no cache returns what was
    /// written: chunks under 64 KiB are loaded several at a time, larger
    /// ones decode only the rows the window needs, and chunks outside the
    /// band of rows written read as the fill value.
    #[test]
    fn windows_of_blosc_arrays_read_what_was_written(
        (shape, chunks) in prop_oneof![
            ((1u64..60, 1u64..30), (1u64..20, 1u64..12)),
            ((1u64..700, 1u64..400), (200u64..260, 170u64..200)),
        ],
        window in (0u64..700, 0u64..700, 0u64..400, 0u64..400),
        band in (0u64..700, 0u64..700), seed in any::<u64>(),
    ) {
        let doc = json!({"zarr_format": 2, "shape": [shape.0, shape.1], "chunks": [chunks.0, chunks.1],
            "dtype": "<u2", "fill_value": 0, "order": "C", "filters": null,
            "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 64}});
        let meta = v2::parse_array("a/.zarray", &doc, None).unwrap();
        let array = Array::new(Store::memory(), StoreKey::new("a").unwrap(), meta).unwrap();
        prop_assert!(array.decodes_part_rows());
        let row = shape.1 as usize * 2;
        let values = pattern(shape.0 as usize * row, seed);
        let (b0, b1) = (band.0 % shape.0, band.1 % shape.0);
        let (b0, b1) = (b0.min(b1), b0.max(b1) + 1);
        let written = Selection::parse(&format!("{b0}:{b1},:")).unwrap()
            .resolve(&[shape.0, shape.1]).unwrap();
        let (r0, r1) = (window.0.min(window.1) % shape.0, window.0.max(window.1) % shape.0 + 1);
        let (c0, c1) = (window.2.min(window.3) % shape.1, window.2.max(window.3) % shape.1 + 1);
        let (r0, c0) = (r0.min(r1 - 1), c0.min(c1 - 1));
        let sel = Selection::parse(&format!("{r0}:{r1},{c0}:{c1}")).unwrap()
            .resolve(&[shape.0, shape.1]).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let band_values = values[b0 as usize * row..b1 as usize * row].to_vec();
        let got = runtime.block_on(async {
            array.write(&written, ArrayBytes::Fixed(band_values)).await.unwrap();
            array.read(&sel).await.unwrap().into_fixed().unwrap()
        });
        let expected: Vec<u8> = (r0..r1)
            .flat_map(|r| {
                let cols = r as usize * row + c0 as usize * 2..r as usize * row + c1 as usize * 2;
                if (b0..b1).contains(&r) { values[cols].to_vec() } else { vec![0; cols.len()] }
            })
            .collect();
        prop_assert_eq!(got, expected);
    }
}
