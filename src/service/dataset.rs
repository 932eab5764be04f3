//! Arrays in the data's own terms: a group read as xarray reads it
//! (dimensions, coordinates, data variables), coordinates kept as the
//! index of their dimension, and selections by label turned into the
//! index selections the engine reads. Every endpoint that speaks labels
//! (`/api/v1/data`, statistics, tiles, WMS and EDR's times and levels)
//! asks here.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::{Result, Service, ServiceError};
use crate::config::Recheck;
use crate::store::StoreKey;
use crate::zarr::cf::coords::{Coordinate, LabelSel};
use crate::zarr::cf::{self, described_attributes, Packing, Period};
use crate::zarr::metadata::NodeMetadata;
use crate::zarr::reduce::Op;
use crate::zarr::selection::{DimSelector, Indices, Resolved, ResolvedDim};
use crate::zarr::{Array, ArrayMetadata, DataType, Selection};

/// The longest coordinate read whole as an index (32 MiB of numbers).
pub const MAX_COORDINATE: u64 = 4 << 20;

/// A request in the data's terms, beside (never with) an index selection.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// `sel.{dim}=`: labels.
    pub sel: Vec<(String, LabelSel)>,
    /// `tolerance.{dim}=`, for nearest labels.
    pub tolerance: Vec<(String, String)>,
    /// `isel.{dim}=`: indices.
    pub isel: Vec<(String, DimSelector)>,
    /// `decode=cf`.
    pub decode: bool,
    pub reduction: Option<Reduction>,
    /// The caller may not read the array's group, and so not the
    /// coordinates beside the array: no labels, no coordinates in answers.
    pub without_coordinates: bool,
}

impl Query {
    /// Whether it selects anything (and so cannot go with `select=`).
    pub fn selects(&self) -> bool {
        // A tolerance alone is a mistake the selection reports.
        !self.sel.is_empty() || !self.isel.is_empty() || !self.tolerance.is_empty()
    }

    /// Whether the answer is the stored values, unchanged.
    pub fn is_plain(&self) -> bool {
        !self.decode && self.reduction.is_none()
    }
}

/// `reduce=`, `coarsen=`, `resample=` and their options.
#[derive(Debug, Clone)]
pub struct Reduction {
    pub op: Op,
    /// Reduced away.
    pub dims: Vec<String>,
    /// Reduced in blocks of this many.
    pub coarsen: Vec<(String, u64)>,
    /// Reduced per calendar period.
    pub resample: Option<(String, Period)>,
    pub ddof: u64,
    pub q: Vec<f64>,
}

/// One dimension of an answer, with its coordinate when it has one.
#[derive(Debug, Clone)]
pub struct Axis {
    pub name: String,
    pub coordinate: Option<AxisValues>,
}

/// A coordinate's values at the positions of an answer.
#[derive(Debug, Clone)]
pub struct AxisValues {
    /// Unpacked numbers; times in `time`'s units.
    pub values: Vec<f64>,
    pub time: Option<cf::TimeUnits>,
    /// Stored in single precision.
    pub single: bool,
    /// Its CF attributes (units, calendar, names).
    pub attributes: Map<String, Value>,
}

impl Axis {
    /// The label of position `i`: an ISO 8601 time or a number.
    pub fn label(&self, i: usize) -> Option<Value> {
        let c = self.coordinate.as_ref()?;
        let v = *c.values.get(i)?;
        Some(match c.time.as_ref().and_then(|t| t.to_datetime(v)) {
            Some(at) => Value::String(at.to_string()),
            None => number_json(v, c.single),
        })
    }
}

/// A number as JSON: special floats as the strings v3 metadata writes;
/// single-precision values as their shortest decimal (52.1, not 52.09999).
pub fn number_json(v: f64, single: bool) -> Value {
    if v.is_nan() {
        Value::String("NaN".into())
    } else if v.is_infinite() {
        Value::String(if v > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else if single {
        format!("{}", v as f32)
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or(Value::from(v))
    } else {
        Value::from(v)
    }
}

/// A coordinate kept as an index, with what it was built from.
#[derive(Debug, Clone)]
pub(super) struct Indexed {
    pub coordinate: Arc<Coordinate>,
    pub attributes: Map<String, Value>,
    version: u64,
    at: Instant,
}

/// Coordinates read whole, by path: they are the index every label is
/// looked up in.
pub(super) type Coordinates = moka::future::Cache<String, Arc<Indexed>>;

pub(super) fn coordinates_cache() -> Coordinates {
    moka::future::Cache::builder()
        .max_capacity(256 << 20)
        .weigher(|_k: &String, v: &Arc<Indexed>| {
            u32::try_from(v.coordinate.len() * 8 + 256).unwrap_or(u32::MAX)
        })
        .build()
}

/// The dimension names of an array, or why labels cannot be used on it.
pub fn dimensions(array: &Array) -> Result<Vec<String>> {
    cf::dimension_names(array.metadata()).ok_or_else(|| {
        ServiceError::invalid(
            "no_dimensions",
            format!(
                "'{}' does not name its dimensions (dimension_names in v3, _ARRAY_DIMENSIONS in v2), so it can only be selected by index (select=)",
                array.path()
            ),
        )
    })
}

fn label_error(message: String) -> ServiceError {
    ServiceError::invalid("bad_label", message)
}

impl Service {
    /// The coordinate of dimension `dim` of the array at `array` (the
    /// 1-D array named `dim` beside it), `None` when there is none.
    pub(super) async fn coordinate(
        &self,
        array: &StoreKey,
        dim: &str,
        len: u64,
    ) -> Result<Option<Arc<Indexed>>> {
        let Some(parent) = array.parent() else {
            return Ok(None);
        };
        let Ok(path) = parent.join(dim) else {
            return Ok(None);
        };
        let meta = match self.node(&path).await {
            Ok(node) => match &node.meta {
                NodeMetadata::Array(m) if m.shape == [len] => m.clone(),
                _ => return Ok(None),
            },
            Err(e) if e.kind == super::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if len > MAX_COORDINATE {
            return Err(ServiceError::too_large(format!(
                "the coordinate '{path}' has {len} values, more than the {MAX_COORDINATE} zarrd reads as an index; select {dim} by index (isel.{dim}=)"
            )));
        }
        let version = self.cache.subtree_version(&path);
        if let Some(kept) = self.coordinates.get(path.as_str()).await {
            let fresh = match self.cache.recheck() {
                Recheck::Never => true,
                Recheck::After(ttl) => kept.at.elapsed() < ttl,
                Recheck::Always => false,
            };
            if fresh && kept.version == version {
                return Ok(Some(kept));
            }
            self.coordinates.invalidate(path.as_str()).await;
        }
        let loaded = self
            .coordinates
            .try_get_with(path.as_str().to_string(), async {
                let array = self.array(&path).await?;
                let coordinate = self.load_coordinate(&array, &meta, dim).await?;
                Ok::<_, ServiceError>(Arc::new(Indexed {
                    coordinate: Arc::new(coordinate),
                    attributes: described_attributes(&meta.attributes),
                    version,
                    at: Instant::now(),
                }))
            })
            .await
            .map_err(|e: Arc<ServiceError>| (*e).clone())?;
        Ok(Some(loaded))
    }

    async fn load_coordinate(
        &self,
        array: &Array,
        meta: &ArrayMetadata,
        dim: &str,
    ) -> Result<Coordinate> {
        let _held = self
            .budget
            .reserve(meta.shape[0].saturating_mul(16), "a coordinate")
            .await?;
        let packing = Packing::of(meta).map_err(|e| {
            ServiceError::invalid("bad_attributes", format!("coordinate '{dim}': {e}"))
        })?;
        let data = array
            .read(&Selection::all().resolve(array.shape())?)
            .await?
            .into_fixed()?;
        let mut values = Vec::with_capacity(meta.shape[0] as usize);
        cf::numbers(&meta.dtype, &data, &mut values).ok_or_else(|| {
            ServiceError::invalid(
                "bad_label",
                format!(
                    "the coordinate '{dim}' holds {} values, not numbers or times, so it cannot be selected by label",
                    meta.dtype.name()
                ),
            )
        })?;
        if !packing.is_identity() {
            for v in &mut values {
                *v = packing.decode(*v);
            }
        }
        let single = matches!(
            meta.dtype,
            DataType::Float32 | DataType::Float16 | DataType::BFloat16
        ) && packing.scale_factor.is_none()
            && packing.add_offset.is_none();
        Ok(Coordinate::new(dim, values, single, packing.time))
    }

    /// The index selection `query`'s labels and indices mean on `array`.
    pub(super) async fn label_selection(&self, array: &Array, query: &Query) -> Result<Selection> {
        let names = dimensions(array)?;
        let shape = array.shape();
        let mut dims = vec![DimSelector::all(); names.len()];
        let mut given = vec![false; names.len()];
        let position = |dim: &str| -> Result<usize> {
            names.iter().position(|n| n == dim).ok_or_else(|| {
                label_error(format!(
                    "'{}' has no dimension '{dim}' (its dimensions are {})",
                    array.path(),
                    names.join(", ")
                ))
            })
        };
        for (dim, _) in &query.tolerance {
            if !query.sel.iter().any(|(d, _)| d == dim) {
                return Err(label_error(format!(
                    "tolerance.{dim} goes with a nearest label, sel.{dim}=~LABEL"
                )));
            }
        }
        for (dim, selector) in &query.isel {
            let d = position(dim)?;
            given[d] = true;
            dims[d] = selector.clone();
        }
        if query.without_coordinates && !query.sel.is_empty() {
            return Err(ServiceError::new(
                super::ErrorKind::Forbidden,
                "forbidden",
                format!(
                    "labels are looked up in the coordinate arrays beside '{}', which this token may not read; select by index (isel.{{dim}}=)",
                    array.path()
                ),
            ));
        }
        for (dim, sel) in &query.sel {
            let d = position(dim)?;
            if std::mem::replace(&mut given[d], true) {
                return Err(label_error(format!(
                    "{dim} is selected twice (by sel.{dim} and isel.{dim}); give one"
                )));
            }
            let Some(indexed) = self.coordinate(array.path(), dim, shape[d]).await? else {
                return Err(label_error(format!(
                    "dimension {dim} has no coordinate (no 1-D array '{dim}' of length {} beside '{}'), so it can only be selected by index (isel.{dim}=)",
                    shape[d],
                    array.path()
                )));
            };
            let tolerance = query
                .tolerance
                .iter()
                .find(|(d, _)| d == dim)
                .map(|(_, t)| t.as_str());
            if tolerance.is_some() && !matches!(sel, LabelSel::Nearest(_)) {
                return Err(label_error(format!(
                    "tolerance.{dim} goes with a nearest label, sel.{dim}=~LABEL"
                )));
            }
            dims[d] = indexed
                .coordinate
                .select(sel, tolerance)
                .map_err(|e| label_error(format!("sel.{dim}: {e}")))?;
        }
        Ok(Selection::Orthogonal(dims))
    }

    /// The axes of a read of `array` resolved as `resolved`: the kept
    /// dimensions, each with its coordinate's values at the positions read.
    pub(super) async fn axes(
        &self,
        array: &Array,
        resolved: &Resolved,
        query: &Query,
    ) -> Result<Vec<Axis>> {
        let Some(names) = cf::dimension_names(array.metadata()) else {
            return Ok(Vec::new());
        };
        let Resolved::Orthogonal(dims) = resolved else {
            return Ok(Vec::new());
        };
        let mut axes = Vec::new();
        for ((name, dim), &len) in names.iter().zip(dims).zip(array.shape()) {
            if !dim.keep {
                continue;
            }
            let found = if query.without_coordinates {
                Ok(None)
            } else {
                self.coordinate(array.path(), name, len).await
            };
            let coordinate = match found {
                Ok(Some(indexed)) => Some(axis_values(&indexed, &dim.indices)),
                // An answer's labels are a courtesy: a coordinate too long
                // to index leaves its dimension unlabelled.
                Ok(None) | Err(_) => None,
            };
            axes.push(Axis {
                name: name.clone(),
                coordinate,
            });
        }
        Ok(axes)
    }
}

impl Service {
    /// The attributes of the grid-mapping variable the array names
    /// (`grid_mapping`: its CRS), empty when there is none.
    pub(super) async fn grid_mapping(&self, array: &Array, query: &Query) -> Map<String, Value> {
        let name = array
            .metadata()
            .attributes
            .get("grid_mapping")
            .and_then(Value::as_str)
            // `grid_mapping` may also be `crs: lat lon` (CF 1.7's long form).
            .and_then(|s| s.split([':', ' ']).next());
        let (Some(name), Some(parent), false) =
            (name, array.path().parent(), query.without_coordinates)
        else {
            return Map::new();
        };
        let Ok(path) = parent.join(name) else {
            return Map::new();
        };
        match self.node(&path).await {
            Ok(node) => node.meta.attributes().clone(),
            Err(_) => Map::new(),
        }
    }
}

/// A coordinate's values at `indices`.
pub(super) fn axis_values(indexed: &Indexed, indices: &Indices) -> AxisValues {
    let c = &indexed.coordinate;
    AxisValues {
        values: (0..indices.len())
            .map(|i| c.values[indices.get(i) as usize])
            .collect(),
        time: c.time.clone(),
        single: c.single,
        attributes: indexed.attributes.clone(),
    }
}

/// The kept dimensions of a resolved selection, for reductions.
pub(super) fn kept(resolved: &Resolved) -> Vec<(usize, &ResolvedDim)> {
    match resolved {
        Resolved::Orthogonal(dims) => dims.iter().enumerate().filter(|(_, d)| d.keep).collect(),
        Resolved::Points { .. } => Vec::new(),
    }
}

/// A group read as xarray reads it.
#[derive(Debug, Clone, Default)]
pub struct DatasetView {
    /// Every dimension a member names, with its length.
    pub dimensions: Vec<(String, u64)>,
    pub coordinates: Vec<VariableView>,
    pub data_variables: Vec<VariableView>,
}

/// One array of a dataset.
#[derive(Debug, Clone)]
pub struct VariableView {
    pub name: String,
    pub dimensions: Vec<String>,
    pub shape: Vec<u64>,
    pub dtype: String,
    /// Its CF attributes.
    pub attributes: Map<String, Value>,
    /// A dimension coordinate's first and last labels.
    pub extent: Option<(Value, Value)>,
    /// A dimension coordinate's time calendar.
    pub calendar: Option<&'static str>,
}

impl Service {
    /// The group at `group` as a dataset; `None` when no member names
    /// its dimensions.
    pub async fn dataset(&self, group: &StoreKey) -> Result<Option<DatasetView>> {
        let mut view = DatasetView::default();
        let mut arrays = Vec::new();
        for (name, node) in self.members(group).await? {
            if !matches!(node, Ok(NodeMetadata::Array(_))) {
                continue;
            }
            // A listing's nodes are summaries: the attributes are the node's.
            let Ok(node) = self.node(&group.join(&name)?).await else {
                continue;
            };
            let NodeMetadata::Array(meta) = &node.meta else {
                continue;
            };
            let meta = meta.clone();
            let Some(dims) = cf::dimension_names(&meta) else {
                continue;
            };
            for (d, &len) in dims.iter().zip(&meta.shape) {
                if !view.dimensions.iter().any(|(n, _)| n == d) {
                    view.dimensions.push((d.clone(), len));
                }
            }
            arrays.push((name, dims, meta));
        }
        if arrays.is_empty() {
            return Ok(None);
        }
        // Non-dimension coordinates: what data variables list in `coordinates`.
        let listed: Vec<String> = arrays
            .iter()
            .filter_map(|(_, _, m)| {
                m.attributes
                    .get("coordinates")?
                    .as_str()
                    .map(str::to_string)
            })
            .flat_map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect();
        for (name, dims, meta) in arrays {
            let is_index = dims.len() == 1 && dims[0] == name;
            let (extent, calendar) = if is_index {
                let path = group.join(&name)?;
                match self.coordinate(&path, &name, meta.shape[0]).await {
                    Ok(Some(indexed)) => {
                        let c = &indexed.coordinate;
                        let axis = Axis {
                            name: name.clone(),
                            coordinate: Some(axis_values(
                                &indexed,
                                &Indices::Range {
                                    start: 0,
                                    step: (c.len() as u64).saturating_sub(1).max(1),
                                    len: c.len().min(2) as u64,
                                },
                            )),
                        };
                        let first = axis.label(0).unwrap_or(Value::Null);
                        let last = axis.label(1).unwrap_or_else(|| first.clone());
                        (
                            Some((first, last)),
                            c.time.as_ref().map(|t| t.calendar.name()),
                        )
                    }
                    _ => (None, None),
                }
            } else {
                (None, None)
            };
            let variable = VariableView {
                attributes: described_attributes(&meta.attributes),
                dtype: meta.dtype.name(),
                shape: meta.shape.clone(),
                dimensions: dims,
                extent,
                calendar,
                name: name.clone(),
            };
            if is_index || listed.contains(&name) {
                view.coordinates.push(variable);
            } else {
                view.data_variables.push(variable);
            }
        }
        Ok(Some(view))
    }
}
