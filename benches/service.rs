//! A warm small slice through the service layer, against the same slice
//! read the way the HTTP layer did before it (node from the metadata cache,
//! then a runtime array and its codec chain built for every request), in
//! one run. Both read through the same warm chunk cache; the difference is
//! what a request costs beyond its data. Run: `cargo bench --bench service`.

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use zarrd::config::Recheck;
use zarrd::service::{Limits, ReadRequest, Residence, Service};
use zarrd::store::{node_path, Store};
use zarrd::zarr::{ArrayBytes, ArraySpec, DataType, Hierarchy, NodeMetadata, Selection};

fn bench_warm_small_slice(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = Store::memory();
    let path = node_path("t").unwrap();
    rt.block_on(async {
        let mut spec = ArraySpec::new(3, vec![1024, 1024], DataType::Float32);
        spec.chunks = Some(vec![256, 256]);
        spec.codecs = Some(json!([
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
        ]));
        let a = Hierarchy::new(store.clone())
            .create_array(&path, &spec, false)
            .await
            .unwrap();
        let values: Vec<u8> = (0..1024 * 1024u32)
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        a.write(
            &Selection::all().resolve(&[1024, 1024]).unwrap(),
            ArrayBytes::Fixed(values),
        )
        .await
        .unwrap();
    });
    let limits = Limits {
        in_memory: 64 << 20,
        streamed: 1 << 30,
    };
    // The server's defaults: metadata rechecked on every request.
    let service = Service::new(store.clone(), 256 << 20, Recheck::Always, limits);
    let selection = Selection::parse("100:116,200:216").unwrap();
    let request = || ReadRequest {
        selection: selection.clone(),
        field: None,
        fixed_size_only: false,
        encoding_per_element: 0,
    };
    let hierarchy = Hierarchy::new(store.clone());
    let mut group = c.benchmark_group("warm_16x16_slice");
    group.bench_function("service_cached_array", |b| {
        b.to_async(&rt).iter(|| async {
            let data = service
                .read(&path, request(), Residence::InMemory { expansion: 1 })
                .await
                .unwrap();
            criterion::black_box(data.shape);
        })
    });
    group.bench_function("anchor_chain_built_per_request", |b| {
        b.to_async(&rt).iter(|| async {
            let node = service.node(&path).await.unwrap();
            let NodeMetadata::Array(meta) = &node.meta else {
                unreachable!()
            };
            let array = hierarchy
                .bind(&path, (**meta).clone())
                .unwrap()
                .with_source(node.array.as_ref().unwrap().source().clone());
            let resolved = selection.resolve(array.shape()).unwrap();
            criterion::black_box(array.read(&resolved).await.unwrap());
        })
    });
    group.finish();
}

criterion_group!(benches, bench_warm_small_slice);
criterion_main!(benches);
