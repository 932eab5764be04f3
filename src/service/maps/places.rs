//! Values of a georeferenced array at places: a point (the nearest cell,
//! or bilinear as xarray's `interp`), a box, polygons, a circle, the
//! vertices of a trajectory. Places are given in any CRS and found on the
//! layer's grid (longitudes round the circle); the other dimensions are
//! chosen by label, as every labelled endpoint chooses them; values are
//! CF-decoded. What OGC API – EDR's queries read.

use serde_json::{Map, Value};

use super::MapLayer;
use crate::service::{Axis, AxisValues, Query, Reservation, Result, Service, ServiceError};
use crate::zarr::geo::{self, Crs, GeoGrid};
use crate::zarr::selection::{DimSelector, Resolved};
use crate::zarr::Selection;

/// Where to read.
#[derive(Debug, Clone)]
pub enum Place {
    Point(f64, f64),
    /// `[min x, min y, max x, max y]`.
    Box([f64; 4]),
    /// Rings; a cell is inside when its centre is inside an odd number of
    /// them (so holes and multipolygons alike).
    Polygons(Vec<Vec<(f64, f64)>>),
    /// Cells whose centres are within `km` of the point (great circle).
    Radius {
        x: f64,
        y: f64,
        km: f64,
    },
    /// The cells nearest each vertex.
    Trajectory(Vec<(f64, f64)>),
}

/// How a point's value is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    Nearest,
    Linear,
}

/// One array's values at a place.
#[derive(Debug)]
pub struct Sampled {
    /// The array's name.
    pub name: String,
    /// Its CF attributes.
    pub attributes: Map<String, Value>,
    /// The dimensions of the answer with their coordinates (x and y in
    /// the layer's CRS; a trajectory's vertices one dimension, `points`).
    pub axes: Vec<Axis>,
    pub shape: Vec<u64>,
    /// C order; NaN where missing or outside the place.
    pub values: Vec<f64>,
    /// The positions of x and y among the axes (`None` for a trajectory).
    pub xy: Option<(usize, usize)>,
    /// A trajectory's vertices on the grid (x, y in the layer's CRS).
    pub points: Vec<(f64, f64)>,
    /// A trajectory's time (its time dimension's label at the position
    /// read), when it has one.
    pub instant: Option<Value>,
    pub crs: Crs,
    pub single: bool,
    /// The memory the answer holds until it is sent.
    pub reservation: Reservation,
}

fn outside(what: &str) -> ServiceError {
    ServiceError::new(
        crate::service::ErrorKind::NotFound,
        "no_data",
        format!("{what} is outside the grid: no values there"),
    )
}

/// Whether (x, y) is inside an odd number of `rings` (even-odd rule).
fn inside(rings: &[Vec<(f64, f64)>], (x, y): (f64, f64)) -> bool {
    let mut odd = false;
    for ring in rings {
        let outside_box = ring.iter().all(|p| p.1 > y) || ring.iter().all(|p| p.1 < y);
        if outside_box {
            continue;
        }
        let n = ring.len();
        for i in 0..n {
            let (x1, y1) = ring[i];
            let (x2, y2) = ring[(i + 1) % n];
            if (y1 > y) != (y2 > y) && x < x1 + (y - y1) * (x2 - x1) / (y2 - y1) {
                odd = !odd;
            }
        }
    }
    odd
}

/// Great-circle distance in km between two (lon, lat) points.
fn km_between((x1, y1): (f64, f64), (x2, y2): (f64, f64)) -> f64 {
    let (p1, p2) = (y1.to_radians(), y2.to_radians());
    let dp = p2 - p1;
    let dl = (x2 - x1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6371.0088 * a.sqrt().min(1.0).asin()
}

/// A box in `crs` around a place (for polygons and circles, their extent).
fn place_extent(place: &Place) -> [f64; 4] {
    match place {
        Place::Box(b) => *b,
        Place::Polygons(rings) => geo::extent(rings.iter().flatten().copied()),
        Place::Radius { x, y, km } => {
            let dlat = km / 111.195;
            let coslat = (y.abs() + dlat).min(89.999).to_radians().cos();
            let dlon = (dlat / coslat.max(1e-6)).min(180.0);
            [
                x - dlon,
                (y - dlat).max(-90.0),
                x + dlon,
                (y + dlat).min(90.0),
            ]
        }
        Place::Point(x, y) => [*x, *y, *x, *y],
        Place::Trajectory(points) => geo::extent(points.iter().copied()),
    }
}

impl Service {
    /// `layer`'s values at `place` (given in `crs`), its other dimensions
    /// as `query` selects them (all of each it leaves out). `per_value`:
    /// the bytes the answer holds for each value (the value and its share
    /// of what it is written as), reserved and held to the in-memory limit.
    pub async fn sample(
        &self,
        layer: &MapLayer,
        place: &Place,
        crs: &Crs,
        interpolation: Interpolation,
        query: &Query,
        per_value: u64,
    ) -> Result<Sampled> {
        // A circle is measured on the sphere: its centre in degrees.
        let (place, crs) = match place {
            Place::Radius { x, y, km } if !crs.is_degrees() => {
                let mut c = [(*x, *y)];
                crs.to_degrees(&mut c);
                (
                    &Place::Radius {
                        x: c[0].0,
                        y: c[0].1,
                        km: *km,
                    },
                    &Crs::degrees(),
                )
            }
            _ => (place, crs),
        };
        let grid = layer.grid().clone();
        let array = self.array(&layer.levels[0].path).await?;
        let (yd, xd) = (grid.y_dim, grid.x_dim);
        let spatial = [&layer.dims[yd], &layer.dims[xd]];
        if let Some(d) = query
            .sel
            .iter()
            .map(|(d, _)| d)
            .chain(query.isel.iter().map(|(d, _)| d))
            .find(|d| spatial.contains(d))
        {
            return Err(ServiceError::invalid(
                "bad_selection",
                format!("{d} is placed by the query's coordinates, not by a selection"),
            ));
        }
        let mut dims = if query.selects() {
            match self.label_selection(&array, query).await? {
                Selection::Orthogonal(d) => d,
                Selection::Points(_) => vec![DimSelector::all(); layer.dims.len()],
            }
        } else {
            vec![DimSelector::all(); layer.dims.len()]
        };
        // An index drops its dimension; the answer keeps every one.
        for d in &mut dims {
            if let DimSelector::Index(i) = *d {
                *d = DimSelector::Slice {
                    start: Some(i),
                    stop: Some(if i == -1 { i64::MAX } else { i + 1 }),
                    step: None,
                };
            }
        }
        let to_grid = |points: &mut [(f64, f64)]| crs.transform(&grid.crs, points);
        let (ny, nx) = grid.shape();
        let mut linear = None;
        let mut mask: Option<Mask> = None;
        let mut x_values: Option<Vec<f64>> = None;
        let mut points = Vec::new();
        match place {
            Place::Point(x, y) => {
                let mut p = [(*x, *y)];
                to_grid(&mut p);
                let (r, c) = grid
                    .locate(p[0])
                    .ok_or_else(|| outside(&format!("POINT({x} {y})")))?;
                // Between the outermost cell centres and the edges there
                // is nothing to interpolate between (xarray's interp: NaN).
                let beyond = r < 0.0 || c < 0.0 || r > (ny - 1) as f64 || c > (nx - 1) as f64;
                let (r, c) = (r.clamp(0.0, (ny - 1) as f64), c.clamp(0.0, (nx - 1) as f64));
                match interpolation {
                    Interpolation::Nearest => {
                        dims[yd] = range(r.round() as u64, 1);
                        dims[xd] = range(c.round() as u64, 1);
                    }
                    Interpolation::Linear => {
                        let r0 = (r.floor() as u64).min(ny.saturating_sub(2) as u64);
                        let c0 = (c.floor() as u64).min(nx.saturating_sub(2) as u64);
                        dims[yd] = range(r0, (ny as u64).min(2));
                        dims[xd] = range(c0, (nx as u64).min(2));
                        linear = Some((r - r0 as f64, c - c0 as f64, p[0], beyond));
                    }
                }
            }
            Place::Trajectory(vertices) => {
                let mut p = vertices.clone();
                to_grid(&mut p);
                for (k, q) in p.iter().enumerate() {
                    let (r, c) = grid.locate(*q).ok_or_else(|| {
                        outside(&format!("vertex {k} ({} {})", vertices[k].0, vertices[k].1))
                    })?;
                    let (r, c) = (r.round() as usize, c.round() as usize);
                    points.push((r.min(ny - 1), c.min(nx - 1)));
                }
            }
            _ => {
                let region = region(&grid, place, crs)?;
                dims[yd] = list_or_range(&region.rows);
                dims[xd] = list_or_range(&region.cols);
                x_values = Some(region.xs);
                mask = region.mask;
            }
        }
        let shape = array.shape().to_vec();
        let mut instant = None;
        let selection = if points.is_empty() {
            Selection::Orthogonal(dims.clone())
        } else {
            let fixed = self.fixed(layer, &array, query).await?;
            instant = self.instant(&array, &fixed, &shape).await?;
            let index = |d: usize| match &fixed[d] {
                DimSelector::Index(i) if *i < 0 => shape[d] as i64 + i,
                DimSelector::Index(i) => *i,
                _ => 0,
            };
            Selection::Points(
                points
                    .iter()
                    .map(|&(r, c)| {
                        (0..shape.len())
                            .map(|d| match d {
                                _ if d == yd => r as i64,
                                _ if d == xd => c as i64,
                                _ => index(d),
                            })
                            .collect()
                    })
                    .collect(),
            )
        };
        let resolved = selection.resolve(&shape)?;
        let count = match &resolved {
            Resolved::Orthogonal(d) => d.iter().map(|d| d.indices.len()).product::<u64>(),
            Resolved::Points { .. } => points.len() as u64,
        };
        let bytes = count.saturating_mul(per_value);
        let limit = self.limits().in_memory;
        if bytes > limit {
            return Err(ServiceError::new(
                crate::service::ErrorKind::TooLarge,
                "too_large",
                format!(
                    "{count} values of '{}' here would take {bytes} bytes to answer, over the {limit} one answer may hold: ask for a smaller area or fewer times",
                    layer.path
                ),
            ));
        }
        let reservation = self.budget.reserve(bytes, "this answer").await?;
        let mut values = self.read_decoded(&array, selection).await?;
        let name = layer.path.name().to_string();
        let attributes = layer.attributes.clone();
        if !points.is_empty() {
            let coords: Vec<(f64, f64)> = points
                .iter()
                .map(|&(r, c)| (grid.x.values()[c], grid.y.values()[r]))
                .collect();
            return Ok(Sampled {
                name,
                attributes,
                axes: vec![Axis {
                    name: "points".into(),
                    coordinate: None,
                }],
                shape: vec![points.len() as u64],
                values,
                xy: None,
                points: coords,
                instant,
                crs: grid.crs.clone(),
                single: layer.single,
                reservation,
            });
        }
        let mut axes = self.axes(&array, &resolved, &Query::default()).await?;
        let mut out_shape: Vec<u64> = match &resolved {
            Resolved::Orthogonal(d) => d.iter().map(|d| d.indices.len()).collect(),
            Resolved::Points { .. } => Vec::new(),
        };
        if axes.len() != out_shape.len() {
            axes = layer
                .dims
                .iter()
                .map(|d| Axis {
                    name: d.clone(),
                    coordinate: None,
                })
                .collect();
        }
        if let Some(xs) = x_values {
            set_values(&mut axes[xd], xs);
        }
        if let Some(mask) = mask {
            // Each cell tested once, whatever the times and levels.
            let (ys, xs) = (axis_values(&axes[yd]), axis_values(&axes[xd]));
            let inside: Vec<bool> = ys
                .iter()
                .flat_map(|&y| xs.iter().map(move |&x| (x, y)))
                .map(&mask)
                .collect();
            let strides = strides(&out_shape);
            for (i, v) in values.iter_mut().enumerate() {
                let (r, c) = (
                    (i as u64 / strides[yd]) % out_shape[yd],
                    (i as u64 / strides[xd]) % out_shape[xd],
                );
                if !inside[(r * out_shape[xd] + c) as usize] {
                    *v = f64::NAN;
                }
            }
        }
        if let Some((fr, fc, (x, y), beyond)) = linear {
            values = bilinear(&values, &out_shape, yd, xd, fr, fc);
            if beyond {
                values.iter_mut().for_each(|v| *v = f64::NAN);
            }
            out_shape[yd] = 1;
            out_shape[xd] = 1;
            set_values(&mut axes[yd], vec![y]);
            set_values(&mut axes[xd], vec![x]);
        }
        Ok(Sampled {
            name,
            attributes,
            axes,
            shape: out_shape,
            values,
            xy: Some((xd, yd)),
            points: Vec::new(),
            instant: None,
            crs: grid.crs.clone(),
            single: layer.single,
            reservation,
        })
    }
}

impl Service {
    /// The time label of a selection that fixes every dimension but x
    /// and y at one position (a trajectory's).
    async fn instant(
        &self,
        array: &crate::zarr::Array,
        fixed: &[DimSelector],
        shape: &[u64],
    ) -> Result<Option<Value>> {
        let one: Vec<DimSelector> = fixed
            .iter()
            .zip(shape)
            .map(|(d, &n)| match d {
                DimSelector::Index(i) if *i < 0 => range((n as i64 + i).max(0) as u64, 1),
                DimSelector::Index(i) => range(*i as u64, 1),
                _ => range(0, 1),
            })
            .collect();
        let resolved = Selection::Orthogonal(one).resolve(shape)?;
        let axes = self.axes(array, &resolved, &Query::default()).await?;
        Ok(axes
            .iter()
            .find(|a| a.coordinate.as_ref().is_some_and(|c| c.time.is_some()))
            .and_then(|a| a.label(0)))
    }
}

/// Whether a cell, by its centre in the grid's CRS, is in a place.
type Mask = Box<dyn Fn((f64, f64)) -> bool + Send>;

/// The cells of a box, polygons or a circle.
struct Region {
    rows: Vec<u64>,
    cols: Vec<u64>,
    /// The columns' x, longitudes taken round the circle into the box.
    xs: Vec<f64>,
    /// Which cells of the rows and columns are in the place (all for a box).
    mask: Option<Mask>,
}

fn region(grid: &GeoGrid, place: &Place, crs: &Crs) -> Result<Region> {
    let [mut x0, y0, mut x1, y1] = place_extent(place);
    let degrees = crs.is_degrees() && grid.crs.is_degrees();
    if degrees {
        // West of east across the antimeridian (`170..-170`), a box of the
        // whole circle or more as the circle once, and the west edge
        // between -180 and 180, so longitudes far out keep their digits.
        if x1 < x0 {
            x1 += 360.0;
        }
        if x1 - x0 >= 360.0 {
            (x0, x1) = (-180.0, 180.0 - 1e-9);
        } else {
            let turns = ((x0 + 180.0) / 360.0).floor() * 360.0;
            (x0, x1) = (x0 - turns, x1 - turns);
        }
    }
    let b = if degrees {
        [x0, y0, x1, y1]
    } else {
        region_in(crs, &grid.crs, [x0, y0, x1, y1])
    };
    let (cols, xs): (Vec<u64>, Vec<f64>) = if degrees {
        // Longitudes taken round the circle into the box.
        let mut cols: Vec<(f64, u64)> = grid
            .x
            .values()
            .iter()
            .enumerate()
            .map(|(i, &v)| (v + ((x0 - v) / 360.0).ceil() * 360.0, i as u64))
            .filter(|(v, _)| *v <= x1)
            .collect();
        cols.sort_by(|a, b| a.0.total_cmp(&b.0));
        cols.into_iter().map(|(v, i)| (i, v)).unzip()
    } else {
        grid.x
            .values()
            .iter()
            .enumerate()
            .filter(|(_, &v)| v >= b[0] && v <= b[2])
            .map(|(i, &v)| (i as u64, v))
            .unzip()
    };
    let rows: Vec<u64> = grid
        .y
        .values()
        .iter()
        .enumerate()
        .filter(|(_, &v)| v >= b[1] && v <= b[3])
        .map(|(i, _)| i as u64)
        .collect();
    if rows.is_empty() || cols.is_empty() {
        return Err(outside("the area"));
    }
    let from = grid.crs.clone();
    let mask: Option<Mask> = match place {
        Place::Polygons(rings) => {
            let (rings, to) = (rings.clone(), crs.clone());
            Some(Box::new(move |p| {
                let mut q = [p];
                if !degrees {
                    from.transform(&to, &mut q);
                }
                inside(&rings, q[0])
            }))
        }
        // Distances on the sphere, between longitudes and latitudes.
        Place::Radius { x, y, km } => {
            let mut centre = [(*x, *y)];
            crs.to_degrees(&mut centre);
            let (centre, km) = (centre[0], *km);
            Some(Box::new(move |p| {
                let mut q = [p];
                from.to_degrees(&mut q);
                km_between(centre, q[0]) <= km
            }))
        }
        _ => None,
    };
    Ok(Region {
        rows,
        cols,
        xs,
        mask,
    })
}

fn range(start: u64, len: u64) -> DimSelector {
    DimSelector::Slice {
        start: Some(start as i64),
        stop: Some((start + len) as i64),
        step: None,
    }
}

/// Consecutive indices as a range, others as a list.
fn list_or_range(indices: &[u64]) -> DimSelector {
    let consecutive = indices.windows(2).all(|w| w[1] == w[0] + 1);
    match (consecutive, indices.first()) {
        (true, Some(&first)) => range(first, indices.len() as u64),
        _ => DimSelector::List(indices.iter().map(|&i| i as i64).collect()),
    }
}

fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn axis_values(axis: &Axis) -> Vec<f64> {
    axis.coordinate
        .as_ref()
        .map(|c| c.values.clone())
        .unwrap_or_default()
}

fn set_values(axis: &mut Axis, values: Vec<f64>) {
    match &mut axis.coordinate {
        Some(c) => c.values = values,
        None => {
            axis.coordinate = Some(AxisValues {
                values,
                time: None,
                single: false,
                attributes: Map::new(),
            })
        }
    }
}

/// A box of `from` as a box of `to`: its edges traced, and the extent of
/// the points that land.
fn region_in(from: &Crs, to: &Crs, [x0, y0, x1, y1]: [f64; 4]) -> [f64; 4] {
    const N: usize = 16;
    let mut points = Vec::with_capacity(4 * (N + 1));
    for k in 0..=N {
        let t = k as f64 / N as f64;
        let (x, y) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
        points.extend([(x, y0), (x, y1), (x0, y), (x1, y)]);
    }
    from.transform(to, &mut points);
    geo::extent(points)
}

/// The values of a block two cells high and wide (or one, on an edge)
/// at the fraction (`fr`, `fc`) between its cells, for every position of
/// the other dimensions; NaN when any of the four is (as xarray's
/// `interp`).
fn bilinear(values: &[f64], shape: &[u64], yd: usize, xd: usize, fr: f64, fc: f64) -> Vec<f64> {
    let mut out_shape = shape.to_vec();
    out_shape[yd] = 1;
    out_shape[xd] = 1;
    let n: u64 = out_shape.iter().product();
    let mut out = vec![0.0; n as usize];
    let (from, to) = (strides(shape), strides(&out_shape));
    for (i, &v) in values.iter().enumerate() {
        let mut rest = i as u64;
        let mut o = 0;
        let mut w = 1.0;
        for d in 0..shape.len() {
            let k = rest / from[d];
            rest %= from[d];
            if d == yd || d == xd {
                let f = if d == yd { fr } else { fc };
                let single = shape[d] == 1;
                w *= match (single, k) {
                    (true, _) => 1.0,
                    (false, 0) => 1.0 - f,
                    _ => f,
                };
            } else {
                o += k * to[d];
            }
        }
        out[o as usize] += w * v;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polygons_and_holes_by_the_even_odd_rule() {
        let outer = vec![(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)];
        let hole = vec![(4.0, 4.0), (6.0, 4.0), (6.0, 6.0), (4.0, 6.0)];
        let rings = vec![outer, hole];
        assert!(inside(&rings, (1.0, 1.0)));
        assert!(!inside(&rings, (5.0, 5.0)));
        assert!(!inside(&rings, (11.0, 5.0)));
    }

    #[test]
    fn distances_on_the_sphere() {
        let d = km_between((0.0, 0.0), (1.0, 0.0));
        assert!((d - 111.195).abs() < 0.01, "{d}");
        assert!(km_between((179.5, 0.0), (-179.5, 0.0)) < 112.0);
    }

    #[test]
    fn bilinear_weights_and_missing_neighbours() {
        // 2 x 2 block, y then x.
        let v = [0.0, 10.0, 20.0, 30.0];
        let out = bilinear(&v, &[2, 2], 0, 1, 0.5, 0.25);
        assert!((out[0] - 12.5).abs() < 1e-12);
        let out = bilinear(&[0.0, f64::NAN, 20.0, 30.0], &[2, 2], 0, 1, 0.0, 0.0);
        assert!(
            out[0].is_nan(),
            "NaN times a zero weight is NaN, as numpy has it"
        );
        // A time dimension first: one value per time.
        let out = bilinear(
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            &[2, 2, 2],
            1,
            2,
            0.5,
            0.5,
        );
        assert_eq!(out, vec![1.5, 5.5]);
    }
}
