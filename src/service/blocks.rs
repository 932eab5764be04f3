//! A selection cut into blocks for computations: position ranges per
//! dimension, whole trailing dimensions, one dimension cut into pieces of
//! whole chunks where it can be, so no chunk is decoded for two blocks.

use crate::zarr::selection::{Indices, Resolved, ResolvedDim};

/// Elements per block read and folded at once (a block of whole chunks may
/// hold up to [`CHUNK_ALIGNED_BLOCKS`] times this).
pub(super) const BLOCK_ELEMENTS: u64 = 1 << 20;

/// Blocks of a selection as position ranges per dimension: whole trailing
/// dimensions, one dimension cut into pieces of whole chunks where it can
/// be (so no chunk is decoded for two blocks), single positions before it.
pub(super) struct Blocks {
    lens: Vec<u64>,
    split: usize,
    piece: u64,
    /// Where the split dimension's chunk boundaries fall: a block ends
    /// where `position + align` is a multiple of `piece`.
    align: u64,
    /// The next block's start; `None` when done.
    next: Option<Vec<u64>>,
}

/// How many blocks' worth of elements a block may grow to so that it holds
/// whole chunks.
const CHUNK_ALIGNED_BLOCKS: u64 = 8;

impl Blocks {
    /// The most elements one block of `dims` holds.
    pub(super) fn largest(dims: &[ResolvedDim], chunk_shape: &[u64]) -> u64 {
        let b = Blocks::new(dims, chunk_shape);
        b.lens
            .iter()
            .enumerate()
            .map(|(d, &l)| match d.cmp(&b.split) {
                std::cmp::Ordering::Less => 1,
                std::cmp::Ordering::Equal => b.piece.min(l),
                std::cmp::Ordering::Greater => l,
            })
            .product::<u64>()
            .max(1)
    }

    pub(super) fn new(dims: &[ResolvedDim], chunk_shape: &[u64]) -> Self {
        let lens: Vec<u64> = dims.iter().map(|d| d.indices.len()).collect();
        let n = lens.len();
        if lens.contains(&0) {
            return Blocks {
                lens,
                split: 0,
                piece: 1,
                align: 0,
                next: None,
            };
        }
        // The first dimension whose trailing product fits a block.
        let mut split = n;
        let mut inner = 1u64;
        while split > 0 && inner.saturating_mul(lens[split - 1]) <= BLOCK_ELEMENTS {
            split -= 1;
            inner = inner.saturating_mul(lens[split]);
        }
        // `split` is now the first whole dimension; cut the one before it.
        let (split, piece, align) = if split == 0 {
            (0, lens.first().copied().unwrap_or(1), 0)
        } else {
            let d = split - 1;
            let mut piece = (BLOCK_ELEMENTS / inner).clamp(1, lens[d]);
            let mut align = 0;
            let chunk = chunk_shape.get(d).copied().unwrap_or(0);
            if let (Indices::Range { start, step: 1, .. }, true) = (&dims[d].indices, chunk > 0) {
                if piece >= chunk {
                    piece = piece / chunk * chunk;
                } else if chunk.saturating_mul(inner) <= CHUNK_ALIGNED_BLOCKS * BLOCK_ELEMENTS {
                    piece = chunk;
                }
                if piece.is_multiple_of(chunk) {
                    align = start % chunk;
                }
            }
            (d, piece, align)
        };
        Blocks {
            next: Some(vec![0; n]),
            lens,
            split,
            piece,
            align,
        }
    }
}

impl Iterator for Blocks {
    /// A block's start and lengths.
    type Item = (Vec<u64>, Vec<u64>);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.next.take()?;
        let n = self.lens.len();
        let len: Vec<u64> = (0..n)
            .map(|d| {
                if d < self.split {
                    1
                } else if d == self.split {
                    let to_boundary = self.piece - (start[d] + self.align) % self.piece;
                    to_boundary.min(self.lens[d] - start[d])
                } else {
                    self.lens[d]
                }
            })
            .collect();
        // Advance: the split dimension past this block, those before by one.
        let mut next = start.clone();
        let mut d = self.split.min(n.saturating_sub(1)) + 1;
        let mut done = n == 0;
        while !done {
            if d == 0 {
                done = true;
                break;
            }
            d -= 1;
            next[d] += if d == self.split { len[d] } else { 1 };
            if next[d] < self.lens[d] {
                break;
            }
            next[d] = 0;
        }
        if !done {
            self.next = Some(next);
        }
        Some((start, len))
    }
}

/// The part of a selection at positions `start..start+len` per dimension.
pub(super) fn sub_selection(dims: &[ResolvedDim], start: &[u64], len: &[u64]) -> Resolved {
    Resolved::Orthogonal(
        dims.iter()
            .enumerate()
            .map(|(d, rd)| ResolvedDim {
                keep: rd.keep,
                indices: match &rd.indices {
                    Indices::Range { start: s, step, .. } => Indices::Range {
                        start: s + start[d] * step,
                        step: *step,
                        len: len[d],
                    },
                    Indices::List(list) => {
                        Indices::List(list[start[d] as usize..(start[d] + len[d]) as usize].into())
                    }
                },
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(len: u64) -> ResolvedDim {
        ResolvedDim {
            indices: Indices::Range {
                start: 0,
                step: 1,
                len,
            },
            keep: true,
        }
    }

    #[test]
    fn blocks_cover_the_selection_once() {
        for shape in [vec![3000u64, 700, 3], vec![5], vec![2, 2_000_000], vec![]] {
            let dims: Vec<ResolvedDim> = shape.iter().map(|&n| range(n)).collect();
            let chunks: Vec<u64> = shape.iter().map(|&n| n.min(64)).collect();
            let total: u64 = Blocks::new(&dims, &chunks)
                .map(|(_, len)| {
                    let n: u64 = len.iter().product();
                    assert!(
                        n <= BLOCK_ELEMENTS || len.iter().all(|&l| l <= 1 || n <= BLOCK_ELEMENTS)
                    );
                    n
                })
                .sum();
            assert_eq!(total, shape.iter().product::<u64>(), "{shape:?}");
        }
    }

    #[test]
    fn blocks_hold_whole_chunks() {
        // 8760 x 180 x 360 in chunks of 24 steps: blocks of 24 (one chunk).
        let dims: Vec<ResolvedDim> = [8760u64, 180, 360].iter().map(|&n| range(n)).collect();
        let blocks: Vec<_> = Blocks::new(&dims, &[24, 180, 360]).collect();
        assert!(
            blocks.iter().all(|(s, l)| s[0] % 24 == 0 && l[0] == 24),
            "{:?}",
            &blocks[..2]
        );
        // A selection starting inside a chunk ends its first block at the boundary.
        let mut dims = dims;
        dims[0].indices = Indices::Range {
            start: 5,
            step: 1,
            len: 100,
        };
        let lens: Vec<u64> = Blocks::new(&dims, &[24, 180, 360])
            .map(|(_, l)| l[0])
            .collect();
        assert_eq!(lens, vec![19, 24, 24, 24, 9]);
    }
}
