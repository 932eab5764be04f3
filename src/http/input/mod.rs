//! What handlers read from a request: extractors whose rejections are
//! JSON errors, bodies (raw, `.npy`, JSON arrays), byte ranges and the
//! caller's credentials.

pub mod body;
pub mod constraint;
pub mod credentials;
pub mod extract;
pub mod json_body;
pub mod labels;
pub mod range;
pub mod wkt;
