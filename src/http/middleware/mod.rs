//! What every routed request passes before and after its handler: the
//! gate (errors, limits, load shedding, metrics, authorization) and CORS.

pub mod audit;
pub mod auth;
pub mod cors;
pub mod fair;
pub mod gate;
pub mod limits;
