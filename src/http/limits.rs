//! Load shedding, timeouts and per-route request metrics.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// At most `--max-concurrency` requests at once (one semaphore shared by
/// every route): more get 503 with `Retry-After` at once rather than queueing
/// without bound. A request holds its place until its response body has been
/// sent (a streamed `.npy` of gigabytes is in flight until its last byte),
/// and its upload counts too. Liveness (`/healthz`) is never shed: an
/// overloaded server is alive. A request that does not start its response
/// within `--request-timeout` gets 504.
pub async fn shed<Fut>(
    state: &AppState,
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    if request.uri().path() == "/healthz" {
        return next(request).await;
    }
    // An HTTP/2 connection, whose responses are watched for stalls.
    let connection = request
        .extensions()
        .get::<Arc<super::idle::Activity>>()
        .cloned();
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        crate::metrics::count(&crate::metrics::LOAD_SHED);
        let mut r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the server is at its concurrency limit; retry shortly",
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    match tokio::time::timeout(state.config.request_timeout, next(request)).await {
        // A stream that lasts as long as its client (a watch) counts
        // against its own limit, not against requests in flight.
        Ok(response) if response.extensions().get::<super::LongLived>().is_some() => response,
        Ok(response) => response.map(|body| {
            let held = Held {
                body,
                _keep: permit,
            };
            match connection {
                Some(c) if !http_body::Body::is_end_stream(&held) => {
                    Body::new(Watched::new(held, state.config.body_timeout, c))
                }
                _ => Body::new(held),
            }
        }),
        Err(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took longer than the server's --request-timeout",
        )
        .into_response(),
    }
}

/// A response body that keeps `K` until it ends (or the client goes away
/// and it is dropped): its request's concurrency permit here, an HTTP/2
/// connection's count of open requests in `idle`.
pub(super) struct Keeping<K> {
    pub body: Body,
    pub _keep: K,
}

type Held = Keeping<tokio::sync::OwnedSemaphorePermit>;

impl<K: Unpin> http_body::Body for Keeping<K> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        http_body::Body::poll_frame(Pin::new(&mut self.body), cx)
    }

    fn is_end_stream(&self) -> bool {
        http_body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::Body::size_hint(&self.body)
    }
}

/// An HTTP/2 response body whose connection is closed once its client
/// has taken none of it for `timeout`, as `serve::Stalling` closes an
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
struct Watched {
    body: Held,
    /// What is left of the frame being handed over.
    rest: axum::body::Bytes,
    progress: Arc<Progress>,
    watchdog: tokio::task::AbortHandle,
}

/// The most of a response an HTTP/2 stream is handed at once.
const PIECE: usize = 64 << 10;

struct Progress {
    /// Polls so far.
    asked: AtomicU64,
    /// The last poll handed the client a frame (or none was asked for
    /// yet): what follows waits on the client.
    waiting: AtomicBool,
}

impl Watched {
    fn new(body: Held, timeout: Duration, connection: Arc<super::idle::Activity>) -> Self {
        let progress = Arc::new(Progress {
            asked: AtomicU64::new(0),
            waiting: AtomicBool::new(true),
        });
        let watched = Arc::downgrade(&progress);
        let watchdog = tokio::spawn(async move {
            let mut seen = None;
            loop {
                tokio::time::sleep(timeout).await;
                let Some(progress) = watched.upgrade() else {
                    return;
                };
                let asked = progress.asked.load(Ordering::Acquire);
                if seen == Some(asked) && progress.waiting.load(Ordering::Acquire) {
                    return connection.stalled();
                }
                seen = Some(asked);
            }
        })
        .abort_handle();
        Watched {
            body,
            rest: axum::body::Bytes::new(),
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
        self.progress.asked.fetch_add(1, Ordering::AcqRel);
        self.progress.waiting.store(false, Ordering::Release);
        let polled = if self.rest.is_empty() {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut data) => {
                        let piece = data.split_to(data.len().min(PIECE));
                        self.rest = data;
                        Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
                    }
                    Err(trailers) => Poll::Ready(Some(Ok(trailers))),
                },
                other => other,
            }
        } else {
            let n = self.rest.len().min(PIECE);
            let piece = self.rest.split_to(n);
            Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
        };
        if let Poll::Ready(Some(Ok(_))) = &polled {
            self.progress.waiting.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && http_body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let inner = http_body::Body::size_hint(&self.body);
        let rest = self.rest.len() as u64;
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// Count requests, latency and bytes per matched route.
pub async fn observe<Fut>(
    state: &AppState,
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    // A clone of the matched route shares its string: no allocation per request.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = method_name(request.method());
    let started = Instant::now();
    let response = next(request).await;
    let bytes = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    state.metrics.observe(
        route.as_ref().map_or("(none)", |m| m.as_str()),
        method,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
        bytes,
    );
    response
}

/// Methods as static names for metric labels; anything unusual is "other".
fn method_name(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Refuse requests whose target and headers together exceed
/// `--max-header-bytes` with 431, before any handler or store work. (hyper
/// caps what it buffers at a few hundred KiB; this is the configurable,
/// tighter limit, with a JSON error saying what was too large.)
pub async fn headers<Fut>(
    state: &AppState,
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let limit = state.config.max_header_bytes;
    let size = header_bytes(&request);
    if size > limit {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!("the request target and headers are {size} bytes; the limit is {limit}"),
        )
        .into_response();
    }
    next(request).await
}

/// Bytes of the request target and header lines, as sent on the wire
/// (give or take the separators).
fn header_bytes(request: &Request) -> u64 {
    let target = request.uri().to_string().len();
    let fields: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (target + fields) as u64
}
