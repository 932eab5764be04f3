//! Reductions of array data as xarray computes them (NaN skipped):
//! which output cell each input element falls in ([`Plan`]: a dimension
//! kept, reduced away, coarsened by blocks, or grouped into calendar
//! periods), and per-cell accumulators that take blocks of elements in
//! any order and merge, so blocks can be reduced in parallel and memory
//! is the output's, not the input's.

use std::sync::Arc;

mod summary;

pub use summary::{Histogram, Summary};

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Mean,
    Sum,
    Min,
    Max,
    Std,
    Var,
    Count,
    Median,
    Quantile,
    Argmin,
    Argmax,
}

pub const OPS: &str = "mean, sum, min, max, std, var, count, median, quantile, argmin, argmax";

impl Op {
    pub fn parse(name: &str) -> Result<Op, String> {
        Ok(match name {
            "mean" => Op::Mean,
            "sum" => Op::Sum,
            "min" => Op::Min,
            "max" => Op::Max,
            "std" => Op::Std,
            "var" => Op::Var,
            "count" => Op::Count,
            "median" => Op::Median,
            "quantile" => Op::Quantile,
            "argmin" => Op::Argmin,
            "argmax" => Op::Argmax,
            other => return Err(format!("reduction '{other}' is not one of {OPS}")),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Mean => "mean",
            Op::Sum => "sum",
            Op::Min => "min",
            Op::Max => "max",
            Op::Std => "std",
            Op::Var => "var",
            Op::Count => "count",
            Op::Median => "median",
            Op::Quantile => "quantile",
            Op::Argmin => "argmin",
            Op::Argmax => "argmax",
        }
    }

    /// Whether it needs every value of a cell at once (and so memory the
    /// size of what it reduces).
    pub fn holds_values(self) -> bool {
        matches!(self, Op::Median | Op::Quantile)
    }

    pub fn is_arg(self) -> bool {
        matches!(self, Op::Argmin | Op::Argmax)
    }
}

/// How one input dimension maps onto the output.
#[derive(Debug, Clone)]
pub enum Grouping {
    Keep,
    /// Reduced away.
    Reduce,
    /// Blocks of this many positions become one (`coarsen`).
    Blocks(u64),
    /// Position `i` goes to group `of[i]`, of `count` groups (`resample`).
    Groups {
        of: Arc<[u32]>,
        count: u64,
    },
}

/// Which output cell each input element falls in.
#[derive(Debug, Clone)]
pub struct Plan {
    groupings: Vec<Grouping>,
    /// Each input dimension's output stride (0 when reduced away).
    strides: Vec<usize>,
    out_shape: Vec<u64>,
    cells: usize,
}

impl Plan {
    /// A plan for input of `shape`; errors name the dimension by index.
    pub fn new(shape: &[u64], groupings: Vec<Grouping>) -> Result<Plan, String> {
        let mut out_len = Vec::with_capacity(shape.len());
        for (d, (g, &len)) in groupings.iter().zip(shape).enumerate() {
            out_len.push(match g {
                Grouping::Keep => Some(len),
                Grouping::Reduce => None,
                Grouping::Blocks(0) => return Err(format!("dimension {d}: a block of 0")),
                Grouping::Blocks(n) if len % n != 0 => {
                    return Err(format!(
                        "dimension {d} has {len} values, not a multiple of {n}"
                    ))
                }
                Grouping::Blocks(n) => Some(len / n),
                Grouping::Groups { of, count } => {
                    if of.len() as u64 != len {
                        return Err(format!(
                            "dimension {d}: groups for {} of {len} values",
                            of.len()
                        ));
                    }
                    Some(*count)
                }
            });
        }
        let out_shape: Vec<u64> = out_len.iter().flatten().copied().collect();
        let cells = out_shape
            .iter()
            .try_fold(1usize, |a, &n| a.checked_mul(usize::try_from(n).ok()?))
            .ok_or("the output would have more cells than memory holds")?;
        let mut strides = vec![0usize; shape.len()];
        let mut stride = 1usize;
        for d in (0..shape.len()).rev() {
            if let Some(n) = out_len[d] {
                strides[d] = stride;
                stride = stride.saturating_mul(n as usize);
            }
        }
        Ok(Plan {
            groupings,
            strides,
            out_shape,
            cells,
        })
    }

    pub fn out_shape(&self) -> &[u64] {
        &self.out_shape
    }

    pub fn cells(&self) -> usize {
        self.cells
    }

    /// Output offsets of positions `start..start+len` along `dim`.
    fn offsets(&self, dim: usize, start: u64, len: u64) -> Vec<usize> {
        let stride = self.strides[dim];
        (start..start + len)
            .map(|i| match &self.groupings[dim] {
                Grouping::Keep => i as usize * stride,
                Grouping::Reduce => 0,
                Grouping::Blocks(n) => (i / n) as usize * stride,
                Grouping::Groups { of, .. } => of[i as usize] as usize * stride,
            })
            .collect()
    }

    /// Calls `f(base, inner, row, index)` for each row (the last
    /// dimension) of a block of `shape` starting at `start` (C order
    /// values): the row's cell is `base + inner[j]` for its element `j`;
    /// `index` is the row's position in the block's other dimensions.
    #[inline]
    fn rows(
        &self,
        start: &[u64],
        shape: &[u64],
        values: &[f64],
        mut f: impl FnMut(usize, &[usize], &[f64], &[usize]),
    ) {
        let n = shape.len();
        if n == 0 {
            if !values.is_empty() {
                f(0, &[0], &values[..1], &[]);
            }
            return;
        }
        if shape.contains(&0) {
            return;
        }
        let offsets: Vec<Vec<usize>> = (0..n)
            .map(|d| self.offsets(d, start[d], shape[d]))
            .collect();
        let inner = &offsets[n - 1];
        let mut index = vec![0usize; n - 1];
        let mut at = 0usize;
        loop {
            let base: usize = (0..n - 1).map(|d| offsets[d][index[d]]).sum();
            f(base, inner, &values[at..at + inner.len()], &index);
            at += inner.len();
            // The next row.
            let mut d = n - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                if (index[d] as u64) < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }

    /// Calls `f(cell, value, position along dim)` for each element of a
    /// block of `shape` starting at `start` (C order values).
    #[inline]
    fn walk(
        &self,
        start: &[u64],
        shape: &[u64],
        along: usize,
        values: &[f64],
        mut f: impl FnMut(usize, f64, u64),
    ) {
        let n = shape.len();
        self.rows(start, shape, values, |base, inner, row, index| {
            if n > 0 && along == n - 1 {
                for (j, (&v, &o)) in row.iter().zip(inner).enumerate() {
                    f(base + o, v, start[along] + j as u64);
                }
            } else {
                let p = if along + 1 < n {
                    start[along] + index[along] as u64
                } else {
                    0
                };
                for (&v, &o) in row.iter().zip(inner) {
                    f(base + o, v, p);
                }
            }
        });
    }
}

/// How a row's elements fall into cells.
enum RowCells {
    /// All in one cell (the last dimension is reduced).
    One(usize),
    /// In consecutive cells from this one (the last dimension is kept).
    Run(usize),
    Other,
}

fn row_cells(base: usize, inner: &[usize]) -> RowCells {
    let first = inner.first().copied().unwrap_or(0);
    if inner.iter().all(|&o| o == first) {
        RowCells::One(base + first)
    } else if inner.iter().enumerate().all(|(j, &o)| o == first + j) {
        RowCells::Run(base + first)
    } else {
        RowCells::Other
    }
}

/// The sum and count of a row's finite values, and which infinities it has.
#[inline]
fn finite_sum(row: &[f64], shift: f64) -> (f64, f64, u64, u8) {
    let (mut s1, mut s2, mut k) = (0.0, 0.0, 0u64);
    for &v in row {
        // Branch-free over finite values, so the loop vectorizes.
        let finite = v.is_finite();
        let d = if finite { v - shift } else { 0.0 };
        s1 += d;
        s2 += d * d;
        k += u64::from(finite);
    }
    let mut infinite = 0u8;
    if k < row.len() as u64 {
        for &v in row {
            if v.is_infinite() {
                infinite |= if v > 0.0 { 1 } else { 2 };
            }
        }
    }
    (s1, s2, k, infinite)
}

/// Per-cell state of a reduction, mergeable.
#[derive(Debug, Clone)]
pub struct Accumulator {
    op: Op,
    count: Vec<u64>,
    /// Mean/var: the first value seen (a shift that keeps the sums of
    /// squares from cancelling); min/max: the extreme; sum: unused.
    a: Vec<f64>,
    /// Sum of (value - shift), or the sum.
    s1: Vec<f64>,
    /// Sum of (value - shift)^2.
    s2: Vec<f64>,
    /// argmin/argmax: the position of the extreme.
    pos: Vec<u64>,
    /// median/quantile: every value.
    values: Vec<Vec<f64>>,
    /// mean/std/var: infinities seen (1: +inf, 2: -inf), kept out of the
    /// sums: numpy's mean of them is an infinity or NaN, std and var NaN.
    infinite: Vec<u8>,
    /// The dimension argmin/argmax report positions along.
    along: usize,
}

impl Accumulator {
    /// An accumulator for `cells` output cells; `along` is the reduced
    /// dimension argmin/argmax report positions of.
    pub fn new(op: Op, cells: usize, along: usize) -> Self {
        let sized = |on: bool, v: f64| if on { vec![v; cells] } else { Vec::new() };
        let extreme = match op {
            Op::Min | Op::Argmin => f64::INFINITY,
            _ => f64::NEG_INFINITY,
        };
        Accumulator {
            op,
            count: vec![0; cells],
            a: sized(
                matches!(
                    op,
                    Op::Mean | Op::Std | Op::Var | Op::Min | Op::Max | Op::Argmin | Op::Argmax
                ),
                if matches!(op, Op::Mean | Op::Std | Op::Var) {
                    0.0
                } else {
                    extreme
                },
            ),
            s1: sized(matches!(op, Op::Mean | Op::Std | Op::Var | Op::Sum), 0.0),
            s2: sized(matches!(op, Op::Std | Op::Var), 0.0),
            pos: if op.is_arg() {
                vec![0; cells]
            } else {
                Vec::new()
            },
            values: if op.holds_values() {
                vec![Vec::new(); cells]
            } else {
                Vec::new()
            },
            infinite: if matches!(op, Op::Mean | Op::Std | Op::Var) {
                vec![0; cells]
            } else {
                Vec::new()
            },
            along,
        }
    }

    /// Bytes it holds per cell (beyond held values).
    pub fn bytes_per_cell(op: Op) -> u64 {
        match op {
            Op::Count => 8,
            Op::Sum => 16,
            Op::Min | Op::Max => 16,
            Op::Mean | Op::Argmin | Op::Argmax => 24,
            Op::Std | Op::Var => 32,
            Op::Median | Op::Quantile => 32,
        }
    }

    /// Takes a block of values (C order, `shape`, at `start` of the input).
    pub fn add(&mut self, plan: &Plan, start: &[u64], shape: &[u64], values: &[f64]) {
        let along = self.along;
        match self.op {
            Op::Count | Op::Sum | Op::Mean | Op::Std | Op::Var => {
                plan.rows(start, shape, values, |base, inner, row, _| {
                    self.sums(base, inner, row)
                })
            }
            Op::Min | Op::Argmin => plan.walk(start, shape, along, values, |c, v, p| {
                if v < self.a[c] || (self.count[c] == 0 && !v.is_nan()) {
                    self.a[c] = v;
                    if let Some(slot) = self.pos.get_mut(c) {
                        *slot = p;
                    }
                }
                if !v.is_nan() {
                    self.count[c] += 1;
                }
            }),
            Op::Max | Op::Argmax => plan.walk(start, shape, along, values, |c, v, p| {
                if v > self.a[c] || (self.count[c] == 0 && !v.is_nan()) {
                    self.a[c] = v;
                    if let Some(slot) = self.pos.get_mut(c) {
                        *slot = p;
                    }
                }
                if !v.is_nan() {
                    self.count[c] += 1;
                }
            }),
            Op::Median | Op::Quantile => plan.walk(start, shape, along, values, |c, v, _| {
                if !v.is_nan() {
                    self.count[c] += 1;
                    self.values[c].push(v);
                }
            }),
        }
    }

    /// One row into the sums of count, sum, mean, std and var: a reduced
    /// last dimension as one sum, a kept one cell by cell.
    #[inline]
    fn sums(&mut self, base: usize, inner: &[usize], row: &[f64]) {
        let op = self.op;
        match row_cells(base, inner) {
            RowCells::One(c) => {
                if self.count[c] == 0 && matches!(op, Op::Mean | Op::Std | Op::Var) {
                    match row.iter().find(|v| v.is_finite()) {
                        Some(&first) => self.a[c] = first,
                        None => {
                            self.infinite[c] |= finite_sum(row, 0.0).3;
                            return;
                        }
                    }
                }
                let shift = if self.a.is_empty() || op == Op::Sum {
                    0.0
                } else {
                    self.a[c]
                };
                let (s1, s2, k, infinite) = finite_sum(row, shift);
                self.count[c] += k;
                match op {
                    Op::Count => {
                        // NaN is missing; infinities count.
                        self.count[c] += row.iter().filter(|v| v.is_infinite()).count() as u64;
                    }
                    Op::Sum => {
                        self.s1[c] += s1;
                        if infinite != 0 {
                            // inf + -inf is NaN, as numpy's sum.
                            self.s1[c] += match infinite {
                                1 => f64::INFINITY,
                                2 => f64::NEG_INFINITY,
                                _ => f64::NAN,
                            };
                        }
                    }
                    _ => {
                        self.s1[c] += s1;
                        if let Some(s) = self.s2.get_mut(c) {
                            *s += s2;
                        }
                        self.infinite[c] |= infinite;
                    }
                }
            }
            RowCells::Run(c0) => {
                let cells = c0..c0 + row.len();
                let count = &mut self.count[cells.clone()];
                match op {
                    Op::Count => {
                        for (n, &v) in count.iter_mut().zip(row) {
                            *n += u64::from(!v.is_nan());
                        }
                    }
                    Op::Sum => {
                        for ((n, s), &v) in count.iter_mut().zip(&mut self.s1[cells]).zip(row) {
                            if !v.is_nan() {
                                *n += 1;
                                *s += v;
                            }
                        }
                    }
                    _ => {
                        let (a, s1) = (&mut self.a[cells.clone()], &mut self.s1[cells.clone()]);
                        let infinite = &mut self.infinite[cells.clone()];
                        let mut s2 = self.s2.get_mut(cells).map(|s| s.iter_mut());
                        for ((((n, a), s1), inf), &v) in
                            count.iter_mut().zip(a).zip(s1).zip(infinite).zip(row)
                        {
                            let s2 = s2.as_mut().and_then(|i| i.next());
                            if v.is_finite() {
                                if *n == 0 {
                                    *a = v;
                                }
                                *n += 1;
                                let d = v - *a;
                                *s1 += d;
                                if let Some(s2) = s2 {
                                    *s2 += d * d;
                                }
                            } else if v.is_infinite() {
                                *inf |= if v > 0.0 { 1 } else { 2 };
                            }
                        }
                    }
                }
            }
            RowCells::Other => {
                for (&v, &o) in row.iter().zip(inner) {
                    self.sums(base + o, &[0], std::slice::from_ref(&v));
                }
            }
        }
    }

    /// Folds in another accumulator of the same plan. For argmin/argmax
    /// the earlier position wins a tie only if `other` covers later input.
    pub fn merge(&mut self, mut other: Accumulator) {
        for (mine, theirs) in self.infinite.iter_mut().zip(&other.infinite) {
            *mine |= theirs;
        }
        for c in 0..self.count.len() {
            let (n1, n2) = (self.count[c], other.count[c]);
            if n2 == 0 {
                continue;
            }
            match self.op {
                Op::Count => {}
                Op::Sum => self.s1[c] += other.s1[c],
                Op::Mean | Op::Std | Op::Var => {
                    if n1 == 0 {
                        self.a[c] = other.a[c];
                        self.s1[c] = other.s1[c];
                        if !self.s2.is_empty() {
                            self.s2[c] = other.s2[c];
                        }
                    } else {
                        // Re-centre the other's sums on this shift.
                        let delta = other.a[c] - self.a[c];
                        let n2f = n2 as f64;
                        self.s1[c] += other.s1[c] + n2f * delta;
                        if !self.s2.is_empty() {
                            self.s2[c] +=
                                other.s2[c] + 2.0 * delta * other.s1[c] + n2f * delta * delta;
                        }
                    }
                }
                Op::Min | Op::Argmin => {
                    let better = other.a[c] < self.a[c]
                        || (other.a[c] == self.a[c]
                            && self.op == Op::Argmin
                            && other.pos[c] < self.pos[c]);
                    if n1 == 0 || better {
                        self.a[c] = other.a[c];
                        if !self.pos.is_empty() {
                            self.pos[c] = other.pos[c];
                        }
                    }
                }
                Op::Max | Op::Argmax => {
                    let better = other.a[c] > self.a[c]
                        || (other.a[c] == self.a[c]
                            && self.op == Op::Argmax
                            && other.pos[c] < self.pos[c]);
                    if n1 == 0 || better {
                        self.a[c] = other.a[c];
                        if !self.pos.is_empty() {
                            self.pos[c] = other.pos[c];
                        }
                    }
                }
                Op::Median | Op::Quantile => {
                    self.values[c].append(&mut other.values[c]);
                }
            }
            self.count[c] += n2;
        }
    }

    /// Cells where nothing was counted (all missing), for argmin/argmax,
    /// which have no answer there.
    pub fn first_empty(&self) -> Option<usize> {
        self.count.iter().position(|&n| n == 0)
    }

    /// The results: one value per cell, or for quantiles one block of
    /// cells per `q`.
    pub fn finish(mut self, ddof: u64, q: &[f64]) -> Vec<f64> {
        let n = self.count.len();
        let count = |c: usize| self.count[c] as f64;
        match self.op {
            Op::Count => (0..n).map(count).collect(),
            Op::Sum => self.s1,
            Op::Mean => (0..n)
                .map(|c| match self.infinite[c] {
                    1 => f64::INFINITY,
                    2 => f64::NEG_INFINITY,
                    3 => f64::NAN,
                    _ if self.count[c] == 0 => f64::NAN,
                    _ => self.a[c] + self.s1[c] / count(c),
                })
                .collect(),
            Op::Std | Op::Var => (0..n)
                .map(|c| {
                    let k = self.count[c];
                    if k <= ddof || self.infinite[c] != 0 {
                        return f64::NAN;
                    }
                    // Sums that overflowed are an infinite variance, not none.
                    let m2 = self.s2[c] - self.s1[c] * self.s1[c] / k as f64;
                    let m2 = if m2.is_nan() {
                        f64::INFINITY
                    } else {
                        m2.max(0.0)
                    };
                    let var = m2 / (k - ddof) as f64;
                    if self.op == Op::Std {
                        var.sqrt()
                    } else {
                        var
                    }
                })
                .collect(),
            Op::Min | Op::Max => (0..n)
                .map(|c| {
                    if self.count[c] == 0 {
                        f64::NAN
                    } else {
                        self.a[c]
                    }
                })
                .collect(),
            Op::Argmin | Op::Argmax => self.pos.iter().map(|&p| p as f64).collect(),
            Op::Median => self.values.iter_mut().map(|v| quantile(v, 0.5)).collect(),
            Op::Quantile => {
                let mut out = Vec::with_capacity(n * q.len());
                for v in &mut self.values {
                    v.sort_unstable_by(f64::total_cmp);
                }
                for &q in q {
                    out.extend(self.values.iter_mut().map(|v| quantile_sorted(v, q)));
                }
                out
            }
        }
    }
}

/// numpy's default (linear) quantile of values, NaN when there are none.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    quantile_sorted(values, q)
}

fn quantile_sorted(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let h = (values.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(values.len() - 1);
    let frac = h - lo as f64;
    values[lo] + frac * (values[hi] - values[lo])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube() -> (Vec<u64>, Vec<f64>) {
        // 4 x 3 x 2, with one missing value.
        let mut v: Vec<f64> = (0..24).map(f64::from).collect();
        v[5] = f64::NAN;
        (vec![4, 3, 2], v)
    }

    fn reduce(op: Op, groupings: Vec<Grouping>, split: bool) -> Vec<f64> {
        let (shape, values) = cube();
        let plan = Plan::new(&shape, groupings).unwrap();
        let mut acc = Accumulator::new(op, plan.cells(), 0);
        if split {
            // Two blocks along the first dimension, merged.
            let mut other = Accumulator::new(op, plan.cells(), 0);
            acc.add(&plan, &[0, 0, 0], &[2, 3, 2], &values[..12]);
            other.add(&plan, &[2, 0, 0], &[2, 3, 2], &values[12..]);
            acc.merge(other);
        } else {
            acc.add(&plan, &[0, 0, 0], &shape, &values);
        }
        acc.finish(1, &[0.5])
    }

    #[test]
    fn reducing_a_dimension_skips_missing_values() {
        let over_first = vec![Grouping::Reduce, Grouping::Keep, Grouping::Keep];
        for split in [false, true] {
            let mean = reduce(Op::Mean, over_first.clone(), split);
            // Cell (2, 1) = elements 5 (NaN), 11, 17, 23.
            assert_eq!(mean[5], (11.0 + 17.0 + 23.0) / 3.0);
            assert_eq!(mean[0], (0.0 + 6.0 + 12.0 + 18.0) / 4.0);
            let var = reduce(Op::Var, over_first.clone(), split);
            assert!((var[0] - 60.0).abs() < 1e-9, "{var:?}");
            assert_eq!(reduce(Op::Count, over_first.clone(), split)[5], 3.0);
            assert_eq!(reduce(Op::Argmax, over_first.clone(), split)[5], 3.0);
            assert_eq!(reduce(Op::Min, over_first.clone(), split)[5], 11.0);
            assert_eq!(reduce(Op::Median, over_first.clone(), split)[5], 17.0);
        }
    }

    #[test]
    fn blocks_and_groups_map_positions_to_cells() {
        let coarse = vec![Grouping::Blocks(2), Grouping::Keep, Grouping::Blocks(2)];
        let plan = Plan::new(&[4, 3, 2], coarse.clone()).unwrap();
        assert_eq!(plan.out_shape(), &[2, 3, 1]);
        let sum = reduce(Op::Sum, coarse, true);
        assert_eq!(sum[0], 0.0 + 1.0 + 6.0 + 7.0);
        let groups = Grouping::Groups {
            of: vec![0, 0, 0, 1].into(),
            count: 2,
        };
        let max = reduce(
            Op::Max,
            vec![groups, Grouping::Reduce, Grouping::Reduce],
            false,
        );
        assert_eq!(max, vec![17.0, 23.0]);
        assert!(Plan::new(&[5], vec![Grouping::Blocks(2)]).is_err());
    }

    #[test]
    fn infinities_as_numpy_counts_them() {
        let plan = Plan::new(&[4], vec![Grouping::Reduce]).unwrap();
        let run = |op: Op, values: &[f64]| {
            let mut acc = Accumulator::new(op, 1, 0);
            acc.add(&plan, &[0], &[4], values);
            acc.finish(0, &[])[0]
        };
        let mixed = [f64::INFINITY, f64::NEG_INFINITY, 1.0, 2.0];
        assert!(run(Op::Mean, &mixed).is_nan());
        assert!(run(Op::Std, &mixed).is_nan());
        assert_eq!(
            run(Op::Mean, &[f64::INFINITY, 1.0, 2.0, 3.0]),
            f64::INFINITY
        );
        let huge = [1.7e308, 1.7e308, 1.7e308, -1e308];
        assert_eq!(run(Op::Var, &huge), f64::INFINITY);
        let mut s = Summary::default();
        s.add(&mixed);
        assert!(s.std().is_nan() && s.mean().is_nan());
        assert_eq!(
            (s.count, s.min, s.max),
            (4, f64::NEG_INFINITY, f64::INFINITY)
        );
    }
}
