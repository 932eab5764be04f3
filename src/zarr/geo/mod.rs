//! Where on Earth each element of an array is: the dimensions that are
//! its x and y, their coordinates as a grid in a CRS, and the inverse
//! every map needs (the fractional index of a point). `warp` samples a
//! grid onto a picture in any CRS; `tms` is the tile grids map clients
//! ask for. Pure arithmetic: the service finds the coordinates and the
//! CRS and reads the elements.

pub mod crs;
pub mod tms;
pub mod warp;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use crs::Crs;

/// One axis of a grid: its coordinate's values, ascending or descending.
#[derive(Debug, Clone)]
pub struct Axis1 {
    values: Arc<Vec<f64>>,
    /// `(first, step)` when evenly spaced (to a millionth of a step).
    regular: Option<(f64, f64)>,
}

impl Axis1 {
    pub fn new(values: Vec<f64>) -> Result<Axis1, String> {
        if values.is_empty() {
            return Err("the coordinate is empty".into());
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err("the coordinate holds values that are not finite".into());
        }
        let ascending = values.windows(2).all(|w| w[1] > w[0]);
        let descending = values.windows(2).all(|w| w[1] < w[0]);
        if !(ascending || descending) {
            return Err("the coordinate is not sorted (ascending or descending)".into());
        }
        let n = values.len();
        let regular = if n == 1 {
            None
        } else {
            let step = (values[n - 1] - values[0]) / (n - 1) as f64;
            values
                .windows(2)
                .all(|w| ((w[1] - w[0]) - step).abs() <= step.abs() * 1e-6)
                .then_some((values[0], step))
        };
        Ok(Axis1 {
            values: Arc::new(values),
            regular,
        })
    }

    /// `n` cells evenly over `[from, to]` (their edges), centres as values.
    pub fn even(from: f64, to: f64, n: usize) -> Axis1 {
        let step = (to - from) / n.max(1) as f64;
        let values: Vec<f64> = (0..n).map(|i| from + (i as f64 + 0.5) * step).collect();
        Axis1 {
            regular: (n > 1).then_some((values[0], step)),
            values: Arc::new(values),
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The mean step (1 for a single value).
    pub fn step(&self) -> f64 {
        let n = self.values.len();
        if n < 2 {
            return 1.0;
        }
        (self.values[n - 1] - self.values[0]) / (n - 1) as f64
    }

    /// The outer edges of the first and last cells, half a step out.
    pub fn edges(&self) -> (f64, f64) {
        let n = self.values.len();
        let (first_half, last_half) = if n < 2 {
            (0.5, 0.5)
        } else {
            (
                (self.values[1] - self.values[0]) / 2.0,
                (self.values[n - 1] - self.values[n - 2]) / 2.0,
            )
        };
        (self.values[0] - first_half, self.values[n - 1] + last_half)
    }

    /// The fractional index of `v` (0 at the first value, 1 at the second);
    /// `None` outside the cells.
    pub fn index(&self, v: f64) -> Option<f64> {
        let n = self.values.len();
        let f = match self.regular {
            Some((first, step)) => (v - first) / step,
            None if n == 1 => {
                if (v - self.values[0]).abs() <= 0.5 {
                    0.0
                } else {
                    return None;
                }
            }
            None => {
                let vals = &self.values;
                let ascending = vals[1] > vals[0];
                // The first value past `v` in the axis' own order.
                let i = vals.partition_point(|&x| if ascending { x <= v } else { x >= v });
                let (lo, hi) = match i {
                    0 => (0, 1),
                    i if i >= n => (n - 2, n - 1),
                    i => (i - 1, i),
                };
                lo as f64 + (v - vals[lo]) / (vals[hi] - vals[lo])
            }
        };
        (f.is_finite() && f >= -0.5 && f < n as f64 - 0.5).then_some(f)
    }
}

/// `[min x, min y, max x, max y]` of the finite points (infinite when
/// there are none): where transformed points land.
pub fn extent(points: impl IntoIterator<Item = (f64, f64)>) -> [f64; 4] {
    let mut b = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    for (x, y) in points
        .into_iter()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
    {
        b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
    }
    b
}

/// An array's spatial dimensions and their grid.
#[derive(Debug, Clone)]
pub struct GeoGrid {
    pub crs: Crs,
    /// The positions of the y and x dimensions among the array's.
    pub y_dim: usize,
    pub x_dim: usize,
    pub y: Axis1,
    pub x: Axis1,
}

impl GeoGrid {
    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        (self.y.len(), self.x.len())
    }

    /// The same extent in `rows` by `cols` even cells: a pyramid level
    /// that has no coordinates of its own.
    pub fn scaled(&self, rows: usize, cols: usize) -> GeoGrid {
        let (x0, x1) = self.x.edges();
        let (y0, y1) = self.y.edges();
        GeoGrid {
            y: Axis1::even(y0, y1, rows),
            x: Axis1::even(x0, x1, cols),
            ..self.clone()
        }
    }

    /// The fractional (row, column) of a point of the grid's CRS; `None`
    /// outside. Longitudes are taken round the circle to the grid's own
    /// range, so 0–360 grids answer -180–180 points and the reverse.
    pub fn locate(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        Some((self.row(y)?, self.column(x)?))
    }

    /// The fractional column of `x` (longitudes round the circle).
    pub fn column(&self, x: f64) -> Option<f64> {
        let x = if self.crs.is_degrees() {
            let (a, b) = self.x.edges();
            let west = a.min(b);
            west + (x - west).rem_euclid(360.0)
        } else {
            x
        };
        self.x.index(x)
    }

    /// The fractional row of `y`.
    pub fn row(&self, y: f64) -> Option<f64> {
        self.y.index(y)
    }

    /// The cells' outer edges: `[min x, min y, max x, max y]` in its CRS.
    pub fn bounds(&self) -> [f64; 4] {
        let (x0, x1) = self.x.edges();
        let (y0, y1) = self.y.edges();
        [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
    }

    /// [`GeoGrid::bounds`] in longitude and latitude degrees, from a
    /// lattice over the grid (a projected grid's edges are curves in
    /// degrees, and a geostationary disk's corners are in space), out to
    /// the poles where the grid holds one; longitudes east of 180 as they
    /// are. The whole world when no point of the grid reaches the Earth.
    pub fn bounds_degrees(&self) -> [f64; 4] {
        let [x0, y0, x1, y1] = self.bounds();
        if self.crs.is_degrees() {
            return [x0, y0.max(-90.0), x1, y1.min(90.0)];
        }
        const N: usize = 32;
        let mut points = Vec::with_capacity((N + 1) * (N + 1));
        for i in 0..=N {
            for j in 0..=N {
                let (tx, ty) = (i as f64 / N as f64, j as f64 / N as f64);
                points.push((x0 + (x1 - x0) * tx, y0 + (y1 - y0) * ty));
            }
        }
        self.crs.to_degrees(&mut points);
        let mut b = extent(points);
        if !b.iter().all(|v| v.is_finite()) {
            return [-180.0, -90.0, 180.0, 90.0];
        }
        // A pole inside the grid: every longitude, up to the pole.
        for pole in [90.0, -90.0] {
            let mut p = [(0.0, pole)];
            self.crs.from_degrees(&mut p);
            let [px, py] = [p[0].0, p[0].1];
            if px.is_finite()
                && py.is_finite()
                && (x0..=x1).contains(&px)
                && (y0..=y1).contains(&py)
            {
                b = [-180.0, b[1].min(pole), 180.0, b[3].max(pole)];
            }
        }
        b
    }

    /// The size of the grid's cells in the units of `to`, the smallest
    /// of those measured over a 5 x 5 lattice of cells (a polar grid's
    /// cells seen from Web Mercator differ most); `None` when none maps.
    pub fn cell_size_in(&self, to: &Crs) -> Option<f64> {
        let (rows, cols) = self.shape();
        let mut best: Option<f64> = None;
        for i in 0..5 {
            for j in 0..5 {
                let (r, c) = ((rows - 1) * i / 4, (cols - 1) * j / 4);
                let (x, y) = (self.x.values()[c], self.y.values()[r]);
                let mut p = [(x, y), (x + self.x.step().abs(), y)];
                self.crs.transform(to, &mut p);
                let d = (p[1].0 - p[0].0).hypot(p[1].1 - p[0].1);
                if d.is_finite() && d > 0.0 {
                    best = Some(best.map_or(d, |b: f64| b.min(d)));
                }
            }
        }
        best
    }
}

fn lower(attrs: Option<&Map<String, Value>>, key: &str) -> String {
    attrs
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Which of a coordinate's signs says it is an x (`Some(true)`) or a y
/// (`Some(false)`) axis: CF's `axis`, `standard_name` and `units`, then
/// the names xarray users give them.
pub fn axis_kind(name: &str, attrs: Option<&Map<String, Value>>) -> Option<bool> {
    match lower(attrs, "axis").as_str() {
        "x" => return Some(true),
        "y" => return Some(false),
        _ => {}
    }
    match lower(attrs, "standard_name").as_str() {
        "longitude" | "projection_x_coordinate" | "grid_longitude" => return Some(true),
        "latitude" | "projection_y_coordinate" | "grid_latitude" => return Some(false),
        _ => {}
    }
    match lower(attrs, "units").as_str() {
        "degrees_east" | "degree_east" | "degree_e" | "degrees_e" | "degreee" | "degreese" => {
            return Some(true)
        }
        "degrees_north" | "degree_north" | "degree_n" | "degrees_n" | "degreen" | "degreesn" => {
            return Some(false)
        }
        _ => {}
    }
    match name.to_ascii_lowercase().as_str() {
        "x" | "lon" | "longitude" | "long" | "nav_lon" | "easting" => Some(true),
        "y" | "lat" | "latitude" | "nav_lat" | "northing" => Some(false),
        _ => None,
    }
}

/// The positions of an array's y and x dimensions: the last dimension
/// whose coordinate reads as each (see [`axis_kind`]).
pub fn spatial_dims(dims: &[(&str, Option<&Map<String, Value>>)]) -> Option<(usize, usize)> {
    let find = |want: bool| {
        dims.iter()
            .rposition(|(name, attrs)| axis_kind(name, *attrs) == Some(want))
    };
    let (y, x) = (find(false)?, find(true)?);
    (y != x).then_some((y, x))
}

/// Whether a coordinate's attributes and name say degrees of longitude or
/// latitude (so a grid without a grid mapping is in degrees).
pub fn in_degrees(name: &str, attrs: Option<&Map<String, Value>>) -> bool {
    let units = lower(attrs, "units");
    let standard = lower(attrs, "standard_name");
    units.starts_with("degree")
        || standard == "longitude"
        || standard == "latitude"
        || (units.is_empty()
            && ["lon", "longitude", "lat", "latitude"]
                .contains(&name.to_ascii_lowercase().as_str()))
}

/// The levels a group's `multiscales` declares, finest first as written:
/// OME-NGFF's and ndpyramid's `datasets[].path`, or GeoZarr's
/// `layout[].asset`. Empty when it declares none.
pub fn overview_paths(attrs: &Map<String, Value>) -> Vec<String> {
    if let Some(m) = super::ome::multiscales(attrs).into_iter().next() {
        return m.datasets.into_iter().map(|d| d.path).collect();
    }
    attrs
        .get("multiscales")
        .and_then(|m| m.get("layout"))
        .and_then(Value::as_array)
        .map(|layout| {
            layout
                .iter()
                .filter_map(|l| l.get("asset").and_then(Value::as_str))
                .filter(|p| crate::store::StoreKey::new(p).is_ok())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_irregular_and_descending_axes_find_fractional_indices() {
        let a = Axis1::new(vec![0.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(a.index(1.25), Some(1.25));
        assert_eq!(a.index(-0.5), Some(-0.5));
        assert_eq!(a.index(3.6), None);
        let d = Axis1::new(vec![90.0, 45.0, 0.0]).unwrap();
        assert_eq!(d.index(67.5), Some(0.5));
        assert_eq!(d.edges(), (112.5, -22.5));
        let irregular = Axis1::new(vec![0.0, 1.0, 4.0]).unwrap();
        assert_eq!(irregular.index(2.5), Some(1.5));
        assert_eq!(irregular.index(-0.4), Some(-0.4));
        assert!(Axis1::new(vec![0.0, 2.0, 1.0]).is_err());
        assert!(Axis1::new(vec![0.0, f64::NAN]).is_err());
    }

    #[test]
    fn longitudes_go_round_the_circle() {
        let grid = GeoGrid {
            crs: Crs::degrees(),
            y_dim: 0,
            x_dim: 1,
            y: Axis1::new(vec![10.0, 0.0, -10.0]).unwrap(),
            x: Axis1::new((0..36).map(|i| i as f64 * 10.0).collect()).unwrap(),
        };
        assert_eq!(grid.locate((-10.0, 0.0)), Some((1.0, 35.0)));
        assert_eq!(grid.locate((370.0, 10.0)), Some((0.0, 1.0)));
        assert_eq!(grid.locate((0.0, 20.0)), None);
        assert_eq!(grid.bounds(), [-5.0, -15.0, 355.0, 15.0]);
    }

    #[test]
    fn a_polar_grid_reaches_the_pole_and_a_disk_in_space_the_world() {
        let polar = GeoGrid {
            crs: Crs::proj_string(
                "+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +ellps=WGS84 +units=m",
            )
            .unwrap(),
            y_dim: 0,
            x_dim: 1,
            y: Axis1::even(3e6, -3e6, 60),
            x: Axis1::even(-3e6, 3e6, 60),
        };
        let [w, s, e, n] = polar.bounds_degrees();
        assert_eq!((w, e, n), (-180.0, 180.0, 90.0));
        assert!(s > 40.0 && s < 60.0, "{s}");
        let space = GeoGrid {
            crs: Crs::proj_string("+proj=geos +h=35785831 +lon_0=0 +ellps=WGS84 +units=m").unwrap(),
            y: Axis1::even(1e8, 9e7, 4),
            x: Axis1::even(9e7, 1e8, 4),
            ..polar.clone()
        };
        assert_eq!(space.bounds_degrees(), [-180.0, -90.0, 180.0, 90.0]);
    }

    #[test]
    fn spatial_dimensions_by_attributes_then_names() {
        let lat: Map<String, Value> =
            serde_json::from_str(r#"{"units": "degrees_north"}"#).unwrap();
        let dims = [("time", None), ("latitude", Some(&lat)), ("lon", None)];
        assert_eq!(spatial_dims(&dims), Some((1, 2)));
        assert_eq!(spatial_dims(&[("time", None), ("level", None)]), None);
        assert!(in_degrees("latitude", Some(&lat)));
        assert!(!in_degrees("x", None));
    }
}
