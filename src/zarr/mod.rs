//! The Zarr engine: metadata of every version, data types, codecs, sharding,
//! selections, and reading and writing arrays. It knows stores, not HTTP.

pub mod array;
pub mod buffer;
pub mod cf;
pub mod chunk_key;
pub mod codec;
pub mod dtype;
pub mod edit;
pub mod error;
pub mod fill;
pub mod geo;
pub mod hierarchy;
pub mod metadata;
pub mod ome;
pub mod reduce;
pub mod selection;
pub mod slabs;

pub use array::Array;
pub use buffer::ArrayBytes;
pub use dtype::{DataType, Endian};
pub use error::{Result, ZarrError};
pub use hierarchy::{ArraySpec, Hierarchy, NodeSources};
pub use metadata::{ArrayMetadata, GroupMetadata, NodeMetadata};
pub use selection::{Resolved, Selection};
