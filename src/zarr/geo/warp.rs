//! A grid sampled onto a picture in another CRS: each pixel's centre
//! carried into the grid's CRS and located there, then read by nearest
//! neighbour or bilinear weights. The elements a picture needs are listed
//! before anything is read, so a map reads what it draws and no more.

use super::{Crs, GeoGrid};

/// A picture: its CRS, its bounds `[min x, min y, max x, max y]` in it,
/// and its size in pixels (rows top to bottom, north up).
#[derive(Debug, Clone)]
pub struct Target {
    pub crs: Crs,
    pub bounds: [f64; 4],
    pub width: u32,
    pub height: u32,
}

impl Target {
    /// The centre of pixel (`col`, `row`) in the picture's CRS.
    pub fn centre(&self, col: f64, row: f64) -> (f64, f64) {
        let [x0, y0, x1, y1] = self.bounds;
        (
            x0 + (col + 0.5) * (x1 - x0) / self.width as f64,
            y1 - (row + 0.5) * (y1 - y0) / self.height as f64,
        )
    }

    pub fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resampling {
    Nearest,
    Bilinear,
}

impl Resampling {
    pub fn parse(text: &str) -> Option<Resampling> {
        match text.to_ascii_lowercase().as_str() {
            "nearest" => Some(Resampling::Nearest),
            "bilinear" | "linear" => Some(Resampling::Bilinear),
            _ => None,
        }
    }
}

/// One element a pixel reads, with its weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tap {
    pub pixel: u32,
    pub row: u64,
    pub col: u64,
    pub weight: f32,
}

/// Where each pixel of `target` falls in `grid`: fractional (row,
/// column), `None` outside the grid or where the CRS cannot reach.
pub fn locate(grid: &GeoGrid, target: &Target) -> Vec<Option<(f64, f64)>> {
    if target.crs.separable_with(&grid.crs) {
        return locate_separable(grid, target);
    }
    let mut points: Vec<(f64, f64)> = (0..target.height)
        .flat_map(|r| (0..target.width).map(move |c| (c, r)))
        .map(|(c, r)| target.centre(c as f64, r as f64))
        .collect();
    target.crs.transform(&grid.crs, &mut points);
    points
        .into_iter()
        .map(|p| {
            if p.0.is_finite() && p.1.is_finite() {
                grid.locate(p)
            } else {
                None
            }
        })
        .collect()
}

/// Where columns map to columns and rows to rows ([`Crs::separable_with`]):
/// the fractional column of each of the picture's columns and row of each
/// of its rows, each carried over once.
pub fn axes(grid: &GeoGrid, target: &Target) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let (cx, cy) = target.centre(0.0, 0.0);
    let mut xs: Vec<(f64, f64)> = (0..target.width)
        .map(|c| (target.centre(c as f64, 0.0).0, cy))
        .collect();
    let mut ys: Vec<(f64, f64)> = (0..target.height)
        .map(|r| (cx, target.centre(0.0, r as f64).1))
        .collect();
    target.crs.transform(&grid.crs, &mut xs);
    target.crs.transform(&grid.crs, &mut ys);
    let finite = |v: f64| v.is_finite().then_some(v);
    let cols: Vec<Option<f64>> = xs
        .iter()
        .map(|p| finite(p.0).and_then(|x| grid.column(x)))
        .collect();
    let rows: Vec<Option<f64>> = ys
        .iter()
        .map(|p| finite(p.1).and_then(|y| grid.row(y)))
        .collect();
    (rows, cols)
}

/// The nearest cell of a fractional index on an axis of `len` cells.
pub fn nearest(at: f64, len: usize) -> u64 {
    (at + 0.5).floor().clamp(0.0, len as f64 - 1.0) as u64
}

fn locate_separable(grid: &GeoGrid, target: &Target) -> Vec<Option<(f64, f64)>> {
    let (rows, cols) = axes(grid, target);
    let mut out = Vec::with_capacity(target.pixels());
    for r in &rows {
        for c in &cols {
            out.push(r.zip(*c));
        }
    }
    out
}

/// The elements each pixel reads, in pixel order.
pub fn taps(grid: &GeoGrid, located: &[Option<(f64, f64)>], resampling: Resampling) -> Vec<Tap> {
    let (rows, cols) = grid.shape();
    let (last_row, last_col) = (rows as f64 - 1.0, cols as f64 - 1.0);
    let mut out = Vec::with_capacity(located.len());
    for (pixel, at) in located.iter().enumerate() {
        let Some((r, c)) = *at else { continue };
        let pixel = pixel as u32;
        match resampling {
            Resampling::Nearest => out.push(Tap {
                pixel,
                row: nearest(r, rows),
                col: nearest(c, cols),
                weight: 1.0,
            }),
            Resampling::Bilinear => {
                // Between the centres; at the outer half cells, the edge value.
                let (r, c) = (r.clamp(0.0, last_row), c.clamp(0.0, last_col));
                let (r0, c0) = (r.floor(), c.floor());
                let (fr, fc) = (r - r0, c - c0);
                for (dr, wr) in [(0.0, 1.0 - fr), (1.0, fr)] {
                    for (dc, wc) in [(0.0, 1.0 - fc), (1.0, fc)] {
                        let w = wr * wc;
                        if w > 0.0 {
                            out.push(Tap {
                                pixel,
                                row: (r0 + dr).min(last_row) as u64,
                                col: (c0 + dc).min(last_col) as u64,
                                weight: w as f32,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Pixels of the picture per cell of the grid, inverted: how many grid
/// cells one pixel spans (the smaller of across and down), measured at
/// the picture's centre pixel, or where the picture first meets the grid.
/// `None` when it does not.
pub fn cells_per_pixel(grid: &GeoGrid, target: &Target) -> Option<f64> {
    let (w, h) = (target.width as f64, target.height as f64);
    // The centre, then an 8 x 8 lattice: a picture that only grazes the
    // grid is measured where it meets it.
    let lattice = (0..64).map(|i| {
        (
            (i % 8) as f64 / 8.0 + 1.0 / 16.0,
            (i / 8) as f64 / 8.0 + 1.0 / 16.0,
        )
    });
    for (fx, fy) in std::iter::once((0.5, 0.5)).chain(lattice) {
        let (col, row) = ((w * fx).floor(), (h * fy).floor());
        let mut pts = [
            target.centre(col, row),
            target.centre(col + 1.0, row),
            target.centre(col, row + 1.0),
        ];
        target.crs.transform(&grid.crs, &mut pts);
        let (Some(a), Some(b), Some(c)) = (
            grid.locate(pts[0]),
            grid.locate(pts[1]),
            grid.locate(pts[2]),
        ) else {
            continue;
        };
        let across = (b.0 - a.0).hypot(b.1 - a.1);
        let down = (c.0 - a.0).hypot(c.1 - a.1);
        return Some(across.min(down));
    }
    None
}

/// Of a pyramid's levels (finest first), the coarsest whose cells are no
/// larger than the picture's pixels (one pixel spans at least one cell);
/// the finest when every level's cells are larger, the coarsest when the
/// picture does not meet the grid at all.
pub fn level_for(levels: &[&GeoGrid], target: &Target) -> usize {
    let mut chosen = 0;
    let mut met = false;
    for (i, grid) in levels.iter().enumerate() {
        if let Some(span) = cells_per_pixel(grid, target) {
            met = true;
            if span >= 1.0 - 1e-9 {
                chosen = i;
            }
        }
    }
    if met {
        chosen
    } else {
        levels.len().saturating_sub(1)
    }
}

/// Each pixel's value from the values of its taps (`value(i)` of tap
/// `i`): the weighted mean of those that are not NaN, NaN where none is.
pub fn resample(pixels: usize, taps: &[Tap], value: impl Fn(usize) -> f64) -> Vec<f64> {
    let mut sum = vec![0.0f64; pixels];
    let mut weight = vec![0.0f64; pixels];
    for (i, t) in taps.iter().enumerate() {
        let v = value(i);
        if v.is_finite() {
            sum[t.pixel as usize] += v * t.weight as f64;
            weight[t.pixel as usize] += t.weight as f64;
        }
    }
    sum.iter()
        .zip(&weight)
        .map(|(s, w)| if *w > 0.0 { s / w } else { f64::NAN })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Axis1;
    use super::*;

    fn world(rows: usize, cols: usize) -> GeoGrid {
        GeoGrid {
            crs: Crs::degrees(),
            y_dim: 0,
            x_dim: 1,
            y: Axis1::even(90.0, -90.0, rows),
            x: Axis1::even(-180.0, 180.0, cols),
        }
    }

    #[test]
    fn a_picture_of_the_grid_itself_reads_each_cell_once() {
        let grid = world(4, 8);
        let target = Target {
            crs: Crs::degrees(),
            bounds: [-180.0, -90.0, 180.0, 90.0],
            width: 8,
            height: 4,
        };
        let taps = taps(&grid, &locate(&grid, &target), Resampling::Nearest);
        let cells: Vec<(u64, u64)> = taps.iter().map(|t| (t.row, t.col)).collect();
        let expected: Vec<(u64, u64)> = (0..4).flat_map(|r| (0..8).map(move |c| (r, c))).collect();
        assert_eq!(cells, expected);
        assert_eq!(cells_per_pixel(&grid, &target), Some(1.0));
    }

    #[test]
    fn columns_and_rows_carried_once_land_where_each_pixel_would() {
        let grid = world(180, 360);
        let target = Target {
            crs: Crs::web_mercator(),
            bounds: [-2e6, -1e6, 3e6, 4e6],
            width: 64,
            height: 48,
        };
        let mut points: Vec<(f64, f64)> = (0..48)
            .flat_map(|r| (0..64).map(move |c| (c, r)))
            .map(|(c, r)| target.centre(c as f64, r as f64))
            .collect();
        target.crs.transform(&grid.crs, &mut points);
        let each: Vec<_> = points.into_iter().map(|p| grid.locate(p)).collect();
        let once = locate(&grid, &target);
        for (a, b) in each.iter().zip(&once) {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!((a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9);
        }
    }

    #[test]
    fn bilinear_weights_sum_to_one_and_skip_missing_values() {
        let grid = world(2, 2);
        let at = [Some((0.5, 0.25))];
        let taps = taps(&grid, &at, Resampling::Bilinear);
        let total: f32 = taps.iter().map(|t| t.weight).sum();
        assert!((total - 1.0).abs() < 1e-6);
        let values = [1.0, 2.0, 3.0, 4.0];
        let v = |i: usize| values[(taps[i].row * 2 + taps[i].col) as usize];
        assert!((resample(1, &taps, v)[0] - 2.25).abs() < 1e-9);
        let missing = resample(1, &taps, |i| if taps[i].col == 1 { f64::NAN } else { v(i) });
        assert!((missing[0] - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_level_chosen_is_the_coarsest_not_coarser_than_the_pixels() {
        let levels = [world(720, 1440), world(360, 720), world(180, 360)];
        let refs: Vec<&GeoGrid> = levels.iter().collect();
        // 512 pixels across 360 degrees: 0.7 degrees a pixel.
        let target = |w: u32| Target {
            crs: Crs::degrees(),
            bounds: [-180.0, -90.0, 180.0, 90.0],
            width: w,
            height: w / 2,
        };
        assert_eq!(level_for(&refs, &target(512)), 1);
        assert_eq!(level_for(&refs, &target(360)), 2);
        assert_eq!(level_for(&refs, &target(4096)), 0);
        // A picture that does not meet the grid reads the least.
        let away = Target {
            crs: Crs::web_mercator(),
            bounds: [0.0, 0.0, 1.0, 1.0],
            width: 4,
            height: 4,
        };
        let regional = [GeoGrid {
            x: Axis1::even(10.0, 20.0, 100),
            y: Axis1::even(60.0, 40.0, 100),
            ..world(1, 1)
        }];
        let pyramid = [regional[0].clone(), regional[0].scaled(10, 10)];
        let refs: Vec<&GeoGrid> = pyramid.iter().collect();
        assert_eq!(level_for(&refs, &away), 1);
    }
}
