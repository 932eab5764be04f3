//! The outermost service, which every request and response passes before
//! routing: trailing slashes of API paths, request ids, CORS and
//! compression.
//!
//! The first three are done here by hand rather than by tower layers. As
//! layers (`SetRequestId`, `PropagateRequestId`, `Cors`, and a `Router`
//! around the router to rewrite paths before it matches) they took a
//! quarter of a cached metadata GET's throughput (`bench/profile.md`): a
//! future, a clone of the whole stack and a map of headers per request and
//! layer. Requests without an `Origin` (every client but a browser) get
//! the headers tower-http's CORS gives such a request, worked out once at
//! start; browsers' requests and preflights go through it as before.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::response::Response;
use axum::Router;
use futures::future::Either;
use futures::FutureExt;
use tower::{Layer, Service, ServiceExt};
use tower_http::compression::Compression;
use tower_http::cors::{Cors, CorsLayer};

use crate::http::error::X_REQUEST_ID;

/// The whole HTTP service: what [`crate::http::router`] builds. One `Arc`, so
/// the clone hyper makes per request is one reference count.
/// The routes and what wraps them, and the address of the connection
/// this copy serves (set per connection by the server).
#[derive(Clone)]
pub struct App(Arc<Parts>, Option<std::net::IpAddr>);

/// The routes, compressing what [`crate::http::output::compression::compressible`] allows.
pub(crate) type Routes = Compression<Router, crate::http::output::compression::Compressible>;

struct Parts {
    routes: Routes,
    /// The same routes behind tower-http's CORS, for browsers' requests.
    cors: Cors<Routes>,
    /// What CORS adds to a response to a request without `Origin`.
    cors_constant: Vec<(HeaderName, HeaderValue)>,
    ids: RequestIds,
}

impl App {
    pub(crate) fn new(routes: Routes, cors: CorsLayer) -> Self {
        let cors_constant = headers_without_origin(&cors);
        App(
            Arc::new(Parts {
                cors: cors.layer(routes.clone()),
                routes,
                cors_constant,
                ids: RequestIds::new(),
            }),
            None,
        )
    }

    /// This app for a connection from `peer`.
    pub(crate) fn for_peer(&self, peer: std::net::IpAddr) -> App {
        App(self.0.clone(), Some(peer))
    }
}

/// The headers `cors` gives a response to a plain request without
/// `Origin`. They depend on the configuration only (a request without
/// `Origin` matches no listed origin), so asking once is asking always.
fn headers_without_origin(cors: &CorsLayer) -> Vec<(HeaderName, HeaderValue)> {
    let empty =
        tower::service_fn(|_: Request| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let asked = cors
        .layer(empty)
        .oneshot(Request::new(Body::empty()))
        .now_or_never();
    match asked {
        Some(Ok(response)) => response
            .headers()
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        // tower-http answers from the inner response at once; should a
        // later version not, every request takes the CORS path.
        _ => Vec::new(),
    }
}

impl<B> Service<axum::http::Request<B>> for App
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A router is always ready, and so is what wraps it here.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let parts = &self.0;
        let mut request = trim_api_slash(request.map(Body::new));
        if let Some(peer) = self.1 {
            request
                .extensions_mut()
                .insert(crate::http::input::credentials::ClientAddr(peer));
        }
        let id = match request.headers().get(&X_REQUEST_ID) {
            Some(id) => id.clone(),
            None => {
                let id = parts.ids.next();
                request
                    .headers_mut()
                    .insert(X_REQUEST_ID.clone(), id.clone());
                id
            }
        };
        let browser = request.headers().contains_key(header::ORIGIN)
            || request.method() == Method::OPTIONS
            || parts.cors_constant.is_empty();
        let answer = if browser {
            Either::Left(parts.cors.clone().call(request))
        } else {
            Either::Right(parts.routes.clone().call(request))
        };
        let parts = self.0.clone();
        Box::pin(async move {
            let mut response = answer.await?.map(Body::new);
            let headers = response.headers_mut();
            if !browser {
                for (name, value) in &parts.cors_constant {
                    // As tower-http does: Vary adds to what the response
                    // varies by, the rest are the CORS layer's to set.
                    if name == header::VARY {
                        headers.append(name, value.clone());
                    } else {
                        headers.insert(name, value.clone());
                    }
                }
            }
            if !headers.contains_key(&X_REQUEST_ID) {
                headers.insert(X_REQUEST_ID.clone(), id);
            }
            Ok(response)
        })
    }
}

/// Drop trailing slashes from the paths of `/api/v1/...` reads (not from
/// `/zarr/`, where a trailing slash asks for a listing; writes name their
/// node exactly): `/api/v1/tree/` is the tree of the root, as
/// `/api/v1/tree` is.
fn trim_api_slash(mut request: Request) -> Request {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let path = request.uri().path();
    if read && path.starts_with("/api/v1/") && path.len() > "/api/v1/".len() && path.ends_with('/')
    {
        let trimmed = path.trim_end_matches('/').to_string();
        let target = match request.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed,
        };
        if let Ok(uri) = target.parse() {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// Request ids for requests that come without one: a random per-process
/// prefix, the thread's number and a counter of that thread's, unique across
/// replicas without a system call (as a random UUID per request costs) and
/// without a counter every core increments in turn.
struct RequestIds {
    prefix: u64,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl RequestIds {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is seeded from the OS's random source once per process.
        let prefix = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        RequestIds { prefix }
    }

    fn next(&self) -> HeaderValue {
        thread_local! {
            static COUNT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        let count = COUNT.with(|c| {
            let n = c.get();
            c.set(n.wrapping_add(1));
            n
        });
        // 2^40 ids per thread before one repeats, for 2^24 threads.
        let thread = crate::per_thread::thread_number() as u64;
        let n = (thread << 40) | (count & ((1 << 40) - 1));
        let mut id = [0u8; 32];
        let bytes = self.prefix.to_be_bytes();
        for (i, byte) in bytes.iter().chain(&n.to_be_bytes()).enumerate() {
            id[2 * i] = HEX[usize::from(byte >> 4)];
            id[2 * i + 1] = HEX[usize::from(byte & 15)];
        }
        HeaderValue::from_bytes(&id).expect("hex digits are a header value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_distinct_hex() {
        let ids = std::sync::Arc::new(RequestIds::new());
        let (a, b) = (ids.next(), ids.next());
        assert_ne!(a, b);
        let other = {
            let ids = ids.clone();
            std::thread::spawn(move || ids.next()).join().unwrap()
        };
        assert!(other != a && other != b, "another thread's ids differ");
        for id in [a, b, other] {
            let text = id.to_str().unwrap();
            assert_eq!(text.len(), 32);
            assert!(text.bytes().all(|c| c.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn api_reads_lose_their_trailing_slash() {
        let trimmed = |method: Method, uri: &str| {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap();
            trim_api_slash(request).uri().to_string()
        };
        assert_eq!(trimmed(Method::GET, "/api/v1/tree/"), "/api/v1/tree");
        assert_eq!(
            trimmed(Method::GET, "/api/v1/meta/a//?x=1"),
            "/api/v1/meta/a?x=1"
        );
        assert_eq!(trimmed(Method::GET, "/zarr/a/"), "/zarr/a/");
        assert_eq!(trimmed(Method::PUT, "/api/v1/meta/a/"), "/api/v1/meta/a/");
        assert_eq!(trimmed(Method::GET, "/api/v1/"), "/api/v1/");
    }
}
