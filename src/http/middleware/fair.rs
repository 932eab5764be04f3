//! Fair use (see [`crate::auth::fair`]): a caller whose buckets are spent
//! is answered 429 with `Retry-After`; an answer is charged its bytes as
//! they are sent, and once the caller's bucket is below empty it waits
//! for the bucket to refill before sending more, so no single answer
//! takes more than the caller's rate. Runs after authorization, which
//! found who the caller is and the rates they are held to.

use std::future::Future;
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
            rest: None,
            pause: None,
        })
    })
}

/// The most an answer sends before it is charged: larger frames are sent
/// in pieces, so a caller's debt is at most one piece.
const PIECE: usize = 1 << 20;

/// A body that charges its caller's bucket the bytes of each piece sent,
/// and waits while the bucket is below empty.
struct Charged {
    body: Body,
    buckets: Arc<Buckets>,
    caller: String,
    rate: Rate,
    /// What is left of a frame larger than a piece.
    rest: Option<bytes::Bytes>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Charged {
    /// The next piece of `data`, the rest kept; charged.
    fn piece(&mut self, mut data: bytes::Bytes) -> bytes::Bytes {
        if data.len() > PIECE {
            self.rest = Some(data.split_off(PIECE));
        }
        crate::metrics::add(&crate::metrics::FAIR_USE_BYTES, data.len() as u64);
        let wait = self
            .buckets
            .charge(&self.caller, &self.rate, data.len() as u64, Instant::now());
        if !wait.is_zero() {
            self.pause = Some(Box::pin(tokio::time::sleep(wait)));
        }
        data
    }
}

impl http_body::Body for Charged {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.rest.is_none() {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.rest = Some(data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                // The end is not waited for: what is owed stays owed, and
                // the caller's next request waits (429) instead.
                other => return other,
            }
        }
        if let Some(pause) = self.pause.as_mut() {
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        match self.rest.take() {
            Some(data) => {
                let piece = self.piece(data);
                Poll::Ready(Some(Ok(Frame::data(piece))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let mut hint = self.body.size_hint();
        if let Some(rest) = &self.rest {
            let more = rest.len() as u64;
            hint.set_lower(hint.lower() + more);
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper + more);
            }
        }
        hint
    }
}
