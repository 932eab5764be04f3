//! State that every request updates, kept per thread.
//!
//! One lock or counter shared by every request is a cache line that each
//! core takes in turn: on 16 cores such lines held small requests to 40% of
//! nginx's rate (`bench/profile.md`). Each thread updates its own copy here
//! and readers (`/metrics`, log flushes) visit them all.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Copies per [`PerThread`]: more than the threads that update them on
/// most machines, so that two rarely share one; those that do still work,
/// they only share a line again.
const COPIES: usize = 64;

/// A `T` per thread (threads beyond [`COPIES`] share).
pub struct PerThread<T> {
    copies: Box<[Padded<T>]>,
}

/// Each copy on its own cache lines (two of 64 bytes: adjacent-line
/// prefetching pairs them on x86).
#[repr(align(128))]
struct Padded<T>(T);

impl<T: Default> Default for PerThread<T> {
    fn default() -> Self {
        PerThread {
            copies: (0..COPIES).map(|_| Padded(T::default())).collect(),
        }
    }
}

impl<T> PerThread<T> {
    /// This thread's copy.
    pub fn local(&self) -> &T {
        &self.copies[thread_number() % COPIES].0
    }

    /// Every copy, to read or drain them all.
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.copies.iter().map(|c| &c.0)
    }
}

impl<T> std::fmt::Debug for PerThread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PerThread({} copies)", self.copies.len())
    }
}

/// A number for this thread, given once at its first use: distinct for
/// every thread the process ever ran.
pub fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn threads_update_their_own_copies_and_readers_see_all() {
        let counts: Arc<PerThread<AtomicU64>> = Arc::default();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let counts = counts.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        counts.local().fetch_add(1, Ordering::Relaxed);
                    }
                    thread_number()
                })
            })
            .collect();
        let mut numbers: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let total: u64 = counts.all().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 8000);
        numbers.sort();
        numbers.dedup();
        assert_eq!(numbers.len(), 8, "every thread has its own number");
    }
}
