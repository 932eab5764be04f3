//! Map pictures, shared by tiles, WMS and the viewer's map: a raster of
//! values through a colormap over a fixed range (so neighbouring tiles
//! agree), encoded as PNG, JPEG or WebP, the legend beside it, and the
//! answer with a strong ETag so browsers and CDNs revalidate cheaply.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use font8x8::UnicodeFonts;
use sha2::{Digest, Sha256};

use super::image::{colormaps, Style};
use super::NoCompression;
use crate::http::error::{ApiError, ApiResult};
use crate::service::Resampling;

/// The encodings a map picture comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Picture {
    Png,
    Jpeg,
    Webp,
}

impl Picture {
    /// By file extension (`png`, `jpg`, `jpeg`, `webp`).
    pub fn by_extension(ext: &str) -> Option<Picture> {
        match ext {
            "png" => Some(Picture::Png),
            "jpg" | "jpeg" => Some(Picture::Jpeg),
            "webp" => Some(Picture::Webp),
            _ => None,
        }
    }

    /// By media type, as WMS's `FORMAT` names it.
    pub fn by_media_type(text: &str) -> Option<Picture> {
        match text.split(';').next().unwrap_or("").trim() {
            "image/png" | "png" => Some(Picture::Png),
            "image/jpeg" | "jpeg" | "image/jpg" => Some(Picture::Jpeg),
            "image/webp" | "webp" => Some(Picture::Webp),
            _ => None,
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Picture::Png => "image/png",
            Picture::Jpeg => "image/jpeg",
            Picture::Webp => "image/webp",
        }
    }
}

/// How a map is drawn: `cmap`, `vmin`/`vmax` or `rescale=lo,hi`,
/// `scale=log`, `resampling=nearest|bilinear`.
#[derive(Debug, Clone, Default)]
pub struct Drawing {
    pub cmap: Option<String>,
    pub vmin: Option<f64>,
    pub vmax: Option<f64>,
    pub scale: Option<String>,
    pub resampling: Option<Resampling>,
}

/// The parameters [`Drawing::take`] reads.
pub const DRAWING_PARAMS: &[&str] = &["cmap", "vmin", "vmax", "rescale", "scale", "resampling"];

fn number(name: &str, text: &str) -> ApiResult<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            ApiError::bad_request(
                "bad_query",
                format!("{name}: '{text}' is not a finite number"),
            )
        })
}

impl Drawing {
    /// Reads parameter `name` = `value` if it is one of the drawing's;
    /// `Ok(false)` when it is not.
    pub fn take(&mut self, name: &str, value: &str) -> ApiResult<bool> {
        match name {
            "cmap" => self.cmap = Some(value.to_string()),
            "vmin" => self.vmin = Some(number(name, value)?),
            "vmax" => self.vmax = Some(number(name, value)?),
            "rescale" | "colorscalerange" => {
                let (lo, hi) = value.split_once(',').ok_or_else(|| {
                    ApiError::bad_request("bad_query", format!("{name}: '{value}' is not LOW,HIGH"))
                })?;
                self.vmin = Some(number(name, lo)?);
                self.vmax = Some(number(name, hi)?);
            }
            "scale" => self.scale = Some(value.to_string()),
            "logscale" => {
                if value.eq_ignore_ascii_case("true") {
                    self.scale = Some("log".into());
                }
            }
            "resampling" => {
                self.resampling = Some(Resampling::parse(value).ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_query",
                        format!("resampling: '{value}' is not nearest or bilinear"),
                    )
                })?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The style, over `range` where `vmin`/`vmax` leave it open.
    pub fn style(&self, range: (f64, f64)) -> ApiResult<Style> {
        let style = Style {
            vmin: Some(self.vmin.unwrap_or(range.0)),
            vmax: Some(self.vmax.unwrap_or(range.1)),
            ..Style::new(u64::MAX)
        }
        .with_cmap(self.cmap.as_deref())?
        .with_scale(self.scale.as_deref())?;
        let (lo, hi) = (style.vmin.unwrap_or(0.0), style.vmax.unwrap_or(1.0));
        if lo > hi {
            return Err(ApiError::bad_request(
                "bad_range",
                format!("vmin {lo} is above vmax {hi}"),
            ));
        }
        if style.log && lo <= 0.0 {
            return Err(ApiError::bad_request(
                "bad_range",
                format!(
                    "a log scale needs a positive range; it runs from {lo} (give vmin above 0)"
                ),
            ));
        }
        Ok(style)
    }

    /// Whether the scale asked for is logarithmic.
    pub fn is_log(&self) -> bool {
        self.scale.as_deref() == Some("log")
    }

    /// Whether the range is given, so none need be found.
    pub fn has_range(&self) -> bool {
        self.vmin.is_some() && self.vmax.is_some()
    }
}

/// Values (NaN where missing) as RGBA through `style`, whose range is
/// set: what cannot be drawn is transparent.
pub fn paint(values: &[f64], style: &Style) -> Vec<u8> {
    // The colormap at 1024 steps, looked up: evaluating its spline for
    // each of a tile's 65,536 pixels would cost more than the tile.
    const STEPS: usize = 1024;
    let table: Vec<[u8; 3]> = (0..STEPS)
        .map(|i| style.colormap.at(i as f64 / (STEPS - 1) as f64))
        .collect();
    let log = style.log;
    let t = |v: f64| if log { v.log10() } else { v };
    let lo = t(style.vmin.unwrap_or(0.0));
    let hi = t(style.vmax.unwrap_or(1.0));
    // In halves: `hi - lo` of two finite values can overflow to infinity.
    let half_span = if hi > lo { hi / 2.0 - lo / 2.0 } else { 0.5 };
    let mut rgba = Vec::with_capacity(values.len() * 4);
    for &v in values {
        let v = t(v);
        if v.is_finite() && lo.is_finite() {
            let at = ((v / 2.0 - lo / 2.0) / half_span).clamp(0.0, 1.0);
            let [r, g, b] = table[(at * (STEPS - 1) as f64).round() as usize];
            rgba.extend([r, g, b, 255]);
        } else {
            rgba.extend([0, 0, 0, 0]);
        }
    }
    rgba
}

fn failed(what: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("{what} encoding failed: {e}"),
    )
}

/// RGBA pixels as a file. JPEG has no transparency: what is transparent
/// is drawn on white.
pub fn encode(picture: Picture, width: u32, height: u32, rgba: &[u8]) -> ApiResult<Vec<u8>> {
    match picture {
        Picture::Png => {
            // Fast compression: a tile is small and asked for often.
            let mut out = Vec::new();
            let mut encoder = png::Encoder::new(&mut out, width, height);
            encoder.set_color(png::ColorType::Rgba);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.set_compression(png::Compression::Fast);
            let mut writer = encoder.write_header().map_err(|e| failed("PNG", e))?;
            writer
                .write_image_data(rgba)
                .map_err(|e| failed("PNG", e))?;
            writer.finish().map_err(|e| failed("PNG", e))?;
            Ok(out)
        }
        Picture::Jpeg => {
            let rgb: Vec<u8> = rgba
                .chunks_exact(4)
                .flat_map(|p| {
                    let a = p[3] as u32;
                    let over = |c: u8| ((c as u32 * a + 255 * (255 - a)) / 255) as u8;
                    [over(p[0]), over(p[1]), over(p[2])]
                })
                .collect();
            let (w, h) = (
                u16::try_from(width).map_err(|e| failed("JPEG", e))?,
                u16::try_from(height).map_err(|e| failed("JPEG", e))?,
            );
            let mut out = Vec::new();
            jpeg_encoder::Encoder::new(&mut out, 90)
                .encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
                .map_err(|e| failed("JPEG", e))?;
            Ok(out)
        }
        Picture::Webp => {
            let mut out = Vec::new();
            image_webp::WebPEncoder::new(&mut out)
                .encode(rgba, width, height, image_webp::ColorType::Rgba8)
                .map_err(|e| failed("WebP", e))?;
            Ok(out)
        }
    }
}

/// A number as a legend labels it: at most four significant digits.
pub fn label(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Draws `text` in an 8 x 8 pixel font at (`x`, `y`), clipped.
fn text(rgba: &mut [u8], width: usize, x: usize, y: usize, text: &str, colour: [u8; 4]) {
    let height = rgba.len() / 4 / width.max(1);
    for (i, c) in text.chars().enumerate() {
        let glyph = font8x8::BASIC_FONTS
            .get(c)
            .or_else(|| font8x8::LATIN_FONTS.get(c))
            .unwrap_or([0; 8]);
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                let (px, py) = (x + i * 8 + col, y + row);
                if bits >> col & 1 == 1 && px < width && py < height {
                    rgba[(py * width + px) * 4..][..4].copy_from_slice(&colour);
                }
            }
        }
    }
}

/// A legend: the colour bar over the range, its ends and middle
/// labelled, and `title` (the variable and its units) above it.
pub fn legend(style: &Style, title: &str, width: u32, height: u32) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    // White, nearly opaque, so the legend reads over any map.
    let mut rgba: Vec<u8> = [255, 255, 255, 230].repeat(w * h);
    let ink = [0, 0, 0, 255];
    let margin = 6usize;
    text(&mut rgba, w, margin, 4, title, ink);
    let (bar_top, bar_bottom) = (16usize, h.saturating_sub(14).max(17));
    let bar = w.saturating_sub(2 * margin).max(1);
    let (lo, hi) = (style.vmin.unwrap_or(0.0), style.vmax.unwrap_or(1.0));
    for i in 0..bar {
        let t = i as f64 / (bar.max(2) - 1) as f64;
        let [r, g, b] = style.colormap.at(t);
        for y in bar_top..bar_bottom.min(h) {
            rgba[(y * w + margin + i) * 4..][..4].copy_from_slice(&[r, g, b, 255]);
        }
    }
    let at = |t: f64| {
        if style.log && lo > 0.0 && hi > 0.0 {
            10f64.powf(lo.log10() + t * (hi.log10() - lo.log10()))
        } else {
            lo + t * (hi - lo)
        }
    };
    let y = h.saturating_sub(11);
    let (left, mid, right) = (label(at(0.0)), label(at(0.5)), label(at(1.0)));
    text(&mut rgba, w, margin, y, &left, ink);
    text(
        &mut rgba,
        w,
        (w / 2).saturating_sub(mid.len() * 4),
        y,
        &mid,
        ink,
    );
    text(
        &mut rgba,
        w,
        w.saturating_sub(margin + right.len() * 8),
        y,
        &right,
        ink,
    );
    rgba
}

/// The colormap names, for capabilities documents.
pub fn colormap_names() -> impl Iterator<Item = &'static str> {
    colormaps().map(|(name, _)| name)
}

/// A picture as the answer: its media type, a strong ETag of its bytes
/// (304 when `If-None-Match` holds it), `cache_control`, never compressed.
pub fn answer(
    bytes: Vec<u8>,
    media_type: &'static str,
    request: &HeaderMap,
    cache_control: HeaderValue,
) -> Response {
    let digest = Sha256::digest(&bytes);
    let etag = format!("\"{}\"", hex::encode(&digest[..16]));
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if fresh {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::from(bytes));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
        r
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, cache_control);
    response.extensions_mut().insert(NoCompression);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short() {
        assert_eq!(label(273.15), "273.1");
        assert_eq!(label(0.5), "0.5");
        assert_eq!(label(12.0), "12");
        assert_eq!(label(123456.0), "1.23e5");
        assert_eq!(label(-0.0001), "-1.00e-4");
    }

    #[test]
    fn every_encoding_decodes_to_its_size() {
        let rgba: Vec<u8> = (0..16 * 8).flat_map(|i| [i as u8, 0, 255, 255]).collect();
        for p in [Picture::Png, Picture::Jpeg, Picture::Webp] {
            let bytes = encode(p, 16, 8, &rgba).unwrap();
            assert!(bytes.len() > 20, "{p:?}");
        }
        let png = encode(Picture::Png, 16, 8, &rgba).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (16, 8));
    }

    #[test]
    fn missing_values_are_transparent_and_the_range_is_fixed() {
        let mut d = Drawing::default();
        assert!(d.take("rescale", "0,10").unwrap());
        assert!(!d.take("other", "1").unwrap());
        assert!(d.take("vmin", "x").is_err());
        let style = d.style((100.0, 200.0)).unwrap();
        let rgba = paint(&[0.0, f64::NAN, 10.0], &style);
        assert_eq!(rgba[7], 0);
        assert_eq!(&rgba[0..3], &style.colormap.at(0.0));
        assert_eq!(&rgba[8..11], &style.colormap.at(1.0));
        let legend = legend(&style, "t (K)", 200, 48);
        assert_eq!(legend.len(), 200 * 48 * 4);
    }
}
