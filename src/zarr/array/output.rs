//! The output of a read, filled by many chunk tasks at once without a lock.
//!
//! A selection maps every output element to exactly one chunk (see
//! [`crate::zarr::selection::Resolved::chunks`]), so the parts that different
//! chunk tasks write never overlap. Holding a mutex around each copy
//! serialized them instead: with a warm cache the copies are most of a read,
//! and both cores waited on one lock.

use std::sync::Arc;

use crate::zarr::buffer::{for_each_run, ArrayBytes};
use crate::zarr::error::{Result, ZarrError};
use crate::zarr::selection::ChunkPart;

/// Output elements shared by the tasks of one read. Tasks hold an `Arc`, so
/// the buffer outlives a read whose caller went away while copies were
/// still running on the blocking pool.
pub(super) struct Output {
    // Never moved or resized while shared: the pointers below stay valid.
    data: std::cell::UnsafeCell<ArrayBytes>,
    fixed: *mut u8,
    variable: *mut Vec<u8>,
    len: usize,
    elem: usize,
}

// SAFETY: writers touch disjoint elements (the invariant above), and the
// buffer is only read back after every writer is done (`into_inner` needs
// the last reference).
unsafe impl Send for Output {}
unsafe impl Sync for Output {}

impl Output {
    /// `count` elements of `elem` bytes each (`elem` is 0 for
    /// variable-length data, and for zero-sized types, which have nothing to
    /// copy; their count is taken as given).
    pub(super) fn new(mut data: ArrayBytes, count: usize, elem: usize) -> Arc<Self> {
        let (fixed, variable, len) = match &mut data {
            ArrayBytes::Fixed(b) if elem > 0 => {
                (b.as_mut_ptr(), std::ptr::null_mut(), b.len() / elem)
            }
            ArrayBytes::Fixed(b) => (b.as_mut_ptr(), std::ptr::null_mut(), count),
            ArrayBytes::Variable(v) => (std::ptr::null_mut(), v.as_mut_ptr(), v.len()),
        };
        Arc::new(Output {
            data: std::cell::UnsafeCell::new(data),
            fixed,
            variable,
            len,
            elem,
        })
    }

    /// The filled buffer, once no task holds it any more.
    pub(super) fn into_inner(self: Arc<Self>) -> Option<ArrayBytes> {
        Arc::into_inner(self).map(|o| o.data.into_inner())
    }

    /// Copy one decoded chunk's part of the selection into its elements.
    ///
    /// # Safety
    /// Parts copied at the same time must not share output elements, as the
    /// parts of different chunks of one resolved selection never do.
    pub(super) unsafe fn scatter(
        &self,
        chunk: &ArrayBytes,
        chunk_shape: &[usize],
        part: &ChunkPart,
        out_shape: &[usize],
    ) -> Result<()> {
        let mut fits = true;
        match part {
            ChunkPart::Block(maps) => for_each_run(chunk_shape, out_shape, maps, |s, d, n| {
                fits &= self.copy(chunk, s, d, n)
            }),
            ChunkPart::Points(points) => {
                let strides = crate::zarr::buffer::c_strides(chunk_shape);
                for (out_pos, local) in points {
                    let src: usize = local.iter().zip(&strides).map(|(i, s)| i * s).sum();
                    fits &= self.copy(chunk, src, *out_pos, 1);
                }
            }
        }
        if fits {
            Ok(())
        } else {
            Err(ZarrError::Internal(
                "a chunk's part of the selection lies outside the chunk or the output".into(),
            ))
        }
    }

    /// Copy elements `s..s + n` of `chunk` to elements `d..d + n` of the
    /// output; `false` when either side is out of bounds (nothing copied).
    fn copy(&self, chunk: &ArrayBytes, s: usize, d: usize, n: usize) -> bool {
        if d + n > self.len {
            return false;
        }
        match chunk {
            ArrayBytes::Fixed(_) if self.elem == 0 => {}
            ArrayBytes::Fixed(c) if !self.fixed.is_null() => {
                let e = self.elem;
                let Some(src) = c.get(s * e..(s + n) * e) else {
                    return false;
                };
                // SAFETY: in bounds (checked above); no other task writes
                // these elements and nobody reads them until all writes end.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), self.fixed.add(d * e), src.len())
                }
            }
            ArrayBytes::Variable(c) if !self.variable.is_null() => {
                let Some(src) = c.get(s..s + n) else {
                    return false;
                };
                for (i, value) in src.iter().enumerate() {
                    // SAFETY: as above; each element is its own `Vec`.
                    unsafe { (*self.variable.add(d + i)).clone_from(value) }
                }
            }
            // A chunk decoded to the other kind of data than the array's is
            // refused when decoding; nothing to copy here.
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::buffer::DimMap;

    #[test]
    fn parts_of_different_chunks_fill_their_own_elements() {
        // A 2 x 4 output from two 2 x 2 chunks, the second copied on another thread.
        let out = Output::new(ArrayBytes::Fixed(vec![0; 8]), 8, 1);
        let left = ArrayBytes::Fixed(vec![1, 2, 3, 4]);
        let right = ArrayBytes::Fixed(vec![5, 6, 7, 8]);
        let part = |dst| ChunkPart::Block(vec![DimMap::range(0, 0, 2), DimMap::range(0, dst, 2)]);
        let other = out.clone();
        let (p, r) = (part(2), right.clone());
        // SAFETY (both): the two parts are different columns.
        let t = std::thread::spawn(move || unsafe { other.scatter(&r, &[2, 2], &p, &[2, 4]) });
        unsafe { out.scatter(&left, &[2, 2], &part(0), &[2, 4]) }.unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(
            out.into_inner(),
            Some(ArrayBytes::Fixed(vec![1, 2, 5, 6, 3, 4, 7, 8]))
        );
    }

    #[test]
    fn points_and_variable_length_elements_land_where_they_belong() {
        let out = Output::new(ArrayBytes::Variable(vec![vec![]; 3]), 3, 0);
        let chunk = ArrayBytes::Variable(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let points = ChunkPart::Points(vec![(0, vec![2]), (2, vec![0])]);
        // SAFETY: one writer.
        unsafe { out.scatter(&chunk, &[3], &points, &[3]) }.unwrap();
        assert_eq!(
            out.into_inner(),
            Some(ArrayBytes::Variable(vec![
                b"c".to_vec(),
                vec![],
                b"a".to_vec()
            ]))
        );
    }

    #[test]
    fn zero_sized_elements_have_nothing_to_copy() {
        let out = Output::new(ArrayBytes::Fixed(vec![]), 4, 0);
        let part = ChunkPart::Block(vec![DimMap::range(0, 1, 2)]);
        // SAFETY: one writer.
        unsafe { out.scatter(&ArrayBytes::Fixed(vec![]), &[2], &part, &[4]) }.unwrap();
        assert_eq!(out.into_inner(), Some(ArrayBytes::Fixed(vec![])));
    }

    #[test]
    fn a_part_outside_the_output_is_an_error_not_a_wild_write() {
        let out = Output::new(ArrayBytes::Fixed(vec![0; 4]), 1, 4);
        let chunk = ArrayBytes::Fixed(vec![9; 8]);
        let beyond = ChunkPart::Block(vec![DimMap::range(0, 1, 2)]);
        // SAFETY: one writer.
        assert!(unsafe { out.scatter(&chunk, &[2], &beyond, &[2]) }.is_err());
        let short = ChunkPart::Block(vec![DimMap::range(1, 0, 2)]);
        let out = Output::new(ArrayBytes::Fixed(vec![0; 8]), 2, 4);
        assert!(unsafe { out.scatter(&chunk, &[2], &short, &[2]) }.is_err());
    }
}
