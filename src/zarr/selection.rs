//! numpy-like selections: parsing (`5,-1,2:10,::4,...,[1,5,9]`), resolving
//! against a shape, and mapping onto the chunk grid so reads and writes touch
//! only the chunks a selection intersects.

use std::collections::BTreeMap;

use super::buffer::DimMap;
use super::error::{Result, ZarrError};

/// One dimension of an orthogonal selection, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimSelector {
    /// A single index; the dimension is dropped from the result.
    Index(i64),
    /// `start:stop:step` (step not 0; a negative one walks backwards, as
    /// numpy's `::-1`).
    Slice {
        start: Option<i64>,
        stop: Option<i64>,
        step: Option<i64>,
    },
    /// Orthogonal integer list (like zarr's `oindex`).
    List(Vec<i64>),
    /// `...`: as many `:` as needed.
    Ellipsis,
}

impl DimSelector {
    pub fn all() -> Self {
        DimSelector::Slice {
            start: None,
            stop: None,
            step: None,
        }
    }
}

/// A selection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    Orthogonal(Vec<DimSelector>),
    /// Coordinates of individual elements (like `vindex`).
    Points(Vec<Vec<i64>>),
}

/// The most points, or indices of lists (over all dimensions), one
/// selection may name: each costs some 200 bytes once resolved and grouped
/// by chunk, and a list is the one part of a request that is not a size.
pub const MAX_LISTED: usize = 1 << 20;

fn sel_err(msg: impl Into<String>) -> ZarrError {
    ZarrError::Selection(msg.into())
}

/// Split on commas outside brackets.
fn split_top(s: &str) -> Result<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(sel_err(format!("unbalanced ']' in '{s}'")));
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(sel_err(format!("unbalanced '[' in '{s}'")));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_int(s: &str, what: &str) -> Result<Option<i64>> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|_| sel_err(format!("{what} '{s}' is not an integer")))
}

/// A slice's start, stop or step. numpy clamps slice bounds to the
/// dimension, so an integer past i64's range means the same as i64's end.
fn parse_bound(s: &str, what: &str) -> Result<Option<i64>> {
    use std::num::IntErrorKind;
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    // The parser reports an overflow before it looks at the rest, so a
    // number that overflows is checked to be only digits.
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    let integer = digits.bytes().all(|b| b.is_ascii_digit());
    match t.parse::<i64>() {
        Ok(v) => Ok(Some(v)),
        Err(e) if integer && *e.kind() == IntErrorKind::PosOverflow => Ok(Some(i64::MAX)),
        Err(e) if integer && *e.kind() == IntErrorKind::NegOverflow => Ok(Some(i64::MIN)),
        Err(_) => Err(sel_err(format!("{what} '{t}' is not an integer"))),
    }
}

fn parse_dim(token: &str) -> Result<DimSelector> {
    let t = token.trim();
    if t == "..." {
        return Ok(DimSelector::Ellipsis);
    }
    if t.starts_with('[') {
        let list: Vec<i64> = serde_json::from_str(t)
            .map_err(|_| sel_err(format!("'{t}' is not a list of integers")))?;
        return Ok(DimSelector::List(list));
    }
    if t.contains(':') {
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() > 3 {
            return Err(sel_err(format!("'{t}' has too many ':'")));
        }
        let start = parse_bound(parts[0], "slice start")?;
        let stop = parse_bound(parts[1], "slice stop")?;
        let step = match parts.get(2) {
            Some(p) => parse_bound(p, "slice step")?,
            None => None,
        };
        if step == Some(0) {
            return Err(sel_err(format!("slice step in '{t}' must not be zero")));
        }
        return Ok(DimSelector::Slice { start, stop, step });
    }
    match parse_int(t, "index")? {
        Some(i) => Ok(DimSelector::Index(i)),
        None => Err(sel_err(
            "empty selection item (use ':' for a whole dimension)",
        )),
    }
}

impl Selection {
    /// Parse `5,-1,2:10,::4,:,...,[1,5,9]`; an empty string selects everything.
    pub fn parse(s: &str) -> Result<Selection> {
        if s.trim().is_empty() {
            return Ok(Selection::Orthogonal(vec![]));
        }
        let dims = split_top(s)?
            .into_iter()
            .map(parse_dim)
            .collect::<Result<Vec<_>>>()?;
        if dims.iter().filter(|d| **d == DimSelector::Ellipsis).count() > 1 {
            return Err(sel_err("only one '...' is allowed"));
        }
        Ok(Selection::Orthogonal(dims))
    }

    /// Parse a JSON list of coordinates `[[i, j], ...]`.
    pub fn parse_points(s: &str) -> Result<Selection> {
        let points: Vec<Vec<i64>> = serde_json::from_str(s).map_err(|_| {
            sel_err("points must be a JSON list of coordinate lists, like [[0,1],[2,3]]")
        })?;
        Ok(Selection::Points(points))
    }

    /// Everything.
    pub fn all() -> Selection {
        Selection::Orthogonal(vec![])
    }

    /// Resolve against an array shape.
    pub fn resolve(&self, shape: &[u64]) -> Result<Resolved> {
        let listed = match self {
            Selection::Points(points) => points.len(),
            Selection::Orthogonal(dims) => dims
                .iter()
                .map(|d| match d {
                    DimSelector::List(list) => list.len(),
                    _ => 0,
                })
                .sum(),
        };
        if listed > MAX_LISTED {
            return Err(ZarrError::TooLarge(format!(
                "the selection lists more than {MAX_LISTED} points or indices, the most one \
                 request may list (read a large set in several requests, or use slices)"
            )));
        }
        match self {
            Selection::Orthogonal(dims) => resolve_orthogonal(dims, shape),
            Selection::Points(points) => resolve_points(points, shape),
        }
    }
}

/// The indices one dimension selects, in output order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Indices {
    Range {
        start: u64,
        step: u64,
        len: u64,
    },
    /// Shared: slabs of a read along other dimensions each hold the list.
    List(std::sync::Arc<[u64]>),
}

impl Indices {
    pub fn len(&self) -> u64 {
        match self {
            Indices::Range { len, .. } => *len,
            Indices::List(l) => l.len() as u64,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get(&self, i: u64) -> u64 {
        match self {
            Indices::Range { start, step, .. } => start + i * step,
            Indices::List(l) => l[i as usize],
        }
    }
}

/// One resolved dimension; `keep` is false for integer indexes (dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedDim {
    pub indices: Indices,
    pub keep: bool,
}

/// A selection resolved against a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Orthogonal(Vec<ResolvedDim>),
    Points { coords: Vec<Vec<u64>> },
}

// Lengths are at most 2^63 - 1 (`ArrayMetadata::validate`); the arithmetic
// is wide anyway, so no length an index meets can overflow it.
fn normalize(i: i64, len: u64, dim: usize) -> Result<u64> {
    let n = if i < 0 {
        i128::from(i) + i128::from(len)
    } else {
        i128::from(i)
    };
    if n < 0 || n >= i128::from(len) {
        return Err(sel_err(format!(
            "index {i} is out of bounds for dimension {dim} of length {len}"
        )));
    }
    Ok(n as u64)
}

/// A slice with a negative step, as Python's `slice.indices` resolves it:
/// from `start` (default the last index) down to just above `stop`
/// (default before the first). Its indices are listed, in the order they
/// are selected, so they count against [`MAX_LISTED`] as a list's do.
fn resolve_backwards(
    start: Option<i64>,
    stop: Option<i64>,
    step: i64,
    len: u64,
    dim: usize,
    listed: &mut usize,
) -> Result<Indices> {
    let len = i128::from(len);
    // Bounds clamp to [-1, len - 1]: -1 is "before the first".
    let clamp = |v: i64| {
        let v = i128::from(v);
        let v = if v < 0 { v + len } else { v };
        v.clamp(-1, len - 1)
    };
    let first = start.map(clamp).unwrap_or(len - 1);
    let last = stop.map(clamp).unwrap_or(-1);
    let step = -i128::from(step);
    let n = if first > last {
        (first - last - 1) / step + 1
    } else {
        0
    };
    // What the selection lists in all: its lists and these.
    let total = n.saturating_add(*listed as i128);
    if total > MAX_LISTED as i128 {
        return Err(sel_err(format!(
            "a negative step selects its {n} indices along dimension {dim} as a list, \
             and a selection may list at most {MAX_LISTED} indices in all"
        )));
    }
    *listed = total as usize;
    let indices: Vec<u64> = (0..n).map(|k| (first - k * step) as u64).collect();
    Ok(Indices::List(indices.into()))
}

fn resolve_slice(start: Option<i64>, stop: Option<i64>, step: Option<i64>, len: u64) -> Indices {
    let clamp = |v: i64| -> u64 {
        let v = if v < 0 {
            i128::from(v) + i128::from(len)
        } else {
            i128::from(v)
        };
        v.clamp(0, i128::from(len)) as u64
    };
    let step = step.unwrap_or(1).max(1) as u64;
    let start = start.map(clamp).unwrap_or(0);
    let stop = stop.map(clamp).unwrap_or(len);
    let n = if stop > start {
        (stop - start).div_ceil(step)
    } else {
        0
    };
    Indices::Range {
        start,
        step,
        len: n,
    }
}

fn resolve_orthogonal(dims: &[DimSelector], shape: &[u64]) -> Result<Resolved> {
    let explicit = dims.iter().filter(|d| **d != DimSelector::Ellipsis).count();
    if explicit > shape.len() {
        return Err(sel_err(format!(
            "{explicit} dimensions selected, the array has {}",
            shape.len()
        )));
    }
    let mut expanded = Vec::with_capacity(shape.len());
    for d in dims {
        if *d == DimSelector::Ellipsis {
            expanded.extend(std::iter::repeat_n(
                DimSelector::all(),
                shape.len() - explicit,
            ));
        } else {
            expanded.push(d.clone());
        }
    }
    expanded.resize(shape.len(), DimSelector::all());
    let mut listed: usize = expanded
        .iter()
        .map(|d| match d {
            DimSelector::List(l) => l.len(),
            _ => 0,
        })
        .sum();
    let resolved = expanded
        .iter()
        .zip(shape)
        .enumerate()
        .map(|(dim, (sel, &len))| {
            Ok(match sel {
                DimSelector::Index(i) => ResolvedDim {
                    indices: Indices::List([normalize(*i, len, dim)?].into()),
                    keep: false,
                },
                DimSelector::Slice {
                    start,
                    stop,
                    step: Some(step),
                } if *step < 0 => ResolvedDim {
                    indices: resolve_backwards(*start, *stop, *step, len, dim, &mut listed)?,
                    keep: true,
                },
                DimSelector::Slice { start, stop, step } => ResolvedDim {
                    indices: resolve_slice(*start, *stop, *step, len),
                    keep: true,
                },
                DimSelector::List(list) => ResolvedDim {
                    indices: Indices::List(
                        list.iter()
                            .map(|&i| normalize(i, len, dim))
                            .collect::<Result<Vec<_>>>()?
                            .into(),
                    ),
                    keep: true,
                },
                DimSelector::Ellipsis => unreachable_all(len),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Resolved::Orthogonal(resolved))
}

/// Ellipses are expanded before this point; treat a stray one as `:`.
fn unreachable_all(len: u64) -> ResolvedDim {
    ResolvedDim {
        indices: Indices::Range {
            start: 0,
            step: 1,
            len,
        },
        keep: true,
    }
}

fn resolve_points(points: &[Vec<i64>], shape: &[u64]) -> Result<Resolved> {
    let coords = points
        .iter()
        .enumerate()
        .map(|(p, point)| {
            if point.len() != shape.len() {
                return Err(sel_err(format!(
                    "point {p} has {} coordinates, the array has {} dimensions",
                    point.len(),
                    shape.len()
                )));
            }
            point
                .iter()
                .zip(shape)
                .enumerate()
                .map(|(d, (&i, &len))| normalize(i, len, d))
                .collect()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Resolved::Points { coords })
}

/// A chunk's part of a selection: which elements of the chunk go where in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkPart {
    /// Orthogonal: one map per dimension (output shape keeps dropped dims as 1).
    Block(Vec<DimMap>),
    /// Points: (position in output, coordinates within the chunk).
    Points(Vec<(usize, Vec<usize>)>),
}

impl Resolved {
    /// Shape of the result (dropped dimensions removed).
    pub fn shape(&self) -> Vec<u64> {
        match self {
            Resolved::Orthogonal(dims) => dims
                .iter()
                .filter(|d| d.keep)
                .map(|d| d.indices.len())
                .collect(),
            Resolved::Points { coords } => vec![coords.len() as u64],
        }
    }

    /// Shape of the result with dropped dimensions kept as length 1.
    pub fn block_shape(&self) -> Vec<usize> {
        match self {
            Resolved::Orthogonal(dims) => dims.iter().map(|d| d.indices.len() as usize).collect(),
            Resolved::Points { coords } => vec![coords.len()],
        }
    }

    pub fn num_elements(&self) -> u64 {
        self.shape().iter().product()
    }

    /// At least as many chunks as the selection touches, computed without
    /// listing them (to bound work before it starts).
    pub fn chunk_count_bound(&self, chunk_shape: &[u64]) -> u64 {
        match self {
            Resolved::Points { coords } => coords.len() as u64,
            Resolved::Orthogonal(dims) => dims
                .iter()
                .zip(chunk_shape)
                .map(|(d, &c)| match &d.indices {
                    Indices::Range { len: 0, .. } => 0,
                    Indices::Range { start, step, len } => {
                        let last = start.saturating_add(step.saturating_mul(len - 1));
                        let spanned = (last / c.max(1)) - (start / c.max(1)) + 1;
                        spanned.min(*len)
                    }
                    Indices::List(l) => l.len() as u64,
                })
                .fold(1u64, u64::saturating_mul),
        }
    }

    /// The chunks the selection touches (grid coordinates), each with its part.
    pub fn chunks(&self, chunk_shape: &[u64]) -> Vec<(Vec<u64>, ChunkPart)> {
        match self {
            Resolved::Orthogonal(dims) => orthogonal_chunks(dims, chunk_shape),
            Resolved::Points { coords } => {
                let mut by_chunk: BTreeMap<Vec<u64>, Vec<(usize, Vec<usize>)>> = BTreeMap::new();
                for (i, point) in coords.iter().enumerate() {
                    let chunk: Vec<u64> =
                        point.iter().zip(chunk_shape).map(|(p, c)| p / c).collect();
                    let local: Vec<usize> = point
                        .iter()
                        .zip(chunk_shape)
                        .map(|(p, c)| (p % c) as usize)
                        .collect();
                    by_chunk.entry(chunk).or_default().push((i, local));
                }
                by_chunk
                    .into_iter()
                    .map(|(c, p)| (c, ChunkPart::Points(p)))
                    .collect()
            }
        }
    }
}

/// Per dimension: chunk index → map from chunk-local to output positions,
/// by chunk index.
fn dim_chunk_maps(dim: &ResolvedDim, chunk: u64) -> Vec<(u64, DimMap)> {
    let (start, step, len) = match &dim.indices {
        Indices::Range { start, step, len } => (*start, (*step).max(1), *len),
        Indices::List(list) => {
            let mut maps: BTreeMap<u64, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
            for (out, &i) in list.iter().enumerate() {
                let (src, dst) = maps.entry(i / chunk).or_default();
                src.push((i % chunk) as usize);
                dst.push(out);
            }
            return maps
                .into_iter()
                .map(|(c, (src, dst))| (c, DimMap::list(src, dst)))
                .collect();
        }
    };
    // A range only increases: its positions in each chunk are one strided
    // run, found with one division per chunk.
    let mut maps = Vec::new();
    let mut out = 0;
    while out < len {
        let i = start + out * step;
        let run = ((chunk - 1 - i % chunk) / step + 1).min(len - out);
        maps.push((
            i / chunk,
            DimMap::Strided {
                src: (i % chunk) as usize,
                src_step: step as usize,
                dst: out as usize,
                dst_step: 1,
                len: run as usize,
            },
        ));
        out += run;
    }
    maps
}

fn orthogonal_chunks(dims: &[ResolvedDim], chunk_shape: &[u64]) -> Vec<(Vec<u64>, ChunkPart)> {
    if dims.iter().any(|d| d.indices.is_empty()) {
        return vec![];
    }
    let per_dim: Vec<Vec<(u64, DimMap)>> = dims
        .iter()
        .zip(chunk_shape)
        .map(|(d, &c)| dim_chunk_maps(d, c))
        .collect();
    let mut out = Vec::new();
    let mut counter = vec![0usize; dims.len()];
    loop {
        let coords = counter
            .iter()
            .enumerate()
            .map(|(d, &i)| per_dim[d][i].0)
            .collect();
        let maps = counter
            .iter()
            .enumerate()
            .map(|(d, &i)| per_dim[d][i].1.clone())
            .collect();
        out.push((coords, ChunkPart::Block(maps)));
        let mut d = dims.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            counter[d] += 1;
            if counter[d] < per_dim[d].len() {
                break;
            }
            counter[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The indices numpy selects with `a[start:stop:step]` of length `len`.
    fn numpy(start: Option<i64>, stop: Option<i64>, step: i64, len: i64) -> Vec<u64> {
        // Python's slice.indices for a negative step.
        let norm = |v: i64, default: i64| {
            let v = if v < 0 { v + len } else { v };
            if v < 0 {
                -1
            } else if v >= len {
                len - 1
            } else {
                v
            }
            .max(-1)
            .min(default.max(len - 1))
        };
        let mut i = start.map(|s| norm(s, len - 1)).unwrap_or(len - 1);
        let stop = stop.map(|s| norm(s, -1)).unwrap_or(-1);
        let mut out = vec![];
        while i > stop {
            out.push(i as u64);
            i += step;
        }
        out
    }

    #[test]
    fn negative_steps_select_as_numpy_does() {
        for len in [0i64, 1, 5, 10] {
            for step in [-1i64, -2, -3, -11] {
                for start in [None, Some(-20), Some(-1), Some(0), Some(3), Some(20)] {
                    for stop in [None, Some(-20), Some(-2), Some(0), Some(2), Some(20)] {
                        let sel = DimSelector::Slice {
                            start,
                            stop,
                            step: Some(step),
                        };
                        let got = Selection::Orthogonal(vec![sel])
                            .resolve(&[len as u64])
                            .unwrap();
                        let Resolved::Orthogonal(dims) = got else {
                            unreachable!()
                        };
                        let got: Vec<u64> = (0..dims[0].indices.len())
                            .map(|i| dims[0].indices.get(i))
                            .collect();
                        assert_eq!(
                            got,
                            numpy(start, stop, step, len),
                            "{start:?}:{stop:?}:{step} of {len}"
                        );
                    }
                }
            }
        }
        assert!(Selection::parse("::0").is_err());
        assert!(Selection::parse("::-1").is_ok());
        let huge = Selection::parse("::-1").unwrap().resolve(&[1 << 40]);
        assert!(huge.unwrap_err().to_string().contains("at most"));
    }

    #[test]
    fn slice_bounds_past_i64_clamp_as_numpy_clamps_them() {
        let huge = "99999999999999999999";
        let resolve = |sel: &str| Selection::parse(sel).unwrap().resolve(&[10]).unwrap();
        let whole = resolve(":");
        assert_eq!(resolve(&format!("-{huge}:{huge}")), whole);
        assert_eq!(resolve(&format!("+0:+{huge}")), whole);
        assert_eq!(resolve(&format!("{huge}:")), resolve("10:"));
        assert_eq!(
            resolve(&format!("::{huge}")),
            resolve(&format!("::{}", i64::MAX))
        );
        // A step past i64 backwards takes the last index alone, as numpy's.
        let last = resolve(&format!("::-{huge}"));
        let Resolved::Orthogonal(dims) = last else {
            unreachable!()
        };
        assert_eq!((dims[0].indices.len(), dims[0].indices.get(0)), (1, 9));
        for bad in [format!("0:{huge}x"), huge.to_string(), "0:-".into()] {
            assert!(
                Selection::parse(&bad)
                    .and_then(|s| s.resolve(&[10]))
                    .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn range_maps_hold_each_chunks_positions_as_one_strided_run() {
        // Against the positions counted one by one, for steps from 1 to
        // past the chunk size (where a chunk holds one position or none).
        for (start, step, len, chunk) in [
            (0, 1, 100, 7),
            (3, 5, 40, 16),
            (5, 999_999, 1_000, 1_000_000),
            (2, 64, 64, 64),
            (1, 3, 0, 4),
        ] {
            let dim = ResolvedDim {
                indices: Indices::Range { start, step, len },
                keep: true,
            };
            let maps = dim_chunk_maps(&dim, chunk);
            let mut want: Vec<(u64, usize, usize)> = (0..len)
                .map(|out| {
                    let i = start + out * step;
                    (i / chunk, (i % chunk) as usize, out as usize)
                })
                .collect();
            want.dedup();
            let got: Vec<(u64, usize, usize)> = maps
                .iter()
                .flat_map(|(c, m)| {
                    assert!(matches!(m, DimMap::Strided { .. }), "{m:?}");
                    m.pairs().map(move |(s, d)| (*c, s, d))
                })
                .collect();
            assert_eq!(got, want, "start {start} step {step} len {len}");
            let chunks: std::collections::BTreeSet<u64> = want.iter().map(|w| w.0).collect();
            assert_eq!(maps.len(), chunks.len(), "one map per chunk");
        }
    }

    #[test]
    fn parses_numpy_syntax() {
        let s = Selection::parse("5, -1, 2:10, ::4, :, [1,5,9]").unwrap();
        let Selection::Orthogonal(d) = s else {
            panic!()
        };
        assert_eq!(d[0], DimSelector::Index(5));
        assert_eq!(
            d[3],
            DimSelector::Slice {
                start: None,
                stop: None,
                step: Some(4)
            }
        );
        assert_eq!(d[5], DimSelector::List(vec![1, 5, 9]));
        for bad in ["1:2:0", "a", "[1,", "...,...", "1:2:3:4", ""] {
            if bad.is_empty() {
                continue;
            }
            assert!(Selection::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolves_like_numpy() {
        let r = Selection::parse("-1,...,1:100:3")
            .unwrap()
            .resolve(&[10, 4, 20])
            .unwrap();
        assert_eq!(r.shape(), vec![4, 7]);
        let r = Selection::parse("2").unwrap().resolve(&[3, 5]).unwrap();
        assert_eq!(r.shape(), vec![5]);
        assert!(Selection::parse("3").unwrap().resolve(&[3]).is_err());
        assert!(Selection::parse("0,0").unwrap().resolve(&[3]).is_err());
        assert_eq!(
            Selection::parse("5:2")
                .unwrap()
                .resolve(&[10])
                .unwrap()
                .shape(),
            vec![0]
        );
    }

    #[test]
    fn lists_past_the_bound_are_too_large() {
        let points = Selection::Points(vec![vec![0]; MAX_LISTED]);
        assert!(points.resolve(&[1]).is_ok());
        let points = Selection::Points(vec![vec![0]; MAX_LISTED + 1]);
        assert!(matches!(points.resolve(&[1]), Err(ZarrError::TooLarge(_))));
        // Across the lists of all dimensions.
        let half = DimSelector::List(vec![0; MAX_LISTED / 2 + 1]);
        let lists = Selection::Orthogonal(vec![half.clone(), half]);
        assert!(matches!(
            lists.resolve(&[1, 1]),
            Err(ZarrError::TooLarge(_))
        ));
    }

    #[test]
    fn maps_onto_chunks() {
        let r = Selection::parse("3:7").unwrap().resolve(&[10]).unwrap();
        let chunks = r.chunks(&[4]);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].0, vec![0]);
        assert_eq!(chunks[0].1, ChunkPart::Block(vec![DimMap::range(3, 0, 1)]));
        assert_eq!(chunks[1].1, ChunkPart::Block(vec![DimMap::range(0, 1, 3)]));
        let p = Selection::parse_points("[[0,0],[5,5],[1,1]]")
            .unwrap()
            .resolve(&[6, 6])
            .unwrap();
        assert_eq!(p.chunks(&[2, 2]).len(), 2);
    }
}
