//! zarrd: an HTTP data server for Zarr.
//!
//! The library holds the Zarr engine ([`zarr`]), with no HTTP in it, and the
//! store layer it reads and writes through ([`store`]).

pub mod auth;
pub mod config;
pub mod demo;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod npy;
pub mod per_thread;
pub mod service;
pub mod size;
pub mod store;
pub mod zarr;
