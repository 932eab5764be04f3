//! Summaries of a selection for viewers' colour scales: min, max, mean and
//! spread, and histograms, both mergeable so blocks fold in parallel.

/// Summary statistics of a selection, mergeable.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Elements seen, missing ones included.
    pub total: u64,
    /// Elements present (not NaN), infinities included.
    pub count: u64,
    pub min: f64,
    pub max: f64,
    /// Infinities seen (bit 1: +inf, bit 2: -inf), kept out of the sums.
    infinite: u8,
    infinities: u64,
    shift: f64,
    s1: f64,
    s2: f64,
}

impl Summary {
    pub fn add(&mut self, values: &[f64]) {
        self.total += values.len() as u64;
        for &v in values {
            if v.is_nan() {
                continue;
            }
            if self.count == 0 {
                self.min = v;
                self.max = v;
            }
            self.count += 1;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            if v.is_infinite() {
                self.infinite |= if v > 0.0 { 1 } else { 2 };
                self.infinities += 1;
                continue;
            }
            if self.finite() == 1 {
                self.shift = v;
            }
            let d = v - self.shift;
            self.s1 += d;
            self.s2 += d * d;
        }
    }

    /// Values counted into the sums (the finite ones).
    fn finite(&self) -> u64 {
        self.count - self.infinities
    }

    pub fn merge(&mut self, o: Summary) {
        self.total += o.total;
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = Summary {
                total: self.total,
                ..o
            };
            return;
        }
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.infinite |= o.infinite;
        if self.finite() == 0 {
            (self.shift, self.s1, self.s2) = (o.shift, o.s1, o.s2);
        } else if o.finite() > 0 {
            let delta = o.shift - self.shift;
            let n2 = o.finite() as f64;
            self.s2 += o.s2 + 2.0 * delta * o.s1 + n2 * delta * delta;
            self.s1 += o.s1 + n2 * delta;
        }
        self.count += o.count;
        self.infinities += o.infinities;
    }

    pub fn mean(&self) -> f64 {
        match self.infinite {
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => f64::NAN,
            _ if self.finite() == 0 => f64::NAN,
            _ => self.shift + self.s1 / self.finite() as f64,
        }
    }

    /// Population standard deviation (numpy's default, ddof 0).
    pub fn std(&self) -> f64 {
        if self.finite() == 0 || self.infinite != 0 {
            return f64::NAN;
        }
        let n = self.finite() as f64;
        let m2 = self.s2 - self.s1 * self.s1 / n;
        if m2.is_nan() {
            // Sums that overflowed: an infinite spread, not none.
            return f64::INFINITY;
        }
        (m2.max(0.0) / n).sqrt()
    }
}

/// Counts of values in equal bins over `[lo, hi]` (the last bin closed,
/// as numpy's histogram).
#[derive(Debug, Clone)]
pub struct Histogram {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

impl Histogram {
    pub fn new(lo: f64, hi: f64, bins: usize) -> Self {
        Histogram {
            lo,
            hi,
            counts: vec![0; bins],
        }
    }

    pub fn add(&mut self, values: &[f64]) {
        let bins = self.counts.len();
        let width = self.hi - self.lo;
        for &v in values {
            if !(v >= self.lo && v <= self.hi) {
                continue;
            }
            let b = if width > 0.0 {
                (((v - self.lo) / width) * bins as f64) as usize
            } else {
                0
            };
            self.counts[b.min(bins - 1)] += 1;
        }
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }

    /// The bins' edges.
    pub fn edges(&self) -> Vec<f64> {
        let bins = self.counts.len();
        (0..=bins)
            .map(|i| self.lo + (self.hi - self.lo) * i as f64 / bins as f64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_histograms_merge() {
        let mut a = Summary::default();
        a.add(&[1.0, 2.0, f64::NAN]);
        let mut b = Summary::default();
        b.add(&[3.0, 4.0]);
        a.merge(b);
        assert_eq!((a.total, a.count, a.min, a.max), (5, 4, 1.0, 4.0));
        assert_eq!(a.mean(), 2.5);
        assert!((a.std() - 1.118033988749895).abs() < 1e-12);
        let mut h = Histogram::new(1.0, 4.0, 3);
        h.add(&[1.0, 2.0, 3.0, 4.0, 5.0, f64::NAN]);
        assert_eq!(h.counts, vec![1, 1, 2]);
    }
}
