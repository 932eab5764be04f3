//! The integration tests, one binary: the library and its dependencies are
//! linked once, not once per file. Run one file's tests with
//! `cargo test --test it <file>::`, e.g. `cargo test --test it peers::`.

mod common;

mod access;
mod access_log;
mod bad_input;
mod cancelled_writes;
mod concurrency;
mod corpus;
mod documents;
mod edr;
mod http;
mod http_write;
mod images;
mod maps;
mod node_writes;
mod opendap;
mod peers;
mod properties;
mod read_edges;
mod request_fuzz;
mod roundtrip;
mod router_fuzz;
mod security;
mod sharing;
mod slow_clients;
mod viewer;
