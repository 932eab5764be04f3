//! Icechunk repositories through the icechunk crate (the `icechunk`
//! feature, on by default): `repo.rs` reads any branch, tag or snapshot
//! (`name@ref` mounts); `session.rs` is one write's transaction on a
//! branch, committed or dropped. `names.rs` is what the rest of the store
//! knows of them in every build; without the feature, `absent.rs` refuses
//! to open a repository.

mod names;
pub use names::*;

#[cfg(feature = "icechunk")]
pub mod repo;
#[cfg(feature = "icechunk")]
pub mod session;
#[cfg(feature = "icechunk")]
pub use repo::Repo;
#[cfg(feature = "icechunk")]
pub use session::Transaction;

#[cfg(not(feature = "icechunk"))]
mod absent;
#[cfg(not(feature = "icechunk"))]
pub use absent::{Repo, Transaction};
