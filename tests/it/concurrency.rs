//! Many writers at once, through real zarrd processes: no acknowledged write
//! is lost, with one server and with two servers sharing one directory;
//! concurrent appends each land exactly once; a killed writer leaves every
//! chunk old or new, never torn.
//!
//! The check for overlapping writes: a write W is superseded at an element
//! when another write covering it was sent after W was acknowledged; each
//! element must hold the value of a write that covered it and was not
//! superseded there (or the fill value when none covered it). This fails on
//! any lost acknowledged write and allows any order of writes that overlapped.

use crate::common::process;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let args = [
            dir.as_os_str(),
            "--allow-anonymous-writes".as_ref(),
            "--recheck-cached".as_ref(),
            "always".as_ref(),
        ];
        let (child, addr) = process::spawn(&args, |command| {
            command.env("ZARRD_LOG", "error").stderr(Stdio::null());
        });
        Server {
            child,
            url: format!("http://{addr}"),
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

async fn create(url: &str, path: &str, spec: Value) {
    let r = client()
        .put(format!("{url}/api/v1/meta/{path}"))
        .header("content-type", "application/json")
        .body(spec.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

async fn read_all(url: &str, path: &str) -> Vec<u32> {
    let r = client()
        .get(format!("{url}/api/v1/data/{path}?format=raw"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes()
        .await
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A tiny deterministic generator, so each writer has its own sequence.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[derive(Debug, Clone)]
struct Write {
    value: u32,
    rows: (u64, u64),
    cols: (u64, u64),
    sent: Instant,
    acked: Instant,
}

impl Write {
    fn covers(&self, r: u64, c: u64) -> bool {
        (self.rows.0..self.rows.1).contains(&r) && (self.cols.0..self.cols.1).contains(&c)
    }
}

const N: u64 = 64;
const WRITERS: u64 = 16;

async fn overlapping_writers(urls: &[String], path: &str, seconds: f64) -> Vec<Write> {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = urls[w as usize % urls.len()].clone();
            let path = path.to_string();
            tokio::spawn(async move {
                let http = client();
                let mut rng = Lcg(w * 7919 + 17);
                let mut done = Vec::new();
                let mut seq = 0u32;
                while Instant::now() < deadline {
                    seq += 1;
                    let (r0, c0) = (rng.next(N - 1), rng.next(N - 1));
                    let (r1, c1) = (
                        r0 + 1 + rng.next((N - r0).min(24)),
                        c0 + 1 + rng.next((N - c0).min(24)),
                    );
                    let value = ((w as u32 + 1) << 20) | seq;
                    let count = ((r1 - r0) * (c1 - c0)) as usize;
                    let body: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), count)
                        .flatten()
                        .collect();
                    let sent = Instant::now();
                    let r = http
                        .put(format!(
                            "{url}/api/v1/data/{path}?select={r0}:{r1},{c0}:{c1}"
                        ))
                        .header("content-type", "application/octet-stream")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    let status = r.status();
                    let text = r.text().await.unwrap();
                    assert_eq!(status, 200, "write failed: {text}");
                    done.push(Write {
                        value,
                        rows: (r0, r1),
                        cols: (c0, c1),
                        sent,
                        acked: Instant::now(),
                    });
                }
                done
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

fn verify_overlapping(values: &[u32], writes: &[Write]) {
    let mut errors = Vec::new();
    for r in 0..N {
        for c in 0..N {
            let got = values[(r * N + c) as usize];
            let covering: Vec<&Write> = writes.iter().filter(|w| w.covers(r, c)).collect();
            let allowed: Vec<u32> = covering
                .iter()
                .filter(|w| !covering.iter().any(|o| o.sent > w.acked))
                .map(|w| w.value)
                .collect();
            let ok = if covering.is_empty() {
                got == 0
            } else {
                allowed.contains(&got)
            };
            if !ok && errors.len() < 10 {
                errors.push(format!("({r},{c}) holds {got:#x}, allowed {allowed:x?}"));
            }
        }
    }
    assert!(errors.is_empty(), "lost writes:\n{}", errors.join("\n"));
}

fn layouts() -> Vec<(&'static str, Value)> {
    vec![
        (
            "v2",
            json!({"node_type": "array", "zarr_format": 2, "shape": [N, N], "chunks": [16, 16], "dtype": "<u4", "fill_value": 0}),
        ),
        (
            "v3",
            json!({"node_type": "array", "zarr_format": 3, "shape": [N, N], "chunks": [16, 16], "dtype": "uint32", "fill_value": 0}),
        ),
        (
            "sharded",
            json!({"node_type": "array", "zarr_format": 3, "shape": [N, N], "chunks": [8, 8], "shards": [32, 32], "dtype": "uint32", "fill_value": 0}),
        ),
    ]
}

async fn stress(servers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let running: Vec<Server> = (0..servers).map(|_| Server::start(dir.path())).collect();
    let urls: Vec<String> = running.iter().map(|s| s.url.clone()).collect();
    for (name, spec) in layouts() {
        create(&urls[0], name, spec).await;
        let writes = overlapping_writers(&urls, name, 2.5).await;
        assert!(writes.len() > 100, "{name}: only {} writes", writes.len());
        // Read back through every server: each must see the same final state.
        for url in &urls {
            verify_overlapping(&read_all(url, name).await, &writes);
        }
        eprintln!("{name}: {} overlapping writes by {WRITERS} writers through {servers} server(s), none lost", writes.len());
    }
    for (name, spec) in layouts() {
        let path = format!("{name}_stripes");
        create(&urls[0], &path, spec).await;
        let deadline = Instant::now() + Duration::from_secs_f64(1.5);
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (url, path) = (urls[w as usize % urls.len()].clone(), path.clone());
                tokio::spawn(async move {
                    let http = client();
                    let mut last = 0u32;
                    while Instant::now() < deadline {
                        last += 1;
                        let body: Vec<u8> = std::iter::repeat_n(
                            ((w as u32) << 24 | last).to_le_bytes(),
                            (N * N / WRITERS) as usize,
                        )
                        .flatten()
                        .collect();
                        let r = http
                            .put(format!("{url}/api/v1/data/{path}?select=:,{w}::{WRITERS}"))
                            .header("content-type", "application/octet-stream")
                            .body(body)
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
                    }
                    (w, (w as u32) << 24 | last)
                })
            })
            .collect();
        let mut last = vec![0u32; WRITERS as usize];
        for t in tasks {
            let (w, v) = t.await.unwrap();
            last[w as usize] = v;
        }
        let values = read_all(&urls[urls.len() - 1], &path).await;
        for (i, &v) in values.iter().enumerate() {
            let owner = i as u64 % N % WRITERS;
            assert_eq!(
                v, last[owner as usize],
                "{path}: element {i} lost its owner's last write"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_one_server() {
    stress(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_two_servers_one_directory() {
    stress(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let servers = [Server::start(dir.path()), Server::start(dir.path())];
    create(
        &servers[0].url,
        "log",
        json!({"node_type": "array", "shape": [0, 4], "chunks": [5, 4], "dtype": "uint32"}),
    )
    .await;
    let (clients, blocks, rows) = (16u32, 8u32, 3u64);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let url = servers[c as usize % 2].url.clone();
            tokio::spawn(async move {
                let http = client();
                for b in 0..blocks {
                    let value = (c + 1) * 1000 + b;
                    let body: Vec<u8> =
                        std::iter::repeat_n(value.to_le_bytes(), (rows * 4) as usize)
                            .flatten()
                            .collect();
                    let r = http
                        .post(format!("{url}/api/v1/append/log?axis=0"))
                        .header("content-type", "application/octet-stream")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let values = read_all(&servers[1].url, "log").await;
    assert_eq!(
        values.len() as u64,
        (clients * blocks) as u64 * rows * 4,
        "final length is the sum of the appends"
    );
    let mut seen = std::collections::HashMap::new();
    for (i, row) in values.chunks(4).enumerate() {
        assert!(
            row.iter().all(|&v| v == row[0]),
            "row {i} is mixed: {row:?}"
        );
        seen.entry(row[0]).or_insert_with(Vec::new).push(i);
    }
    assert_eq!(seen.len() as u32, clients * blocks, "every block present");
    for (value, idx) in seen {
        assert_eq!(
            idx.len() as u64,
            rows,
            "block {value} appears {} rows, not {rows}",
            idx.len()
        );
        assert!(
            idx.windows(2).all(|w| w[1] == w[0] + 1),
            "block {value} is not contiguous: {idx:?}"
        );
    }
}

/// Every chunk of `a` decodes and holds one value throughout; returns the values.
async fn chunk_values(dir: &Path, side: u64, chunk: u64) -> std::collections::BTreeSet<u32> {
    let store = zarrd::store::Store::local(dir).unwrap();
    let array = zarrd::zarr::Hierarchy::new(store.clone())
        .array(&zarrd::store::node_path("a").unwrap())
        .await
        .unwrap();
    let mut values = std::collections::BTreeSet::new();
    for i in 0..side / chunk {
        for j in 0..side / chunk {
            let data = array
                .read_chunk(&[i, j])
                .await
                .unwrap_or_else(|e| panic!("chunk {i},{j}: {e}"))
                .expect("chunk stored");
            let zarrd::zarr::ArrayBytes::Fixed(bytes) = data.as_ref() else {
                unreachable!()
            };
            let first = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            assert!(
                bytes
                    .chunks_exact(4)
                    .all(|c| u32::from_le_bytes(c.try_into().unwrap()) == first),
                "chunk {i},{j} is torn"
            );
            values.insert(first);
        }
    }
    // Interrupted puts leave no visible keys behind.
    for key in store
        .list_recursive(&zarrd::store::StoreKey::root())
        .await
        .unwrap()
    {
        let rel = key.as_str().trim_start_matches("a/");
        assert!(
            rel == "zarr.json" || rel.starts_with("c/"),
            "unexpected key {key}"
        );
        assert!(!rel.contains('#'), "staging file visible: {key}");
    }
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_writer_leaves_no_torn_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (side, chunk) = (1024u64, 64u64);
    {
        let server = Server::start(dir.path());
        create(&server.url, "a", json!({"node_type": "array", "shape": [side, side], "chunks": [chunk, chunk], "dtype": "uint32", "fill_value": 0})).await;
        let r = client()
            .put(format!("{}/api/v1/data/a", server.url))
            .header("content-type", "application/json")
            .body(r#"{"data": 1}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // Kill the server as soon as the first chunks of a whole-array write
    // have landed (seen on disk), so the kill falls in the middle of it.
    let chunk_files: Vec<std::path::PathBuf> = (0..side / chunk)
        .flat_map(|i| (0..side / chunk).map(move |j| (i, j)))
        .map(|(i, j)| dir.path().join(format!("a/c/{i}/{j}")))
        .collect();
    let mut mid_write = false;
    for round in 0..10u32 {
        let mut server = Server::start(dir.path());
        let url = server.url.clone();
        let value = round + 2;
        let started = std::time::SystemTime::now() - Duration::from_millis(1);
        let write = tokio::spawn(async move {
            let body: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), (side * side) as usize)
                .flatten()
                .collect();
            let _ = client()
                .put(format!("{url}/api/v1/data/a"))
                .header("content-type", "application/octet-stream")
                .body(body)
                .send()
                .await;
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && !write.is_finished() {
            let landed = chunk_files
                .iter()
                .filter(|f| {
                    std::fs::metadata(f)
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t > started)
                })
                .count();
            if landed > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        server.kill();
        let _ = write.await;
        let values = chunk_values(dir.path(), side, chunk).await;
        if values.contains(&value) && values.len() > 1 {
            eprintln!(
                "round {round}: killed mid-write, chunks hold {values:?}: old or new, none torn"
            );
            mid_write = true;
            break;
        }
    }
    assert!(mid_write, "no kill landed in the middle of a write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_lets_in_flight_requests_finish() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    create(&server.url, "a", json!({"node_type": "array", "shape": [1024, 1024], "chunks": [128, 128], "dtype": "uint32"})).await;
    let url = server.url.clone();
    let write = tokio::spawn(async move {
        let body: Vec<u8> = std::iter::repeat_n(7u32.to_le_bytes(), 1024 * 1024)
            .flatten()
            .collect();
        client()
            .put(format!("{url}/api/v1/data/a"))
            .header("content-type", "application/octet-stream")
            .body(body)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Signal once the write is being applied (its first chunk is on disk).
    let first = dir.path().join("a/c/0/0");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !first.exists() && !write.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    assert!(
        !write.is_finished(),
        "the write finished before the signal; nothing was in flight"
    );
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let status = write.await.unwrap();
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "zarrd exits cleanly on SIGTERM: {exit:?}");
    {
        // In flight when the signal came: it must have finished, not been cut off.
        assert_eq!(status.expect("the in-flight request got its response"), 200);
        let values = chunk_values(dir.path(), 1024, 128).await;
        assert_eq!(
            values.into_iter().collect::<Vec<_>>(),
            vec![7],
            "the whole write landed"
        );
    }
}
