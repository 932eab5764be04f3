//! Listings of a reference set, costing their page, not the set: the
//! whole set in key order a batch at a time (a JSON set's map is in order;
//! a Parquet set's keys are sorted once, on the blocking pool, and kept),
//! and one folder a page at a time as S3 lists (`PaginatedListStore`),
//! each entry a lookup in the ordered index.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ListResult, ObjectMeta};

use super::{generic, kerchunk, listed, location_of, Broken, Index, Ref, References};

/// Keys a listing takes from the index at a time.
const LIST_BATCH: usize = 1000;

/// The keys in `folder` (`""`: all) after `offset`, in key order, read from
/// the index a batch at a time.
pub(super) fn in_key_order(
    index: Index,
    folder: String,
    offset: &Path,
    loaded: DateTime<Utc>,
) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
    let start = Some(offset.as_ref().to_string());
    futures::stream::try_unfold(start, move |cursor| {
        let (index, folder) = (index.clone(), folder.clone());
        async move {
            let Some(cursor) = cursor else {
                return Ok::<_, object_store::Error>(None);
            };
            let batch = index
                .page(&folder, &cursor, LIST_BATCH)
                .await
                .map_err(|e| {
                    generic(Broken {
                        key: folder.clone(),
                        reason: e.0,
                        disallowed: false,
                    })
                })?;
            let next = (batch.len() == LIST_BATCH).then(|| batch[batch.len() - 1].0.clone());
            let metas: Vec<object_store::Result<ObjectMeta>> = batch
                .into_iter()
                .map(|(k, r)| Ok(listed(k, &r, loaded)))
                .collect();
            Ok(Some((futures::stream::iter(metas), next)))
        }
    })
    .try_flatten()
    .boxed()
}

impl Index {
    /// Up to `limit` keys at or below the folder `prefix` after `offset`,
    /// in key order, costing the page, not the set (a listing of a set of
    /// millions of references is read page by page).
    async fn page(
        &self,
        prefix: &str,
        offset: &str,
        limit: usize,
    ) -> Result<Vec<(String, Ref)>, kerchunk::Malformed> {
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        // Keys after `offset`: from the first key above it.
        let from = if offset.is_empty() || offset < start.as_str() {
            start.clone()
        } else {
            format!("{offset}\0")
        };
        let take = |it: &mut dyn Iterator<Item = (&String, &Ref)>| -> Vec<(String, Ref)> {
            it.take_while(|(k, _)| k.starts_with(&start))
                .take(limit)
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect()
        };
        match self {
            Index::Json(refs) => Ok(take(&mut refs.range(from..))),
            #[cfg(feature = "parquet")]
            Index::Parquet(..) => {
                let all = self.sorted().await?;
                let at = all.partition_point(|(k, _)| k.as_str() < from.as_str());
                Ok(take(&mut all[at..].iter().map(|(k, r)| (k, r))))
            }
        }
    }

    /// Every key of a Parquet set in order, listed once on the blocking
    /// pool and kept (empty for a JSON set, whose map is in order).
    #[cfg(feature = "parquet")]
    async fn sorted(&self) -> Result<Arc<Vec<(String, Ref)>>, kerchunk::Malformed> {
        let Index::Parquet(set, sorted) = self else {
            return Ok(Arc::default());
        };
        sorted
            .get_or_try_init(|| async {
                let (set, handle) = (set.clone(), tokio::runtime::Handle::current());
                tokio::task::spawn_blocking(move || handle.block_on(set.under("")))
                    .await
                    .map_err(|e| kerchunk::Malformed(e.to_string()))?
                    .map(Arc::new)
            })
            .await
            .cloned()
    }

    /// No Parquet sets in this build: a JSON set's map is in order.
    #[cfg(not(feature = "parquet"))]
    async fn sorted(&self) -> Result<Arc<Vec<(String, Ref)>>, kerchunk::Malformed> {
        Ok(Arc::default())
    }

    /// Up to `limit` entries of the folder `base` (`""`, or a path ending
    /// in `/`) from `cursor` on (a whole key, inclusive): its keys, and its
    /// folders (their paths, without the `/`), in key order; and where the
    /// next page starts when there may be more. Each entry costs a lookup
    /// in the ordered index, whatever the folders hold.
    async fn level_page(
        &self,
        base: &str,
        cursor: String,
        limit: usize,
    ) -> Result<LevelPage, kerchunk::Malformed> {
        #[cfg_attr(not(feature = "parquet"), allow(unused_variables))]
        let sorted = self.sorted().await?;
        let first_from = |cursor: &str| -> Option<(String, Ref)> {
            match self {
                Index::Json(refs) => refs
                    .range::<str, _>((
                        std::ops::Bound::Included(cursor),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                    .map(|(k, r)| (k.clone(), r.clone())),
                #[cfg(feature = "parquet")]
                Index::Parquet(..) => {
                    let at = sorted.partition_point(|(k, _)| k.as_str() < cursor);
                    sorted.get(at).cloned()
                }
            }
        };
        let (mut keys, mut dirs) = (Vec::new(), Vec::new());
        let mut cursor = cursor.max(base.to_string());
        while keys.len() + dirs.len() < limit {
            let Some((k, r)) = first_from(&cursor) else {
                return Ok((keys, dirs, None));
            };
            let Some(rest) = k.strip_prefix(base) else {
                return Ok((keys, dirs, None));
            };
            match rest.split_once('/') {
                Some((dir, _)) => {
                    dirs.push(format!("{base}{dir}"));
                    // '0' is the character after '/': past the folder.
                    cursor = format!("{base}{dir}0");
                }
                None => {
                    cursor = format!("{k}\0");
                    keys.push((k, r));
                }
            }
        }
        Ok((keys, dirs, Some(cursor)))
    }
}

/// A page of one folder: its keys, its folders, and where the next starts.
type LevelPage = (Vec<(String, Ref)>, Vec<String>, Option<String>);

/// A reference set lists one folder a page at a time, from its index, as
/// S3 does (S3 listings with `delimiter=/` and `/zarr/` folder listings of
/// a set of millions of references cost their page).
#[async_trait::async_trait]
impl object_store::list::PaginatedListStore for References {
    async fn list_paginated(
        &self,
        prefix: Option<&str>,
        opts: object_store::list::PaginatedListOptions,
    ) -> object_store::Result<object_store::list::PaginatedListResult> {
        let base = prefix.unwrap_or("");
        if opts.delimiter.as_deref() != Some("/") || !(base.is_empty() || base.ends_with('/')) {
            return Err(object_store::Error::NotSupported {
                source: "reference sets list folders a page at a time with delimiter '/' only"
                    .into(),
            });
        }
        let cursor = match (opts.page_token, opts.offset) {
            (Some(token), _) => token,
            (None, Some(after)) => format!("{after}\0"),
            (None, None) => String::new(),
        };
        let limit = opts.max_keys.unwrap_or(1000).clamp(1, 1000);
        let (keys, dirs, next) = self
            .index
            .level_page(base, cursor, limit)
            .await
            .map_err(|e| self.broken(base, e.0, false))?;
        Ok(object_store::list::PaginatedListResult {
            result: ListResult {
                objects: keys
                    .into_iter()
                    .map(|(key, r)| listed(key, &r, self.loaded))
                    .collect(),
                common_prefixes: dirs.iter().map(|d| location_of(d)).collect(),
                extensions: Default::default(),
            },
            page_token: next,
        })
    }
}
