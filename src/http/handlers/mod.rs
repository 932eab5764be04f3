//! The handlers: one file per endpoint (or family of endpoints), each
//! registered by its rows of the route table (`routes.rs`).

pub mod api;
pub mod data;
pub mod dav;
pub mod edr;
pub mod fallback;
pub mod hidden;
pub mod keys;
pub mod listing;
pub mod maps;
pub mod opendap;
pub mod owned;
pub mod policy;
pub mod preview;
pub mod probes;
pub mod raw;
pub mod s3;
pub mod shares;
pub mod signin;
pub mod statistics;
pub mod tiles;
pub mod versions;
pub mod viewer;
pub mod watch;
pub mod wms;
pub mod write;
