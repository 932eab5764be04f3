//! Stored values as clients read them through `/zarr/`: whole or a range,
//! small whole values from the cache (revalidated as configured) and kept
//! there after a read. What the protocol adds (validators, ranges as
//! headers, multipart) is the HTTP layer's.

use std::ops::Range;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::TryStreamExt;

use super::cache::STORED_MAX;
use super::{Result, Service};
use crate::store::{GetRequest, KeyMeta, StoreError, StoreKey, StoreRange};

/// A value, or the part of it asked for.
pub struct Value {
    pub meta: KeyMeta,
    /// The bytes of the value the body holds.
    pub span: Range<u64>,
    pub body: ValueBody,
}

pub enum ValueBody {
    /// Held in memory: from the cache, or small enough to be kept there.
    Bytes(Bytes),
    /// Read from the store as it is sent.
    Stream(BoxStream<'static, Result<Bytes, StoreError>>),
}

/// What a read of a value found.
pub enum Got {
    Value(Value),
    /// The range starts past the end of a value of `size` bytes.
    Unsatisfiable {
        size: u64,
    },
    Missing,
}

/// `range` of a value held in memory, or all of it.
fn in_memory(bytes: Bytes, meta: KeyMeta, range: Option<StoreRange>) -> Got {
    let size = bytes.len() as u64;
    let span = match range {
        None => 0..size,
        Some(StoreRange::Bounded(r)) if r.start < size => r.start..r.end.min(size),
        Some(StoreRange::From(o)) if o < size => o..size,
        Some(StoreRange::Suffix(n)) => size.saturating_sub(n)..size,
        Some(_) => return Got::Unsatisfiable { size },
    };
    Got::Value(Value {
        meta,
        body: ValueBody::Bytes(bytes.slice(span.start as usize..span.end as usize)),
        span,
    })
}

impl Service {
    /// Size and version of the value at `key` as served (also of
    /// synthesized consolidated metadata), `None` when missing.
    pub async fn head_value(&self, key: &StoreKey) -> Result<Option<KeyMeta>> {
        if self.consolidates(key) {
            return Ok(match self.get_value(key, None).await? {
                Got::Value(v) => Some(v.meta),
                _ => None,
            });
        }
        if let Some(meta) = self.store.head(key).await? {
            return Ok(Some(meta));
        }
        Ok(self.synthesized(key).await?.map(|(_, meta)| meta))
    }

    /// `range` of the value at `key` as served, or all of it: a v3 group's
    /// `zarr.json` may carry synthesized consolidated metadata, so its
    /// ranges are of the served bytes.
    pub async fn get_value(&self, key: &StoreKey, range: Option<StoreRange>) -> Result<Got> {
        if !self.consolidates(key) {
            return self.stored_value(key, range).await;
        }
        match self.stored_value(key, None).await? {
            Got::Value(Value {
                meta,
                body: ValueBody::Bytes(bytes),
                ..
            }) => {
                let (bytes, meta) = self.with_consolidated(key, bytes, meta).await?;
                Ok(in_memory(bytes, meta, range))
            }
            // Too large to be kept whole: served as stored.
            Got::Value(v) if range.is_none() => Ok(Got::Value(v)),
            Got::Value(_) => self.stored_value(key, range).await,
            other => Ok(other),
        }
    }

    /// `range` of the value the store holds at `key`, or all of it.
    async fn stored_value(&self, key: &StoreKey, range: Option<StoreRange>) -> Result<Got> {
        let whole = range.is_none();
        if whole {
            if let Some((bytes, meta)) = self.cache.stored(&self.store, key).await? {
                return Ok(Got::Value(Value {
                    span: 0..meta.size,
                    meta,
                    body: ValueBody::Bytes(bytes),
                }));
            }
        }
        // A value read before a write invalidated the key is kept under the
        // generation its read began at, where no later lookup finds it.
        let generation = self.cache.read_generation(key);
        let range_copy = range.clone();
        let got = match self.store.get_with(key, GetRequest { range }).await {
            Ok(got) => got,
            Err(StoreError::RangeNotSatisfiable { size, .. }) => {
                return Ok(Got::Unsatisfiable { size })
            }
            Err(StoreError::NotFound { .. }) => {
                return Ok(match self.synthesized(key).await? {
                    Some((bytes, meta)) => in_memory(bytes, meta, range_copy),
                    None => Got::Missing,
                })
            }
            Err(e) => return Err(e.into()),
        };
        let (meta, span) = (got.meta, got.range);
        if !whole && span.is_empty() {
            return Ok(Got::Unsatisfiable { size: meta.size });
        }
        if whole && meta.size <= STORED_MAX {
            let parts: Vec<Bytes> = got.body.try_collect().await?;
            let bytes = Bytes::from(parts.concat());
            self.cache
                .keep_stored(key, generation, bytes.clone(), meta.clone())
                .await;
            return Ok(Got::Value(Value {
                meta,
                span,
                body: ValueBody::Bytes(bytes),
            }));
        }
        Ok(Got::Value(Value {
            meta,
            span,
            body: ValueBody::Stream(got.body),
        }))
    }
}
