//! Decoded array data and the N-dimensional copy that moves elements between
//! chunks, shards and selections.

use super::error::{Result, ZarrError};

/// Elements of a decoded array in C order: fixed-size elements packed
/// little-endian, or one byte string per element for variable-length types.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayBytes {
    Fixed(Vec<u8>),
    Variable(Vec<Vec<u8>>),
}

impl ArrayBytes {
    /// `n` copies of one element.
    pub fn filled(element: &[u8], n: usize, variable: bool) -> Self {
        if variable {
            return ArrayBytes::Variable(vec![element.to_vec(); n]);
        }
        if element.iter().all(|&b| b == 0) {
            return ArrayBytes::Fixed(vec![0; element.len() * n]);
        }
        let mut out = Vec::with_capacity(element.len() * n);
        for _ in 0..n {
            out.extend_from_slice(element);
        }
        ArrayBytes::Fixed(out)
    }

    /// Bytes held in memory (a variable-length element also costs its handle).
    pub fn footprint(&self) -> usize {
        match self {
            ArrayBytes::Fixed(b) => b.len(),
            ArrayBytes::Variable(v) => v.iter().map(|e| e.len() + 24).sum(),
        }
    }

    /// Number of elements, given the element size of fixed data.
    pub fn len(&self, elem: usize) -> usize {
        match self {
            ArrayBytes::Fixed(b) if elem > 0 => b.len() / elem,
            ArrayBytes::Fixed(_) => 0,
            ArrayBytes::Variable(v) => v.len(),
        }
    }

    pub fn into_fixed(self) -> Result<Vec<u8>> {
        match self {
            ArrayBytes::Fixed(b) => Ok(b),
            ArrayBytes::Variable(_) => Err(ZarrError::Data(
                "variable-length data where fixed-size elements were expected".into(),
            )),
        }
    }

    pub fn into_variable(self) -> Result<Vec<Vec<u8>>> {
        match self {
            ArrayBytes::Variable(v) => Ok(v),
            ArrayBytes::Fixed(_) => Err(ZarrError::Data(
                "fixed-size data where variable-length elements were expected".into(),
            )),
        }
    }

    /// Whether every element equals `element`.
    pub fn all_equal(&self, element: &[u8]) -> bool {
        match self {
            ArrayBytes::Fixed(b) => {
                if element.is_empty() {
                    return b.is_empty();
                }
                if element.iter().all(|&x| x == element[0]) {
                    return b.iter().all(|&x| x == element[0]);
                }
                b.chunks_exact(element.len()).all(|c| c == element)
            }
            ArrayBytes::Variable(v) => v.iter().all(|e| e == element),
        }
    }
}

/// Element strides of a C-order array of `shape`.
pub(crate) fn c_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// For one dimension: which source indices go to which destination indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimMap {
    /// `len` positions in step on both sides: the k-th goes from
    /// `src + k * src_step` to `dst + k * dst_step`. What a range selects
    /// in one chunk, held without a word per element: a read of small
    /// chunks built, cloned and scanned two lists per chunk and dimension.
    Strided {
        src: usize,
        src_step: usize,
        dst: usize,
        dst_step: usize,
        len: usize,
    },
    /// Any positions, one pair per element (lists of indices).
    List { src: Vec<usize>, dst: Vec<usize> },
}

impl DimMap {
    /// `len` consecutive indices from `src` to `dst`.
    pub fn range(src: usize, dst: usize, len: usize) -> Self {
        DimMap::Strided {
            src,
            src_step: 1,
            dst,
            dst_step: 1,
            len,
        }
    }

    /// Source index `src[k]` to destination index `dst[k]`.
    pub fn list(src: Vec<usize>, dst: Vec<usize>) -> Self {
        debug_assert_eq!(src.len(), dst.len());
        DimMap::List { src, dst }
    }

    pub fn len(&self) -> usize {
        match self {
            DimMap::Strided { len, .. } => *len,
            DimMap::List { src, .. } => src.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`-th source index.
    pub fn src(&self, k: usize) -> usize {
        match self {
            DimMap::Strided { src, src_step, .. } => src + k * src_step,
            DimMap::List { src, .. } => src[k],
        }
    }

    /// The `k`-th destination index.
    pub fn dst(&self, k: usize) -> usize {
        match self {
            DimMap::Strided { dst, dst_step, .. } => dst + k * dst_step,
            DimMap::List { dst, .. } => dst[k],
        }
    }

    /// Every (source, destination) pair, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.len()).map(|k| (self.src(k), self.dst(k)))
    }

    /// The same pairs from destination to source (a write's view of a read's map).
    pub fn inverse(&self) -> Self {
        let mut map = self.clone();
        match &mut map {
            DimMap::Strided {
                src,
                src_step,
                dst,
                dst_step,
                ..
            } => {
                std::mem::swap(src, dst);
                std::mem::swap(src_step, dst_step);
            }
            DimMap::List { src, dst } => std::mem::swap(src, dst),
        }
        map
    }

    /// The same sources, to destinations `0..len`.
    pub fn compacted(&self) -> Self {
        let mut map = self.clone();
        match &mut map {
            DimMap::Strided { dst, dst_step, .. } => (*dst, *dst_step) = (0, 1),
            DimMap::List { src, dst } => *dst = (0..src.len()).collect(),
        }
        map
    }

    /// The smallest range holding every source index (`None` when empty).
    pub fn src_span(&self) -> Option<std::ops::Range<usize>> {
        match self {
            DimMap::Strided { len: 0, .. } => None,
            DimMap::Strided {
                src, src_step, len, ..
            } => Some(*src..src + (len - 1) * src_step + 1),
            DimMap::List { src, .. } => Some(*src.iter().min()?..src.iter().max()? + 1),
        }
    }

    /// Source indices moved down by `by` (a part of a chunk seen from a
    /// run of its rows that starts at `by`). Every source index is at least `by`.
    pub fn src_from(&self, by: usize) -> Self {
        let mut map = self.clone();
        match &mut map {
            DimMap::Strided { src, .. } => *src -= by,
            DimMap::List { src, .. } => src.iter_mut().for_each(|i| *i -= by),
        }
        map
    }

    /// Runs where both sides are consecutive: (src, dst, len).
    fn runs(&self) -> Vec<(usize, usize, usize)> {
        if let DimMap::Strided {
            src,
            src_step: 1,
            dst,
            dst_step: 1,
            len,
        } = *self
        {
            return vec![(src, dst, len)];
        }
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        for (s, d) in self.pairs() {
            if let Some(last) = out.last_mut() {
                if last.0 + last.2 == s && last.1 + last.2 == d {
                    last.2 += 1;
                    continue;
                }
            }
            out.push((s, d, 1));
        }
        out
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Copy the elements `maps` select from `src` (of `src_shape`) into `dst`
/// (of `dst_shape`). Both are C order; `elem` is the element size of fixed
/// data. Runs that are consecutive on both sides are copied as one slice.
pub fn copy_mapped(
    src: &ArrayBytes,
    src_shape: &[usize],
    dst: &mut ArrayBytes,
    dst_shape: &[usize],
    maps: &[DimMap],
    elem: usize,
) {
    for_each_run(src_shape, dst_shape, maps, |s, d, n| {
        match (src, &mut *dst) {
            (ArrayBytes::Fixed(a), ArrayBytes::Fixed(b)) => {
                b[d * elem..(d + n) * elem].copy_from_slice(&a[s * elem..(s + n) * elem]);
            }
            (ArrayBytes::Variable(a), ArrayBytes::Variable(b)) => {
                b[d..d + n].clone_from_slice(&a[s..s + n]);
            }
            _ => {}
        }
    });
}

/// Call `run(src, dst, len)` for every run of elements `maps` select, in
/// element offsets of the C-order source and destination. Runs that are
/// consecutive on both sides come as one call; the destination offsets of
/// different calls never overlap.
pub fn for_each_run(
    src_shape: &[usize],
    dst_shape: &[usize],
    maps: &[DimMap],
    mut run: impl FnMut(usize, usize, usize),
) {
    debug_assert_eq!(maps.len(), src_shape.len());
    debug_assert_eq!(maps.len(), dst_shape.len());
    if maps.iter().any(DimMap::is_empty) {
        return;
    }
    if maps.is_empty() {
        run(0, 0, 1);
        return;
    }
    let ndim = maps.len();
    let ss = strides(src_shape);
    let ds = strides(dst_shape);
    let inner = maps[ndim - 1].runs();
    let outer = &maps[..ndim - 1];
    let mut counter = vec![0usize; outer.len()];
    loop {
        let mut s_base = 0;
        let mut d_base = 0;
        for (dim, &i) in counter.iter().enumerate() {
            s_base += outer[dim].src(i) * ss[dim];
            d_base += outer[dim].dst(i) * ds[dim];
        }
        for &(s, d, n) in &inner {
            run(s_base + s, d_base + d, n);
        }
        // Advance the odometer over the outer dimensions.
        let mut dim = outer.len();
        loop {
            if dim == 0 {
                return;
            }
            dim -= 1;
            counter[dim] += 1;
            if counter[dim] < outer[dim].len() {
                break;
            }
            counter[dim] = 0;
        }
    }
}

/// Linear C-order index → multi-index.
pub fn unravel(mut index: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            out[d] = index % shape[d];
            index /= shape[d];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_a_window_with_runs() {
        // 3x4 source, copy rows 1..3, cols 1..3 into a 2x2 destination.
        let src = ArrayBytes::Fixed((0u8..12).collect());
        let mut dst = ArrayBytes::Fixed(vec![0; 4]);
        copy_mapped(
            &src,
            &[3, 4],
            &mut dst,
            &[2, 2],
            &[DimMap::range(1, 0, 2), DimMap::range(1, 0, 2)],
            1,
        );
        assert_eq!(dst, ArrayBytes::Fixed(vec![5, 6, 9, 10]));
    }

    #[test]
    fn copies_strided_and_variable() {
        let src = ArrayBytes::Variable((0u8..6).map(|i| vec![i]).collect());
        let mut dst = ArrayBytes::Variable(vec![vec![]; 2]);
        let map = DimMap::list(vec![4, 0], vec![0, 1]);
        copy_mapped(&src, &[6], &mut dst, &[2], &[map], 0);
        assert_eq!(dst, ArrayBytes::Variable(vec![vec![4], vec![0]]));
    }

    #[test]
    fn zero_dimensional_copy() {
        let src = ArrayBytes::Fixed(vec![1, 2]);
        let mut dst = ArrayBytes::Fixed(vec![0, 0]);
        copy_mapped(&src, &[], &mut dst, &[], &[], 2);
        assert_eq!(dst, ArrayBytes::Fixed(vec![1, 2]));
    }
}
