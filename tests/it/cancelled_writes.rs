//! A write whose client goes away while its chunk is being stored. A
//! local directory's put goes on without its caller (the file is written
//! and renamed on the blocking pool); the write's locks must last until it
//! lands, or the next writer's read-modify-write runs meanwhile and the
//! late rename replaces what that writer stored and was told was stored.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use serde_json::json;
use zarrd::config::{Config, Recheck};
use zarrd::http::{router, AppState};
use zarrd::store::update::Coordination;
use zarrd::store::Store;

use crate::common::call;

/// A store whose next put, once armed, lands `delay` later, whether or not
/// its caller still waits: as a local file's rename does.
#[derive(Debug)]
struct LatePuts {
    inner: Arc<dyn ObjectStore>,
    delay: Mutex<Option<Duration>>,
}

impl std::fmt::Display for LatePuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LatePuts({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for LatePuts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let delay = self.delay.lock().unwrap().take().unwrap_or_default();
        let (inner, location) = (self.inner.clone(), location.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            inner.put_opts(&location, payload, opts).await
        })
        .await
        .unwrap()
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_client_left_cannot_undo_the_next_one() {
    let locks = tempfile::tempdir().unwrap();
    let late = Arc::new(LatePuts {
        inner: Arc::new(object_store::memory::InMemory::new()),
        delay: Mutex::new(None),
    });
    // File locks, as a directory store takes them.
    let coordination = Coordination::FileLocks {
        dir: locks.path().to_path_buf(),
    };
    let store = Store::with_coordination(late.clone(), "late puts", coordination);
    let config = Config {
        allow_anonymous_writes: true,
        recheck_cached: Recheck::Always,
        ..Config::default()
    };
    let app = router(AppState::new(store, config));
    let spec = json!({"node_type": "array", "shape": [8], "chunks": [8], "dtype": "int32"});
    let (s, _, _) = call(&app, Method::PUT, "/api/v1/meta/a", &[], spec.to_string()).await;
    assert_eq!(s, StatusCode::CREATED);
    let json = [("content-type", "application/json")];
    let (s, _, _) = call(&app, Method::PUT, "/api/v1/data/a", &json, r#"{"data": 5}"#).await;
    assert_eq!(s, StatusCode::OK);

    // A writes the first half; its chunk takes 600 ms to land, and its
    // client leaves after 150 ms.
    *late.delay.lock().unwrap() = Some(Duration::from_millis(600));
    let first = call(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=0:4",
        &json,
        r#"{"data": 1}"#,
    );
    let left = tokio::time::timeout(Duration::from_millis(150), first).await;
    assert!(
        left.is_err(),
        "the first write ended before its client left"
    );
    // B writes the other half and is told it is stored.
    let (s, _, b) = call(
        &app,
        Method::PUT,
        "/api/v1/data/a?select=4:8",
        &json,
        r#"{"data": 2}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));

    // Whatever became of A's write, B's stays.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let (s, _, b) = call(
        &app,
        Method::GET,
        "/api/v1/data/a?format=json",
        &[],
        Body::empty(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let values: serde_json::Value = serde_json::from_slice(&b).unwrap();
    let values: Vec<i64> = values["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(
        &values[4..],
        &[2, 2, 2, 2],
        "the acknowledged write was undone: {values:?}"
    );
    // A's write, which was under way when its client left, landed whole.
    assert_eq!(&values[..4], &[1, 1, 1, 1], "{values:?}");
}
