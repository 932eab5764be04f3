//! Closing HTTP/2 connections that carry no requests, or whose client
//! stopped taking a response. HTTP/1.1 connections are closed by hyper's
//! deadline for the next request head, and by `socket::ClientSocket` when the
//! client stops reading; an HTTP/2 connection answers pings while it waits
//! for streams, and a client can stall one stream (granting it no
//! flow-control window) while the connection stays busy, so neither
//! applies to it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use tower::Service;

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
    pub app: super::app::App,
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
            Ok(response.map(|body| Body::new(Keeping::new(body, open))))
        })
    }
}

/// A response body that keeps `K` until it ends (or the client goes away
/// and it is dropped): its request's concurrency permit here, an HTTP/2
/// connection's count of open requests in `idle`, an answer's memory
/// reservation. It hands its body over in pieces of at most
/// [`KEEP_PIECE`]: the server asks for the next piece once it has written
/// the last, so `K` lasts until the client has nearly all of the answer,
/// where a whole answer handed over as one frame would let go of it the
/// moment the frame was queued for a client that may never read it.
pub struct Keeping<K> {
    body: Body,
    rest: Pieces<KEEP_PIECE>,
    _keep: K,
}

/// The most of a frame a [`Keeping`] body hands over at once.
const KEEP_PIECE: usize = 1 << 20;

impl<K> Keeping<K> {
    pub fn new(body: Body, keep: K) -> Self {
        Keeping {
            body,
            rest: Pieces::default(),
            _keep: keep,
        }
    }
}

impl<K: Unpin> http_body::Body for Keeping<K> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        this.rest.poll(&mut this.body, cx)
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && http_body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.rest.size_hint(&self.body)
    }
}

/// What is left of a frame being handed over in pieces of at most `N`
/// bytes (splitting `Bytes` shares them, it copies nothing).
#[derive(Default)]
struct Pieces<const N: usize> {
    rest: axum::body::Bytes,
}

impl<const N: usize> Pieces<N> {
    /// The next piece: of the frame being handed over, else of the next
    /// frame of `body`.
    fn poll<B>(
        &mut self,
        body: &mut B,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<axum::body::Bytes>, axum::Error>>>
    where
        B: http_body::Body<Data = axum::body::Bytes, Error = axum::Error> + Unpin,
    {
        if self.rest.is_empty() {
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.rest = data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                other => return other,
            }
        }
        let n = self.rest.len().min(N);
        Poll::Ready(Some(Ok(http_body::Frame::data(self.rest.split_to(n)))))
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// `body`'s size hint with what is left of the frame.
    fn size_hint<B: http_body::Body>(&self, body: &B) -> http_body::SizeHint {
        let inner = body.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// A response body holding its request's place among those in flight.
type Held = Keeping<crate::http::middleware::limits::Place>;

/// An HTTP/2 response body whose connection is closed once its client
/// has taken none of it for `timeout`, as `socket::ClientSocket` closes an
/// HTTP/1.1 connection. A client can stop one stream (by granting it no
/// flow-control window) while its connection stays busy with others and
/// with pings, so the connection's own stall check never fires; and hyper
/// does not poll a body it has no window for, so the body cannot time
/// itself out: a watchdog task does.
///
/// The body is handed over in pieces of at most [`PIECE`]: hyper asks for
/// the next frame only once the stream has window for more, so each ask
/// is the client's progress, and the body (with its place) lasts until
/// the client has nearly all of it. Whole frames (a 16 MiB slab, a whole
/// JSON answer) would be copied into the stream's send buffer at once,
/// leaving nothing to measure a slow client by and nothing to free when
/// it stops.
pub struct Watched {
    body: Held,
    rest: Pieces<PIECE>,
    progress: Arc<Progress>,
    watchdog: tokio::task::AbortHandle,
}

/// The most of a response an HTTP/2 stream is handed at once.
const PIECE: usize = 64 << 10;

struct Progress {
    /// When the client last took a piece (or the stream began), in
    /// milliseconds since `start`.
    moved: AtomicU64,
    /// The last poll handed the client a frame (or none was asked for
    /// yet): what follows waits on the client.
    waiting: AtomicBool,
    start: std::time::Instant,
}

impl Progress {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// How often the watchdog looks, as a share of the timeout: a stalled
/// stream is closed between 1 and 1.25 timeouts after its last progress.
const LOOKS_PER_TIMEOUT: u32 = 4;

impl Watched {
    pub fn new(body: Held, timeout: Duration, connection: Arc<Activity>) -> Self {
        let progress = Arc::new(Progress {
            moved: AtomicU64::new(0),
            waiting: AtomicBool::new(true),
            start: std::time::Instant::now(),
        });
        let watched = Arc::downgrade(&progress);
        let limit = timeout.as_millis() as u64;
        let watchdog = tokio::spawn(async move {
            loop {
                tokio::time::sleep(timeout / LOOKS_PER_TIMEOUT).await;
                let Some(progress) = watched.upgrade() else {
                    return;
                };
                let idle = progress
                    .now()
                    .saturating_sub(progress.moved.load(Ordering::Acquire));
                if idle >= limit && progress.waiting.load(Ordering::Acquire) {
                    return connection.stalled();
                }
            }
        })
        .abort_handle();
        Watched {
            body,
            rest: Pieces::default(),
            progress,
            watchdog,
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

impl http_body::Body for Watched {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let now = self.progress.now();
        self.progress.moved.store(now, Ordering::Release);
        self.progress.waiting.store(false, Ordering::Release);
        let this = &mut *self;
        let polled = this.rest.poll(&mut this.body, cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            self.progress.waiting.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && http_body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.rest.size_hint(&self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a `Keeping` body keeps lasts until the last piece of a large
    /// frame is taken: a connection asks for a piece only once it has
    /// written the one before, so a client that reads nothing never lets
    /// the server drop it while the frame waits in a buffer.
    #[tokio::test]
    async fn a_kept_thing_lasts_until_the_last_piece_is_taken() {
        use http_body::Body as _;
        let kept = Arc::new(());
        let frame = axum::body::Bytes::from(vec![7u8; 3 * KEEP_PIECE + 5]);
        let mut body = Keeping::new(Body::from(frame), kept.clone());
        assert_eq!(body.size_hint().exact(), Some(3 * KEEP_PIECE as u64 + 5));
        let mut pieces = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let data = frame.unwrap().into_data().unwrap();
            pieces.push(data.len());
            if !body.is_end_stream() {
                assert_eq!(Arc::strong_count(&kept), 2, "let go before the end");
            }
        }
        assert_eq!(pieces, [KEEP_PIECE, KEEP_PIECE, KEEP_PIECE, 5]);
        drop(body);
        assert_eq!(Arc::strong_count(&kept), 1);
    }
}
