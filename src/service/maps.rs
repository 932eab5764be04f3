//! Arrays as maps: which arrays are georeferenced and where (their
//! [`MapLayer`]: grid, CRS, pyramid levels, other dimensions), pictures of
//! them in any CRS drawn from the coarsest level that is fine enough, and
//! the value at a point. Tiles, WMS and the viewer's map all ask here;
//! the selection of the other dimensions is the labelled [`Query`] every
//! endpoint shares.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::dataset::{axis_values, dimensions, AxisValues, Query};
use super::{ReadRequest, Residence, Result, Service, ServiceError};
use crate::config::Recheck;
use crate::store::StoreKey;
use crate::zarr::array::run_blocking;
use crate::zarr::cf::{self, Packing};
use crate::zarr::geo::warp::{self, Resampling, Tap, Target};
use crate::zarr::geo::{self, crs, Axis1, Crs, GeoGrid};
use crate::zarr::metadata::NodeMetadata;
use crate::zarr::selection::{DimSelector, Indices};
use crate::zarr::{Array, ArrayBytes, Selection};

/// The most chunks one picture may decode: past it, the array needs
/// overviews (a pyramid) for pictures that wide.
pub const MAX_PICTURE_CHUNKS: usize = 1024;
/// The most pixels one picture may have (a 2048 x 2048 WMS map).
pub const MAX_PICTURE_PIXELS: u64 = 2048 * 2048;
/// Memory a picture holds per pixel at its peak, nearest neighbour: its
/// place on the grid (24 bytes), its tap (24), the value read (8), the
/// weighted sums (16), the value (8) and its colour and share of the
/// file (8). Bilinear reads four taps a pixel.
const PIXEL_BYTES: u64 = 96;
const BILINEAR_PIXEL_BYTES: u64 = 192;
/// Most layers a WMS lists, and nodes it walks to find them.
const MAX_LAYERS: usize = 1000;
const MAX_WALK: usize = 20_000;

/// A georeferenced array.
#[derive(Debug, Clone)]
pub struct MapLayer {
    pub path: StoreKey,
    pub dims: Vec<String>,
    pub shape: Vec<u64>,
    /// Its pyramid, finest first: the array itself when it has none.
    pub levels: Vec<MapLevel>,
    /// Its dimensions other than y and x, with their coordinates.
    pub others: Vec<OtherDim>,
    /// Its CF attributes (units, long_name, ...).
    pub attributes: Map<String, Value>,
    /// Its values are single precision (and written as such).
    pub single: bool,
    /// It is read at an Icechunk snapshot: its pictures never change.
    pub immutable: bool,
}

#[derive(Debug, Clone)]
pub struct MapLevel {
    pub path: StoreKey,
    pub grid: GeoGrid,
}

/// A dimension a map fixes at one position.
#[derive(Debug, Clone)]
pub struct OtherDim {
    pub name: String,
    pub len: u64,
    pub coordinate: Option<AxisValues>,
}

impl OtherDim {
    /// Whether its coordinate holds times.
    pub fn is_time(&self) -> bool {
        self.coordinate.as_ref().is_some_and(|c| c.time.is_some())
    }

    /// Whether it is a vertical dimension (CF `positive` or `axis: Z`).
    pub fn is_vertical(&self) -> bool {
        self.coordinate.as_ref().is_some_and(|c| {
            c.attributes.contains_key("positive")
                || c.attributes.get("axis").and_then(Value::as_str) == Some("Z")
        })
    }
}

impl MapLayer {
    pub fn grid(&self) -> &GeoGrid {
        &self.levels[0].grid
    }
}

/// A picture's values, row by row from the top; NaN where nothing is.
#[derive(Debug)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    pub values: Vec<f64>,
    /// The pyramid level drawn.
    pub level: usize,
    /// The memory the picture holds until it is drawn and sent.
    pub reservation: super::Reservation,
}

/// The value of a layer at a point.
#[derive(Debug, Clone)]
pub struct PointValue {
    /// NaN where the value is missing.
    pub value: f64,
    /// The element's index along each dimension of the level read.
    pub index: Vec<u64>,
    /// Its x and y in the layer's CRS.
    pub x: f64,
    pub y: f64,
}

/// Layers and value ranges, briefly kept: a map asks for the same layer
/// for each of its tiles.
#[derive(Debug)]
pub(super) struct MapCaches {
    layers: moka::future::Cache<String, (u64, Instant, Arc<MapLayer>)>,
    ranges: moka::future::Cache<String, (f64, f64)>,
    /// Every layer below a path (WMS capabilities): one walk shared by
    /// the requests that ask meanwhile, kept 10 s or until a write below.
    all: moka::future::Cache<String, Arc<Vec<Arc<MapLayer>>>>,
}

impl Default for MapCaches {
    fn default() -> Self {
        MapCaches {
            layers: moka::future::Cache::builder().max_capacity(4096).build(),
            ranges: moka::future::Cache::builder()
                .max_capacity(4096)
                .time_to_live(Duration::from_secs(300))
                .build(),
            all: moka::future::Cache::builder()
                .max_capacity(64)
                .time_to_live(Duration::from_secs(10))
                .build(),
        }
    }
}

fn not_georeferenced(path: &StoreKey, why: &str) -> ServiceError {
    ServiceError::new(
        super::ErrorKind::NotFound,
        "not_georeferenced",
        format!("'{path}' is not a map: {why}"),
    )
}

impl Service {
    /// The array at `path` as a map layer; 404 `not_georeferenced` when
    /// it is not one.
    pub async fn map_layer(&self, path: &StoreKey) -> Result<Arc<MapLayer>> {
        let version = self
            .cache
            .subtree_version(&path.parent().unwrap_or_else(StoreKey::root));
        if let Some((v, at, layer)) = self.maps.layers.get(path.as_str()).await {
            let fresh = match self.cache.recheck() {
                Recheck::Never => true,
                Recheck::After(ttl) => at.elapsed() < ttl,
                Recheck::Always => false,
            };
            if fresh && v == version {
                return Ok(layer);
            }
        }
        let layer = Arc::new(self.find_layer(path).await?);
        self.maps
            .layers
            .insert(
                path.as_str().to_string(),
                (version, Instant::now(), layer.clone()),
            )
            .await;
        Ok(layer)
    }

    async fn find_layer(&self, path: &StoreKey) -> Result<MapLayer> {
        let array = self.array(path).await?;
        let meta = array.metadata().clone();
        if meta.shape.len() < 2 {
            return Err(not_georeferenced(path, "it has fewer than two dimensions"));
        }
        let dims = dimensions(&array)
            .map_err(|_| not_georeferenced(path, "it does not name its dimensions"))?;
        let grid = self
            .geogrid(&array, &dims)
            .await?
            .ok_or_else(|| not_georeferenced(path, "no x and y coordinates with a known CRS"))?;
        let mut levels = vec![MapLevel {
            path: path.clone(),
            grid: grid.clone(),
        }];
        for level in self.pyramid(path).await {
            if level == *path {
                continue;
            }
            let Ok(a) = self.array(&level).await else {
                continue;
            };
            let shape = a.shape();
            if shape.len() != meta.shape.len() {
                continue;
            }
            let own = match dimensions(&a) {
                Ok(d) if d == dims => self.geogrid(&a, &d).await.ok().flatten(),
                _ => None,
            };
            let grid = own.unwrap_or_else(|| {
                grid.scaled(shape[grid.y_dim] as usize, shape[grid.x_dim] as usize)
            });
            levels.push(MapLevel { path: level, grid });
        }
        // Finest first, whatever order the pyramid was declared in.
        levels.sort_by_key(|l| std::cmp::Reverse(l.grid.x.len() * l.grid.y.len()));
        let mut others = Vec::new();
        for (d, name) in dims.iter().enumerate() {
            if d == grid.y_dim || d == grid.x_dim {
                continue;
            }
            let coordinate = match self.coordinate(path, name, meta.shape[d]).await {
                Ok(Some(indexed)) => Some(axis_values(
                    &indexed,
                    &Indices::Range {
                        start: 0,
                        step: 1,
                        len: meta.shape[d],
                    },
                )),
                _ => None,
            };
            others.push(OtherDim {
                name: name.clone(),
                len: meta.shape[d],
                coordinate,
            });
        }
        Ok(MapLayer {
            path: path.clone(),
            dims,
            shape: meta.shape.clone(),
            levels,
            others,
            attributes: cf::described_attributes(&meta.attributes),
            immutable: self.is_immutable(path).await,
            single: Packing::of(&meta)
                .is_ok_and(|p| p.decoded_dtype(&meta.dtype) == crate::zarr::DataType::Float32),
        })
    }

    /// The grid of `array` from its x and y coordinates and its CRS;
    /// `None` when it has no such coordinates or no CRS can be told.
    async fn geogrid(&self, array: &Array, dims: &[String]) -> Result<Option<GeoGrid>> {
        let shape = array.shape();
        let mut coords = Vec::with_capacity(dims.len());
        for (d, name) in dims.iter().enumerate() {
            coords.push(
                self.coordinate(array.path(), name, shape[d])
                    .await
                    .ok()
                    .flatten(),
            );
        }
        let signs: Vec<(&str, Option<&Map<String, Value>>)> = dims
            .iter()
            .zip(&coords)
            .map(|(n, c)| (n.as_str(), c.as_ref().map(|c| &c.attributes)))
            .collect();
        let Some((y_dim, x_dim)) = geo::spatial_dims(&signs) else {
            return Ok(None);
        };
        let (Some(xc), Some(yc)) = (&coords[x_dim], &coords[y_dim]) else {
            return Ok(None);
        };
        let Some(crs) = self
            .crs_of(array, &dims[x_dim], xc, &dims[y_dim], yc)
            .await?
        else {
            return Ok(None);
        };
        let axis = |name: &str, c: &super::dataset::Indexed| {
            Axis1::new(c.coordinate.values.clone()).map_err(|e| {
                ServiceError::unprocessable(
                    "bad_coordinate",
                    format!("'{}': coordinate {name}: {e}", array.path()),
                )
            })
        };
        Ok(Some(GeoGrid {
            crs,
            y_dim,
            x_dim,
            y: axis(&dims[y_dim], yc)?,
            x: axis(&dims[x_dim], xc)?,
        }))
    }

    async fn crs_of(
        &self,
        array: &Array,
        x_name: &str,
        x: &super::dataset::Indexed,
        y_name: &str,
        y: &super::dataset::Indexed,
    ) -> Result<Option<Crs>> {
        let bad =
            |e: String| ServiceError::unprocessable("bad_crs", format!("'{}': {e}", array.path()));
        // GeoZarr's attributes, on the array or the groups above it.
        let mut holders = vec![array.metadata().attributes.clone()];
        let mut at = array.path().parent();
        for _ in 0..2 {
            let Some(group) = at else { break };
            if let Ok(node) = self.node(&group).await {
                holders.push(node.meta.attributes().clone());
            }
            at = group.parent();
        }
        for attrs in &holders {
            if let Some(found) = crs::geozarr(attrs) {
                return found.map(Some).map_err(bad);
            }
        }
        let mapping = self.grid_mapping(array, &Query::default()).await;
        if !mapping.is_empty() {
            return crs::grid_mapping(&mapping)
                .map(Some)
                .map_err(|e| bad(format!("grid_mapping: {e}")));
        }
        let degrees = geo::in_degrees(x_name, Some(&x.attributes))
            && geo::in_degrees(y_name, Some(&y.attributes));
        Ok(degrees.then(Crs::degrees))
    }

    /// The arrays of the pyramid `path` is a level of (itself among
    /// them): levels of an OME-NGFF image beside it, or the same array in
    /// each level group of a pyramid above its group.
    async fn pyramid(&self, path: &StoreKey) -> Vec<StoreKey> {
        let Some(parent) = path.parent() else {
            return Vec::new();
        };
        let declared = |attrs: &Map<String, Value>| geo::overview_paths(attrs);
        if let Ok(node) = self.node(&parent).await {
            let levels: Vec<StoreKey> = declared(node.meta.attributes())
                .iter()
                .filter_map(|p| parent.join(p).ok())
                .collect();
            if levels.contains(path) {
                return levels;
            }
        }
        let Some(top) = parent.parent() else {
            return Vec::new();
        };
        let Ok(node) = self.node(&top).await else {
            return Vec::new();
        };
        let groups: Vec<StoreKey> = declared(node.meta.attributes())
            .iter()
            .filter_map(|p| top.join(p).ok())
            .collect();
        if !groups.contains(&parent) {
            return Vec::new();
        }
        groups
            .iter()
            .filter_map(|g| g.join(path.name()).ok())
            .collect()
    }

    /// Every georeferenced array below `path` (a pyramid once, by its
    /// finest level), in path order, at most [`MAX_LAYERS`]; at most 10 s
    /// old (a write through this server below `path` makes it new).
    pub async fn map_layers(&self, path: &StoreKey) -> Result<Arc<Vec<Arc<MapLayer>>>> {
        let key = format!("{path}\u{0}{}", self.cache.subtree_version(path));
        self.maps
            .all
            .try_get_with(key, async { self.walk_layers(path).await.map(Arc::new) })
            .await
            .map_err(|e: Arc<ServiceError>| (*e).clone())
    }

    async fn walk_layers(&self, path: &StoreKey) -> Result<Vec<Arc<MapLayer>>> {
        let mut layers = Vec::new();
        let mut after: Option<String> = None;
        let mut walked = 0;
        loop {
            let page = self
                .tree_page(path, after.as_deref(), super::TREE_PAGE)
                .await?;
            for node in &page.nodes {
                walked += 1;
                let Ok(n) = &node.node else { continue };
                let NodeMetadata::Array(m) = &n.meta else {
                    continue;
                };
                if m.shape.len() < 2 {
                    continue;
                }
                let Ok(key) = StoreKey::new(&node.path) else {
                    continue;
                };
                if let Ok(layer) = self.map_layer(&key).await {
                    if layer.levels[0].path == key && layers.len() < MAX_LAYERS {
                        layers.push(layer);
                    }
                }
            }
            match page.next {
                Some(next) if walked < MAX_WALK && layers.len() < MAX_LAYERS => after = Some(next),
                _ => break,
            }
        }
        Ok(layers)
    }

    /// The selection of a level that fixes the layer's other dimensions
    /// as `query` says (the first position of each it leaves out) and
    /// takes `y` and `x` as given.
    async fn fixed(
        &self,
        layer: &MapLayer,
        array: &Array,
        query: &Query,
    ) -> Result<Vec<DimSelector>> {
        let grid = layer.grid();
        let spatial = [&layer.dims[grid.y_dim], &layer.dims[grid.x_dim]];
        let named = query
            .sel
            .iter()
            .map(|(d, _)| d)
            .chain(query.isel.iter().map(|(d, _)| d));
        for dim in named {
            if spatial.contains(&dim) {
                return Err(ServiceError::invalid(
                    "bad_selection",
                    format!("{dim} is a dimension of the map itself: the picture's bounds choose it, not sel.{dim} or isel.{dim}"),
                ));
            }
        }
        let mut dims = if query.selects() {
            match self.label_selection(array, query).await? {
                Selection::Orthogonal(d) => d,
                Selection::Points(_) => {
                    return Err(ServiceError::new(
                        super::ErrorKind::Internal,
                        "internal",
                        "a label selection came back as points",
                    ))
                }
            }
        } else {
            vec![DimSelector::all(); layer.dims.len()]
        };
        for (d, sel) in dims.iter_mut().enumerate() {
            if d == grid.y_dim || d == grid.x_dim {
                continue;
            }
            let name = &layer.dims[d];
            let given = query.sel.iter().any(|(n, _)| n == name)
                || query.isel.iter().any(|(n, _)| n == name);
            match sel {
                DimSelector::Index(_) => {}
                _ if !given => *sel = DimSelector::Index(0),
                _ => {
                    return Err(ServiceError::invalid(
                        "bad_selection",
                        format!("a map shows one {name}: select one value (sel.{name}=LABEL or isel.{name}=INDEX), not a range or list"),
                    ))
                }
            }
        }
        Ok(dims)
    }

    /// Refuses a query whose other dimensions a map could not show (a
    /// label no coordinate holds, a range), as its pictures would.
    pub async fn check_map_query(&self, layer: &MapLayer, query: &Query) -> Result<()> {
        let array = self.array(&layer.levels[0].path).await?;
        self.fixed(layer, &array, query).await.map(drop)
    }

    /// A picture of `layer` as `target` frames it, with its other
    /// dimensions fixed by `query`, from the pyramid level whose cells are
    /// the largest no larger than the picture's pixels.
    pub async fn render_map(
        &self,
        layer: &MapLayer,
        query: &Query,
        target: &Target,
        resampling: Resampling,
    ) -> Result<Raster> {
        let pixels = target.width as u64 * target.height as u64;
        if pixels == 0 || pixels > MAX_PICTURE_PIXELS {
            return Err(ServiceError::invalid(
                "bad_size",
                format!(
                    "a picture of {} x {} pixels: give 1 to {MAX_PICTURE_PIXELS} pixels in all",
                    target.width, target.height
                ),
            ));
        }
        let per_pixel = match resampling {
            Resampling::Nearest => PIXEL_BYTES,
            Resampling::Bilinear => BILINEAR_PIXEL_BYTES,
        };
        let reservation = self
            .budget
            .reserve(pixels * per_pixel, "this picture")
            .await?;
        let grids: Vec<&GeoGrid> = layer.levels.iter().map(|l| &l.grid).collect();
        let level = warp::level_for(&grids, target);
        let grid = &layer.levels[level].grid;
        let array = self.array(&layer.levels[level].path).await?;
        let fixed = self.fixed(layer, &array, query).await?;
        let values = if resampling == Resampling::Nearest && target.crs.separable_with(&grid.crs) {
            // Degrees and Web Mercator: a picture's rows read grid rows and
            // its columns grid columns, so its pixels are a table of them.
            let (rows, cols) = warp::axes(grid, target);
            let (h, w) = grid.shape();
            let rows: Vec<Option<u64>> = rows
                .iter()
                .map(|r| r.map(|r| warp::nearest(r, h)))
                .collect();
            let cols: Vec<Option<u64>> = cols
                .iter()
                .map(|c| c.map(|c| warp::nearest(c, w)))
                .collect();
            self.table_values(&array, grid, &fixed, &rows, &cols)
                .await?
        } else {
            // Projecting every pixel is CPU work: on the decoding pool.
            let (g, t) = (grid.clone(), target.clone());
            let taps = run_blocking(move || {
                let located = warp::locate(&g, &t);
                Ok(warp::taps(&g, &located, resampling))
            })
            .await?;
            let values = self.tap_values(&array, grid, &fixed, &taps).await?;
            warp::resample(target.pixels(), &taps, |i| values[i])
        };
        Ok(Raster {
            width: target.width,
            height: target.height,
            values,
            level,
            reservation,
        })
    }

    /// The values of a picture whose row `r` shows grid row `rows[r]` and
    /// column `c` grid column `cols[c]` (`None`: off the grid), read as one
    /// selection of those rows and columns.
    async fn table_values(
        &self,
        array: &Array,
        grid: &GeoGrid,
        fixed: &[DimSelector],
        rows: &[Option<u64>],
        cols: &[Option<u64>],
    ) -> Result<Vec<f64>> {
        let mut out = vec![f64::NAN; rows.len() * cols.len()];
        let distinct = |v: &[Option<u64>]| {
            let mut d: Vec<u64> = v.iter().flatten().copied().collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let (ur, uc) = (distinct(rows), distinct(cols));
        if ur.is_empty() || uc.is_empty() {
            return Ok(out);
        }
        let chunk = array.read_chunk_shape();
        let (cy, cx) = (chunk[grid.y_dim].max(1), chunk[grid.x_dim].max(1));
        let chunks_across = |v: &[u64], c: u64| {
            let mut n: Vec<u64> = v.iter().map(|i| i / c).collect();
            n.dedup();
            n.len()
        };
        let chunks = chunks_across(&ur, cy) * chunks_across(&uc, cx);
        if chunks > MAX_PICTURE_CHUNKS {
            return Err(too_many_chunks(array, chunks));
        }
        let mut dims = fixed.to_vec();
        dims[grid.y_dim] = DimSelector::List(ur.iter().map(|&r| r as i64).collect());
        dims[grid.x_dim] = DimSelector::List(uc.iter().map(|&c| c as i64).collect());
        let decoded = self
            .read_decoded(array, Selection::Orthogonal(dims))
            .await?;
        let (row_at, col_at) = (Positions::of(&ur), Positions::of(&uc));
        let x_first = grid.x_dim < grid.y_dim;
        let col_pos: Vec<Option<usize>> = cols.iter().map(|c| c.map(|c| col_at.get(c))).collect();
        for (r, row) in rows.iter().enumerate() {
            let Some(row) = row else { continue };
            let pr = row_at.get(*row);
            let line = &mut out[r * cols.len()..(r + 1) * cols.len()];
            for (px, pc) in line.iter_mut().zip(&col_pos) {
                if let Some(pc) = pc {
                    *px = if x_first {
                        decoded[pc * ur.len() + pr]
                    } else {
                        decoded[pr * uc.len() + pc]
                    };
                }
            }
        }
        Ok(out)
    }

    /// A selection's elements, decoded.
    async fn read_decoded(&self, array: &Array, selection: Selection) -> Result<Vec<f64>> {
        let data = self
            .read_array(
                array.clone(),
                ReadRequest {
                    selection,
                    field: None,
                    fixed_size_only: true,
                    encoding_per_element: 0,
                },
                Residence::InMemory { expansion: 1 },
            )
            .await?;
        decoded_values(array, &data)
    }

    /// The decoded value at each tap, read in one selection: the rows and
    /// columns they share when that is compact, else the elements alone.
    async fn tap_values(
        &self,
        array: &Array,
        grid: &GeoGrid,
        fixed: &[DimSelector],
        taps: &[Tap],
    ) -> Result<Vec<f64>> {
        if taps.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = array.read_chunk_shape();
        let (cy, cx) = (chunk[grid.y_dim].max(1), chunk[grid.x_dim].max(1));
        let mut chunks: Vec<(u64, u64)> = taps.iter().map(|t| (t.row / cy, t.col / cx)).collect();
        chunks.sort_unstable();
        chunks.dedup();
        if chunks.len() > MAX_PICTURE_CHUNKS {
            return Err(too_many_chunks(array, chunks.len()));
        }
        let mut rows: Vec<u64> = taps.iter().map(|t| t.row).collect();
        let mut cols: Vec<u64> = taps.iter().map(|t| t.col).collect();
        rows.sort_unstable();
        rows.dedup();
        cols.sort_unstable();
        cols.dedup();
        let compact = (rows.len() * cols.len()) as u64 <= 2 * taps.len() as u64 + 65_536;
        let fixed_index = |d: usize| match &fixed[d] {
            DimSelector::Index(i) => *i,
            _ => 0,
        };
        let selection = if compact {
            let mut dims = fixed.to_vec();
            dims[grid.y_dim] = DimSelector::List(rows.iter().map(|&r| r as i64).collect());
            dims[grid.x_dim] = DimSelector::List(cols.iter().map(|&c| c as i64).collect());
            Selection::Orthogonal(dims)
        } else {
            let points = taps
                .iter()
                .map(|t| {
                    (0..fixed.len())
                        .map(|d| match d {
                            d if d == grid.y_dim => t.row as i64,
                            d if d == grid.x_dim => t.col as i64,
                            d => fixed_index(d),
                        })
                        .collect()
                })
                .collect();
            Selection::Points(points)
        };
        let decoded = self.read_decoded(array, selection).await?;
        if !compact {
            return Ok(decoded);
        }
        // Rows then columns, in the order the dimensions come.
        let x_first = grid.x_dim < grid.y_dim;
        let (row_at, col_at) = (Positions::of(&rows), Positions::of(&cols));
        Ok(taps
            .iter()
            .map(|t| {
                let (r, c) = (row_at.get(t.row), col_at.get(t.col));
                let i = if x_first {
                    c * rows.len() + r
                } else {
                    r * cols.len() + c
                };
                decoded[i]
            })
            .collect())
    }

    /// The value of `layer` at (`x`, `y`) of `crs` (its finest level),
    /// `None` off the grid.
    pub async fn map_value(
        &self,
        layer: &MapLayer,
        query: &Query,
        crs: &Crs,
        (x, y): (f64, f64),
    ) -> Result<Option<PointValue>> {
        let grid = layer.grid();
        let mut p = [(x, y)];
        crs.transform(&grid.crs, &mut p);
        let Some((r, c)) = grid.locate(p[0]) else {
            return Ok(None);
        };
        let tap = warp::taps(grid, &[Some((r, c))], Resampling::Nearest);
        // The finest level, whichever level the layer was asked by.
        let array = self.array(&layer.levels[0].path).await?;
        let fixed = self.fixed(layer, &array, query).await?;
        let value = self.tap_values(&array, grid, &fixed, &tap).await?[0];
        let shape = array.shape();
        let index = fixed
            .iter()
            .enumerate()
            .map(|(d, s)| match s {
                _ if d == grid.y_dim => tap[0].row,
                _ if d == grid.x_dim => tap[0].col,
                // Counted from the end, as numpy counts it.
                DimSelector::Index(i) if *i < 0 => shape[d].saturating_sub(i.unsigned_abs()),
                DimSelector::Index(i) => *i as u64,
                _ => 0,
            })
            .collect();
        Ok(Some(PointValue {
            value,
            index,
            x: grid.x.values()[tap[0].col as usize],
            y: grid.y.values()[tap[0].row as usize],
        }))
    }

    /// The range a map's colours span when the request names none: the
    /// layer's `valid_min`/`valid_max` (or `valid_range`), else the 2nd to
    /// 98th percentile of its coarsest level (at most 512 x 512 of it, by
    /// stride) at the same other dimensions, so every tile of a map uses
    /// the same colours. `positive`: of the values above 0 only (for a log
    /// scale).
    pub async fn map_range(
        &self,
        layer: &MapLayer,
        query: &Query,
        positive: bool,
    ) -> Result<(f64, f64)> {
        let attr = |k: &str| layer.attributes.get(k).and_then(cf::attr_number);
        let range = layer
            .attributes
            .get("valid_range")
            .and_then(Value::as_array);
        let (lo, hi) = match range {
            Some(r) if r.len() == 2 => (cf::attr_number(&r[0]), cf::attr_number(&r[1])),
            _ => (attr("valid_min"), attr("valid_max")),
        };
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if !positive || lo > 0.0 {
                return Ok((lo, hi));
            }
        }
        let coarsest = layer.levels.last().unwrap_or(&layer.levels[0]);
        let array = self.array(&coarsest.path).await?;
        let mut dims = self.fixed(layer, &array, query).await?;
        let key = format!(
            "{}\u{0}{}\u{0}{positive}\u{0}{dims:?}",
            coarsest.path,
            self.cache.subtree_version(&coarsest.path)
        );
        if let Some(kept) = self.maps.ranges.get(&key).await {
            return Ok(kept);
        }
        let grid = &coarsest.grid;
        let (shape, chunk) = (array.shape(), array.read_chunk_shape());
        for d in [grid.y_dim, grid.x_dim] {
            dims[d] = DimSelector::List(sample(shape[d], chunk[d]));
        }
        let mut finite: Vec<f64> = self
            .read_decoded(&array, Selection::Orthogonal(dims))
            .await?
            .into_iter()
            .filter(|v| v.is_finite() && (!positive || *v > 0.0))
            .collect();
        let found = if finite.is_empty() {
            (0.0, 1.0)
        } else {
            finite.sort_by(f64::total_cmp);
            let at = |q: f64| finite[((finite.len() - 1) as f64 * q).round() as usize];
            (at(0.02), at(0.98))
        };
        self.maps.ranges.insert(key, found).await;
        Ok(found)
    }

    /// Whether what `path` holds can never change (read at an Icechunk
    /// snapshot id), so pictures of it can be kept for good.
    async fn is_immutable(&self, path: &StoreKey) -> bool {
        for name in ["zarr.json", ".zarray"] {
            if let Ok(key) = path.join(name) {
                if let Ok(Some(meta)) = self.store.head(&key).await {
                    return meta.immutable();
                }
            }
        }
        false
    }
}

/// At most 512 positions along a dimension of `len` in chunks of `chunk`,
/// spread over at most 32 of its chunks: a sample of a level for its
/// range that decodes at most 32 x 32 chunks, however the array is cut.
fn sample(len: u64, chunk: u64) -> Vec<i64> {
    let chunk = chunk.max(1);
    let chunks = len.div_ceil(chunk);
    let picked = chunks.min(32);
    let per_chunk = (512 / picked).max(1);
    let mut out = Vec::new();
    for k in 0..picked {
        let c = k * chunks / picked;
        let (start, end) = (c * chunk, ((c + 1) * chunk).min(len));
        let step = (end - start).div_ceil(per_chunk).max(1);
        out.extend((start..end).step_by(step as usize).map(|i| i as i64));
    }
    out
}

fn too_many_chunks(array: &Array, chunks: usize) -> ServiceError {
    ServiceError::too_large(format!(
        "this picture of '{}' would decode {chunks} chunks, more than {MAX_PICTURE_CHUNKS}: zoom in, or give the array overviews (a multiscales pyramid) for pictures this wide",
        array.path()
    ))
}

/// Where each index is in a sorted list of distinct indices: a table
/// over their span when it is short (a tile's rows are), else a search.
struct Positions<'a> {
    sorted: &'a [u64],
    first: u64,
    table: Vec<u32>,
}

impl<'a> Positions<'a> {
    fn of(sorted: &'a [u64]) -> Self {
        let first = sorted.first().copied().unwrap_or(0);
        let span = sorted.last().map_or(0, |&l| l - first + 1);
        let table = if span <= 1 << 20 {
            let mut t = vec![0u32; span as usize];
            for (i, &v) in sorted.iter().enumerate() {
                t[(v - first) as usize] = i as u32;
            }
            t
        } else {
            Vec::new()
        };
        Positions {
            sorted,
            first,
            table,
        }
    }

    fn get(&self, v: u64) -> usize {
        if self.table.is_empty() {
            self.sorted.binary_search(&v).unwrap_or(0)
        } else {
            self.table[(v - self.first) as usize] as usize
        }
    }
}

/// A read's elements as the numbers they mean: CF-decoded, NaN where
/// missing (`_FillValue`, `missing_value`, a v2 array's fill value), as
/// xarray decodes them.
fn decoded_values(array: &Array, data: &super::Data) -> Result<Vec<f64>> {
    let super::Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ServiceError::new(
            super::ErrorKind::Internal,
            "internal",
            "a map read came back streamed",
        ));
    };
    let meta = array.metadata();
    let mut values = Vec::with_capacity(bytes.len() / meta.dtype.size().unwrap_or(1).max(1));
    cf::numbers(&meta.dtype, bytes, &mut values).ok_or_else(|| {
        ServiceError::new(
            super::ErrorKind::NotAcceptable,
            "not_numbers",
            format!(
                "'{}' holds {} values; a map draws numbers",
                array.path(),
                meta.dtype.name()
            ),
        )
    })?;
    let packing = Packing::of(meta).map_err(|e| {
        ServiceError::invalid(
            "bad_attributes",
            format!("'{}' cannot be decoded: {e}", array.path()),
        )
    })?;
    for v in &mut values {
        *v = packing.decode(*v);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn a_range_sample_touches_at_most_32_chunks_a_dimension() {
        let s = sample(100_000, 100);
        assert!(s.len() <= 544 && s.len() >= 256, "{}", s.len());
        let mut chunks: Vec<i64> = s.iter().map(|i| i / 100).collect();
        chunks.dedup();
        assert_eq!(chunks.len(), 32);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && *s.last().unwrap() < 100_000);
        assert_eq!(sample(10, 100), (0..10).collect::<Vec<i64>>());
        assert_eq!(sample(1000, 1).len(), 32);
    }
}
