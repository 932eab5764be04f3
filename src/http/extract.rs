//! Extractors whose rejections are JSON errors like every other error.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Query<T>` that rejects with a JSON 400 naming the problem.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request("bad_query", format!("query parameters: {}", e.body_text()))
            })
    }
}

/// `Path<T>` that rejects with a JSON 400 naming the problem.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e: PathRejection| {
                ApiError::bad_request("bad_path", format!("path: {}", e.body_text()))
            })
    }
}
