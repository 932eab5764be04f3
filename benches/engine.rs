//! Engine hot paths: reading a float32 8192x8192 array (1024x1024 chunks)
//! whole and as a 1000x1000 window, in the three layouts of the benchmark
//! corpus, plus decode per codec and the chunk-to-selection copy.
//! Throughput is decoded output bytes. Run: `cargo bench --bench engine`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::json;
use zarrd::store::{node_path, Store};
use zarrd::zarr::buffer::{copy_mapped, DimMap};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, Selection};

const N: u64 = 8192;

fn layouts() -> Vec<(&'static str, ArraySpec)> {
    let base = |format| {
        let mut s = ArraySpec::new(format, vec![N, N], DataType::Float32);
        s.chunks = Some(vec![1024, 1024]);
        s
    };
    let mut v2 = base(2);
    v2.compressor =
        Some(json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}));
    let mut v3 = base(3);
    v3.codecs = Some(
        json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]),
    );
    let mut sharded = base(3);
    sharded.chunks = Some(vec![256, 256]);
    sharded.shards = Some(vec![2048, 2048]);
    sharded.codecs = v3.codecs.clone();
    vec![
        ("v2_blosc_lz4", v2),
        ("v3_zstd1", v3),
        ("v3_sharded_zstd1", sharded),
    ]
}

/// A smooth field with noise, so compressors see realistic data.
fn field() -> ArrayBytes {
    let mut out = Vec::with_capacity((N * N * 4) as usize);
    for i in 0..N {
        for j in 0..N {
            let v = ((i as f32) * 0.01).sin() * ((j as f32) * 0.013).cos() * 100.0
                + ((i * 31 + j * 17) % 7) as f32 * 0.01;
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    ArrayBytes::Fixed(out)
}

fn bench_reads(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path()).unwrap();
    let h = Hierarchy::new(store);
    let data = field();
    let all = Selection::all().resolve(&[N, N]).unwrap();
    let window = Selection::parse("3500:4500,3500:4500")
        .unwrap()
        .resolve(&[N, N])
        .unwrap();
    let mut arrays = vec![];
    for (name, spec) in layouts() {
        let a = rt.block_on(async {
            let a = h
                .create_array(&node_path(name).unwrap(), &spec, false)
                .await
                .unwrap();
            a.write(&all, data.clone()).await.unwrap();
            a
        });
        arrays.push((name, a));
    }
    let mut group = c.benchmark_group("read");
    group.sample_size(10);
    for (name, a) in &arrays {
        group.throughput(Throughput::Bytes(N * N * 4));
        group.bench_with_input(BenchmarkId::new("whole", name), a, |b, a| {
            b.iter(|| rt.block_on(a.read(&all)).unwrap())
        });
        group.throughput(Throughput::Bytes(1000 * 1000 * 4));
        group.bench_with_input(BenchmarkId::new("window_1000", name), a, |b, a| {
            b.iter(|| rt.block_on(a.read(&window)).unwrap())
        });
    }
    group.finish();
}

fn bench_codecs(c: &mut Criterion) {
    let chunk: Vec<u8> = (0..1024 * 1024u32)
        .flat_map(|i| ((i % 1024) as f32 * 0.5 + (i / 1024) as f32).to_le_bytes())
        .collect();
    let repr = zarrd::zarr::codec::ChunkRepr {
        shape: vec![1024, 1024],
        dtype: DataType::Float32,
        fill: zarrd::zarr::fill::FillValue(vec![0; 4]),
    };
    let b = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(chunk.len() as u64));
    group.sample_size(20);
    for (name, codec) in [
        (
            "blosc_lz4_shuffle",
            json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}),
        ),
        (
            "zstd1",
            json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}}),
        ),
        (
            "gzip5",
            json!({"name": "gzip", "configuration": {"level": 5}}),
        ),
        (
            "lz4",
            json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
        ),
        ("crc32c", json!({"name": "crc32c"})),
    ] {
        let chain = zarrd::zarr::codec::build_v3_chain(&json!([b, codec]), &repr).unwrap();
        let encoded = chain
            .encode(ArrayBytes::Fixed(chunk.clone()), &repr)
            .unwrap();
        group.bench_function(name, |bch| {
            bch.iter(|| chain.decode(encoded.clone(), &repr).unwrap())
        });
    }
    group.finish();

    let mut group = c.benchmark_group("copy");
    let src = ArrayBytes::Fixed(chunk.clone());
    group.throughput(Throughput::Bytes(512 * 512 * 4));
    group.bench_function("chunk_to_window_512", |bch| {
        let mut dst = ArrayBytes::Fixed(vec![0; 512 * 512 * 4]);
        let maps = [DimMap::range(100, 0, 512), DimMap::range(300, 0, 512)];
        bch.iter(|| copy_mapped(&src, &[1024, 1024], &mut dst, &[512, 512], &maps, 4))
    });
    group.finish();
}

/// `.npy` framing: the header every response carries and the parse every
/// `.npy` upload goes through.
fn bench_npy(c: &mut Criterion) {
    let mut group = c.benchmark_group("npy");
    group.bench_function("header_f4_2d", |bch| {
        bch.iter(|| zarrd::npy::header("<f4", &[8192, 8192]))
    });
    let mut upload = zarrd::npy::header("<f4", &[512, 512]);
    upload.extend(std::iter::repeat_n(0u8, 512 * 512 * 4));
    group.bench_function("parse_header_f4_2d", |bch| {
        bch.iter(|| zarrd::npy::parse_header(&upload).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_codecs, bench_reads, bench_npy);
criterion_main!(benches);
