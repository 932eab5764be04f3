//! Fair use: `[[fair_use]]` tables give callers (by the same names as the
//! policy) a rate of bytes, and optionally of requests, per second. Each
//! caller has a token bucket per rate holding `burst_seconds` of it:
//! signed-in callers one each, anonymous ones one per client address. A
//! request costs at least `request_bytes` and is then charged the bytes it
//! answers, so a viewer's many small range requests are weighed by their
//! bytes, not their count, while a flood of tiny ones is still bounded. A
//! caller whose bucket is spent is refused until it refills; other callers'
//! buckets are their own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::policy::{Principal, Who};
use super::AuthConfigError;

/// A `[[fair_use]]` table as configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairUseConfig {
    /// `user:SUB`, `group:NAME`, `authenticated`, `anonymous` (static
    /// tokens are `authenticated`, named `user:NAME` by their name).
    pub to: Vec<String>,
    /// Bytes per second: a number or a size (`20MiB`).
    pub bytes_per_second: Size,
    /// Requests per second, on top of the bytes.
    #[serde(default)]
    pub requests_per_second: Option<f64>,
    /// How many seconds of its rate a bucket holds (default 10).
    #[serde(default)]
    pub burst_seconds: Option<f64>,
    /// What a request costs at least (default 16 KiB).
    #[serde(default)]
    pub request_bytes: Option<Size>,
}

/// A number of bytes: an integer, or text such as `16KiB`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(Size(n)),
            Raw::Text(t) => crate::size::parse_size(&t)
                .map(Size)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The rates one caller is held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub bytes_per_second: f64,
    pub requests_per_second: Option<f64>,
    pub burst_seconds: f64,
    pub request_bytes: f64,
}

/// The configured tables.
#[derive(Debug, Clone, Default)]
pub struct FairUse {
    tables: Vec<(Vec<Principal>, Rate)>,
}

impl FairUse {
    pub fn new(tables: &[FairUseConfig]) -> Result<FairUse, AuthConfigError> {
        let tables = tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let bad = |reason: String| AuthConfigError::FairUse {
                    index: i + 1,
                    reason,
                };
                let to = Principal::list(&t.to).map_err(bad)?;
                let positive = |v: f64, name: &str| {
                    if v.is_finite() && v > 0.0 {
                        Ok(v)
                    } else {
                        Err(bad(format!("{name} must be more than 0")))
                    }
                };
                let rate = Rate {
                    bytes_per_second: positive(t.bytes_per_second.0 as f64, "bytes_per_second")?,
                    requests_per_second: t
                        .requests_per_second
                        .map(|r| positive(r, "requests_per_second"))
                        .transpose()?,
                    burst_seconds: positive(t.burst_seconds.unwrap_or(10.0), "burst_seconds")?,
                    request_bytes: t.request_bytes.map_or(16384.0, |s| s.0 as f64),
                };
                Ok((to, rate))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FairUse { tables })
    }

    /// The most generous rate of the tables that name `who`; `None`: no
    /// limit.
    pub fn rate(&self, who: &Who) -> Option<Rate> {
        self.tables
            .iter()
            .filter(|(to, _)| to.iter().any(|p| p.applies(who)))
            .map(|(_, rate)| *rate)
            .max_by(|a, b| a.bytes_per_second.total_cmp(&b.bytes_per_second))
    }
}

#[derive(Debug)]
struct Bucket {
    bytes: f64,
    requests: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, rate: &Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.bytes = (self.bytes + elapsed * rate.bytes_per_second)
            .min(rate.bytes_per_second * rate.burst_seconds);
        if let Some(r) = rate.requests_per_second {
            self.requests = (self.requests + elapsed * r).min(r * rate.burst_seconds);
        }
    }
}

/// Every caller's buckets. Callers idle long enough for a full bucket are
/// forgotten (a new bucket is full), and at most [`MAX_CALLERS`] are kept,
/// so the memory does not grow with the addresses clients come from.
pub struct Buckets {
    kept: moka::sync::Cache<String, Arc<std::sync::Mutex<Bucket>>>,
}

/// Callers whose buckets are kept at once.
pub const MAX_CALLERS: u64 = 100_000;

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            kept: moka::sync::Cache::builder()
                .max_capacity(MAX_CALLERS)
                .time_to_idle(Duration::from_secs(600))
                .build(),
        }
    }
}

impl std::fmt::Debug for Buckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buckets({})", self.kept.entry_count())
    }
}

impl Buckets {
    fn bucket(&self, caller: &str, rate: &Rate) -> Arc<std::sync::Mutex<Bucket>> {
        self.kept.get_with_by_ref(caller, || {
            Arc::new(std::sync::Mutex::new(Bucket {
                bytes: rate.bytes_per_second * rate.burst_seconds,
                requests: rate.requests_per_second.unwrap_or(0.0) * rate.burst_seconds,
                at: Instant::now(),
            }))
        })
    }

    /// Takes a request's least cost from `caller`'s buckets, or says how
    /// long until they hold it.
    pub fn admit(&self, caller: &str, rate: &Rate, now: Instant) -> Result<(), Duration> {
        let bucket = self.bucket(caller, rate);
        let mut b = bucket.lock().unwrap_or_else(|p| p.into_inner());
        b.refill(rate, now);
        let mut wait: f64 = 0.0;
        if b.bytes < rate.request_bytes {
            wait = wait.max((rate.request_bytes - b.bytes) / rate.bytes_per_second);
        }
        if let Some(r) = rate.requests_per_second {
            if b.requests < 1.0 {
                wait = wait.max((1.0 - b.requests) / r);
            }
        }
        if wait > 0.0 {
            return Err(Duration::from_secs_f64(wait));
        }
        b.bytes -= rate.request_bytes;
        if rate.requests_per_second.is_some() {
            b.requests -= 1.0;
        }
        Ok(())
    }

    /// Charges `bytes` answered beyond the least cost already taken, and
    /// says how long until the bucket is no longer below empty: what the
    /// answer waits before sending more.
    pub fn charge(&self, caller: &str, rate: &Rate, bytes: u64, now: Instant) -> Duration {
        let bucket = self.bucket(caller, rate);
        let mut b = bucket.lock().unwrap_or_else(|p| p.into_inner());
        b.refill(rate, now);
        b.bytes -= bytes as f64;
        if b.bytes >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.bytes / rate.bytes_per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate() -> Rate {
        Rate {
            bytes_per_second: 1000.0,
            requests_per_second: None,
            burst_seconds: 2.0,
            request_bytes: 100.0,
        }
    }

    #[test]
    fn a_bucket_admits_its_burst_then_waits_for_its_rate() {
        let buckets = Buckets::default();
        let (r, t0) = (rate(), Instant::now());
        // 2000 bytes of burst: 20 requests of the least cost.
        for _ in 0..20 {
            assert!(buckets.admit("a", &r, t0).is_ok());
        }
        let wait = buckets.admit("a", &r, t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert!(
            buckets.admit("b", &r, t0).is_ok(),
            "another caller's bucket is full"
        );
        assert!(buckets
            .admit("a", &r, t0 + Duration::from_millis(100))
            .is_ok());
        // Bytes answered beyond the least cost are owed, and waited for.
        let owed = buckets.charge("a", &r, 1000, t0 + Duration::from_millis(100));
        assert!((owed.as_secs_f64() - 1.0).abs() < 1e-6, "{owed:?}");
        let wait = buckets
            .admit("a", &r, t0 + Duration::from_millis(100))
            .unwrap_err();
        assert!((wait.as_secs_f64() - 1.1).abs() < 1e-6, "{wait:?}");
    }

    #[test]
    fn requests_per_second_bound_cheap_requests_too() {
        let buckets = Buckets::default();
        let r = Rate {
            requests_per_second: Some(5.0),
            ..rate()
        };
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(buckets.admit("a", &r, t0).is_ok());
        }
        assert!(buckets.admit("a", &r, t0).is_err());
    }

    #[test]
    fn the_most_generous_table_that_names_a_caller_applies() {
        let t = |to: &str, bps: u64| FairUseConfig {
            to: vec![to.into()],
            bytes_per_second: Size(bps),
            requests_per_second: None,
            burst_seconds: None,
            request_bytes: None,
        };
        let fair = FairUse::new(&[
            t("anonymous", 10),
            t("authenticated", 100),
            t("group:lab", 1000),
        ])
        .unwrap();
        let who = |user: Option<&str>, groups: &[&str]| Who {
            user: user.map(String::from),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        assert_eq!(fair.rate(&who(None, &[])).unwrap().bytes_per_second, 10.0);
        assert_eq!(
            fair.rate(&who(Some("u"), &[])).unwrap().bytes_per_second,
            100.0
        );
        assert_eq!(
            fair.rate(&who(Some("u"), &["lab"]))
                .unwrap()
                .bytes_per_second,
            1000.0
        );
        assert!(FairUse::new(&[]).unwrap().rate(&who(None, &[])).is_none());
        assert!(FairUse::new(&[t("nobody", 10)]).is_err());
        assert!(FairUse::new(&[t("anonymous", 0)]).is_err());
    }
}
