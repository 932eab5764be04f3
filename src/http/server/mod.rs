//! Serving: the accept loop and its deadlines, sockets, TLS, the
//! connections' idle accounting, and [`app::App`], the outermost service.

pub mod app;
pub mod idle;
pub mod serve;
pub mod socket;
pub mod tls;
