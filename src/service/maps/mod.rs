//! Arrays as maps: which arrays are georeferenced and where (their
//! [`MapLayer`]: grid, CRS, pyramid levels, other dimensions), pictures of
//! them in any CRS drawn from the coarsest level that is fine enough, and
//! the value at a point, values at places (EDR's queries). Tiles, WMS,
//! EDR and the viewer's map all ask here;
//! the selection of the other dimensions is the labelled [`Query`] every
//! endpoint shares.

mod picture;
mod places;

pub use places::{Interpolation, Place, Sampled};

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
