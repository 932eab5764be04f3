//! Answers derived from stored data cost what they return, not what the
//! store holds: consolidated metadata, thumbnails, trees and array
//! descriptions, each measured by what it reads and lists; and memory is
//! reserved from the budget before the work starts.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::cache::tests::CountedReads;
use super::*;
use crate::zarr::Selection;

fn limits() -> Limits {
    Limits {
        in_memory: 1 << 30,
        streamed: 1 << 40,
    }
}

/// A v3 array's document: `shape`, `chunks`, `dtype`, uncompressed.
fn v3_array(shape: &[u64], chunks: &[u64], dtype: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({"zarr_format": 3, "node_type": "array",
            "shape": shape, "data_type": dtype, "fill_value": 0, "attributes": {},
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}))
        .unwrap(),
    )
}

fn v3_group() -> Bytes {
    Bytes::from_static(br#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#)
}

fn key(k: &str) -> StoreKey {
    StoreKey::new(k).unwrap()
}

/// A counted store holding `documents` and `chunks` chunk keys of one byte
/// under `array`.
async fn counted_store(
    documents: &[(&str, Bytes)],
    array: &str,
    chunks: usize,
) -> (Store, Arc<CountedReads>) {
    let counted = Arc::new(CountedReads::default());
    let store = Store::new(counted.clone(), "counted");
    for (k, v) in documents {
        store.put(&key(k), v.clone()).await.unwrap();
    }
    for i in 0..chunks {
        store
            .put(&key(&format!("{array}/c/{i}")), Bytes::from_static(b"\x01"))
            .await
            .unwrap();
    }
    (store, counted)
}

#[tokio::test]
async fn consolidated_metadata_reads_node_documents_once_for_concurrent_requests() {
    let (store, counted) = counted_store(
        &[
            ("zarr.json", v3_group()),
            ("g/zarr.json", v3_group()),
            ("g/a/zarr.json", v3_array(&[5000], &[1], "uint8")),
        ],
        "g/a",
        5000,
    )
    .await;
    // Documents changed within the last 2 s are not trusted by their ETags.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let service = Arc::new(Service::new(store, 1 << 20, Recheck::Always, limits()));
    counted.listed.store(0, Ordering::SeqCst);
    counted.reads.store(0, Ordering::SeqCst);
    let asks = (0..8).map(|_| {
        let service = service.clone();
        tokio::spawn(async move {
            match service.get_value(&key("zarr.json"), None).await.unwrap() {
                Got::Value(Value {
                    body: ValueBody::Bytes(b),
                    ..
                }) => b,
                _ => panic!("no document"),
            }
        })
    });
    let answers = futures::future::join_all(asks).await;
    let doc: serde_json::Value = serde_json::from_slice(answers[0].as_ref().unwrap()).unwrap();
    let members = &doc["consolidated_metadata"]["metadata"];
    assert_eq!(members["g/a"]["shape"], serde_json::json!([5000]), "{doc}");
    assert!(members.get("g").is_some());
    // The walk lists the groups' folders, never the array's 5,000 chunks.
    let listed = counted.listed.load(Ordering::SeqCst);
    assert!(listed < 20, "{listed} entries listed");
    // Eight requests at once share one build: each document is read by it
    // (and the group's own by each request), not eight times over.
    let reads = counted.reads.load(Ordering::SeqCst);
    assert!(reads < 24, "{reads} reads");
}

#[tokio::test]
async fn a_thumbnail_of_a_large_array_decodes_a_bounded_number_of_chunks() {
    // 4096 chunks of 64²: a thumbnail strided over all of it would decode
    // every one.
    let counted = Arc::new(CountedReads::default());
    let store = Store::new(counted.clone(), "counted");
    store
        .put(
            &key("big/zarr.json"),
            v3_array(&[4096, 4096], &[64, 64], "uint8"),
        )
        .await
        .unwrap();
    let chunk = Bytes::from(vec![7u8; 64 * 64]);
    for i in 0..64 {
        for j in 0..64 {
            store
                .put(&key(&format!("big/c/{i}/{j}")), chunk.clone())
                .await
                .unwrap();
        }
    }
    let service = Service::new(store, 0, Recheck::Always, limits());
    counted.reads.store(0, Ordering::SeqCst);
    let preview = service.preview(&key("big"), 128).await.unwrap();
    let reads = counted.reads.load(Ordering::SeqCst);
    assert!(
        reads <= preview::MAX_PREVIEW_CHUNKS as usize + 4,
        "{reads} reads for one thumbnail"
    );
    assert_eq!(preview.data.shape, vec![128, 128]);
    match &preview.data.content {
        Content::Whole(crate::zarr::ArrayBytes::Fixed(b)) => assert!(b.iter().all(|&v| v == 7)),
        _ => panic!("not whole"),
    }
}

#[tokio::test]
async fn trees_come_in_pages_that_together_hold_every_node_once() {
    let mut documents = vec![("zarr.json".to_string(), v3_group())];
    for g in 0..12 {
        documents.push((format!("g{g:02}/zarr.json"), v3_group()));
        documents.push((format!("g{g:02}/sub/zarr.json"), v3_group()));
        for a in ["a", "a.b", "a-b"] {
            documents.push((
                format!("g{g:02}/{a}/zarr.json"),
                v3_array(&[4], &[2], "uint8"),
            ));
        }
    }
    let refs: Vec<(&str, Bytes)> = documents
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let (store, _) = counted_store(&refs, "x", 0).await;
    let service = Service::new(store, 1 << 20, Recheck::Always, limits());
    let whole = service
        .tree_page(&StoreKey::root(), None, 10_000)
        .await
        .unwrap();
    assert_eq!(whole.nodes.len(), 1 + 12 * 5);
    assert!(whole.next.is_none());
    let mut paged = Vec::new();
    let mut after = None;
    for limit in [7, 1, 13, 9, 30, 30] {
        let page = service
            .tree_page(&StoreKey::root(), after.as_deref(), limit)
            .await
            .unwrap();
        assert!(page.nodes.len() <= limit);
        paged.extend(page.nodes.into_iter().map(|n| n.path));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert!(after.is_none(), "more pages than expected");
    let mut expected: Vec<String> = whole.nodes.into_iter().map(|n| n.path).collect();
    paged.sort();
    expected.sort();
    assert_eq!(paged, expected);
    // A subtree pages the same way, and `after` outside it is refused.
    let page = service.tree_page(&key("g03"), None, 2).await.unwrap();
    assert_eq!(page.nodes.len(), 2);
    let rest = service
        .tree_page(&key("g03"), page.next.as_deref(), 100)
        .await
        .unwrap();
    assert_eq!(page.nodes.len() + rest.nodes.len(), 5);
    let e = service
        .tree_page(&key("g03"), Some("g04/a"), 10)
        .await
        .unwrap_err();
    assert_eq!(e.code, "bad_after");
}

#[tokio::test]
async fn describing_an_array_counts_its_chunks_only_so_far() {
    let (store, _) = counted_store(
        &[
            ("a/zarr.json", v3_array(&[200_000], &[1], "uint8")),
            ("b/zarr.json", v3_array(&[8], &[1], "uint8")),
        ],
        "a",
        MAX_STORAGE_KEYS as usize + 5000,
    )
    .await;
    for i in 0..3 {
        store
            .put(&key(&format!("b/c/{i}")), Bytes::from_static(b"\x01"))
            .await
            .unwrap();
    }
    let service = Service::new(store, 1 << 20, Recheck::Always, limits());
    let a = service
        .storage(&service.array(&key("a")).await.unwrap())
        .await
        .unwrap();
    assert!(!a.complete);
    assert!(
        a.chunks_initialized >= MAX_STORAGE_KEYS && a.chunks_initialized < MAX_STORAGE_KEYS + 5000
    );
    let b = service
        .storage(&service.array(&key("b")).await.unwrap())
        .await
        .unwrap();
    assert!(b.complete);
    assert_eq!(b.chunks_initialized, 3);
    assert_eq!(b.present.unwrap(), vec![vec![0], vec![1], vec![2]]);
}

#[tokio::test]
async fn reads_reserve_their_memory_and_are_refused_when_it_is_spent() {
    let (store, _) = counted_store(
        &[(
            "a/zarr.json",
            v3_array(&[4096, 4096], &[512, 512], "float32"),
        )],
        "x",
        0,
    )
    .await;
    let service = Service::new(store, 0, Recheck::Always, limits())
        .with_budget(Budget::new(256 << 20, Duration::from_millis(20)));
    let read = |select: &str| ReadRequest {
        selection: Selection::parse(select).unwrap(),
        field: None,
        fixed_size_only: false,
        encoding_per_element: 0,
    };
    // 64 MiB of data built in memory with its encoding: 128 MiB each.
    let whole = Residence::InMemory { expansion: 1 };
    let first = service.read(&key("a"), read(":,:"), whole).await.unwrap();
    assert_eq!(first.reservation.bytes(), 128 << 20);
    let second = service.read(&key("a"), read(":,:"), whole).await.unwrap();
    assert_eq!(service.budget().reserved(), 256 << 20);
    let refused = service
        .read(&key("a"), read(":,:"), whole)
        .await
        .err()
        .unwrap();
    assert_eq!(refused.kind, ErrorKind::Busy);
    // Small reads are never refused.
    service
        .read(&key("a"), read("0:64,0:64"), whole)
        .await
        .unwrap();
    drop((first, second));
    assert_eq!(service.budget().reserved(), 0);
    service.read(&key("a"), read(":,:"), whole).await.unwrap();
}

#[tokio::test]
async fn a_tree_page_reads_the_nodes_it_returns_not_their_siblings() {
    let mut documents = vec![("zarr.json".to_string(), v3_group())];
    for g in 0..300 {
        documents.push((format!("g{g:03}/zarr.json"), v3_group()));
    }
    let refs: Vec<(&str, Bytes)> = documents
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let (store, counted) = counted_store(&refs, "x", 0).await;
    let service = Service::new(store, 1 << 20, Recheck::Always, limits());
    // A page of one is the start node, with where to go on.
    let first = service.tree_page(&StoreKey::root(), None, 1).await.unwrap();
    assert_eq!(first.nodes.len(), 1);
    assert_eq!(first.next.as_deref(), Some(""));
    let second = service
        .tree_page(&StoreKey::root(), first.next.as_deref(), 1)
        .await
        .unwrap();
    assert_eq!(second.nodes[0].path, "g000");
    // A page in the middle reads the documents of the nodes on it (and of
    // the node it resumes after), not those of the group's other children.
    counted.reads.store(0, Ordering::SeqCst);
    let page = service
        .tree_page(&StoreKey::root(), Some("g150"), 5)
        .await
        .unwrap();
    let paths: Vec<&str> = page.nodes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(paths, ["g151", "g152", "g153", "g154", "g155"]);
    let reads = counted.reads.load(Ordering::SeqCst);
    assert!(reads < 40, "{reads} reads for a page of 5");
}

#[tokio::test]
async fn a_group_is_served_as_stored_while_memory_to_consolidate_it_is_held() {
    let big = Bytes::from(
        serde_json::to_vec(&serde_json::json!({"zarr_format": 3, "node_type": "group",
            "attributes": {"notes": "x".repeat(100_000)}}))
        .unwrap(),
    );
    let (store, _) =
        counted_store(&[("zarr.json", v3_group()), ("g/zarr.json", big)], "x", 0).await;
    let service = Service::new(store, 1 << 20, Recheck::Always, limits())
        .with_budget(Budget::new(256 << 20, Duration::from_millis(20)));
    async fn served(service: &Service) -> serde_json::Value {
        match service.get_value(&key("zarr.json"), None).await.unwrap() {
            Got::Value(Value {
                body: ValueBody::Bytes(b),
                ..
            }) => serde_json::from_slice(&b).unwrap(),
            _ => panic!("no document"),
        }
    }
    let all = service
        .budget()
        .reserve(256 << 20, "everything")
        .await
        .unwrap();
    let doc = served(&service).await;
    assert!(doc.get("consolidated_metadata").is_none(), "{doc}");
    drop(all);
    let doc = served(&service).await;
    assert!(doc["consolidated_metadata"]["metadata"].get("g").is_some());
}

/// S3 tools take a 32-hex ETag for the body's MD5 and check it (`rclone
/// copy` failed "md5 hash differ" on a group served with consolidated
/// metadata): documents zarrd builds carry their bytes' MD5.
#[tokio::test]
async fn built_documents_carry_the_md5_of_their_bytes() {
    use md5::Digest;
    let (store, _) = counted_store(
        &[
            ("v3/zarr.json", v3_group()),
            ("v3/a/zarr.json", v3_array(&[4], &[2], "uint8")),
            ("v2/.zgroup", Bytes::from_static(br#"{"zarr_format": 2}"#)),
        ],
        "x",
        0,
    )
    .await;
    let service = Service::new(store, 1 << 20, Recheck::Always, limits());
    for doc in ["v3/zarr.json", "v2/.zmetadata"] {
        let Got::Value(Value {
            body: ValueBody::Bytes(bytes),
            meta,
            ..
        }) = service.get_value(&key(doc), None).await.unwrap()
        else {
            panic!("{doc}: no document");
        };
        assert!(bytes.len() > 40, "{doc}: not built");
        assert_eq!(
            meta.version.e_tag.as_deref(),
            Some(hex::encode(md5::Md5::digest(&bytes)).as_str()),
            "{doc}"
        );
    }
}
