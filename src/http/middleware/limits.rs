//! Load shedding, timeouts, per-route request metrics and the access log.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::error::{ApiError, X_REQUEST_ID};
use crate::http::server::idle::{Keeping, Watched};
use crate::http::state::AppState;

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
        .get::<Arc<crate::http::server::idle::Activity>>()
        .cloned();
    let Some(permit) = InFlight::take(&state.in_flight) else {
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
        Ok(response)
            if response
                .extensions()
                .get::<crate::http::output::LongLived>()
                .is_some() =>
        {
            response
        }
        Ok(response) => response.map(|body| {
            let held = Held::new(body, permit);
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

type Held = Keeping<Place>;

/// Requests in flight, against `--max-concurrency`. Nothing ever waits for
/// a place (a request over the limit is refused at once), so a counter is
/// enough: a semaphore took a lock on every release that all cores shared.
#[derive(Debug)]
pub struct InFlight {
    count: AtomicUsize,
    most: usize,
}

/// One request's place in flight, given back when dropped.
pub struct Place(Arc<InFlight>);

impl InFlight {
    pub fn new(most: usize) -> Arc<Self> {
        Arc::new(InFlight {
            count: AtomicUsize::new(0),
            most,
        })
    }

    /// A place, `None` when all are taken.
    pub fn take(this: &Arc<Self>) -> Option<Place> {
        let before = this.count.fetch_add(1, Ordering::Acquire);
        if before >= this.most {
            this.count.fetch_sub(1, Ordering::Release);
            return None;
        }
        Some(Place(this.clone()))
    }

    /// Requests in flight now.
    pub fn current(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Release);
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
    let elapsed = started.elapsed();
    let bytes = body_bytes(&response);
    state.metrics.observe(
        route.as_ref().map_or("(none)", |m| m.as_str()),
        method,
        response.status().as_u16(),
        elapsed.as_secs_f64(),
        bytes,
    );
    response
}

/// A line in the access log for every routed request, those the other
/// checks refuse included, where the access log is on. A request whose
/// client goes away before its answer starts is logged with status 499,
/// as nginx does.
pub async fn access_log<Fut>(request: Request, next: impl FnOnce(Request) -> Fut) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let Some(log) = crate::logging::access() else {
        return next(request).await;
    };
    // Clones that share the request's bytes: no copy of the path or id.
    let mut pending = Pending {
        log,
        route: request.extensions().get::<MatchedPath>().cloned(),
        method: request.method().clone(),
        uri: request.uri().clone(),
        id: request.headers().get(&X_REQUEST_ID).cloned(),
        started: Instant::now(),
        answered: false,
    };
    let response = next(request).await;
    pending.write(response.status().as_u16(), body_bytes(&response));
    response
}

/// The bytes an answer's body holds: its declared length, or the length of
/// a body built whole; 0 for a stream of unknown length.
fn body_bytes(response: &Response) -> u64 {
    response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .or_else(|| http_body::Body::size_hint(response.body()).exact())
        .unwrap_or(0)
}

/// A request on its way to the access log, written once: when its answer
/// starts, or when it is dropped before that.
struct Pending {
    log: &'static crate::logging::Access,
    route: Option<MatchedPath>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    id: Option<HeaderValue>,
    started: Instant,
    answered: bool,
}

/// What the access log records when the client left before an answer.
const CLIENT_CLOSED: u16 = 499;

impl Pending {
    fn write(&mut self, status: u16, bytes: u64) {
        self.answered = true;
        let id = self
            .id
            .as_ref()
            .map(|v| String::from_utf8_lossy(v.as_bytes()));
        self.log.log(&crate::logging::Request {
            method: self.method.as_str(),
            path: &super::audit::loggable(self.uri.path()),
            route: self.route.as_ref().map_or("(none)", |m| m.as_str()),
            status,
            bytes,
            micros: self.started.elapsed().as_micros() as u64,
            request_id: id.as_deref().unwrap_or(""),
        });
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.answered {
            self.write(CLIENT_CLOSED, 0);
        }
    }
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
/// `--max-header-bytes` with 431, bodies declared larger than
/// `--max-body-size` with 413, and writes whose body comes in a content
/// coding with 415, before any handler or store work. (hyper
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
    if let Some(refused) = unsupported_coding(&request) {
        return refused;
    }
    // A body declared larger than any the server takes is refused before
    // it is waited for (it was answered only once the limit had been read,
    // or after --body-timeout when the client waited for an answer first).
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let most = state.config.max_body_size;
    if let Some(size) = declared.filter(|&size| size > most) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the request body is {size} bytes; the limit is {most} (set with --max-body-size)"
            ),
        )
        .into_response();
    }
    next(request).await
}

/// Bodies are taken as sent: a `Content-Encoding` other than `identity`
/// on a write is refused (RFC 9110 §15.5.16), where it was stored as its
/// encoded bytes (a gzipped chunk readers could not decode).
fn unsupported_coding(request: &Request) -> Option<Response> {
    use axum::http::Method;
    if !matches!(
        *request.method(),
        Method::PUT | Method::POST | Method::PATCH
    ) {
        return None;
    }
    let coding = request.headers().get(header::CONTENT_ENCODING)?;
    let coding = String::from_utf8_lossy(coding.as_bytes());
    if coding.trim().eq_ignore_ascii_case("identity") {
        return None;
    }
    Some(
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            format!(
                "request bodies are taken as sent; Content-Encoding '{coding}' is not decoded here"
            ),
        )
        .into_response(),
    )
}

/// Bytes of the request target and header lines, as sent on the wire
/// (give or take the separators).
fn header_bytes(request: &Request) -> u64 {
    let uri = request.uri();
    // The target as sent, measured without writing it out again.
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len());
    let fields: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (target + fields) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_in_flight_are_limited_and_given_back() {
        let limit = InFlight::new(2);
        let a = InFlight::take(&limit).unwrap();
        let b = InFlight::take(&limit).unwrap();
        assert!(
            InFlight::take(&limit).is_none(),
            "a third request over a limit of two"
        );
        assert_eq!(limit.current(), 2);
        drop(a);
        let c = InFlight::take(&limit).unwrap();
        drop((b, c));
        assert_eq!(limit.current(), 0);
    }
}
