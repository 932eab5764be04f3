//! The access log is a layer only when the log level keeps it: at the
//! default level every request is logged with its route, status and request
//! id; at `warn` nothing is (and the layer is not there to cost anything).

use crate::common::process;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

/// Run zarrd with `ZARRD_LOG` set to `level` (unset: the default), send one
/// request with a known request id, stop the server, and return its log.
fn log_of_one_request(level: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = process::spawn(&[dir.path().as_os_str()], |command| {
        command.stderr(Stdio::piped()).env_remove("ZARRD_LOG");
        if let Some(level) = level {
            command.env("ZARRD_LOG", level);
        }
    });
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /api/v1/tree HTTP/1.1\r\nHost: x\r\nx-request-id: log-probe-7\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    // The response is logged once it is sent; give the writer a moment.
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let _ = child.wait();
    log
}

#[test]
fn requests_are_logged_at_the_default_level_and_not_at_warn() {
    let log = log_of_one_request(None);
    let entry = log
        .lines()
        .find(|l| l.contains("log-probe-7"))
        .unwrap_or_else(|| panic!("no access log line for the request in:\n{log}"));
    assert!(entry.contains("/api/v1/tree"), "{entry}");
    assert!(entry.contains("200"), "{entry}");

    let quiet = log_of_one_request(Some("warn"));
    assert!(!quiet.contains("log-probe-7"), "{quiet}");
}
