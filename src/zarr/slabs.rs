//! Slabs: a selection cut along its first dimension into parts, read a
//! few at a time in order, so a large answer is produced (and held) a part
//! at a time, in the order its bytes leave.

use super::selection::{Indices, Resolved, ResolvedDim};

/// What a read holds for each chunk it touches beside the chunk's bytes
/// (its coordinates and its part of the answer; ~270 bytes measured), so
/// slabs of tiny chunks join fewer rows.
const CHUNK_RECORD: u64 = 256;

/// Split a selection into slabs along its first dimension of length > 1,
/// one per chunk row, chunk rows over `max_bytes` split further (when
/// `row_bytes`, the bytes of one step along that dimension, allows).
/// Concatenating the slabs' C-order results gives the whole selection's
/// C-order result.
///
/// Whole chunk rows of a range next to each other are then joined while
/// the chunks the slab decodes (`elem`-byte elements, and a record per
/// chunk), and so the slab, stay within `join_bytes`: a slab costs a pass through the read (a shard's
/// index read again, a trip per file), which a window over small chunks
/// otherwise paid once per chunk row; a thin column of large chunks joins
/// no more rows than the chunks allow. Rows split by `max_bytes` are never
/// joined, so a slab either lies within one chunk row or holds whole ones
/// (what [`slabs_revisit_chunks`] relies on).
pub fn slab_split(
    selection: &Resolved,
    chunk_shape: &[u64],
    elem: u64,
    max_bytes: u64,
    join_bytes: u64,
) -> Vec<Resolved> {
    match selection {
        Resolved::Points { coords } => {
            let per = (max_bytes / elem.max(1)).max(1) as usize;
            coords
                .chunks(per)
                .map(|c| Resolved::Points { coords: c.to_vec() })
                .collect()
        }
        Resolved::Orthogonal(dims) => {
            let Some(d) = dims.iter().position(|dim| dim.indices.len() > 1) else {
                return vec![selection.clone()];
            };
            let row_bytes: u64 = dims[d + 1..]
                .iter()
                .fold(elem, |n, x| n.saturating_mul(x.indices.len()))
                .max(1);
            let max_rows = (max_bytes / row_bytes).max(1);
            // The chunks one chunk row of the selection decodes (at least
            // its bytes of the answer): chunk rows join while a slab
            // decodes at most `join_bytes`. Lists may come back to a chunk
            // row later: only ranges join.
            let row_decoded = {
                let mut one_row = dims.clone();
                one_row[d].indices = sub_indices(&dims[d].indices, 0, 1);
                let chunk_bytes = chunk_shape
                    .iter()
                    .product::<u64>()
                    .saturating_mul(elem)
                    .saturating_add(CHUNK_RECORD);
                Resolved::Orthogonal(one_row)
                    .chunk_count_bound(chunk_shape)
                    .saturating_mul(chunk_bytes)
                    .max(1)
            };
            let join_rows = match dims[d].indices {
                Indices::Range { .. } => join_bytes.min(max_bytes) / row_decoded,
                Indices::List(_) => 0,
            };
            let n = dims[d].indices.len();
            let chunk_of = |i: u64| dims[d].indices.get(i) / chunk_shape[d];
            let mut out: Vec<(u64, u64)> = Vec::new();
            // Whether the last slab holds whole chunk rows only, and how many.
            let mut last_whole = false;
            let mut last_rows = 0;
            let mut start = 0;
            while start < n {
                let chunk = chunk_of(start);
                let mut end = start + 1;
                while end < n && end - start < max_rows && chunk_of(end) == chunk {
                    end += 1;
                }
                let whole = (start == 0 || chunk_of(start - 1) != chunk)
                    && (end == n || chunk_of(end) != chunk);
                match out.last_mut() {
                    Some(last) if last_whole && whole && last_rows < join_rows => {
                        last.1 = end;
                        last_rows += 1;
                    }
                    _ => {
                        out.push((start, end));
                        last_whole = whole;
                        last_rows = 1;
                    }
                }
                start = end;
            }
            out.into_iter()
                .map(|(start, end)| {
                    let mut slab = dims.clone();
                    slab[d] = ResolvedDim {
                        indices: sub_indices(&dims[d].indices, start, end),
                        keep: dims[d].keep,
                    };
                    Resolved::Orthogonal(slab)
                })
                .collect()
        }
    }
}

/// Whether reading `slabs` one after another touches some chunk more than
/// once: only then is keeping a slab's chunks for a later slab worth its
/// cost. Slabs of [`slab_split`] each lie within one chunk along the split
/// dimension or hold whole chunk rows of a range, so two of them share
/// chunks exactly when they start in the same chunk along every dimension; points share whenever there are two
/// slabs of them.
pub fn slabs_revisit_chunks(slabs: &[Resolved], chunk_shape: &[u64]) -> bool {
    let mut seen = std::collections::HashSet::new();
    for slab in slabs {
        let Resolved::Orthogonal(dims) = slab else {
            return slabs.len() > 1;
        };
        let first: Vec<u64> = dims
            .iter()
            .zip(chunk_shape)
            .map(|(d, &c)| {
                if d.indices.is_empty() {
                    0
                } else {
                    d.indices.get(0) / c.max(1)
                }
            })
            .collect();
        if !seen.insert(first) {
            return true;
        }
    }
    false
}

fn sub_indices(indices: &Indices, start: u64, end: u64) -> Indices {
    match indices {
        Indices::Range { start: s, step, .. } => Indices::Range {
            start: s + start * step,
            step: *step,
            len: end - start,
        },
        Indices::List(l) => Indices::List(l[start as usize..end as usize].into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::Selection;

    #[test]
    fn slabs_share_a_list_along_another_dimension() {
        // One slab per row (each row is over the join size): a copy of the
        // list per slab grew with rows times the list's length.
        let list = (0..4000).map(|i| (i % 7).to_string()).collect::<Vec<_>>();
        let sel = Selection::parse(&format!("0:64,[{}]", list.join(",")))
            .unwrap()
            .resolve(&[64, 8])
            .unwrap();
        let parts = slab_split(&sel, &[1, 8], 1, 1024, 0);
        assert_eq!(parts.len(), 64);
        let lists: Vec<&std::sync::Arc<[u64]>> = parts
            .iter()
            .map(|p| match p {
                Resolved::Orthogonal(d) => match &d[1].indices {
                    Indices::List(l) => l,
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(lists.iter().all(|l| std::sync::Arc::ptr_eq(l, lists[0])));
    }

    #[test]
    fn slabs_cover_the_selection_in_order() {
        let sel = Selection::parse("3:20:2,1:4")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        let parts = slab_split(&sel, &[8, 5], 4, 1 << 20, 0);
        let rows: Vec<u64> = parts
            .iter()
            .flat_map(|p| match p {
                Resolved::Orthogonal(d) => (0..d[0].indices.len())
                    .map(|i| d[0].indices.get(i))
                    .collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect();
        assert_eq!(rows, vec![3, 5, 7, 9, 11, 13, 15, 17, 19]);
        assert_eq!(parts.len(), 3, "one slab per chunk row");
        assert_eq!(
            slab_split(&sel, &[100, 5], 4, 24, 0).len(),
            5,
            "byte cap splits rows"
        );
    }

    #[test]
    fn whole_chunk_rows_of_a_range_are_joined_up_to_the_join_size() {
        let rows_of = |slabs: &[Resolved]| -> Vec<Vec<u64>> {
            slabs
                .iter()
                .map(|p| match p {
                    Resolved::Orthogonal(d) => (0..d[0].indices.len())
                        .map(|i| d[0].indices.get(i))
                        .collect(),
                    _ => vec![],
                })
                .collect()
        };
        // Rows 3..=20 in chunks of 4 x 5 float32: each chunk row of the
        // selection decodes one 80-byte chunk (336 bytes with its record),
        // so 672 bytes join two: the lone row of chunk 0 with chunk 1,
        // chunks 2 and 3, chunk 4 with the lone row 20.
        let sel = Selection::parse("3:21,0:2")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        let row = |r: std::ops::Range<u64>| r.collect::<Vec<_>>();
        assert_eq!(
            rows_of(&slab_split(&sel, &[4, 5], 4, 1 << 20, 672)),
            vec![row(3..8), row(8..16), row(16..21)]
        );
        assert_eq!(slab_split(&sel, &[4, 5], 4, 1 << 20, 0).len(), 6);
        // A chunk row split by the byte cap is never joined to a neighbour,
        // so slabs still come back to a chunk only when a row was split.
        let capped = slab_split(&sel, &[8, 5], 4, 3 * 8, 1 << 20);
        assert_eq!(
            rows_of(&capped),
            vec![
                row(3..6),
                row(6..8),
                row(8..11),
                row(11..14),
                row(14..16),
                row(16..19),
                row(19..21)
            ]
        );
        assert!(slabs_revisit_chunks(&capped, &[8, 5]));
        let joined = slab_split(&sel, &[4, 5], 4, 1 << 20, 1 << 20);
        assert_eq!(rows_of(&joined), vec![row(3..21)]);
        assert!(!slabs_revisit_chunks(&joined, &[4, 5]));
        // A thin column: each chunk row selects a few bytes but decodes a
        // whole 128-byte chunk (384 bytes with its record), so 1536 bytes
        // join four chunk rows at most.
        let column = Selection::parse(":,0").unwrap().resolve(&[64, 8]).unwrap();
        assert_eq!(
            rows_of(&slab_split(&column, &[16, 8], 1, 1 << 20, 1536)),
            vec![row(0..64)]
        );
        assert_eq!(
            rows_of(&slab_split(&column, &[4, 8], 4, 1 << 20, 1536)),
            vec![row(0..16), row(16..32), row(32..48), row(48..64)]
        );
        // Lists may come back to a chunk row: they are never joined.
        let listed = Selection::parse("[0,20,1],:")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        assert_eq!(slab_split(&listed, &[8, 5], 4, 1 << 20, 1 << 20).len(), 3);
    }

    #[test]
    fn slabs_revisit_a_chunk_only_when_they_split_a_chunk_row() {
        let sel = Selection::parse("3:20:2,1:4")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        let by_row = slab_split(&sel, &[8, 5], 4, 1 << 20, 0);
        assert!(
            !slabs_revisit_chunks(&by_row, &[8, 5]),
            "one slab per chunk row"
        );
        let capped = slab_split(&sel, &[100, 5], 4, 24, 0);
        assert!(
            slabs_revisit_chunks(&capped, &[100, 5]),
            "a chunk row in five slabs"
        );
        let one = slab_split(&sel, &[8, 5], 4, 1 << 20, 0)[..1].to_vec();
        assert!(!slabs_revisit_chunks(&one, &[8, 5]));
        // Unsorted indices come back to chunk 0 after chunk 2.
        let listed = Selection::parse("[0,20,1],:")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        let slabs = slab_split(&listed, &[8, 5], 4, 1 << 20, 0);
        assert_eq!(slabs.len(), 3);
        assert!(slabs_revisit_chunks(&slabs, &[8, 5]));
        let points = Selection::parse_points("[[0,0],[1,1],[2,2]]")
            .unwrap()
            .resolve(&[30, 5])
            .unwrap();
        assert!(slabs_revisit_chunks(
            &slab_split(&points, &[8, 5], 4, 4, 0),
            &[8, 5]
        ));
        assert!(!slabs_revisit_chunks(
            &slab_split(&points, &[8, 5], 4, 1 << 20, 0),
            &[8, 5]
        ));
    }
}
