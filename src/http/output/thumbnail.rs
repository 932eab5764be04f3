//! Thumbnails of arrays for the viewer's tree: the service picks the
//! strided read; this draws it (a colormapped field, RGB, or a line for a
//! series) and keeps the PNG for as long as the subtree it was read from is
//! unchanged through this server and, past what `--recheck-cached` trusts
//! by age, the array's document and the chunks it was drawn from keep their
//! ETags.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::image::{draw, drawable, encode, line, Style};
use crate::config::Recheck;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Preview, PreviewKind};
use crate::store::StoreKey;
use crate::zarr::fill::element_as_f64;
use crate::zarr::ArrayBytes;

/// Longest side of a thumbnail, in pixels.
const SIZE: u64 = 128;
/// A series is drawn this tall.
const SERIES_HEIGHT: u32 = 48;
/// Bytes of PNGs kept.
const CACHE_BYTES: u64 = 32 << 20;

#[derive(Clone)]
pub struct Kept {
    pub png: Bytes,
    pub etag: String,
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

    /// The thumbnail of the array at `key`, drawn now or kept from before.
    pub async fn get(
        &self,
        service: &crate::service::Service,
        key: &StoreKey,
        max_pixels: u64,
    ) -> ApiResult<Kept> {
        let version = service.cache().subtree_version(key);
        if let Some(kept) = self.cache.get(key.as_str()).await {
            if self.current(service, &kept, version).await {
                return Ok(kept);
            }
        }
        // Requests for the same thumbnail at once share one drawing.
        self.cache.invalidate(key.as_str()).await;
        self.cache
            .try_get_with(key.as_str().to_string(), async {
                let preview = service.preview(key, SIZE).await?;
                let png = Bytes::from(thumbnail(&preview, max_pixels)?);
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
            .map_err(|e: std::sync::Arc<ApiError>| (*e).clone())
    }
}

fn thumbnail(preview: &Preview, max_pixels: u64) -> ApiResult<Vec<u8>> {
    let data = &preview.data;
    if preview.kind != PreviewKind::Series {
        // The default colormap and robust range, as `format=png` draws.
        return Ok(draw(data, &Style::new(max_pixels))?.png);
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
    encode(width, SERIES_HEIGHT, &rgba)
}
