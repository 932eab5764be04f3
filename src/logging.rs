//! Where log lines go: standard error, written in batches per thread.
//!
//! Written line by line, the access log cost a quarter of the small
//! requests a 16-core machine served (`bench/profile.md`): every line took
//! standard error's lock, which all cores shared, and made a system call
//! of its own. Here each thread appends its lines to its own buffer, written
//! out when it fills and by a flusher every [`FLUSH_EVERY`]. Warnings and
//! errors are written at once, with what the thread had buffered before
//! them, so they are never late and a thread's lines keep their order.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

use crate::per_thread::PerThread;

/// How long a line may wait in its buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A buffer is written out when it holds this much.
const BUFFER_BYTES: usize = 32 << 10;

/// Lines waiting to be written, per thread, and where they go.
pub struct Lines<W: Write + Send + 'static> {
    buffers: PerThread<Mutex<Vec<u8>>>,
    out: Mutex<W>,
    /// No flusher runs: lines are written as they come.
    unflushed: AtomicBool,
}

impl Lines<std::io::Stderr> {
    /// Lines for standard error, with a thread that flushes them.
    pub fn stderr() -> Arc<Self> {
        Self::start(std::io::stderr())
    }
}

impl<W: Write + Send + 'static> Lines<W> {
    /// Lines for `out`, with a thread that flushes them every
    /// [`FLUSH_EVERY`] for as long as the lines are in use.
    pub fn start(out: W) -> Arc<Self> {
        Self::start_flushing_every(out, FLUSH_EVERY)
    }

    fn start_flushing_every(out: W, every: Duration) -> Arc<Self> {
        let lines = Arc::new(Lines {
            buffers: PerThread::default(),
            out: Mutex::new(out),
            unflushed: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&lines);
        let spawned = std::thread::Builder::new()
            .name("zarrd-log".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                match weak.upgrade() {
                    Some(lines) => lines.flush(),
                    None => return,
                }
            });
        if spawned.is_err() {
            // Without the flusher lines would wait for a full buffer:
            // every line is written at once instead.
            lines.unflushed.store(true, Ordering::Relaxed);
        }
        lines
    }

    /// Write out every thread's buffered lines.
    pub fn flush(&self) {
        for buffer in self.buffers.all() {
            let mut buffer = buffer.lock().unwrap_or_else(|p| p.into_inner());
            self.write_out(&mut buffer);
        }
    }

    /// Called with the buffer's lock held, so that a thread's lines leave
    /// in the order it wrote them.
    fn write_out(&self, buffer: &mut Vec<u8>) {
        if buffer.is_empty() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A log line that cannot be written has nowhere else to go.
        let _ = out.write_all(buffer);
        let _ = out.flush();
        buffer.clear();
    }

    fn append(&self, line: &[u8], at_once: bool) {
        let mut buffer = self
            .buffers
            .local()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        buffer.extend_from_slice(line);
        let at_once = at_once || self.unflushed.load(Ordering::Relaxed);
        if at_once || buffer.len() >= BUFFER_BYTES {
            self.write_out(&mut buffer);
            if buffer.capacity() > 2 * BUFFER_BYTES {
                buffer.shrink_to(BUFFER_BYTES);
            }
        }
    }
}

/// The access log: a line per request, formatted here rather than by
/// tracing. Through tracing (a span per request, then an event formatted
/// with the span's fields) each line cost more CPU than a cached metadata
/// request itself: 40% of such requests/s on one core (`bench/profile.md`).
pub struct Access {
    lines: Arc<Lines<std::io::Stderr>>,
    json: bool,
}

static ACCESS: std::sync::OnceLock<Access> = std::sync::OnceLock::new();

/// The access log, where the process turned it on.
pub fn access() -> Option<&'static Access> {
    ACCESS.get()
}

/// Turn the access log on, written through `lines` (once per process).
pub fn start_access(lines: Arc<Lines<std::io::Stderr>>, json: bool) {
    let _ = ACCESS.set(Access { lines, json });
}

/// One request, as the access log records it.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub route: &'a str,
    pub status: u16,
    pub bytes: u64,
    pub micros: u64,
    pub request_id: &'a str,
}

impl Access {
    pub fn log(&self, r: &Request<'_>) {
        thread_local! {
            static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        LINE.with(|line| {
            let mut line = line.borrow_mut();
            line.clear();
            format_line(&mut line, r, self.json, std::time::SystemTime::now());
            self.lines.append(line.as_bytes(), false);
        });
    }
}

/// A line as tracing's formats write events of target `zarrd::access`:
/// text (`timestamp  INFO zarrd::access: fields`) or JSON (`timestamp`,
/// `level`, `fields`, `target`).
fn format_line(out: &mut String, r: &Request<'_>, json: bool, now: std::time::SystemTime) {
    use std::fmt::Write;
    let stamp = timestamp(now);
    if json {
        out.push_str("{\"timestamp\":\"");
        out.push_str(&stamp);
        out.push_str("\",\"level\":\"INFO\",\"fields\":{\"method\":");
        json_string(out, r.method);
        out.push_str(",\"path\":");
        json_string(out, r.path);
        out.push_str(",\"route\":");
        json_string(out, r.route);
        let _ = write!(
            out,
            ",\"status\":{},\"bytes\":{},\"micros\":{},\"request_id\":",
            r.status, r.bytes, r.micros
        );
        json_string(out, r.request_id);
        out.push_str("},\"target\":\"zarrd::access\"}\n");
    } else {
        let _ = write!(
            out,
            "{stamp}  INFO zarrd::access: {} {} status={} bytes={} micros={} route={} request_id=",
            r.method, r.path, r.status, r.bytes, r.micros, r.route
        );
        // The id is the client's: quoted where it could pass for more
        // fields (spaces, quotes, control characters).
        if r.request_id
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"')
        {
            out.push_str(r.request_id);
        } else {
            json_string(out, r.request_id);
        }
        out.push('\n');
    }
}

/// RFC 3339 in UTC with microseconds, the date worked out once a second
/// per thread.
fn timestamp(now: std::time::SystemTime) -> String {
    thread_local! {
        static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let since = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, micros) = (since.as_secs(), since.subsec_micros());
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            let at = chrono::DateTime::<chrono::Utc>::from(now);
            *second = (secs, at.format("%Y-%m-%dT%H:%M:%S").to_string());
        }
        format!("{}.{micros:06}Z", second.1)
    })
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                use std::fmt::Write;
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// What one event is written through (tracing formats an event whole and
/// writes it with one `write_all`).
pub struct Line<'a, W: Write + Send + 'static> {
    lines: &'a Lines<W>,
    at_once: bool,
}

impl<W: Write + Send + 'static> Write for Line<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.lines.append(bytes, self.at_once);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Handed to `tracing_subscriber::fmt().with_writer`.
#[derive(Clone)]
pub struct Writer<W: Write + Send + 'static>(pub Arc<Lines<W>>);

impl<'a, W: Write + Send + 'static> MakeWriter<'a> for Writer<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        Line {
            lines: &self.0,
            at_once: true,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        Line {
            lines: &self.0,
            at_once: *meta.level() <= tracing::Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` whose bytes a test can read.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn text(out: &Shared) -> String {
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn info_waits_for_the_flush_and_a_warning_takes_it_along() {
        let out = Shared::default();
        // A flusher that does not come during the test.
        let lines = Lines::start_flushing_every(out.clone(), Duration::from_secs(3600));
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Writer(lines.clone()))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("one");
            tracing::info!("two");
            assert_eq!(text(&out), "", "info lines are batched");
            tracing::warn!("three");
            let written: Vec<String> = text(&out).lines().map(String::from).collect();
            assert_eq!(written.len(), 3, "{written:?}");
            assert!(written[0].ends_with("one") && written[2].ends_with("three"));
            tracing::info!("four");
        });
        assert!(!text(&out).contains("four"));
        lines.flush();
        assert!(text(&out).ends_with("four\n"));
    }

    #[test]
    fn access_lines_in_text_and_json() {
        let r = Request {
            method: "GET",
            path: "/zarr/a\"b/.zarray",
            route: "/zarr/{*key}",
            status: 200,
            bytes: 317,
            micros: 42,
            request_id: "abc",
        };
        let at = std::time::UNIX_EPOCH + Duration::from_micros(1_764_300_000_123_456);
        let mut text = String::new();
        format_line(&mut text, &r, false, at);
        assert_eq!(
            text,
            "2025-11-28T03:20:00.123456Z  INFO zarrd::access: GET /zarr/a\"b/.zarray status=200 \
             bytes=317 micros=42 route=/zarr/{*key} request_id=abc\n"
        );
        let forged = Request {
            request_id: "x status=999",
            ..r
        };
        let mut quoted = String::new();
        format_line(&mut quoted, &forged, false, at);
        assert!(
            quoted.ends_with(" request_id=\"x status=999\"\n"),
            "{quoted}"
        );
        let mut json = String::new();
        format_line(&mut json, &r, true, at);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["timestamp"], "2025-11-28T03:20:00.123456Z");
        assert_eq!(doc["target"], "zarrd::access");
        assert_eq!(doc["fields"]["path"], "/zarr/a\"b/.zarray");
        assert_eq!(doc["fields"]["status"], 200);
        assert_eq!(doc["fields"]["micros"], 42);
    }

    #[test]
    fn the_flusher_writes_what_waits() {
        let out = Shared::default();
        let lines = Lines::start_flushing_every(out.clone(), Duration::from_millis(10));
        lines.append(b"four\n", false);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !text(&out).ends_with("four\n") {
            assert!(std::time::Instant::now() < deadline, "the flusher wrote it");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_full_buffer_is_written_out_and_threads_keep_their_lines_whole() {
        let out = Shared::default();
        let lines = Lines::start_flushing_every(out.clone(), Duration::from_secs(3600));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let lines = lines.clone();
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        let line = format!("thread {t} line {i:05} {}\n", "x".repeat(40));
                        lines.append(line.as_bytes(), false);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(
            !text(&out).is_empty(),
            "full buffers were written before any flush"
        );
        lines.flush();
        let all = text(&out);
        for t in 0..4 {
            let mine: Vec<&str> = all
                .lines()
                .filter(|l| l.starts_with(&format!("thread {t} ")))
                .collect();
            assert_eq!(mine.len(), 2000);
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "in the order written");
        }
    }
}
