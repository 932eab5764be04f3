//! Arrays and hierarchies written by zarrd, for zarr-python and TensorStore
//! to read back (tests/interop/check_roundtrip.py). Each case is created,
//! written whole, then partly overwritten with an unaligned window (the
//! read-modify-write path); zarrd reads it back and must agree with the
//! values it was given (lossy filters aside). The store and a manifest go to
//! ZARRD_ROUNDTRIP_OUT when set (the test script sets it), else a temp dir.

use serde_json::{json, Value};
use zarrd::store::{node_path, Store};
use zarrd::zarr::metadata::Order;
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Endian, Hierarchy, Selection};

struct Case {
    path: &'static str,
    spec: ArraySpec,
    lossy: bool,
}

fn spec(format: u8, shape: &[u64], chunks: &[u64], dtype: DataType) -> ArraySpec {
    let mut s = ArraySpec::new(format, shape.to_vec(), dtype);
    s.chunks = Some(chunks.to_vec());
    s
}

fn with(mut s: ArraySpec, f: impl FnOnce(&mut ArraySpec)) -> ArraySpec {
    f(&mut s);
    s
}

/// Deterministic values valid for the type.
fn values(dtype: &DataType, n: usize, seed: u64) -> ArrayBytes {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    match dtype {
        DataType::String => ArrayBytes::Variable(
            (0..n)
                .map(|i| format!("s{}é{}", next() % 1000, "x".repeat(i % 5)).into_bytes())
                .collect(),
        ),
        DataType::Bytes => {
            ArrayBytes::Variable((0..n).map(|i| vec![(next() % 256) as u8; i % 7]).collect())
        }
        DataType::Bool => ArrayBytes::Fixed((0..n).map(|_| (next() % 2) as u8).collect()),
        DataType::FixedUtf32(c) => ArrayBytes::Fixed(
            (0..n * c)
                .flat_map(|_| (0x41 + next() % 26).to_le_bytes())
                .collect(),
        ),
        DataType::Float32 => ArrayBytes::Fixed(
            (0..n)
                .flat_map(|_| ((next() % 100000) as f32 / 7.0 - 5000.0).to_le_bytes())
                .collect(),
        ),
        DataType::Float64 => ArrayBytes::Fixed(
            (0..n)
                .flat_map(|_| ((next() % 100000) as f64 / 3.0 - 10000.0).to_le_bytes())
                .collect(),
        ),
        DataType::Float16 => ArrayBytes::Fixed(
            (0..n)
                .flat_map(|_| half::f16::from_f32((next() % 2000) as f32 / 8.0).to_le_bytes())
                .collect(),
        ),
        d => ArrayBytes::Fixed(
            (0..n * d.size().unwrap())
                .map(|_| (next() % 256) as u8)
                .collect(),
        ),
    }
}

fn cases() -> Vec<Case> {
    let i4 = || spec(3, &[23, 17], &[5, 4], DataType::Int32);
    let v3 = |codecs: Value| with(i4(), |s| s.codecs = Some(codecs));
    let b = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let i4v2 = || spec(2, &[23, 17], &[5, 4], DataType::Int32);
    let v2 = |compressor: Value| with(i4v2(), |s| s.compressor = Some(compressor));
    let f8v2 = |filters: Value| {
        with(spec(2, &[30, 7], &[8, 3], DataType::Float64), |s| {
            s.filters = Some(filters)
        })
    };
    vec![
        Case {
            path: "v3/default",
            spec: i4(),
            lossy: false,
        },
        Case {
            path: "v3/gzip",
            spec: v3(json!([b, {"name": "gzip", "configuration": {"level": 5}}])),
            lossy: false,
        },
        Case {
            path: "v3/zstd",
            spec: v3(json!([b, {"name": "zstd", "configuration": {"level": 3, "checksum": true}}])),
            lossy: false,
        },
        Case {
            path: "v3/blosc",
            spec: v3(
                json!([b, {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/crc32c",
            spec: v3(json!([b, {"name": "crc32c"}])),
            lossy: false,
        },
        Case {
            path: "v3/big_endian",
            spec: v3(json!([{"name": "bytes", "configuration": {"endian": "big"}}])),
            lossy: false,
        },
        Case {
            path: "v3/transpose",
            spec: v3(
                json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, b, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_delta_lz4",
            spec: v3(
                json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, b, {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_bz2_adler",
            spec: v3(
                json!([b, {"name": "numcodecs.bz2", "configuration": {"level": 3}}, {"name": "numcodecs.adler32"}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_lzma_shuffle",
            spec: v3(
                json!([b, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}, {"name": "numcodecs.lzma", "configuration": {"preset": 1}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_zlib_crc32_fletcher",
            spec: v3(
                json!([b, {"name": "numcodecs.zlib", "configuration": {"level": 1}}, {"name": "numcodecs.crc32"}, {"name": "numcodecs.fletcher32"}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/sharded",
            spec: with(spec(3, &[40, 30], &[5, 5], DataType::Float32), |s| {
                s.shards = Some(vec![20, 15])
            }),
            lossy: false,
        },
        Case {
            path: "v3/sharded_start_gzip",
            spec: with(spec(3, &[24, 24], &[24, 24], DataType::UInt16), |s| {
                s.codecs = Some(
                    json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [6, 8], "codecs": [b, {"name": "gzip", "configuration": {"level": 1}}], "index_codecs": [b, {"name": "crc32c"}], "index_location": "start"}}]),
                );
            }),
            lossy: false,
        },
        Case {
            path: "v3/sharded_nested",
            spec: with(spec(3, &[32, 32], &[16, 16], DataType::Int16), |s| {
                s.codecs = Some(
                    json!([{"name": "sharding_indexed", "configuration": {"chunk_shape": [8, 8], "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [4, 4], "codecs": [b], "index_codecs": [b, {"name": "crc32c"}]}}], "index_codecs": [b, {"name": "crc32c"}]}}]),
                );
            }),
            lossy: false,
        },
        Case {
            path: "v3/strings",
            spec: spec(3, &[11], &[4], DataType::String),
            lossy: false,
        },
        Case {
            path: "v3/sharded_strings",
            spec: with(spec(3, &[12], &[2], DataType::String), |s| {
                s.shards = Some(vec![6])
            }),
            lossy: false,
        },
        Case {
            path: "v3/bytes",
            spec: spec(3, &[9], &[4], DataType::Bytes),
            lossy: false,
        },
        Case {
            path: "v3/bool",
            spec: spec(3, &[10, 3], &[4, 2], DataType::Bool),
            lossy: false,
        },
        Case {
            path: "v3/float16",
            spec: spec(3, &[10], &[4], DataType::Float16),
            lossy: false,
        },
        Case {
            path: "v3/complex128",
            spec: spec(3, &[6, 2], &[4, 2], DataType::Complex128),
            lossy: false,
        },
        Case {
            path: "v3/u8_fill",
            spec: with(spec(3, &[13], &[4], DataType::UInt8), |s| {
                s.fill_value = json!(7)
            }),
            lossy: false,
        },
        Case {
            path: "v3/dims",
            spec: with(spec(3, &[4, 5, 6], &[2, 3, 4], DataType::Int64), |s| {
                s.dimension_names = Some(vec![Some("t".into()), None, Some("x".into())]);
                s.attributes = json!({"units": "m"}).as_object().unwrap().clone();
            }),
            lossy: false,
        },
        Case {
            path: "v3/zero_d",
            spec: spec(3, &[], &[], DataType::Float64),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_fixedscaleoffset",
            spec: with(spec(3, &[30, 7], &[8, 3], DataType::Float64), |s| {
                s.codecs = Some(
                    json!([{"name": "numcodecs.fixedscaleoffset", "configuration": {"offset": 100, "scale": 10, "dtype": "<f8", "astype": "<i4"}}, b]),
                );
            }),
            lossy: true,
        },
        Case {
            path: "v3/numcodecs_pcodec",
            spec: v3(json!([{"name": "numcodecs.pcodec", "configuration": {"level": 8}}])),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_lookup3",
            spec: v3(
                json!([b, {"name": "numcodecs.jenkins_lookup3", "configuration": {"initval": 3, "prefix": null}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_zfpy_reversible",
            spec: v3(
                json!([{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": -1}}]),
            ),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_zfpy_accuracy",
            spec: with(spec(3, &[30, 7], &[8, 3], DataType::Float64), |s| {
                s.codecs = Some(
                    json!([{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.05}}]),
                );
            }),
            lossy: true,
        },
        Case {
            path: "v2/pcodec",
            spec: v2(json!({"id": "pcodec", "level": 5})),
            lossy: false,
        },
        Case {
            path: "v2/zfpy",
            spec: v2(json!({"id": "zfpy", "mode": 4, "tolerance": -1})),
            lossy: false,
        },
        Case {
            path: "v3/numcodecs_bitround",
            spec: with(spec(3, &[30], &[8], DataType::Float32), |s| {
                s.codecs = Some(
                    json!([{"name": "numcodecs.bitround", "configuration": {"keepbits": 8}}, b]),
                );
            }),
            lossy: true,
        },
        Case {
            path: "v2/default_blosc",
            spec: i4v2(),
            lossy: false,
        },
        Case {
            path: "v2/big_endian",
            spec: with(i4v2(), |s| s.endian = Endian::Big),
            lossy: false,
        },
        Case {
            path: "v2/order_f",
            spec: with(i4v2(), |s| s.order = Order::F),
            lossy: false,
        },
        Case {
            path: "v2/slash",
            spec: with(i4v2(), |s| s.separator = Some('/')),
            lossy: false,
        },
        Case {
            path: "v2/zlib",
            spec: v2(json!({"id": "zlib", "level": 1})),
            lossy: false,
        },
        Case {
            path: "v2/gzip",
            spec: v2(json!({"id": "gzip", "level": 5})),
            lossy: false,
        },
        Case {
            path: "v2/bz2",
            spec: v2(json!({"id": "bz2", "level": 1})),
            lossy: false,
        },
        Case {
            path: "v2/lzma",
            spec: v2(json!({"id": "lzma", "format": 1, "check": -1, "preset": 1, "filters": null})),
            lossy: false,
        },
        Case {
            path: "v2/lzma_raw",
            spec: v2(
                json!({"id": "lzma", "format": 3, "check": -1, "preset": null, "filters": [{"id": 3, "dist": 4}, {"id": 33, "preset": 1}]}),
            ),
            lossy: false,
        },
        Case {
            path: "v2/zstd",
            spec: v2(json!({"id": "zstd", "level": 3})),
            lossy: false,
        },
        Case {
            path: "v2/lz4",
            spec: v2(json!({"id": "lz4", "acceleration": 1})),
            lossy: false,
        },
        Case {
            path: "v2/blosc_lz4hc_noshuffle",
            spec: v2(
                json!({"id": "blosc", "cname": "lz4hc", "clevel": 9, "shuffle": 0, "blocksize": 0}),
            ),
            lossy: false,
        },
        Case {
            path: "v2/blosc_zlib_auto",
            spec: v2(
                json!({"id": "blosc", "cname": "zlib", "clevel": 1, "shuffle": -1, "blocksize": 0}),
            ),
            lossy: false,
        },
        Case {
            path: "v2/none",
            spec: v2(Value::Null),
            lossy: false,
        },
        Case {
            path: "v2/filter_delta",
            spec: with(i4v2(), |s| {
                s.filters = Some(json!([{"id": "delta", "dtype": "<i4", "astype": "<i4"}]))
            }),
            lossy: false,
        },
        Case {
            path: "v2/filter_astype",
            spec: with(i4v2(), |s| {
                s.filters =
                    Some(json!([{"id": "astype", "encode_dtype": "<i8", "decode_dtype": "<i4"}]))
            }),
            lossy: false,
        },
        Case {
            path: "v2/filter_shuffle_crc32c",
            spec: with(i4v2(), |s| {
                s.filters = Some(json!([{"id": "shuffle", "elementsize": 4}, {"id": "crc32c"}]))
            }),
            lossy: false,
        },
        Case {
            path: "v2/filter_fixedscaleoffset",
            spec: f8v2(
                json!([{"id": "fixedscaleoffset", "offset": 1000, "scale": 10, "dtype": "<f8", "astype": "<i4"}]),
            ),
            lossy: true,
        },
        Case {
            path: "v2/filter_quantize",
            spec: f8v2(json!([{"id": "quantize", "digits": 2, "dtype": "<f8", "astype": "<f8"}])),
            lossy: true,
        },
        Case {
            path: "v2/filter_packbits",
            spec: with(spec(2, &[21, 5], &[8, 3], DataType::Bool), |s| {
                s.filters = Some(json!([{"id": "packbits"}]))
            }),
            lossy: false,
        },
        Case {
            path: "v2/filter_categorize",
            spec: with(spec(2, &[10], &[4], DataType::FixedUtf32(1)), |s| {
                s.filters = Some(
                    json!([{"id": "categorize", "labels": ["A", "B", "C"], "dtype": "<U1", "astype": "|u1"}]),
                );
            }),
            lossy: true,
        },
        Case {
            path: "v2/strings",
            spec: spec(2, &[11], &[4], DataType::String),
            lossy: false,
        },
        Case {
            path: "v2/unicode",
            spec: spec(2, &[7], &[3], DataType::FixedUtf32(3)),
            lossy: false,
        },
        Case {
            path: "v2/structured",
            spec: spec(
                2,
                &[9],
                &[4],
                DataType::from_v2_json(&json!([["a", "<i4"], ["b", ">f8"]]))
                    .unwrap()
                    .0,
            ),
            lossy: false,
        },
        Case {
            path: "v2/structured_subarray",
            spec: spec(
                2,
                &[9],
                &[4],
                DataType::from_v2_json(&json!([["a", "<i4"], ["b", ">f8", [2]]]))
                    .unwrap()
                    .0,
            ),
            lossy: false,
        },
    ]
}

fn out_dir() -> (std::path::PathBuf, Option<tempfile::TempDir>) {
    match std::env::var("ZARRD_ROUNDTRIP_OUT") {
        Ok(dir) => {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            (dir.into(), None)
        }
        Err(_) => {
            let tmp = tempfile::tempdir().unwrap();
            (tmp.path().to_path_buf(), Some(tmp))
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn zarrd_writes_what_peers_read() {
    let (dir, _keep) = out_dir();
    let store = Store::local(&dir.join("store.zarr")).unwrap();
    let h = Hierarchy::new(store);
    h.create_group(
        &node_path("").unwrap(),
        3,
        json!({"written_by": "zarrd"}).as_object().unwrap().clone(),
        false,
    )
    .await
    .unwrap();
    h.create_group(&node_path("v2").unwrap(), 2, Default::default(), false)
        .await
        .unwrap();
    let mut manifest = Vec::new();
    std::fs::create_dir_all(dir.join("expected")).unwrap();
    for (i, case) in cases().into_iter().enumerate() {
        let path = node_path(case.path).unwrap();
        let array = h
            .create_array(&path, &case.spec, false)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.path));
        let shape = case.spec.shape.clone();
        let all = Selection::all().resolve(&shape).unwrap();
        let n: usize = shape.iter().product::<u64>() as usize;
        let mut data = values(&case.spec.dtype, n, i as u64);
        array
            .write(&all, data.clone())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.path));
        // An unaligned window over several chunks: read-modify-write.
        if !shape.is_empty() {
            let window: String = shape
                .iter()
                .map(|&s| format!("{}:{}", s / 3, s - s / 4))
                .collect::<Vec<_>>()
                .join(",");
            let sel = Selection::parse(&window).unwrap().resolve(&shape).unwrap();
            let m = sel.num_elements() as usize;
            let patch = values(&case.spec.dtype, m, 1000 + i as u64);
            array.write(&sel, patch.clone()).await.unwrap();
            // Apply the same patch to the expected values, element by element.
            let elem = case.spec.dtype.size().unwrap_or(0);
            let Resolved::Orthogonal(dims) = &sel else {
                unreachable!()
            };
            let strides: Vec<u64> = (0..shape.len())
                .map(|d| shape[d + 1..].iter().product())
                .collect();
            for k in 0..m {
                let mut rem = k as u64;
                let mut flat = 0;
                for d in (0..dims.len()).rev() {
                    let len = dims[d].indices.len();
                    flat += dims[d].indices.get(rem % len) * strides[d];
                    rem /= len;
                }
                let flat = flat as usize;
                match (&mut data, &patch) {
                    (ArrayBytes::Fixed(d), ArrayBytes::Fixed(p)) => d
                        [flat * elem..(flat + 1) * elem]
                        .copy_from_slice(&p[k * elem..(k + 1) * elem]),
                    (ArrayBytes::Variable(d), ArrayBytes::Variable(p)) => d[flat] = p[k].clone(),
                    _ => unreachable!(),
                }
            }
        }
        let reopened = h.array(&path).await.unwrap();
        let back = reopened.read(&all).await.unwrap();
        if !case.lossy {
            assert!(
                back == data,
                "{}: zarrd does not read back what it wrote",
                case.path
            );
        }
        let name = case.path.replace('/', "__");
        let (kind, file) = match &back {
            ArrayBytes::Fixed(bytes) => {
                std::fs::write(dir.join(format!("expected/{name}.bin")), bytes).unwrap();
                ("fixed", format!("expected/{name}.bin"))
            }
            ArrayBytes::Variable(items) => {
                let strs: Vec<Value> = items
                    .iter()
                    .map(|v| match case.spec.dtype {
                        DataType::String => json!(String::from_utf8(v.clone()).unwrap()),
                        _ => json!(base64::Engine::encode(
                            &base64::engine::general_purpose::STANDARD,
                            v
                        )),
                    })
                    .collect();
                std::fs::write(
                    dir.join(format!("expected/{name}.json")),
                    serde_json::to_vec(&strs).unwrap(),
                )
                .unwrap();
                (
                    if case.spec.dtype == DataType::String {
                        "str"
                    } else {
                        "bytes"
                    },
                    format!("expected/{name}.json"),
                )
            }
        };
        manifest.push(json!({"store": "store.zarr", "path": case.path, "shape": shape, "zarr_format": case.spec.zarr_format,
                             "kind": kind, "expected": file, "lossy": case.lossy}));
    }
    // Hierarchy operations peers must see: attributes, a resize, an append, a deletion.
    let path = node_path("v3/default").unwrap();
    h.set_attributes(&path, json!({"edited": true}).as_object().unwrap().clone())
        .await
        .unwrap();
    h.create_group(&node_path("v3/tmp").unwrap(), 3, Default::default(), false)
        .await
        .unwrap();
    h.delete(&node_path("v3/tmp").unwrap()).await.unwrap();
    assert!(h.node(&node_path("v3/tmp").unwrap()).await.is_err());
    // Append and resize: zarr-python must see the new shapes and values.
    let mut spec = ArraySpec::new(3, vec![4, 3], DataType::Int32);
    spec.chunks = Some(vec![3, 3]);
    let first: Vec<u8> = (0..12i32).flat_map(|v| v.to_le_bytes()).collect();
    let more: Vec<u8> = (100..115i32).flat_map(|v| v.to_le_bytes()).collect();
    let appended = node_path("v3/appended").unwrap();
    let a = h.create_array(&appended, &spec, false).await.unwrap();
    a.write(
        &Selection::all().resolve(&[4, 3]).unwrap(),
        ArrayBytes::Fixed(first.clone()),
    )
    .await
    .unwrap();
    assert_eq!(
        h.append(&appended, ArrayBytes::Fixed(more.clone()), &[5, 3], 0)
            .await
            .unwrap(),
        vec![9, 3]
    );
    let expected: Vec<u8> = first.iter().chain(&more).copied().collect();
    std::fs::write(dir.join("expected/appended.bin"), &expected).unwrap();
    manifest.push(json!({"store": "store.zarr", "path": "v3/appended", "shape": [9, 3], "zarr_format": 3, "kind": "fixed", "expected": "expected/appended.bin", "lossy": false}));

    let mut spec = ArraySpec::new(2, vec![10], DataType::Int16);
    spec.chunks = Some(vec![4]);
    spec.fill_value = json!(-1);
    let resized = node_path("v2/resized").unwrap();
    let a = h.create_array(&resized, &spec, false).await.unwrap();
    a.write(
        &Selection::all().resolve(&[10]).unwrap(),
        ArrayBytes::Fixed((0..10i16).flat_map(|v| v.to_le_bytes()).collect()),
    )
    .await
    .unwrap();
    h.resize(&resized, vec![6], true).await.unwrap();
    h.resize(&resized, vec![12], true).await.unwrap();
    // Chunk 1 (4..8) survives the shrink with its old values; chunk 2 was deleted.
    let expected: Vec<u8> = [0i16, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let back = h
        .array(&resized)
        .await
        .unwrap()
        .read(&Selection::all().resolve(&[12]).unwrap())
        .await
        .unwrap();
    assert_eq!(back, ArrayBytes::Fixed(expected.clone()));
    std::fs::write(dir.join("expected/resized.bin"), &expected).unwrap();
    manifest.push(json!({"store": "store.zarr", "path": "v2/resized", "shape": [12], "zarr_format": 2, "kind": "fixed", "expected": "expected/resized.bin", "lossy": false}));

    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    assert!(manifest.len() >= 45);
}

use zarrd::zarr::selection::Resolved;
