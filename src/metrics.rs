//! Prometheus metrics in text exposition format, kept in a small registry
//! of our own: request counts and latency histograms by route, bytes served,
//! cache, codec, lock and compare-and-swap counters, store errors.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::per_thread::PerThread;

/// Latency buckets in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Debug, Default)]
struct RouteStats {
    /// By (method, status).
    requests: BTreeMap<(&'static str, u16), u64>,
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
    bytes: u64,
}

/// Process-wide counters the engine and store bump as they work.
pub static CHUNKS_DECODED: AtomicU64 = AtomicU64::new(0);
pub static CHUNKS_ENCODED: AtomicU64 = AtomicU64::new(0);
pub static STORE_ERRORS: AtomicU64 = AtomicU64::new(0);
pub static LOAD_SHED: AtomicU64 = AtomicU64::new(0);
/// Requests refused with 429 for fair use, and the bytes charged to callers.
pub static FAIR_USE_REFUSED: AtomicU64 = AtomicU64::new(0);
pub static FAIR_USE_BYTES: AtomicU64 = AtomicU64::new(0);

impl RouteStats {
    fn merge(&mut self, other: &RouteStats) {
        for (key, n) in &other.requests {
            *self.requests.entry(*key).or_default() += n;
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum_seconds += other.sum_seconds;
        self.bytes += other.bytes;
    }
}

/// Per-route request metrics, counted per thread (one lock every request
/// took was a line all cores passed around) and summed when rendered.
#[derive(Debug, Default)]
pub struct Metrics {
    routes: PerThread<Mutex<BTreeMap<String, RouteStats>>>,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    pub fn observe(
        &self,
        route: &str,
        method: &'static str,
        status: u16,
        seconds: f64,
        bytes: u64,
    ) {
        let mut routes = self
            .routes
            .local()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Look up before inserting: no allocation on the hot path once a route was seen.
        if !routes.contains_key(route) {
            routes.insert(route.to_string(), RouteStats::default());
        }
        let Some(r) = routes.get_mut(route) else {
            return;
        };
        match r.requests.get_mut(&(method, status)) {
            Some(n) => *n += 1,
            None => {
                r.requests.insert((method, status), 1);
            }
        }
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                r.buckets[i] += 1;
            }
        }
        r.count += 1;
        r.sum_seconds += seconds;
        r.bytes += bytes;
    }

    /// The exposition text; `extra` are (name, help, kind, value) gauges and counters.
    pub fn render(&self, extra: &[(&str, &str, &str, f64)]) -> String {
        let mut out = String::new();
        let mut routes: BTreeMap<String, RouteStats> = BTreeMap::new();
        for copy in self.routes.all() {
            let copy = copy.lock().unwrap_or_else(|p| p.into_inner());
            for (route, stats) in copy.iter() {
                routes.entry(route.clone()).or_default().merge(stats);
            }
        }
        out.push_str("# HELP zarrd_http_requests_total HTTP requests by route, method and status.\n# TYPE zarrd_http_requests_total counter\n");
        for (route, r) in routes.iter() {
            for ((method, status), n) in &r.requests {
                let _ = writeln!(out, "zarrd_http_requests_total{{route=\"{}\",method=\"{method}\",status=\"{status}\"}} {n}", escape(route));
            }
        }
        out.push_str("# HELP zarrd_http_request_duration_seconds Request latency by route.\n# TYPE zarrd_http_request_duration_seconds histogram\n");
        for (route, r) in routes.iter() {
            let route = escape(route);
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(out, "zarrd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{le}\"}} {}", r.buckets[i]);
            }
            let _ = writeln!(
                out,
                "zarrd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                r.count
            );
            let _ = writeln!(
                out,
                "zarrd_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                r.sum_seconds
            );
            let _ = writeln!(
                out,
                "zarrd_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                r.count
            );
        }
        out.push_str("# HELP zarrd_http_response_bytes_total Response body bytes by route.\n# TYPE zarrd_http_response_bytes_total counter\n");
        for (route, r) in routes.iter() {
            let _ = writeln!(
                out,
                "zarrd_http_response_bytes_total{{route=\"{}\"}} {}",
                escape(route),
                r.bytes
            );
        }
        for (name, help, kind, value) in extra {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

pub fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

pub fn read(counter: &AtomicU64) -> f64 {
    counter.load(Ordering::Relaxed) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.observe("/zarr/{key}", "GET", 200, 0.003, 100);
        m.observe("/zarr/{key}", "GET", 404, 0.2, 50);
        let text = m.render(&[("zarrd_cache_hits_total", "Cache hits.", "counter", 3.0)]);
        assert!(text.contains(
            "zarrd_http_requests_total{route=\"/zarr/{key}\",method=\"GET\",status=\"404\"} 1"
        ));
        assert!(text.contains(
            "zarrd_http_request_duration_seconds_bucket{route=\"/zarr/{key}\",le=\"0.005\"} 1"
        ));
        assert!(text.contains("zarrd_http_request_duration_seconds_count{route=\"/zarr/{key}\"} 2"));
        assert!(text.contains("zarrd_http_response_bytes_total{route=\"/zarr/{key}\"} 150"));
        assert!(text.contains("# TYPE zarrd_cache_hits_total counter\nzarrd_cache_hits_total 3"));
    }

    #[test]
    fn counts_from_every_thread_are_summed() {
        let m = std::sync::Arc::new(Metrics::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        m.observe("/r", "GET", 200, 0.002, 3);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let text = m.render(&[]);
        assert!(text
            .contains("zarrd_http_requests_total{route=\"/r\",method=\"GET\",status=\"200\"} 40"));
        assert!(text
            .contains("zarrd_http_request_duration_seconds_bucket{route=\"/r\",le=\"0.0025\"} 40"));
        assert!(text.contains("zarrd_http_response_bytes_total{route=\"/r\"} 120"));
    }
}
