//! Fair use (see [`crate::auth::fair`]): a caller whose buckets are spent
//! is answered 429 with `Retry-After`; an answer is charged its bytes as
//! they are sent. Runs after authorization, which found who the caller is
//! and the rates they are held to.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;

use crate::auth::fair::{Buckets, Rate};
use crate::http::error::ApiError;
use crate::http::input::credentials::Caller;
use crate::http::state::AppState;

pub async fn admit<Fut>(
    state: &AppState,
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response
where
    Fut: std::future::Future<Output = Response>,
{
    let Some((caller, rate)) = request
        .extensions()
        .get::<Caller>()
        .and_then(|c| Some((c.bucket.clone()?, c.rate?)))
    else {
        return next(request).await;
    };
    let buckets = state.fair.clone();
    if let Err(wait) = buckets.admit(&caller, &rate, Instant::now()) {
        crate::metrics::count(&crate::metrics::FAIR_USE_REFUSED);
        let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
        let mut response = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("{caller} has used its share for now ({} bytes per second); retry after {seconds} s", rate.bytes_per_second),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let head = request.method() == Method::HEAD;
    let response = next(request).await;
    if head {
        return response;
    }
    response.map(|body| {
        Body::new(Charged {
            body,
            buckets,
            caller,
            rate,
        })
    })
}

/// A body that charges its caller's bucket the bytes of each frame sent.
struct Charged {
    body: Body,
    buckets: Arc<Buckets>,
    caller: String,
    rate: Rate,
}

impl http_body::Body for Charged {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let this = &*self;
                crate::metrics::add(&crate::metrics::FAIR_USE_BYTES, data.len() as u64);
                this.buckets
                    .charge(&this.caller, &this.rate, data.len() as u64);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
