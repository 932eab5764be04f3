//! Icechunk repositories through the icechunk crate: `repo.rs` reads any
//! branch, tag or snapshot (`name@ref` mounts); `session.rs` is one
//! write's transaction on a branch, committed or dropped.

pub mod repo;
pub mod session;
