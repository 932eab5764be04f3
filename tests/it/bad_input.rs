//! Bad stored data and metadata give typed errors naming the key and the
//! reason, never a panic.

use bytes::Bytes;
use serde_json::{json, Value};
use zarrd::store::{node_path, Store, StoreKey};
use zarrd::zarr::{ArraySpec, DataType, Hierarchy, Selection, ZarrError};

async fn put(store: &Store, key: &str, value: impl Into<Bytes>) {
    store
        .put(&StoreKey::new(key).unwrap(), value.into())
        .await
        .unwrap();
}

async fn array_with(codecs: Value) -> (Store, Hierarchy) {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![8], DataType::Int32);
    spec.chunks = Some(vec![4]);
    spec.codecs = Some(codecs);
    let a = h
        .create_array(&node_path("a").unwrap(), &spec, false)
        .await
        .unwrap();
    a.write(
        &Selection::all().resolve(&[8]).unwrap(),
        zarrd::zarr::ArrayBytes::Fixed((0..32).collect()),
    )
    .await
    .unwrap();
    (store, h)
}

async fn read_err(h: &Hierarchy) -> ZarrError {
    let a = h.array(&node_path("a").unwrap()).await.unwrap();
    a.read(&Selection::all().resolve(&[8]).unwrap())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn truncated_chunk_names_its_key() {
    let (store, h) = array_with(json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}])).await;
    let key = StoreKey::new("a/c/1").unwrap();
    let full = store.get(&key).await.unwrap().unwrap();
    put(&store, "a/c/1", full.slice(..full.len() / 2)).await;
    let err = read_err(&h).await;
    assert!(
        matches!(err, ZarrError::CorruptChunk { ref key, .. } if key == "a/c/1"),
        "{err}"
    );
}

#[tokio::test]
async fn checksum_mismatch_is_reported() {
    let (store, h) = array_with(
        json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]),
    )
    .await;
    let key = StoreKey::new("a/c/0").unwrap();
    let mut bytes = store.get(&key).await.unwrap().unwrap().to_vec();
    bytes[0] ^= 0xff;
    put(&store, "a/c/0", bytes).await;
    let err = read_err(&h).await.to_string();
    assert!(
        err.contains("a/c/0") && err.contains("checksum mismatch"),
        "{err}"
    );
}

#[tokio::test]
async fn shard_index_outside_the_shard_is_an_error() {
    let store = Store::memory();
    let h = Hierarchy::new(store.clone());
    let mut spec = ArraySpec::new(3, vec![8], DataType::Int32);
    spec.chunks = Some(vec![2]);
    spec.shards = Some(vec![8]);
    let a = h
        .create_array(&node_path("a").unwrap(), &spec, false)
        .await
        .unwrap();
    a.write(
        &Selection::all().resolve(&[8]).unwrap(),
        zarrd::zarr::ArrayBytes::Fixed((1..33).collect()),
    )
    .await
    .unwrap();
    let key = StoreKey::new("a/c/0").unwrap();
    let mut shard = store.get(&key).await.unwrap().unwrap().to_vec();
    // Rewrite the first index entry's offset far past the end and fix up the crc32c.
    let index_at = shard.len() - (4 * 16 + 4);
    shard[index_at..index_at + 8].copy_from_slice(&1_000_000u64.to_le_bytes());
    let crc = crc32c::crc32c(&shard[index_at..shard.len() - 4]);
    let n = shard.len();
    shard[n - 4..].copy_from_slice(&crc.to_le_bytes());
    put(&store, "a/c/0", shard).await;
    let err = read_err(&h).await.to_string();
    assert!(
        err.contains("a/c/0") && err.contains("outside the shard"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_metadata_names_key_and_reason() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "array"}),
            "missing field 'shape'",
        ),
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "array", "shape": "x"}),
            "'shape' must be a list",
        ),
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "snappy-ish"}]}),
            "is not one zarrd decodes",
        ),
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"},
            "fill_value": 0, "codecs": [{"name": "bytes"}]}),
            "has 1 dimensions",
        ),
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "group", "surprise": 1}),
            "unknown field 'surprise'",
        ),
        (
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"},
            "fill_value": "many", "codecs": [{"name": "bytes"}]}),
            "fill value",
        ),
        (
            ".zarray",
            json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i3", "compressor": null, "fill_value": 0, "order": "C", "filters": null}),
            "not a numpy typestr",
        ),
        (
            ".zarray",
            json!({"zarr_format": 2, "shape": [4], "chunks": [0], "dtype": "<i4", "compressor": null, "fill_value": 0, "order": "C", "filters": null}),
            "zero-length",
        ),
        (
            ".zarray",
            json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": {"id": "nope"}, "fill_value": 0, "order": "C", "filters": null}),
            "is not one zarrd decodes",
        ),
        (
            ".zarray",
            json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "|O", "compressor": null, "fill_value": 0, "order": "C", "filters": null}),
            "vlen-utf8",
        ),
    ];
    for (name, doc, reason) in cases {
        let store = Store::memory();
        put(
            &store,
            &format!("x/{name}"),
            serde_json::to_vec(&doc).unwrap(),
        )
        .await;
        let h = Hierarchy::new(store);
        let err = h
            .array(&node_path("x").unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("x/{name}")) && err.contains(reason),
            "{doc}: {err}"
        );
    }
    let store = Store::memory();
    put(&store, "x/zarr.json", &b"{not json"[..]).await;
    let err = Hierarchy::new(store)
        .node(&node_path("x").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("x/zarr.json") && err.contains("not valid JSON"),
        "{err}"
    );
}

#[tokio::test]
async fn missing_nodes_and_wrong_types() {
    let store = Store::memory();
    let h = Hierarchy::new(store);
    h.create_group(&node_path("g").unwrap(), 3, Default::default(), false)
        .await
        .unwrap();
    assert!(matches!(
        h.array(&node_path("nope").unwrap()).await,
        Err(ZarrError::NodeNotFound { .. })
    ));
    assert!(matches!(
        h.array(&node_path("g").unwrap()).await,
        Err(ZarrError::WrongNodeType { .. })
    ));
    let err = h
        .create_group(&node_path("g").unwrap(), 3, Default::default(), false)
        .await
        .unwrap_err();
    assert!(matches!(err, ZarrError::NodeExists { .. }));
}

#[tokio::test]
async fn write_shape_mismatch_is_explained() {
    let (_, h) =
        array_with(json!([{"name": "bytes", "configuration": {"endian": "little"}}])).await;
    let a = h.array(&node_path("a").unwrap()).await.unwrap();
    let sel = Selection::parse("2:5").unwrap().resolve(&[8]).unwrap();
    let err = a
        .write(&sel, zarrd::zarr::ArrayBytes::Fixed(vec![0; 8]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("[3]") && err.contains("holds 2"), "{err}");
}
