//! `GET /api/v1/preview/{path}`: a small picture of an array for the
//! viewer's tree. The service picks the strided read; this draws it (a
//! colormapped field, RGB, or a line for a series) and keeps the PNG for as
//! long as the subtree it was read from is unchanged through this server
//! and, past what `--recheck-cached` trusts by age, the array's document
//! and the chunks it was drawn from keep their ETags.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::error::{ApiError, ApiResult};
use super::extract::ApiPath;
use super::output::{colormaps, draw as draw_png, drawable, encode_png, image, Render};
use super::AppState;
use crate::config::Recheck;
use crate::service::{Content, Preview, PreviewKind};
use crate::store::node_path;
use crate::zarr::fill::element_as_f64;
use crate::zarr::ArrayBytes;

/// Longest side of a thumbnail, in pixels.
const SIZE: u64 = 128;
/// A series is drawn this tall.
const SERIES_HEIGHT: u32 = 48;
/// Bytes of PNGs kept.
const CACHE_BYTES: u64 = 32 << 20;

#[derive(Clone)]
struct Kept {
    png: Bytes,
    etag: String,
    version: u64,
    at: Instant,
    /// What it was drawn from (see `Preview::sources`).
    sources: std::sync::Arc<Vec<(crate::store::StoreKey, Option<String>)>>,
}

/// Thumbnails already drawn, by array path.
pub struct Previews {
    cache: moka::future::Cache<String, Kept>,
    /// How long one is trusted without a look at the store; `None`: until
    /// something below its array changes through this server.
    trust: Option<Duration>,
}

impl std::fmt::Debug for Previews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Previews")
            .field("entries", &self.cache.entry_count())
            .field("trust", &self.trust)
            .finish()
    }
}

impl Previews {
    pub fn new(recheck: Recheck) -> Self {
        Previews {
            cache: moka::future::Cache::builder()
                .max_capacity(CACHE_BYTES)
                .weigher(|k: &String, v: &Kept| {
                    u32::try_from(k.len() + v.png.len() + 64).unwrap_or(u32::MAX)
                })
                .build(),
            trust: match recheck {
                Recheck::Always => Some(Duration::ZERO),
                Recheck::After(d) => Some(d),
                Recheck::Never => None,
            },
        }
    }

    /// Whether a kept thumbnail still shows its array: nothing changed
    /// through this server, and, once `--recheck-cached` no longer trusts
    /// it by age, the array's document and the chunks it was drawn from
    /// unchanged by their ETags (a few hundred looks at most, instead of
    /// reading and drawing it again).
    async fn current(&self, service: &crate::service::Service, kept: &Kept, version: u64) -> bool {
        if kept.version != version {
            return false;
        }
        if self.trust.is_none_or(|t| kept.at.elapsed() < t) {
            return true;
        }
        service.unchanged(&kept.sources).await.unwrap_or(false)
    }
}

pub async fn preview(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let key = node_path(&path)?;
    let version = state.service.cache().subtree_version(&key);
    let previews = &state.previews;
    let mut kept = previews.cache.get(key.as_str()).await;
    let current = match &kept {
        Some(k) => previews.current(&state.service, k, version).await,
        None => false,
    };
    if !current {
        // Requests for the same thumbnail at once share one drawing.
        previews.cache.invalidate(key.as_str()).await;
        let service = &state.service;
        let max_pixels = state.config.max_image_pixels;
        let drawn = previews
            .cache
            .try_get_with(key.as_str().to_string(), async {
                let preview = service.preview(&key, SIZE).await?;
                let png = Bytes::from(draw(&preview, max_pixels)?);
                let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&png))[..32]);
                Ok::<_, ApiError>(Kept {
                    png,
                    etag,
                    version: preview.version,
                    at: Instant::now(),
                    sources: std::sync::Arc::new(preview.sources),
                })
            })
            .await
            .map_err(|e: std::sync::Arc<ApiError>| (*e).clone())?;
        kept = Some(drawn);
    }
    let Some(kept) = kept else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "a thumbnail was drawn but not kept",
        ));
    };
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

fn draw(preview: &Preview, max_pixels: u64) -> ApiResult<Vec<u8>> {
    let data = &preview.data;
    if preview.kind != PreviewKind::Series {
        // The default colormap and robust range, as `format=png` draws.
        let render = Render {
            max_pixels,
            ..Render::default()
        };
        return Ok(draw_png(data, &render)?.png);
    }
    let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "a thumbnail was handed streamed data",
        ));
    };
    let size = data.dtype.size().unwrap_or(1).max(1);
    let values = drawable(bytes, data, |v| v);
    if element_as_f64(&data.dtype, &vec![0; size]).is_none() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_drawable",
            format!("{} values cannot be drawn", data.dtype.name()),
        ));
    }
    let width = SIZE as u32;
    let rgba = line(&values, width, SERIES_HEIGHT);
    encode_png(width, SERIES_HEIGHT, &rgba)
}

/// A series as a line on a transparent background: each point joined to the
/// next, gaps (NaN, fill) left open.
fn line(values: &[Option<f64>], width: u32, height: u32) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let mut rgba = vec![0u8; w * h * 4];
    let finite = values.iter().flatten();
    let lo = finite.clone().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return rgba;
    }
    let span = if hi > lo { hi - lo } else { 1.0 };
    // The default colormap's middle, so series and fields look of a piece.
    let [r, g, b] = colormaps().next().map_or([68, 1, 84], |(_, c)| c.at(0.35));
    let n = values.len();
    let point = |i: usize, v: f64| -> (f64, f64) {
        let x = if n > 1 {
            i as f64 * (w - 1) as f64 / (n - 1) as f64
        } else {
            (w / 2) as f64
        };
        let y = (h - 2) as f64 * (1.0 - (v - lo) / span) + 1.0;
        (x, y)
    };
    let mut plot = |x: f64, y: f64| {
        let (x, y) = (x.round() as usize, y.round() as usize);
        if x < w && y < h {
            rgba[(y * w + x) * 4..][..4].copy_from_slice(&[r, g, b, 255]);
        }
    };
    let mut last: Option<(f64, f64)> = None;
    for (i, v) in values.iter().enumerate() {
        let Some(v) = v else {
            last = None;
            continue;
        };
        let (x, y) = point(i, *v);
        match last {
            None => plot(x, y),
            Some((x0, y0)) => {
                let steps = (x - x0).abs().max((y - y0).abs()).ceil().max(1.0) as usize;
                for s in 0..=steps {
                    let t = s as f64 / steps as f64;
                    plot(x0 + (x - x0) * t, y0 + (y - y0) * t);
                }
            }
        }
        last = Some((x, y));
    }
    rgba
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_a_line_from_its_low_to_its_high() {
        let values: Vec<Option<f64>> = (0..10).map(|i| Some(i as f64)).collect();
        let rgba = line(&values, 10, 10);
        let lit = |x: usize, y: usize| rgba[(y * 10 + x) * 4 + 3] == 255;
        // Low values at the bottom left, high at the top right.
        assert!(lit(0, 9) || lit(0, 8));
        assert!(lit(9, 1) || lit(9, 0));
        assert!(!lit(9, 9) && !lit(0, 0));
    }

    #[test]
    fn gaps_are_left_open_and_nothing_drawn_is_empty() {
        let rgba = line(&[Some(1.0), None, Some(1.0)], 3, 3);
        let lit: Vec<bool> = (0..3).map(|x| rgba[(2 * 3 + x) * 4 + 3] == 255).collect();
        assert_eq!(lit, [true, false, true]);
        assert!(line(&[None, None], 4, 4).iter().all(|&b| b == 0));
    }
}
