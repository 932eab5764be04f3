//! Drawing values as pictures, shared by the PNG format, the thumbnails of
//! the viewer's tree and the viewer's colormap list: colormaps, scales,
//! the robust range, RGB(A) channels, lines for series, and PNG encoding.
//! NaN, the fill value and (on a log scale) values that are not positive
//! are transparent. Without `vmin`/`vmax` the range is the 2nd to 98th
//! percentile of the values drawn, so one outlier does not wash out the
//! picture.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;

use super::NoCompression;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data};
use crate::zarr::fill::element_as_f64;
use crate::zarr::{ArrayBytes, DataType};

/// A colormap as images are drawn with it: `at(0)` is the colour of the low
/// end of the range, `at(1)` of the high end.
#[derive(Clone, Copy)]
pub struct Colormap {
    gradient: colorous::Gradient,
    reversed: bool,
}

impl Colormap {
    const fn new(gradient: colorous::Gradient) -> Self {
        Colormap {
            gradient,
            reversed: false,
        }
    }

    pub fn at(&self, t: f64) -> [u8; 3] {
        let t = t.clamp(0.0, 1.0);
        let c = self
            .gradient
            .eval_continuous(if self.reversed { 1.0 - t } else { t });
        [c.r, c.g, c.b]
    }
}

/// The colormaps `cmap=` names; the first is the default.
const COLORMAPS: &[(&str, Colormap)] = &[
    ("viridis", Colormap::new(colorous::VIRIDIS)),
    ("magma", Colormap::new(colorous::MAGMA)),
    ("inferno", Colormap::new(colorous::INFERNO)),
    ("plasma", Colormap::new(colorous::PLASMA)),
    ("cividis", Colormap::new(colorous::CIVIDIS)),
    // Black at the low end, as image viewers draw gray.
    (
        "gray",
        Colormap {
            gradient: colorous::GREYS,
            reversed: true,
        },
    ),
    ("rdbu", Colormap::new(colorous::RED_BLUE)),
];

/// Every colormap, by name, the default first.
pub fn colormaps() -> impl Iterator<Item = (&'static str, Colormap)> {
    COLORMAPS.iter().copied()
}

/// How values become colours: the colormap, the scale, the range (from
/// the values drawn where not given) and the most pixels a picture may have.
#[derive(Clone, Copy)]
pub struct Style {
    pub colormap: Colormap,
    pub log: bool,
    pub vmin: Option<f64>,
    pub vmax: Option<f64>,
    pub max_pixels: u64,
}

impl Style {
    /// The default colormap and a linear scale over the values' robust range.
    pub fn new(max_pixels: u64) -> Self {
        Style {
            colormap: COLORMAPS[0].1,
            log: false,
            vmin: None,
            vmax: None,
            max_pixels,
        }
    }

    /// The colormap `cmap=` names (the default when none).
    pub fn with_cmap(mut self, name: Option<&str>) -> ApiResult<Self> {
        let name = name.unwrap_or(COLORMAPS[0].0);
        self.colormap = COLORMAPS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                let names: Vec<&str> = COLORMAPS.iter().map(|(n, _)| *n).collect();
                ApiError::bad_request(
                    "bad_cmap",
                    format!("cmap '{name}' is not one of {}", names.join(", ")),
                )
            })?;
        Ok(self)
    }

    /// The scale `scale=` names: `linear` (the default) or `log`.
    pub fn with_scale(mut self, scale: Option<&str>) -> ApiResult<Self> {
        self.log = match scale {
            None | Some("linear") => false,
            Some("log") => true,
            Some(other) => {
                return Err(ApiError::bad_request(
                    "bad_scale",
                    format!("scale '{other}' is not linear or log"),
                ))
            }
        };
        Ok(self)
    }
}

fn unprocessable(code: &'static str, message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
}

/// A picture of a selection: the PNG file, and the range of values the
/// colormap spans (none for RGB).
pub struct Drawn {
    pub png: Vec<u8>,
    pub range: Option<(f64, f64)>,
}

/// `data` as a PNG: a 2-D selection through the colormap, or RGB(A).
pub fn draw(data: &Data, style: &Style) -> ApiResult<Drawn> {
    {
        let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "PNG output was handed streamed data",
            ));
        };
        let shape: Vec<usize> = data.shape.iter().map(|&d| d as usize).collect();
        let rgb = matches!(shape.as_slice(), [_, _, 3 | 4]) && data.dtype == DataType::UInt8;
        let (height, width) = match shape.as_slice() {
            [h, w] => (*h, *w),
            [h, w, _] if rgb => (*h, *w),
            other => {
                return Err(ApiError::bad_request(
                    "not_an_image",
                    format!(
                        "an image needs a 2-D selection (or 3-D ending in 3 or 4 uint8 channels); this one has shape {other:?}: select one index along the other dimensions"
                    ),
                ))
            }
        };
        let pixels = (height as u64).saturating_mul(width as u64);
        if pixels == 0 {
            return Err(ApiError::bad_request(
                "not_an_image",
                format!("the selection {shape:?} is empty: an image needs at least one pixel"),
            ));
        }
        if pixels > style.max_pixels {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_large",
                format!(
                    "the image would have {pixels} pixels, over the limit of {}; select a smaller region or a stride (::N)",
                    style.max_pixels
                ),
            ));
        }
        let (rgba, range) = if rgb {
            (channels(bytes, shape[2]), None)
        } else {
            let (rgba, lo, hi) = colored(bytes, data, style)?;
            (rgba, Some((lo, hi)))
        };
        Ok(Drawn {
            png: encode(width as u32, height as u32, &rgba)?,
            range,
        })
    }
}

/// Each element as a number to draw, through `transform`; `None` for what
/// is not drawn: the fill value, NaN, infinities (and, on a log scale,
/// values that are not positive).
pub fn drawable(bytes: &[u8], data: &Data, transform: impl Fn(f64) -> f64) -> Vec<Option<f64>> {
    let size = data.dtype.size().unwrap_or(1).max(1);
    let fill = data.fill.as_deref();
    bytes
        .chunks_exact(size)
        .map(|b| {
            if fill == Some(b) {
                return None;
            }
            let v = transform(element_as_f64(&data.dtype, b)?);
            v.is_finite().then_some(v)
        })
        .collect()
}

/// uint8 RGB or RGBA as RGBA.
fn channels(bytes: &[u8], n: usize) -> Vec<u8> {
    bytes
        .chunks_exact(n)
        .flat_map(|p| [p[0], p[1], p[2], if n == 4 { p[3] } else { 255 }])
        .collect()
}

/// Values through the colormap as RGBA, and the range drawn (in values);
/// what cannot be drawn is transparent.
fn colored(bytes: &[u8], data: &Data, style: &Style) -> ApiResult<(Vec<u8>, f64, f64)> {
    let size = data.dtype.size().unwrap_or(1).max(1);
    let (log, colormap) = (style.log, style.colormap);
    if element_as_f64(&data.dtype, &vec![0; size]).is_none() {
        return Err(unprocessable(
            "not_drawable",
            format!(
                "{} values cannot be drawn as colours (numbers, or 3-4 uint8 channels, can)",
                data.dtype.name()
            ),
        ));
    }
    let transform = |v: f64| if log { v.log10() } else { v };
    let values = drawable(bytes, data, transform);
    let (lo, hi) = match (style.vmin.map(transform), style.vmax.map(transform)) {
        (Some(lo), Some(hi)) => (lo, hi),
        (lo, hi) => {
            let (p2, p98) = percentiles(&values);
            (lo.unwrap_or(p2), hi.unwrap_or(p98))
        }
    };
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(ApiError::bad_request(
            "bad_range",
            "vmin and vmax must be finite (and positive on a log scale)",
        ));
    }
    // In halves: `hi - lo` of two finite values can overflow to infinity.
    let half_span = if hi > lo { hi / 2.0 - lo / 2.0 } else { 0.5 };
    let rgba = values
        .iter()
        .flat_map(|v| match v {
            None => [0, 0, 0, 0],
            Some(v) => {
                let [r, g, b] = colormap.at((v / 2.0 - lo / 2.0) / half_span);
                [r, g, b, 255]
            }
        })
        .collect();
    let untransform = |v: f64| if log { 10f64.powf(v) } else { v };
    Ok((rgba, untransform(lo), untransform(hi)))
}

/// The 2nd and 98th percentiles of the finite values (0 and 1 when none).
fn percentiles(values: &[Option<f64>]) -> (f64, f64) {
    let mut finite: Vec<f64> = values.iter().flatten().copied().collect();
    if finite.is_empty() {
        return (0.0, 1.0);
    }
    finite.sort_by(f64::total_cmp);
    let at = |q: f64| finite[((finite.len() - 1) as f64 * q).round() as usize];
    (at(0.02), at(0.98))
}

/// A PNG answer, never compressed (it already is).
pub fn image(png: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(png));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
    response.extensions_mut().insert(NoCompression);
    response
}

/// RGBA pixels, row by row, as a PNG file.
pub fn encode(width: u32, height: u32, rgba: &[u8]) -> ApiResult<Vec<u8>> {
    let failed = |e: png::EncodingError| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("PNG encoding failed: {e}"),
        )
    };
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(rgba).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(out)
}

/// A series as a line on a transparent background: each point joined to the
/// next, gaps (NaN, fill) left open.
pub fn line(values: &[Option<f64>], width: u32, height: u32) -> Vec<u8> {
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
    fn percentiles_ignore_what_is_not_drawn() {
        let values: Vec<Option<f64>> = (0..=100).map(|i| Some(i as f64)).chain([None]).collect();
        assert_eq!(percentiles(&values), (2.0, 98.0));
        assert_eq!(percentiles(&[None]), (0.0, 1.0));
    }

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
