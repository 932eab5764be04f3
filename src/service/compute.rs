//! Answers computed from a selection rather than copied out of it: CF
//! decoding, reductions (by dimension, block or calendar period),
//! statistics and histograms. The selection is read in blocks of about a
//! million elements, decoded and folded into per-block state on the
//! decoding pool, several blocks at once, and the states merged: memory is
//! the output's and the blocks in flight, never the input's.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use serde_json::{Map, Value};

use super::blocks::{sub_selection, Blocks};
use super::dataset::{dimensions, kept, Axis, AxisValues, Query};
use super::{Content, Data, ReadRequest, Residence, Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::array::run_blocking;
use crate::zarr::cf::{self, Packing};
use crate::zarr::reduce::{Accumulator, Grouping, Histogram, Op, Plan, Summary};
use crate::zarr::selection::{Resolved, ResolvedDim};
use crate::zarr::{Array, ArrayBytes, DataType, Selection};

/// Per-block states held at once when blocks fold in parallel; past it,
/// blocks fold one after the other into one state.
const PARALLEL_STATE_BYTES: u64 = 64 << 20;
/// The blocks read and folded at once hold at most about this much.
const BLOCKS_IN_FLIGHT_BYTES: u64 = 512 << 20;
/// The bytes one block of a computation over `dims` (of `count`
/// elements) holds at `bytes_per_element`, and how many blocks to fold at
/// once: one per thread of the decoding pool, no more than the selection
/// has, nor than [`BLOCKS_IN_FLIGHT_BYTES`] of them.
fn blocks_at_once(
    array: &Array,
    dims: &[ResolvedDim],
    count: u64,
    bytes_per_element: u64,
) -> (u64, u64) {
    let block = Blocks::largest(dims, &array.read_chunk_shape()).min(count.max(1));
    let block_bytes = block * bytes_per_element;
    let threads = (rayon::current_num_threads().max(1) as u64)
        .min(count.div_ceil(block).max(1))
        .min((BLOCKS_IN_FLIGHT_BYTES / block_bytes).max(1));
    (block_bytes, threads)
}

/// The most histogram bins.
pub const MAX_BINS: usize = 10_000;

/// Statistics of a selection, and its histogram when asked for.
#[derive(Debug, Clone)]
pub struct Statistics {
    pub summary: Summary,
    pub histogram: Option<Histogram>,
}

fn invalid(code: &'static str, message: String) -> ServiceError {
    ServiceError::invalid(code, message)
}

impl Service {
    /// A read in the data's terms: `query`'s labels (or the request's
    /// index selection), decoded and reduced as it says. `axes` asks for
    /// the answer's coordinates.
    pub async fn read_query(
        &self,
        path: &StoreKey,
        mut request: ReadRequest,
        query: &Query,
        residence: Residence,
        axes: bool,
    ) -> Result<Data> {
        let array = self.array(&self.store.pin(path).await?).await?;
        if query.selects() {
            request.selection = self.label_selection(&array, query).await?;
        }
        if query.is_plain() {
            let resolved = match &request.selection {
                Selection::Orthogonal(_) if axes && request.field.is_none() => {
                    Some(request.selection.resolve(array.shape())?)
                }
                _ => None,
            };
            let meta = array.metadata();
            let mut attributes = cf::described_attributes(&meta.attributes);
            // xarray masks a v2 array's fill value: formats that carry the
            // attributes say so, or their readers would not.
            if meta.zarr_format == 2 && !attributes.contains_key("_FillValue") {
                if let Some(fill) = cf::fill_as_f64(meta) {
                    attributes.insert("_FillValue".into(), super::number_json(fill, false));
                }
            }
            let mut data = self.read_array(array.clone(), request, residence).await?;
            if let Some(resolved) = resolved {
                data.axes = self.axes(&array, &resolved, query).await?;
                data.attributes = attributes;
                data.grid_mapping = self.grid_mapping(&array, query).await;
            }
            return Ok(data);
        }
        if request.field.is_some() {
            return Err(invalid(
                "bad_query",
                "decode and reduce work on whole elements, not a field".into(),
            ));
        }
        self.computed(array, &request.selection, query).await
    }

    async fn computed(&self, array: Array, selection: &Selection, query: &Query) -> Result<Data> {
        let resolved = selection.resolve(array.shape())?;
        let Resolved::Orthogonal(dims) = &resolved else {
            return Err(invalid(
                "bad_query",
                "decode and reduce work on a region (select=, sel., isel.), not on points".into(),
            ));
        };
        let meta = array.metadata();
        let packing = self.packing(&array, query.decode)?;
        let stored = meta.dtype.clone();
        let is_datetime = matches!(stored, DataType::DateTime64 { .. });
        if let (true, Some(units), false) = (query.decode, &packing.time, is_datetime) {
            if query.reduction.is_some() {
                return Err(invalid(
                    "bad_reduction",
                    format!(
                        "'{}' holds times ({}): reduce the numbers stored, without decode=cf",
                        array.path(),
                        units.describe()
                    ),
                ));
            }
            let units = units.clone();
            return self
                .decoded_times(array, &resolved, &packing, units, query)
                .await;
        }
        let decoded = if query.decode {
            packing.decoded_dtype(&stored)
        } else {
            stored.clone()
        };
        let kept = kept(&resolved);
        let kept_shape: Vec<u64> = kept.iter().map(|(_, d)| d.indices.len()).collect();
        let names: Vec<String> = match cf::dimension_names(meta) {
            Some(names) => kept.iter().map(|(i, _)| names[*i].clone()).collect(),
            None => (0..kept.len()).map(|i| format!("dim_{i}")).collect(),
        };
        let axes = if cf::dimension_names(meta).is_some() {
            self.axes(&array, &resolved, query).await?
        } else {
            Vec::new()
        };
        let (op, groupings, ddof, q) = match &query.reduction {
            None => (None, vec![Grouping::Keep; kept.len()], 0, Vec::new()),
            Some(r) => {
                if !r.dims.is_empty() || !r.coarsen.is_empty() || r.resample.is_some() {
                    dimensions(&array)?;
                }
                let groupings = self.groupings(&names, &axes, r, query.without_coordinates)?;
                (Some(r.op), groupings, r.ddof, r.q.clone())
            }
        };
        let plan = Plan::new(&kept_shape, groupings.clone()).map_err(|e| {
            invalid(
                "bad_reduction",
                format!(
                    "coarsen: {}",
                    name_dimension(&e, &names).unwrap_or(e.clone())
                ),
            )
        })?;
        let cells = plan.cells() as u64;
        // Decoding alone keeps every cell: the largest of one value is
        // that value (a missing one stays NaN).
        let acc_op = op.unwrap_or(Op::Max);
        let out_dtype = output_dtype(op, &decoded);
        let along = match op {
            Some(o) if o.is_arg() => {
                let reduced: Vec<usize> = groupings
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| matches!(g, Grouping::Reduce))
                    .map(|(i, _)| i)
                    .collect();
                match reduced.as_slice() {
                    [one] => *one,
                    _ => {
                        return Err(invalid(
                            "bad_reduction",
                            format!(
                                "{} reduces exactly one dimension (reduce={}:DIM)",
                                o.name(),
                                o.name()
                            ),
                        ))
                    }
                }
            }
            _ => 0,
        };
        // What the answer holds: the states, what median keeps of the
        // input, and the output.
        let count: u64 = kept_shape.iter().product();
        let out_cells = cells.saturating_mul(q.len().max(1) as u64);
        let state = cells.saturating_mul(Accumulator::bytes_per_cell(acc_op));
        let held_values = if acc_op.holds_values() {
            count.saturating_mul(8)
        } else {
            0
        };
        let output = out_cells.saturating_mul(out_dtype.size().unwrap_or(8) as u64);
        let need = state.saturating_add(held_values).saturating_add(output);
        let limit = self.limits.in_memory;
        if need > limit {
            let what = if acc_op.holds_values() {
                format!(
                    "{} holds every value it reduces in memory: {count} values",
                    acc_op.name()
                )
            } else {
                format!("the answer has {out_cells} values")
            };
            return Err(ServiceError::too_large(format!(
                "{what}, about {need} bytes, over the {limit}-byte limit for answers built in memory; select less, coarsen more, or reduce more dimensions"
            )));
        }
        let (block_bytes, threads) =
            blocks_at_once(&array, dims, count, 8 + stored.size().unwrap_or(8) as u64);
        let parallel =
            if acc_op.holds_values() || state.saturating_mul(threads) > PARALLEL_STATE_BYTES {
                1
            } else {
                threads
            };
        let mut reservation = self
            .budget
            .reserve(
                need.saturating_add(state.saturating_mul(parallel))
                    .saturating_add(block_bytes.saturating_mul(parallel + 1)),
                "this reduction",
            )
            .await?;
        let plan = Arc::new(plan);
        let fold_plan = plan.clone();
        let acc = self
            .over_blocks(
                &array,
                dims,
                Arc::new(packing),
                parallel as usize,
                move || Accumulator::new(acc_op, cells as usize, along),
                move |acc, start, shape, values| acc.add(&fold_plan, start, shape, values),
                |a, b| a.merge(b),
            )
            .await?;
        if op.is_some_and(Op::is_arg) {
            if let Some(cell) = acc.first_empty() {
                let at = crate::zarr::buffer::unravel(
                    cell,
                    &plan
                        .out_shape()
                        .iter()
                        .map(|&n| n as usize)
                        .collect::<Vec<_>>(),
                );
                return Err(ServiceError::unprocessable(
                    "all_missing",
                    format!(
                        "{}: every value reduced is missing at output position {at:?}, so it has no answer there",
                        acc_op.name()
                    ),
                ));
            }
        }
        let values = run_blocking(move || Ok(acc.finish(ddof, &q))).await?;
        let bytes = cf::to_bytes(&out_dtype, &values);
        let mut shape = Vec::new();
        let mut out_axes = Vec::new();
        if let Some(r) = query.reduction.as_ref().filter(|r| r.op == Op::Quantile) {
            shape.push(r.q.len() as u64);
            out_axes.push(Axis {
                name: "quantile".into(),
                coordinate: Some(AxisValues {
                    values: r.q.clone(),
                    time: None,
                    single: false,
                    attributes: Map::new(),
                }),
            });
        }
        shape.extend_from_slice(plan.out_shape());
        if !axes.is_empty() {
            for (axis, grouping) in axes.into_iter().zip(&groupings) {
                if let Some(axis) = grouped_axis(axis, grouping, query) {
                    out_axes.push(axis);
                }
            }
        }
        reservation.shrink_to(bytes.len() as u64);
        let mut attributes = cf::described_attributes(&meta.attributes);
        if query.decode {
            for packed in ["scale_factor", "add_offset", "_FillValue", "missing_value"] {
                attributes.remove(packed);
            }
        }
        if let Some(op) = op {
            attributes.insert(
                "cell_methods".into(),
                Value::String(format!(
                    "{}: {}",
                    reduced_names(&names, &groupings),
                    op.name()
                )),
            );
        }
        let grid_mapping = self.grid_mapping(&array, query).await;
        Ok(Data {
            grid_mapping,
            dtype: out_dtype,
            shape,
            limit,
            fill: None,
            content: Content::Whole(ArrayBytes::Fixed(bytes)),
            reservation,
            axes: out_axes,
            name: array.path().name().to_string(),
            attributes,
        })
    }

    /// A variable of CF times, decoded as xarray decodes it: numpy
    /// datetimes (nanoseconds since 1970), missing values as NaT. Other
    /// calendars than the Gregorian ones have no numpy datetime.
    async fn decoded_times(
        &self,
        array: Array,
        resolved: &Resolved,
        packing: &Packing,
        units: cf::TimeUnits,
        query: &Query,
    ) -> Result<Data> {
        if !matches!(
            units.calendar,
            cf::Calendar::Standard | cf::Calendar::ProlepticGregorian
        ) {
            return Err(ServiceError::new(
                super::ErrorKind::NotAcceptable,
                "not_acceptable",
                format!(
                    "'{}' holds times in the {} calendar, which numpy's datetimes cannot hold (xarray gives cftime objects); read the numbers stored, without decode=cf, as format=netcdf, which carries their units",
                    array.path(),
                    units.calendar.name()
                ),
            ));
        }
        let count = resolved.num_elements();
        let limit = self.limits.in_memory;
        let need = count.saturating_mul(16);
        if need > limit {
            return Err(ServiceError::too_large(format!(
                "decoding {count} times takes about {need} bytes, over the {limit}-byte limit for answers built in memory; select less"
            )));
        }
        let mut reservation = self.budget.reserve(need, "decoding times").await?;
        let meta = array.metadata();
        let bytes = array.read(resolved).await?.into_fixed()?;
        let mut values = Vec::with_capacity(count as usize);
        cf::numbers(&meta.dtype, &bytes, &mut values);
        drop(bytes);
        let out: Vec<u8> = values
            .iter()
            .flat_map(|&v| {
                units
                    .unix_nanos(packing.decode(v))
                    .unwrap_or(i64::MIN)
                    .to_le_bytes()
            })
            .collect();
        reservation.shrink_to(out.len() as u64);
        let axes = self.axes(&array, resolved, query).await?;
        let mut attributes = cf::described_attributes(&meta.attributes);
        for encoded in [
            "units",
            "calendar",
            "scale_factor",
            "add_offset",
            "_FillValue",
            "missing_value",
        ] {
            attributes.remove(encoded);
        }
        Ok(Data {
            dtype: DataType::DateTime64 {
                unit: "ns".into(),
                scale: 1,
            },
            shape: resolved.shape(),
            limit,
            fill: None,
            content: Content::Whole(ArrayBytes::Fixed(out)),
            reservation,
            axes,
            name: array.path().name().to_string(),
            attributes,
            grid_mapping: Map::new(),
        })
    }

    /// Statistics of a selection (and, with `bins`, its histogram over
    /// `range` or the values' own).
    pub async fn statistics(
        &self,
        path: &StoreKey,
        selection: Selection,
        query: &Query,
        bins: Option<usize>,
        range: Option<(f64, f64)>,
    ) -> Result<Statistics> {
        let array = self.array(&self.store.pin(path).await?).await?;
        let selection = if query.selects() {
            self.label_selection(&array, query).await?
        } else {
            selection
        };
        let resolved = selection.resolve(array.shape())?;
        let Resolved::Orthogonal(dims) = &resolved else {
            return Err(invalid(
                "bad_query",
                "statistics are of a region (select=, sel., isel.), not of points".into(),
            ));
        };
        let packing = Arc::new(self.packing(&array, query.decode)?);
        let count: u64 = dims.iter().map(|d| d.indices.len()).product();
        let (block_bytes, threads) = blocks_at_once(&array, dims, count, 16);
        let _held = self
            .budget
            .reserve(block_bytes * (threads + 1), "computing statistics")
            .await?;
        let threads = threads as usize;
        let summary = self
            .over_blocks(
                &array,
                dims,
                packing.clone(),
                threads,
                Summary::default,
                |s, _, _, values| s.add(values),
                |a, b| a.merge(b),
            )
            .await?;
        let histogram = match bins {
            None => None,
            Some(bins) => {
                let (mut lo, mut hi) = range.unwrap_or((summary.min, summary.max));
                if summary.count == 0 && range.is_none() {
                    Some(Histogram::new(f64::NAN, f64::NAN, bins))
                } else if !(lo.is_finite() && hi.is_finite() && (hi - lo).is_finite()) {
                    return Err(invalid(
                        "bad_query",
                        format!(
                            "range: the values run from {lo} to {hi}, which equal bins cannot span; give range=LOW,HIGH"
                        ),
                    ));
                } else {
                    // One value: a bin-wide range around it, as numpy's.
                    if lo == hi {
                        (lo, hi) = (lo - 0.5, hi + 0.5);
                    }
                    Some(
                        self.over_blocks(
                            &array,
                            dims,
                            packing,
                            threads,
                            move || Histogram::new(lo, hi, bins),
                            |h, _, _, values| h.add(values),
                            |a, b| a.merge(&b),
                        )
                        .await?,
                    )
                }
            }
        };
        Ok(Statistics { summary, histogram })
    }

    fn packing(&self, array: &Array, decode: bool) -> Result<Packing> {
        let meta = array.metadata();
        if cf::numbers(
            &meta.dtype,
            &vec![0; meta.dtype.size().unwrap_or(0)],
            &mut Vec::new(),
        )
        .is_none()
        {
            return Err(ServiceError::new(
                super::ErrorKind::NotAcceptable,
                "not_numbers",
                format!(
                    "'{}' holds {} values; decoding, reductions and statistics need numbers",
                    array.path(),
                    meta.dtype.name()
                ),
            ));
        }
        if !decode {
            return Ok(Packing::default());
        }
        Packing::of(meta).map_err(|e| {
            invalid(
                "bad_attributes",
                format!("'{}' cannot be decoded: {e}", array.path()),
            )
        })
    }

    /// How each kept dimension is reduced.
    fn groupings(
        &self,
        names: &[String],
        axes: &[Axis],
        r: &super::Reduction,
        without_coordinates: bool,
    ) -> Result<Vec<Grouping>> {
        let mut groupings = vec![Grouping::Keep; names.len()];
        let everything = r.dims.is_empty() && r.coarsen.is_empty() && r.resample.is_none();
        if everything {
            groupings = vec![Grouping::Reduce; names.len()];
        }
        let mut set = |dim: &str, g: Grouping, what: &str| -> Result<()> {
            let d = names.iter().position(|n| n == dim).ok_or_else(|| {
                invalid(
                    "bad_reduction",
                    format!(
                        "{what}: the selection has no dimension '{dim}' (it has {}; a dimension selected by one label or index is gone)",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                )
            })?;
            if !matches!(groupings[d], Grouping::Keep) {
                return Err(invalid(
                    "bad_reduction",
                    format!("{what}: {dim} is reduced twice"),
                ));
            }
            groupings[d] = g;
            Ok(())
        };
        for dim in &r.dims {
            set(dim, Grouping::Reduce, "reduce")?;
        }
        for (dim, n) in &r.coarsen {
            set(dim, Grouping::Blocks(*n), "coarsen")?;
        }
        if let Some((dim, period)) = &r.resample {
            if !names.contains(dim) {
                return Err(invalid(
                    "bad_reduction",
                    format!(
                        "resample: the selection has no dimension '{dim}' (it has {}; a dimension selected by one label or index is gone)",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                ));
            }
            if without_coordinates {
                return Err(ServiceError::forbidden(
                    "forbidden",
                    format!("resample: the periods of {dim} are in its coordinate beside the array, which this token may not read"),
                ));
            }
            let axis = axes.iter().find(|a| &a.name == dim);
            let Some((units, values)) = axis
                .and_then(|a| a.coordinate.as_ref())
                .and_then(|c| Some((c.time.as_ref()?, &c.values)))
            else {
                return Err(invalid(
                    "bad_reduction",
                    format!("resample: {dim} has no time coordinate (CF units 'UNIT since DATE') to find periods in"),
                ));
            };
            let periods: Vec<i64> = values
                .iter()
                .map(|&v| units.period_of(v, *period))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    invalid(
                        "bad_reduction",
                        format!("resample: {dim} has missing times"),
                    )
                })?;
            let first = periods.iter().copied().min().unwrap_or(0);
            let last = periods.iter().copied().max().unwrap_or(0);
            let count = u64::try_from(last - first + 1).unwrap_or(u64::MAX);
            if count > super::dataset::MAX_COORDINATE {
                return Err(invalid(
                    "bad_reduction",
                    format!(
                        "resample: {dim} spans {count} periods, more than {}",
                        super::dataset::MAX_COORDINATE
                    ),
                ));
            }
            let of: Vec<u32> = periods.iter().map(|p| (p - first) as u32).collect();
            set(
                dim,
                Grouping::Groups {
                    of: of.into(),
                    count,
                },
                "resample",
            )?;
        }
        Ok(groupings)
    }

    /// Reads the selection `dims` of `array` block by block, folds each
    /// block's decoded values into a fresh `init()` state with `add`, and
    /// merges the states; with `parallel` 1, every block folds into one
    /// state in order.
    #[allow(clippy::too_many_arguments)]
    async fn over_blocks<T, I, A, M>(
        &self,
        array: &Array,
        dims: &[ResolvedDim],
        packing: Arc<Packing>,
        parallel: usize,
        init: I,
        add: A,
        merge: M,
    ) -> Result<T>
    where
        T: Send + 'static,
        I: Fn() -> T + Send + Sync + 'static,
        A: Fn(&mut T, &[u64], &[u64], &[f64]) + Send + Sync + 'static,
        M: Fn(&mut T, T),
    {
        let blocks = Blocks::new(dims, &array.read_chunk_shape());
        let dtype = array.metadata().dtype.clone();
        let keep: Arc<[bool]> = dims.iter().map(|d| d.keep).collect();
        let add = Arc::new(add);
        let reads = futures::stream::iter(blocks).map(|(start, len)| {
            let array = array.clone();
            let sub = sub_selection(dims, &start, &len);
            async move {
                let bytes = array.read(&sub).await?.into_fixed()?;
                Ok::<_, ServiceError>((start, len, bytes))
            }
        });
        let fold = {
            let dtype = dtype.clone();
            let packing = packing.clone();
            let keep = keep.clone();
            move |state: &mut T, start: Vec<u64>, len: Vec<u64>, bytes: Vec<u8>, add: &A| {
                let mut values = Vec::with_capacity(bytes.len() / dtype.size().unwrap_or(1).max(1));
                cf::numbers(&dtype, &bytes, &mut values);
                drop(bytes);
                if !packing.is_identity() {
                    for v in &mut values {
                        *v = packing.decode(*v);
                    }
                }
                let pick = |v: &[u64]| -> Vec<u64> {
                    v.iter()
                        .zip(keep.iter())
                        .filter(|(_, k)| **k)
                        .map(|(x, _)| *x)
                        .collect()
                };
                add(state, &pick(&start), &pick(&len), &values);
            }
        };
        let fold = Arc::new(fold);
        if parallel <= 1 {
            let mut state = Some(init());
            let mut reads = reads.buffered(2);
            while let Some(read) = reads.next().await {
                let (start, len, bytes) = read?;
                let mut s = state.take().unwrap_or_else(&init);
                let (fold, add) = (fold.clone(), add.clone());
                s = run_blocking(move || {
                    fold(&mut s, start, len, bytes, &add);
                    Ok(s)
                })
                .await?;
                state = Some(s);
            }
            return Ok(state.unwrap_or_else(init));
        }
        let init = Arc::new(init);
        let states = reads
            .map(|read| {
                let (fold, add, init) = (fold.clone(), add.clone(), init.clone());
                async move {
                    let (start, len, bytes) = read.await?;
                    Ok::<_, ServiceError>(
                        run_blocking(move || {
                            let mut s = init();
                            fold(&mut s, start, len, bytes, &add);
                            Ok(s)
                        })
                        .await?,
                    )
                }
            })
            .buffer_unordered(parallel);
        states
            .try_fold(init(), |mut total, s| {
                merge(&mut total, s);
                async move { Ok(total) }
            })
            .await
    }
}

/// An axis of the answer after its dimension's grouping: gone when
/// reduced, block means when coarsened (xarray's default), period starts
/// when resampled.
fn grouped_axis(axis: Axis, grouping: &Grouping, query: &Query) -> Option<Axis> {
    match grouping {
        Grouping::Keep => Some(axis),
        Grouping::Reduce => None,
        Grouping::Blocks(n) => Some(Axis {
            coordinate: axis.coordinate.map(|mut c| {
                c.values = c
                    .values
                    .chunks(*n as usize)
                    .map(|b| b.iter().sum::<f64>() / b.len() as f64)
                    .collect();
                c
            }),
            ..axis
        }),
        Grouping::Groups { of, count } => {
            let period = query.reduction.as_ref()?.resample.as_ref()?.1;
            let coordinate = axis.coordinate.map(|mut c| {
                if let (Some(units), Some(&v0)) = (&c.time, c.values.first()) {
                    let first = units.period_of(v0, period).unwrap_or(0) - i64::from(of[0]);
                    c.values = (0..*count as i64)
                        .map(|k| units.period_start(first + k, period).unwrap_or(f64::NAN))
                        .collect();
                }
                c
            });
            Some(Axis { coordinate, ..axis })
        }
    }
}

fn reduced_names(names: &[String], groupings: &[Grouping]) -> String {
    let reduced: Vec<&str> = names
        .iter()
        .zip(groupings)
        .filter(|(_, g)| !matches!(g, Grouping::Keep))
        .map(|(n, _)| n.as_str())
        .collect();
    reduced.join(": ")
}

/// "dimension 2 has…" with the dimension's name.
fn name_dimension(message: &str, names: &[String]) -> Option<String> {
    let rest = message.strip_prefix("dimension ")?;
    let (index, tail) = rest.split_once(' ')?;
    let name = names.get(index.parse::<usize>().ok()?)?;
    Some(format!("{name} {tail}"))
}

/// The dtype of a reduction's answer, as numpy gives it.
fn output_dtype(op: Option<Op>, input: &DataType) -> DataType {
    use DataType::*;
    let float = match input {
        Float16 | Float32 => Float32,
        _ => Float64,
    };
    match op {
        None => input.clone(),
        Some(Op::Mean | Op::Std | Op::Var | Op::Median | Op::Quantile) => float,
        Some(Op::Count | Op::Argmin | Op::Argmax) => Int64,
        Some(Op::Sum) => match input {
            Float16 | Float32 => Float32,
            Float64 => Float64,
            UInt8 | UInt16 | UInt32 | UInt64 => UInt64,
            _ => Int64,
        },
        Some(Op::Min | Op::Max) => match input {
            Float16 | BFloat16 => Float32,
            DateTime64 { .. } | TimeDelta64 { .. } | Bool => Float64,
            other => other.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_dtypes_of_reductions() {
        assert_eq!(
            output_dtype(Some(Op::Mean), &DataType::Int16),
            DataType::Float64
        );
        assert_eq!(
            output_dtype(Some(Op::Mean), &DataType::Float32),
            DataType::Float32
        );
        assert_eq!(
            output_dtype(Some(Op::Sum), &DataType::UInt8),
            DataType::UInt64
        );
        assert_eq!(
            output_dtype(Some(Op::Max), &DataType::Int16),
            DataType::Int16
        );
        assert_eq!(
            output_dtype(Some(Op::Argmax), &DataType::Float32),
            DataType::Int64
        );
    }
}
