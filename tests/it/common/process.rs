//! What the tests that run the zarrd binary share: starting it on a free
//! loopback port and learning the address it printed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Start `zarrd serve --listen 127.0.0.1:0` with `args`, configured further
/// by `setup` (environment, stderr); the child and its `host:port`.
pub fn spawn(args: &[&std::ffi::OsStr], setup: impl FnOnce(&mut Command)) -> (Child, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zarrd"));
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped());
    setup(&mut command);
    let mut child = command.spawn().expect("zarrd starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    (child, addr)
}
