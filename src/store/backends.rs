//! Opening stores from URLs: directories, `memory://`, and object storage
//! (`s3://`, `gs://`, `az://`, read-only `http(s)://`) with credentials from
//! the usual environment variables and retries with backoff.

use std::sync::Arc;
use std::time::Duration;

use object_store::list::PaginatedListStore;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

use super::{Coordination, Store, StoreError};

fn bad(url: &str, reason: impl std::fmt::Display) -> StoreError {
    StoreError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}

/// Transient store errors (timeouts, 5xx, throttling) are retried with
/// exponential backoff before they become 502s.
fn retries() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(60),
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
    }
}

/// Every HTTP client a store opens follows no redirect: where a store or a
/// reference may read is checked on its URL (the reference `targets`, the
/// operator's ROOT), and a redirect would take the read elsewhere (another
/// host, a cloud metadata service) without that check. A redirect is
/// answered as the store failing (502).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoRedirects;

impl object_store::client::HttpConnector for NoRedirects {
    fn connect(
        &self,
        options: &object_store::ClientOptions,
    ) -> object_store::Result<object_store::client::HttpClient> {
        use object_store::ClientConfigKey as Key;
        let value = |key: Key| options.get_config_value(&key);
        let on = |key: Key| value(key).is_some_and(|v| v == "true");
        let duration = |key: Key, default: u64| {
            value(key)
                .and_then(|v| humantime::parse_duration(&v).ok())
                .unwrap_or(Duration::from_secs(default))
        };
        // The options object_store's own client takes from the environment
        // and the builder, as it would apply them, redirects aside.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(!on(Key::AllowHttp))
            .danger_accept_invalid_certs(on(Key::AllowInvalidCertificates))
            .connect_timeout(duration(Key::ConnectTimeout, 5))
            .timeout(duration(Key::Timeout, 30))
            .pool_idle_timeout(duration(Key::PoolIdleTimeout, 90));
        if on(Key::Http1Only) {
            builder = builder.http1_only();
        }
        if on(Key::Http2Only) {
            builder = builder.http2_prior_knowledge();
        }
        if let Some(agent) = value(Key::UserAgent) {
            builder = builder.user_agent(agent);
        }
        if let Some(proxy) = value(Key::ProxyUrl) {
            let mut proxy =
                reqwest::Proxy::all(proxy).map_err(|e| object_store::Error::Generic {
                    store: "HTTP",
                    source: Box::new(e),
                })?;
            if let Some(excludes) = value(Key::ProxyExcludes) {
                proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
            }
            builder = builder.proxy(proxy);
        }
        let client = builder.build().map_err(|e| object_store::Error::Generic {
            store: "HTTP",
            source: Box::new(e),
        })?;
        Ok(object_store::client::HttpClient::new(client))
    }
}

/// The objects below `prefix`, named from there.
fn with_prefix(inner: Arc<dyn ObjectStore>, prefix: &Path) -> Arc<dyn ObjectStore> {
    if prefix.as_ref().is_empty() {
        inner
    } else {
        Arc::new(PrefixStore::new(inner, prefix.clone()))
    }
}

/// A bucket's objects, and its own paged listings where it has them.
pub(super) struct Bucket {
    pub store: Arc<dyn ObjectStore>,
    pub pages: Option<Arc<dyn PaginatedListStore>>,
}

impl Bucket {
    fn plain(store: impl ObjectStore) -> Self {
        Bucket {
            store: Arc::new(store),
            pages: None,
        }
    }

    pub(super) fn paged(store: impl ObjectStore + PaginatedListStore) -> Self {
        let store = Arc::new(store);
        Bucket {
            store: store.clone(),
            pages: Some(store),
        }
    }
}

/// The store holding a URL's objects, without the URL's path: the bucket
/// (`s3://`, `gs://`, `az://`), the host (`http(s)://`, read-only), or the
/// local file system (`file://`). `abfs(s)://` URLs name their container in
/// the URL and are opened from all of it.
pub(super) fn bucket_store(url: &Url) -> Result<Arc<dyn ObjectStore>, StoreError> {
    Ok(bucket(url)?.store)
}

fn bucket(url: &Url) -> Result<Bucket, StoreError> {
    let location = url.as_str();
    // Scheme, credentials, host and port: a host's other ports are other servers.
    let bucket_url = &url[..url::Position::BeforePath];
    Ok(match url.scheme() {
        "file" => Bucket::plain(object_store::local::LocalFileSystem::new()),
        "s3" | "s3a" => Bucket::paged(
            object_store::aws::AmazonS3Builder::from_env()
                .with_url(bucket_url)
                .with_retry(retries())
                .with_http_connector(NoRedirects)
                .build()
                .map_err(|e| bad(location, e))?,
        ),
        "gs" => Bucket::paged(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(bucket_url)
                .with_retry(retries())
                .with_http_connector(NoRedirects)
                .build()
                .map_err(|e| bad(location, e))?,
        ),
        "az" | "azure" | "abfs" | "abfss" => Bucket::paged(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                // abfs URLs name the container before the account; az URLs name it as the host.
                .with_url(if url.scheme().starts_with("abfs") { location } else { bucket_url })
                .with_retry(retries())
                .with_http_connector(NoRedirects)
                .build()
                .map_err(|e| bad(location, e))?,
        ),
        "http" | "https" => Bucket::plain(
            object_store::http::HttpBuilder::new()
                .with_url(bucket_url)
                .with_client_options(
                    object_store::ClientOptions::new().with_allow_http(url.scheme() == "http"),
                )
                .with_retry(retries())
                .with_http_connector(NoRedirects)
                .build()
                .map_err(|e| bad(location, e))?,
        ),
        other => return Err(bad(location, format!("unsupported scheme '{other}' (use a directory, file://, memory://, s3://, gs://, az:// or http(s)://)"))),
    })
}

/// A store for an object storage URL.
pub fn open_url(location: &str) -> Result<Store, StoreError> {
    let url = Url::parse(location).map_err(|e| bad(location, e))?;
    if matches!(url.scheme(), "http" | "https") {
        // The host's store, below the URL's path: object_store's HTTP
        // store names what a WebDAV listing finds by its whole path on
        // the host, and the prefix store takes the URL's path off again
        // (as it does for a bucket's), so a listing names keys.
        let root = Path::from(url.path().trim_matches('/'));
        let store = store_below(bucket(&url)?, &root, location);
        return Ok(store.into_read_only());
    }
    if url.scheme() == "file" {
        return Err(bad(location, "file:// URLs are opened as directories"));
    }
    // The URL's path as the backend names it (`PrefixStore` takes it so).
    let root = if url.scheme().starts_with("abfs") {
        Path::default()
    } else {
        Path::from(url.path().trim_matches('/'))
    };
    let ordered = lists_in_key_order(&url);
    let mut bucket = bucket(&url)?;
    if !ordered {
        // S3 Express directory buckets neither list in key order nor start
        // after a key: their levels are listed whole.
        bucket.pages = None;
    }
    let mut store = store_below(bucket, &root, location);
    store.ordered_listing = ordered;
    Ok(store)
}

/// A store over a bucket's objects below `root`, named from there;
/// writers use compare-and-swap, as object stores put conditionally.
pub(super) fn store_below(bucket: Bucket, root: &Path, description: &str) -> Store {
    let inner = with_prefix(bucket.store, root);
    let store = Store::with_coordination(inner, description, Coordination::CompareAndSwap);
    match bucket.pages {
        Some(pages) => store.with_level_pages(pages, root.as_ref()),
        None => store,
    }
}

/// Whether the bucket lists in key order: S3's general purpose buckets,
/// GCS and Azure do; S3 Express directory buckets do not.
fn lists_in_key_order(url: &Url) -> bool {
    if !matches!(url.scheme(), "s3" | "s3a") {
        return true;
    }
    let express = object_store::aws::AmazonS3Builder::from_env()
        .with_url(&url[..url::Position::BeforePath])
        .get_config_value(&object_store::aws::AmazonS3ConfigKey::S3Express);
    let directory_bucket = url.host_str().is_some_and(|b| b.ends_with("--x-s3"));
    express.as_deref() != Some("true") && !directory_bucket
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_buckets_are_not_taken_to_list_in_key_order() {
        let ordered = |url: &str| lists_in_key_order(&Url::parse(url).unwrap());
        assert!(ordered("s3://bucket/prefix"));
        assert!(ordered("gs://bucket/prefix"));
        assert!(ordered("az://container/prefix"));
        assert!(!ordered("s3://data--usw2-az1--x-s3/prefix"));
    }

    use object_store::ObjectStoreExt;

    /// A server answering every request with `answer`, counting connections.
    async fn answering(answer: String) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        (port, connections)
    }

    /// A store or reference target on an allowed location that redirects
    /// must not make the server read where the redirect points (another
    /// host, a cloud metadata service): the read fails instead.
    #[tokio::test]
    async fn http_stores_follow_no_redirect() {
        let (secret, visits) =
            answering("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret".into()).await;
        for status in [
            "301 Moved Permanently",
            "302 Found",
            "307 Temporary Redirect",
        ] {
            let (port, _) = answering(format!(
                "HTTP/1.1 {status}\r\nLocation: http://127.0.0.1:{secret}/latest\r\nContent-Length: 0\r\n\r\n"
            ))
            .await;
            let url = Url::parse(&format!("http://127.0.0.1:{port}/data/")).unwrap();
            let store = bucket_store(&url).unwrap();
            let got = store.get(&Path::from("data/a")).await;
            assert!(got.is_err(), "{status}: followed");
            let opened = open_url(url.as_str()).unwrap();
            let got = opened.get(&super::super::StoreKey::new("a").unwrap()).await;
            assert!(got.is_err(), "{status}: followed");
        }
        assert_eq!(visits.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
