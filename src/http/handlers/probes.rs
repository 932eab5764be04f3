//! What operators and tools ask of the server itself: liveness, readiness,
//! Prometheus metrics (the request families kept by [`crate::metrics`],
//! the cache, memory and store families gathered here) and the API's own
//! description.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::http::state::AppState;

/// Alive: the process answers.
pub async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// Ready when the store answers: a HEAD of one key, present or not, works
/// on every backend (listing does not on plain HTTP stores).
pub async fn readyz(State(state): State<AppState>) -> Response {
    let key =
        crate::store::StoreKey::new("zarr.json").unwrap_or_else(|_| crate::store::StoreKey::root());
    match state.store.head(&key).await {
        Ok(_) => {
            axum::Json(serde_json::json!({"status": "ready", "store": state.store.description()}))
                .into_response()
        }
        Err(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the store is not reachable: {e}"),
        )
        .into_response(),
    }
}

const OPENAPI: &str = include_str!("../../../openapi.yaml");

pub async fn metrics(State(state): State<AppState>) -> Response {
    use crate::metrics::{
        read, CHUNKS_DECODED, CHUNKS_ENCODED, FAIR_USE_BYTES, FAIR_USE_REFUSED, LOAD_SHED,
        STORE_ERRORS,
    };
    let c = state.service.cache().stats();
    let u = state.store.update_totals();
    let extra = [
        (
            "zarrd_cache_hits_total",
            "Chunk cache hits.",
            "counter",
            c.hits as f64,
        ),
        (
            "zarrd_cache_misses_total",
            "Chunk cache misses.",
            "counter",
            c.misses as f64,
        ),
        (
            "zarrd_cache_revalidations_total",
            "Cache entries revalidated against the store.",
            "counter",
            c.revalidations as f64,
        ),
        (
            "zarrd_cache_evictions_total",
            "Chunk cache evictions.",
            "counter",
            c.evictions as f64,
        ),
        (
            "zarrd_cache_bytes",
            "Bytes held by the chunk cache.",
            "gauge",
            c.weighted_bytes as f64,
        ),
        (
            "zarrd_cache_entries",
            "Entries in the chunk cache.",
            "gauge",
            c.entries as f64,
        ),
        (
            "zarrd_cache_capacity_bytes",
            "Capacity of the chunk cache.",
            "gauge",
            c.capacity_bytes as f64,
        ),
        (
            "zarrd_chunks_decoded_total",
            "Chunks decoded.",
            "counter",
            read(&CHUNKS_DECODED),
        ),
        (
            "zarrd_chunks_encoded_total",
            "Chunks encoded.",
            "counter",
            read(&CHUNKS_ENCODED),
        ),
        (
            "zarrd_lock_waits_total",
            "Chunk lock acquisitions that had to wait.",
            "counter",
            u.lock_waits as f64,
        ),
        (
            "zarrd_lock_wait_seconds_total",
            "Time spent waiting for chunk locks.",
            "counter",
            u.lock_wait_micros as f64 / 1e6,
        ),
        (
            "zarrd_cas_retries_total",
            "Compare-and-swap retries after a conflict.",
            "counter",
            u.cas_retries as f64,
        ),
        (
            "zarrd_cas_conflicts_total",
            "Writes that gave up after repeated conflicts.",
            "counter",
            u.cas_conflicts as f64,
        ),
        (
            "zarrd_store_errors_total",
            "Store errors answered with 502.",
            "counter",
            read(&STORE_ERRORS),
        ),
        (
            "zarrd_memory_budget_bytes",
            "Memory answers may reserve at once (--memory-budget).",
            "gauge",
            state.service.budget().total() as f64,
        ),
        (
            "zarrd_memory_reserved_bytes",
            "Memory reserved by answers in progress.",
            "gauge",
            state.service.budget().reserved() as f64,
        ),
        (
            "zarrd_memory_refused_total",
            "Requests refused with 503 because the memory budget was spent.",
            "counter",
            crate::service::BUDGET_REFUSED.load(std::sync::atomic::Ordering::Relaxed) as f64,
        ),
        (
            "zarrd_load_shed_total",
            "Requests refused with 503 because the server was at its concurrency limit.",
            "counter",
            read(&LOAD_SHED),
        ),
        (
            "zarrd_fair_use_refused_total",
            "Requests refused with 429 because their caller had used its share.",
            "counter",
            read(&FAIR_USE_REFUSED),
        ),
        (
            "zarrd_fair_use_bytes_total",
            "Bytes answered to callers held to a fair-use rate.",
            "counter",
            read(&FAIR_USE_BYTES),
        ),
    ];
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&extra),
    )
        .into_response()
}

pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI).into_response()
}
