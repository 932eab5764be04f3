//! PNG: a 2-D selection drawn through a colormap, or a 3-D one whose last
//! dimension holds 3 or 4 `uint8` channels drawn as RGB(A) (see
//! [`super::image`]). Its parameters: `cmap`, `vmin`, `vmax` and `scale`.

use axum::http::{HeaderValue, StatusCode};
use serde::Deserialize;

use super::image::{draw, image, Style};
use super::{Encode, Output, Params};
use crate::config::Config;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Data, Residence};

pub struct Png;

/// Memory drawing takes per element, beyond the data.
pub const DRAW_BYTES: u64 = 32;

/// The parameters `format=png` reads.
#[derive(Debug, Default, Deserialize)]
struct PngParams {
    cmap: Option<String>,
    vmin: Option<f64>,
    vmax: Option<f64>,
    scale: Option<String>,
}

fn unprocessable(code: &'static str, message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
}

impl Output for Png {
    fn name(&self) -> &'static str {
        "png"
    }
    fn content_type(&self) -> &'static str {
        "image/png"
    }
    fn residence(&self) -> Residence {
        // Percentiles need every value; the pixels are smaller than the data.
        Residence::InMemory { expansion: 1 }
    }
    fn fixed_size_only(&self) -> bool {
        true
    }
    fn explain(&self, error: ApiError) -> ApiError {
        if error.code == "not_acceptable" {
            return unprocessable(
                "not_drawable",
                format!(
                    "{} (images draw numbers; read the values with format=json)",
                    error.message
                ),
            );
        }
        error
    }
    fn encoding_per_element(&self) -> u64 {
        // Per element: the value to draw, a copy for the percentiles, the
        // pixel and its share of the file (measured ~36 bytes per pixel of
        // float32 with the data itself).
        DRAW_BYTES
    }
    fn params(&self) -> &'static [&'static str] {
        &["cmap", "vmin", "vmax", "scale"]
    }
    fn encoder(&self, params: &Params, config: &Config) -> ApiResult<Box<dyn Encode>> {
        let p: PngParams = params.read(self.params())?;
        let style = Style {
            vmin: p.vmin,
            vmax: p.vmax,
            ..Style::new(config.max_image_pixels)
        }
        .with_cmap(p.cmap.as_deref())?
        .with_scale(p.scale.as_deref())?;
        Ok(Box::new(move |data: Data| {
            let drawn = draw(&data, &style)?;
            let mut response = image(drawn.png);
            // The range drawn, so a page can label its colorbar with the
            // percentiles chosen here.
            if let Some((lo, hi)) = drawn.range {
                for (name, v) in [("x-zarr-vmin", lo), ("x-zarr-vmax", hi)] {
                    if let Ok(v) = HeaderValue::from_str(&v.to_string()) {
                        response.headers_mut().insert(name, v);
                    }
                }
            }
            Ok(response)
        }))
    }
}
