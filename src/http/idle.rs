//! Closing HTTP/2 connections that carry no requests, or whose client
//! stopped taking a response. HTTP/1.1 connections are closed by hyper's
//! deadline for the next request head, and by `serve::Stalling` when the
//! client stops reading; an HTTP/2 connection answers pings while it waits
//! for streams, and a client can stall one stream (granting it no
//! flow-control window) while the connection stays busy, so neither
//! applies to it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use tower::Service;

use super::limits::Keeping;

/// The requests of one connection: how many are open, and when the last
/// one ended.
pub struct Activity {
    started: Instant,
    open: AtomicUsize,
    /// Milliseconds after `started` at which the last request ended.
    ended_ms: AtomicU64,
    /// Told when a response of the connection has stalled.
    stalled: tokio::sync::Notify,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Activity {
            started: Instant::now(),
            open: AtomicUsize::new(0),
            ended_ms: AtomicU64::new(0),
            stalled: tokio::sync::Notify::new(),
        })
    }

    /// Close the connection: its client has stopped taking a response.
    pub fn stalled(&self) {
        self.stalled.notify_one();
    }

    /// Resolves once a response of the connection has stalled.
    pub async fn until_stalled(&self) {
        self.stalled.notified().await
    }

    fn begin(self: &Arc<Self>) -> Open {
        self.open.fetch_add(1, Ordering::AcqRel);
        Open(self.clone())
    }

    /// Resolves once the connection has had no open request for `idle`.
    pub async fn idle_for(&self, idle: Duration) {
        loop {
            if self.open.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(idle).await;
                continue;
            }
            let ended = Duration::from_millis(self.ended_ms.load(Ordering::Acquire));
            let due = self.started + ended + idle;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due.into()).await;
        }
    }
}

/// One open request; it ends when its response body is done or dropped.
struct Open(Arc<Activity>);

impl Drop for Open {
    fn drop(&mut self) {
        let at = self.0.started.elapsed().as_millis() as u64;
        self.0.ended_ms.fetch_max(at, Ordering::AcqRel);
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The router, counting the requests of one connection into `activity`.
#[derive(Clone)]
pub struct Tracked {
    pub app: Router,
    pub activity: Arc<Activity>,
}

impl<B> Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let open = self.activity.begin();
        let mut request = request.map(Body::new);
        // For the response's stall watch (`limits::shed`).
        request.extensions_mut().insert(self.activity.clone());
        let answer = self.app.call(request);
        Box::pin(async move {
            let response = answer.await?;
            // The request ends when its response body is done or dropped.
            Ok(response.map(|body| Body::new(Keeping { body, _keep: open })))
        })
    }
}
