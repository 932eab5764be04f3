//! `GET /api/v1/preview/{path}`: a small picture of an array for the
//! viewer's tree (drawn and kept by [`crate::http::output::thumbnail`]),
//! answered with its ETag so browsers revalidate it cheaply.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use crate::http::error::ApiResult;
use crate::http::input::extract::ApiPath;
use crate::http::output::image::image;
use crate::http::state::AppState;
use crate::store::node_path;

pub async fn preview(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let key = node_path(&path)?;
    let kept = state
        .previews
        .get(&state.service, &key, state.config.max_image_pixels)
        .await?;
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == kept.etag));
    let mut response = if fresh {
        let mut r = image(Vec::new());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r.headers_mut().remove(header::CONTENT_TYPE);
        r
    } else {
        image(kept.png.to_vec())
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&kept.etag) {
        h.insert(header::ETAG, v);
    }
    // Browsers ask again each time, and get a 304 while it is unchanged.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
