//! The output of a read, filled by many chunk tasks at once without a lock.
//!
//! A selection maps every output element to exactly one chunk (see
//! [`crate::zarr::selection::Resolved::chunks`]), so the parts that different
//! chunk tasks write never overlap. Holding a mutex around each copy
//! serialized them instead: with a warm cache the copies are most of a read,
//! and both cores waited on one lock.
//!
//! Fixed-size elements are not filled before the copies: every part is
//! either copied from its chunk or, when the chunk is not stored, filled
//! with the fill value, and the read counts the elements its parts wrote.
//! The buffer becomes readable only when that count is the output's length
//! ([`Output::into_inner`]); a read that missed an element is an error,
//! never uninitialized bytes. (Filling 2 MiB slabs first was 7% of a warm
//! read's time, on the request's thread before any copy began.)

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
    /// Fixed-size elements: the buffer's capacity, uninitialized until
    /// written (the `Vec`'s length stays 0 until every element is).
    fixed: *mut u8,
    variable: *mut Vec<u8>,
    len: usize,
    elem: usize,
    /// One element of the fill value, for parts of chunks not stored.
    fill: Vec<u8>,
}

// SAFETY: writers touch disjoint elements (the invariant above), and the
// buffer is only read back after every writer is done (`into_inner` needs
// the last reference).
unsafe impl Send for Output {}
unsafe impl Sync for Output {}

impl Output {
    /// `count` elements of `elem` bytes each (`elem` is 0 for
    /// variable-length data, and for zero-sized types, which have nothing to
    /// copy; their count is taken as given), `fill` being one element of
    /// the fill value. `count * elem` must not overflow.
    pub(super) fn new(fill: &[u8], count: usize, elem: usize, variable: bool) -> Arc<Self> {
        let mut data = if variable {
            // Each element is its own `Vec`, which must exist to be replaced.
            ArrayBytes::filled(fill, count, true)
        } else {
            ArrayBytes::Fixed(Vec::with_capacity(count * elem))
        };
        let (fixed, variable) = match &mut data {
            ArrayBytes::Fixed(b) => (b.as_mut_ptr(), std::ptr::null_mut()),
            ArrayBytes::Variable(v) => (std::ptr::null_mut(), v.as_mut_ptr()),
        };
        Arc::new(Output {
            data: std::cell::UnsafeCell::new(data),
            fixed,
            variable,
            len: count,
            elem,
            fill: fill.to_vec(),
        })
    }

    /// The filled buffer, once no task holds it any more and the parts
    /// written (`written` elements in all) covered every element.
    pub(super) fn into_inner(self: Arc<Self>, written: usize) -> Result<ArrayBytes> {
        let out = Arc::into_inner(self)
            .ok_or_else(|| ZarrError::Internal("output still shared".into()))?;
        if written != out.len {
            return Err(ZarrError::Internal(format!(
                "a read wrote {written} of its {} elements",
                out.len
            )));
        }
        let (len, elem) = (out.len, out.elem);
        let mut data = out.data.into_inner();
        if let ArrayBytes::Fixed(b) = &mut data {
            // SAFETY: every element was written (counted above) through
            // `fixed`, within the capacity reserved for `len` elements.
            unsafe { b.set_len(len * elem) };
        }
        Ok(data)
    }

    /// Copy one decoded chunk's part of the selection into its elements;
    /// the number of elements written.
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
    ) -> Result<usize> {
        self.each_run(chunk_shape, part, out_shape, |s, d, n| {
            self.copy(chunk, s, d, n)
        })
        .ok_or_else(|| {
            ZarrError::Internal(
                "a chunk's part of the selection lies outside the chunk or the output".into(),
            )
        })
    }

    /// Write the fill value into the elements of a part whose chunk is not
    /// stored; the number of elements written.
    ///
    /// # Safety
    /// As for [`Output::scatter`].
    pub(super) unsafe fn fill(
        &self,
        chunk_shape: &[usize],
        part: &ChunkPart,
        out_shape: &[usize],
    ) -> Result<usize> {
        self.each_run(chunk_shape, part, out_shape, |_, d, n| self.fill_run(d, n))
            .ok_or_else(|| {
                ZarrError::Internal("a part of the selection lies outside the output".into())
            })
    }

    /// `write(s, d, n)` for each run of a part (`n` elements from `s` in
    /// the chunk to `d` in the output); the number of elements, `None`
    /// when a run did not fit.
    fn each_run(
        &self,
        chunk_shape: &[usize],
        part: &ChunkPart,
        out_shape: &[usize],
        mut write: impl FnMut(usize, usize, usize) -> bool,
    ) -> Option<usize> {
        let mut fits = true;
        let mut written = 0;
        match part {
            ChunkPart::Block(maps) => for_each_run(chunk_shape, out_shape, maps, |s, d, n| {
                fits &= write(s, d, n);
                written += n;
            }),
            ChunkPart::Points(points) => {
                let strides = crate::zarr::buffer::c_strides(chunk_shape);
                for (out_pos, local) in points {
                    let src: usize = local.iter().zip(&strides).map(|(i, s)| i * s).sum();
                    fits &= write(src, *out_pos, 1);
                    written += 1;
                }
            }
        }
        fits.then_some(written)
    }

    /// Copy elements `s..s + n` of `chunk` to elements `d..d + n` of the
    /// output; `false` when either side is out of bounds (nothing copied).
    fn copy(&self, chunk: &ArrayBytes, s: usize, d: usize, n: usize) -> bool {
        if d + n > self.len {
            return false;
        }
        match chunk {
            ArrayBytes::Fixed(_) if self.elem == 0 => true,
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
                true
            }
            ArrayBytes::Variable(c) if !self.variable.is_null() => {
                let Some(src) = c.get(s..s + n) else {
                    return false;
                };
                for (i, value) in src.iter().enumerate() {
                    // SAFETY: as above; each element is its own `Vec`.
                    unsafe { (*self.variable.add(d + i)).clone_from(value) }
                }
                true
            }
            // A chunk decoded to the other kind of data than the array's is
            // refused when decoding; it writes nothing.
            _ => false,
        }
    }

    /// Write the fill value into elements `d..d + n`.
    fn fill_run(&self, d: usize, n: usize) -> bool {
        if d + n > self.len {
            return false;
        }
        if n == 0 {
            return true;
        }
        if !self.fixed.is_null() {
            let e = self.elem;
            if e == 0 {
                return true;
            }
            if self.fill.len() != e {
                return false;
            }
            let total = n * e;
            // SAFETY: elements `d..d + n` are in bounds (checked above) and
            // this task's alone, as in `copy`; the doubling copies read only
            // what this call has written.
            unsafe {
                let run = self.fixed.add(d * e);
                if self.fill.iter().all(|&b| b == 0) {
                    std::ptr::write_bytes(run, 0, total);
                    return true;
                }
                std::ptr::copy_nonoverlapping(self.fill.as_ptr(), run, e);
                let mut done = e;
                while done < total {
                    let step = done.min(total - done);
                    std::ptr::copy_nonoverlapping(run, run.add(done), step);
                    done += step;
                }
            }
        }
        // Variable-length elements were created holding the fill value.
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
        let out = Output::new(&[0], 8, 1, false);
        let left = ArrayBytes::Fixed(vec![1, 2, 3, 4]);
        let right = ArrayBytes::Fixed(vec![5, 6, 7, 8]);
        let part = |dst| ChunkPart::Block(vec![DimMap::range(0, 0, 2), DimMap::range(0, dst, 2)]);
        let other = out.clone();
        let (p, r) = (part(2), right.clone());
        // SAFETY (both): the two parts are different columns.
        let t = std::thread::spawn(move || unsafe { other.scatter(&r, &[2, 2], &p, &[2, 4]) });
        let written = unsafe { out.scatter(&left, &[2, 2], &part(0), &[2, 4]) }.unwrap();
        let written = written + t.join().unwrap().unwrap();
        assert_eq!(
            out.into_inner(written).unwrap(),
            ArrayBytes::Fixed(vec![1, 2, 5, 6, 3, 4, 7, 8])
        );
    }

    #[test]
    fn parts_of_chunks_not_stored_take_the_fill_value() {
        // A 2 x 5 output of 2-byte elements: columns 0-1 copied, 2-4 filled.
        let fill = [7, 9];
        let out = Output::new(&fill, 10, 2, false);
        let chunk = ArrayBytes::Fixed((1..=8).collect());
        let stored = ChunkPart::Block(vec![DimMap::range(0, 0, 2), DimMap::range(0, 0, 2)]);
        let missing = ChunkPart::Block(vec![DimMap::range(0, 0, 2), DimMap::range(0, 2, 3)]);
        // SAFETY (all): one writer.
        let mut written = unsafe { out.scatter(&chunk, &[2, 2], &stored, &[2, 5]) }.unwrap();
        written += unsafe { out.fill(&[2, 3], &missing, &[2, 5]) }.unwrap();
        let mut want = Vec::new();
        for row in [[1, 2, 3, 4], [5, 6, 7, 8]] {
            want.extend(row);
            want.extend(fill.repeat(3));
        }
        assert_eq!(out.into_inner(written).unwrap(), ArrayBytes::Fixed(want));
        // A zero fill value, and points.
        let out = Output::new(&[0, 0], 3, 2, false);
        let points = ChunkPart::Points(vec![(0, vec![0]), (2, vec![1])]);
        let chunk = ArrayBytes::Fixed(vec![1, 1, 2, 2]);
        let mut written = unsafe { out.scatter(&chunk, &[2], &points, &[3]) }.unwrap();
        let gap = ChunkPart::Points(vec![(1, vec![0])]);
        written += unsafe { out.fill(&[1], &gap, &[3]) }.unwrap();
        assert_eq!(
            out.into_inner(written).unwrap(),
            ArrayBytes::Fixed(vec![1, 1, 0, 0, 2, 2])
        );
    }

    #[test]
    fn an_output_with_elements_no_part_wrote_is_an_error_not_their_bytes() {
        let out = Output::new(&[0; 4], 4, 4, false);
        let chunk = ArrayBytes::Fixed(vec![9; 8]);
        let half = ChunkPart::Block(vec![DimMap::range(0, 0, 2)]);
        // SAFETY: one writer.
        let written = unsafe { out.scatter(&chunk, &[2], &half, &[4]) }.unwrap();
        assert_eq!(written, 2);
        let e = out.into_inner(written).unwrap_err();
        assert!(e.to_string().contains("wrote 2 of its 4 elements"), "{e}");
    }

    #[test]
    fn points_and_variable_length_elements_land_where_they_belong() {
        let out = Output::new(b"", 3, 0, true);
        let chunk = ArrayBytes::Variable(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let points = ChunkPart::Points(vec![(0, vec![2]), (2, vec![0])]);
        // SAFETY (both): one writer.
        let mut written = unsafe { out.scatter(&chunk, &[3], &points, &[3]) }.unwrap();
        written += unsafe { out.fill(&[3], &ChunkPart::Points(vec![(1, vec![1])]), &[3]) }.unwrap();
        assert_eq!(
            out.into_inner(written).unwrap(),
            ArrayBytes::Variable(vec![b"c".to_vec(), vec![], b"a".to_vec()])
        );
    }

    #[test]
    fn zero_sized_elements_have_nothing_to_copy() {
        let out = Output::new(&[], 4, 0, false);
        let part = ChunkPart::Block(vec![DimMap::range(0, 0, 4)]);
        // SAFETY: one writer.
        let written = unsafe { out.scatter(&ArrayBytes::Fixed(vec![]), &[4], &part, &[4]) };
        assert_eq!(
            out.into_inner(written.unwrap()).unwrap(),
            ArrayBytes::Fixed(vec![])
        );
    }

    #[test]
    fn a_part_outside_the_output_is_an_error_not_a_wild_write() {
        let out = Output::new(&[0; 4], 1, 4, false);
        let chunk = ArrayBytes::Fixed(vec![9; 8]);
        let beyond = ChunkPart::Block(vec![DimMap::range(0, 1, 2)]);
        // SAFETY: one writer.
        assert!(unsafe { out.scatter(&chunk, &[2], &beyond, &[2]) }.is_err());
        assert!(unsafe { out.fill(&[2], &beyond, &[2]) }.is_err());
        let short = ChunkPart::Block(vec![DimMap::range(1, 0, 2)]);
        let out = Output::new(&[0; 4], 2, 4, false);
        assert!(unsafe { out.scatter(&chunk, &[2], &short, &[2]) }.is_err());
    }
}
