//! Slow and stalled clients against a running server (the real accept loop,
//! over loopback): half-sent requests and idle connections are closed after
//! the header timeout, and a streaming response holds its concurrency slot
//! until its last byte, while liveness is never refused.

use crate::common::process;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> Server {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let (child, addr) = process::spawn(&args, |command| {
        command.env("ZARRD_LOG", "error").stderr(Stdio::null());
    });
    Server { child, addr }
}

/// The status line of one request sent whole on a new connection.
fn status(addr: &str, path: &str) -> String {
    send(addr, "GET", path, "")
}

fn send(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line.trim().to_string()
}

/// A 64 MiB array (as .npy far more than socket buffers hold), and `n`
/// readers of it that read the status line and nothing more.
fn stalled_readers(addr: &str, n: usize) -> Vec<TcpStream> {
    let spec =
        r#"{"node_type":"array","shape":[4096,2048],"chunks":[1024,1024],"dtype":"float64"}"#;
    assert!(send(addr, "PUT", "/api/v1/meta/big", spec).contains("201"));
    assert!(send(addr, "PUT", "/api/v1/data/big", r#"{"data":1.5}"#).contains("200"));
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET /api/v1/data/big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut line = String::new();
            BufReader::with_capacity(64, s.try_clone().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert!(line.contains("200"), "{line}");
            s
        })
        .collect()
}

/// The status of `path` once it answers 200, polling for up to 20 s.
fn eventually_ok(addr: &str, path: &str) -> String {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < Duration::from_secs(20) {
        last = status(addr, path);
        if last.contains("200") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

/// Whether the server closes `s` within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 512];
    let started = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return started.elapsed() < within,
        }
    }
}

#[test]
fn half_sent_requests_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&[dir.path().to_str().unwrap(), "--header-timeout", "1"]);
    let mut half = TcpStream::connect(&server.addr).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut idle = TcpStream::connect(&server.addr).unwrap();
    assert!(
        closed_within(&mut half, Duration::from_secs(5)),
        "a half-sent request kept its connection"
    );
    assert!(
        closed_within(&mut idle, Duration::from_secs(5)),
        "an idle connection was kept"
    );
    assert!(status(&server.addr, "/healthz").contains("200"));
}

#[test]
fn streaming_responses_hold_their_slot_and_liveness_is_never_shed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&[
        dir.path().to_str().unwrap(),
        "--max-concurrency",
        "2",
        "--allow-anonymous-writes",
    ]);
    let slow = stalled_readers(&server.addr, 2);
    let third = status(&server.addr, "/api/v1/meta/big");
    assert!(
        third.contains("503"),
        "a third request was let in while two bodies streamed: {third}"
    );
    let live = status(&server.addr, "/healthz");
    assert!(live.contains("200"), "liveness was refused: {live}");
    drop(slow);
    // Once the readers are gone, their slots are free again.
    let after = eventually_ok(&server.addr, "/api/v1/meta/big");
    assert!(after.contains("200"), "slots were not released: {after}");
}

#[test]
fn clients_that_stop_reading_are_dropped_and_free_their_slot() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&[
        dir.path().to_str().unwrap(),
        "--max-concurrency",
        "2",
        "--body-timeout",
        "1",
        "--allow-anonymous-writes",
    ]);
    let stalled = stalled_readers(&server.addr, 2);
    assert!(status(&server.addr, "/api/v1/meta/big").contains("503"));
    // Without reading, after --body-timeout the server gives up on them.
    let after = eventually_ok(&server.addr, "/api/v1/meta/big");
    assert!(
        after.contains("200"),
        "stalled readers kept their slots: {after}"
    );
    drop(stalled);
}

/// `Content-Length: len` sent to `path` whole, in 64 KiB pieces, before
/// the answer is read (as `http.client` sends): the answer's status line
/// and body, or why sending or reading failed.
fn upload_then_read(addr: &str, path: &str, len: usize) -> Result<(String, String), String> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n"
    )
    .unwrap();
    let piece = vec![0u8; 1 << 16];
    let mut sent = 0;
    while sent < len {
        let n = piece.len().min(len - sent);
        s.write_all(&piece[..n])
            .map_err(|e| format!("sending failed after {sent} of {len} bytes: {e}"))?;
        sent += n;
    }
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("reading the answer failed: {e}"))?;
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    Ok((status, body.to_string()))
}

#[test]
fn refused_uploads_are_answered_not_reset() {
    // Refused before their body is read, the answer goes out while the
    // client is still sending; closing at once would reset the connection
    // and the client would see a broken pipe instead of the answer.
    let dir = tempfile::tempdir().unwrap();
    let limited = start(&[
        dir.path().to_str().unwrap(),
        "--allow-anonymous-writes",
        "--max-body-size",
        "1MiB",
    ]);
    for _ in 0..3 {
        let (status, body) = upload_then_read(&limited.addr, "/zarr/a/0.0", 32 << 20).unwrap();
        assert!(status.contains("413"), "{status}");
        assert!(body.contains(r#""code":"body_too_large""#), "{body}");
    }
    let closed = start(&[dir.path().to_str().unwrap()]);
    for _ in 0..3 {
        let (status, body) = upload_then_read(&closed.addr, "/zarr/a/0.0", 8 << 20).unwrap();
        assert!(status.contains("403"), "{status}");
        assert!(body.contains(r#""error""#), "{body}");
    }
}

#[test]
fn a_client_still_sending_after_a_refusal_does_not_hold_up_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(&[
        dir.path().to_str().unwrap(),
        "--allow-anonymous-writes",
        "--max-body-size",
        "1MiB",
        "--shutdown-timeout",
        "120",
    ]);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    write!(
        s,
        "PUT /zarr/a/0.0 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        64 << 20
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(s.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("413"), "{line}");
    // A byte every 100 ms: never quiet long enough for the linger to end.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && s.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let signalled = Instant::now();
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(20),
            "a lingering connection held up shutdown toward --shutdown-timeout"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "zarrd exits cleanly on SIGTERM: {exit:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.join().unwrap();
}
