//! Raw bytes: the elements little-endian in C order, nothing else (the
//! shape and dtype travel as headers); fixed-size types only.

use axum::body::Body;
use axum::response::Response;

use super::{binary, slab_body, Encode, Output, Params};
use crate::config::Config;
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data};
use crate::zarr::ArrayBytes;

pub struct Raw;

impl Output for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn content_type(&self) -> &'static str {
        "application/octet-stream"
    }
    fn fixed_size_only(&self) -> bool {
        true
    }
    fn encoder(&self, _: &Params, _: &Config) -> ApiResult<Box<dyn Encode>> {
        Ok(Box::new(encode))
    }
}

fn encode(data: Data) -> ApiResult<Response> {
    match data.content {
        Content::Slabs { bytes, first, rest } => {
            let body = slab_body(Vec::new(), first, rest);
            Ok(binary(
                body,
                Raw.content_type(),
                (&data.dtype, &data.shape),
                Some(bytes),
            ))
        }
        Content::Whole(ArrayBytes::Fixed(ref bytes)) => {
            let length = bytes.len() as u64;
            let body = Body::from(bytes.clone());
            Ok(binary(
                body,
                Raw.content_type(),
                (&data.dtype, &data.shape),
                Some(length),
            ))
        }
        Content::Whole(ArrayBytes::Variable(_)) => Err(ApiError::new(
            axum::http::StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "raw output needs a fixed-size dtype",
        )),
    }
}
