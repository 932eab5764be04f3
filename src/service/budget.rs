//! One memory budget for the whole process. Every answer whose memory grows
//! with what a client asks for (selections, images, thumbnails,
//! consolidated documents, request bodies held whole) reserves its
//! estimated peak here before the work starts, and holds it until its
//! response has been sent. (Trees, listings and chunk counts are bounded by
//! their pages instead.) When the budget is spent a request waits briefly for others to
//! finish, then is refused with 503 and `Retry-After`: a burst of expensive
//! requests queues or is turned away instead of taking the process down.
//!
//! Reservations below [`SMALL`] are not counted: the requests that make
//! them (small keys, ranges, metadata) are bounded by `--max-concurrency`
//! times that size, a margin the operator sizes the pod with
//! (`docs/security.md`), and they must never wait behind large ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ErrorKind, Result, ServiceError};

/// Reservations are counted in units of this many bytes (a semaphore takes
/// at most `u32::MAX` permits at once: 4 TiB of units).
const UNIT: u64 = 1 << 10;
/// Reservations smaller than this are free (see the module's doc).
pub const SMALL: u64 = 256 << 10;
/// The smallest budget: below it, one streamed answer (64 MiB) or one
/// large image would hold all of it.
pub const MIN_BUDGET: u64 = 256 << 20;

/// Refusals since the process started (for metrics).
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

/// The process's memory budget.
#[derive(Debug, Clone)]
pub struct Budget {
    permits: Arc<Semaphore>,
    units: u64,
    /// How long a request waits for memory before it is refused.
    wait: Duration,
}

/// Memory reserved for one answer; given back when dropped.
#[derive(Debug, Default)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
}

impl Reservation {
    /// Bytes this reservation holds of the budget (0 when free).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Give back all but `bytes` (rounded up to the unit): what a piece of
    /// work needed while it ran, once only its result is held.
    pub fn shrink_to(&mut self, bytes: u64) {
        let keep = bytes.div_ceil(UNIT) * UNIT;
        if keep >= self.bytes {
            return;
        }
        if let Some(permit) = self._permit.as_mut() {
            let excess = usize::try_from((self.bytes - keep) / UNIT).unwrap_or(usize::MAX);
            drop(permit.split(excess));
        }
        self.bytes = keep;
    }

    /// One reservation holding both.
    pub fn merge(mut self, other: Reservation) -> Reservation {
        match (&mut self._permit, other._permit) {
            (Some(a), Some(b)) => a.merge(b),
            (None, b) => self._permit = b,
            (Some(_), None) => {}
        }
        self.bytes += other.bytes;
        self
    }
}

impl Budget {
    /// A budget of `bytes` (at least [`MIN_BUDGET`]); requests wait up to
    /// `wait` for memory.
    pub fn new(bytes: u64, wait: Duration) -> Self {
        let units = (bytes.max(MIN_BUDGET) / UNIT).min(Semaphore::MAX_PERMITS as u64);
        Budget {
            permits: Arc::new(Semaphore::new(units as usize)),
            units,
            wait,
        }
    }

    /// The whole budget, in bytes.
    pub fn total(&self) -> u64 {
        self.units * UNIT
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        (self.units - self.permits.available_permits() as u64) * UNIT
    }

    /// Reserve `bytes` for `what` (a few words for the error message),
    /// waiting briefly when the budget is spent.
    pub async fn reserve(&self, bytes: u64, what: &str) -> Result<Reservation> {
        if bytes < SMALL {
            return Ok(Reservation::default());
        }
        let units = bytes.div_ceil(UNIT);
        if units > self.units {
            return Err(ServiceError::too_large(format!(
                "{what} would take about {bytes} bytes of memory, more than the server's whole memory budget of {} bytes (--memory-budget); ask for less",
                self.total()
            )));
        }
        let units32 = u32::try_from(units).unwrap_or(u32::MAX);
        let permit = match self.permits.clone().try_acquire_many_owned(units32) {
            Ok(p) => p,
            Err(_) => {
                match tokio::time::timeout(
                    self.wait,
                    self.permits.clone().acquire_many_owned(units32),
                )
                .await
                {
                    Ok(Ok(p)) => p,
                    _ => {
                        REFUSED.fetch_add(1, Ordering::Relaxed);
                        return Err(ServiceError::new(
                            ErrorKind::Busy,
                            "memory_budget",
                            format!(
                                "{what} needs about {bytes} bytes of memory and the server's memory budget ({} bytes, {} reserved) is spent; retry shortly",
                                self.total(),
                                self.reserved()
                            ),
                        ));
                    }
                }
            }
        };
        Ok(Reservation {
            _permit: Some(permit),
            bytes: units * UNIT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_wait_then_are_refused_and_small_ones_are_free() {
        let budget = Budget::new(256 << 20, Duration::from_millis(50));
        assert_eq!(budget.total(), 256 << 20);
        let mut a = budget.reserve(160 << 20, "a").await.unwrap();
        assert_eq!(budget.reserved(), 160 << 20);
        let e = budget.reserve(160 << 20, "b").await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Busy);
        assert!(e.message.contains("b needs"), "{}", e.message);
        // Small answers never wait behind large ones.
        let small = budget.reserve(SMALL - 1, "small").await.unwrap();
        assert_eq!(small.bytes(), 0);
        // More than the whole budget can never be served: not a retry.
        let e = budget.reserve(257 << 20, "huge").await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge);
        // What work needed while it ran is given back, its result kept.
        a.shrink_to(40 << 20);
        assert_eq!((a.bytes(), budget.reserved()), (40 << 20, 40 << 20));
        let b = budget.reserve(200 << 20, "b").await.unwrap();
        drop(b);
        // A waiting request is served once memory is given back.
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let b = Budget {
                    wait: Duration::from_secs(5),
                    ..budget
                };
                b.reserve(250 << 20, "c").await.map(|r| r.bytes())
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(a);
        assert_eq!(waiting.await.unwrap().unwrap(), 250 << 20);
        assert_eq!(budget.reserved(), 0);
    }

    #[test]
    fn the_default_follows_the_memory_limit() {
        use crate::config::{default_memory_budget, memory_limit};
        let limit = memory_limit().unwrap();
        assert!(limit > MIN_BUDGET);
        assert_eq!(default_memory_budget(0), limit / 2);
        assert_eq!(default_memory_budget(u64::MAX), 0);
        assert_eq!(Budget::new(0, Duration::ZERO).total(), MIN_BUDGET);
    }
}
