//! Directories: the one backend zarrd writes through the file system
//! itself. `confined.rs` keeps every operation inside the directory (no
//! symbolic link followed, `openat2`), `walk.rs` lists folders in key order,
//! `local.rs` reads in one trip to the blocking pool or none, and
//! `open_files.rs` keeps files open while caches are trusted.

pub mod confined;
pub mod local;
pub mod open_files;
pub mod walk;
