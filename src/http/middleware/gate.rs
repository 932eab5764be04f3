//! The checks every routed request passes, in one middleware: the access
//! log, errors as S3 XML under `/s3` and WMS exception reports under
//! `/wms`, and with the request id in JSON error
//! bodies, the header size limit (and a body's declared size and content coding), load
//! shedding and the request timeout, per-route metrics, authorization, fair
//! use, and turning a handler's panic into a 500, in that order (outermost
//! first).
//!
//! Each check is a plain async function of the request and what comes
//! after it, composed here into one future. As separate tower layers each
//! cost a boxed future and a clone of the inner service per request: the
//! six together took a quarter of the throughput of a cached metadata GET
//! (`bench/profile.md`).

use std::panic::AssertUnwindSafe;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

use super::auth;
use super::fair;
use super::limits;
use crate::http::error;
use crate::http::error::ApiError;
use crate::http::handlers::{s3, wms};
use crate::http::state::AppState;

pub async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let state = &state;
    limits::access_log(request, |r| {
        s3::xml_errors(r, |r| {
            wms::exception_reports(r, |r| {
                error::request_id_in_errors(r, |r| {
                    limits::headers(state, r, |r| {
                        limits::shed(state, r, |r| {
                            limits::observe(state, r, |r| {
                                auth::authorize(state, r, |r| {
                                    fair::admit(state, r, |r| caught(next.run(r)))
                                })
                            })
                        })
                    })
                })
            })
        })
    })
    .await
}

/// A bug must cost one request a 500, not its connection an abort.
async fn caught(answer: impl std::future::Future<Output = Response>) -> Response {
    match AssertUnwindSafe(answer).catch_unwind().await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed on this request; its x-request-id identifies it in the logs",
        )
        .into_response(),
    }
}
