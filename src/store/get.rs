//! Reads: whole values, ranges (also pinned to one version), suffixes,
//! heads and streams.

use std::ops::Range;

use bytes::Bytes;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use super::{
    key_meta, local, Change, GetRequest, GetResponse, KeyMeta, Store, StoreError, StoreKey,
    StoreRange, Versioned,
};

/// Values of a store without local reads that one [`Store::get_many`]
/// fetches at once.
const GETS_AT_ONCE: usize = 4;

impl Store {
    /// The whole value, or `None` when the key is missing.
    pub async fn get(&self, key: &StoreKey) -> Result<Option<Bytes>, StoreError> {
        Ok(self.get_versioned(key).await?.map(|v| v.bytes))
    }

    /// The whole value with its version, or `None` when missing.
    pub async fn get_versioned(&self, key: &StoreKey) -> Result<Option<Versioned>, StoreError> {
        let (store, key) = self.route(key)?;
        if let Some(local) = &store.local {
            let got = local.get_whole(&key).await?;
            return Ok(got.map(|(bytes, meta)| Versioned { bytes, meta }));
        }
        match store.inner.get(&store.path(&key)).await {
            Ok(result) => read_whole(result, &key).await.map(Some),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::from_backend(&key, e)),
        }
    }

    /// Whole values, with their versions, of the first of `keys`, in the
    /// order given, `None` for a missing key. Keys of one local directory
    /// are read in one trip to the blocking pool; others a few at a time (a
    /// caller runs several such reads at once). Reading stops once the
    /// values read pass `budget` (a local directory stops before the file
    /// that would take them past it, others before their next few), so the
    /// answer can be shorter than `keys` and the caller asks again for the
    /// rest: a chunk key holding a huge file is then not read alongside
    /// many others. At least one key is answered.
    pub async fn get_many(
        &self,
        keys: &[StoreKey],
        budget: u64,
    ) -> Result<Vec<Option<Versioned>>, StoreError> {
        match self.one_local_dir(keys)? {
            Some((dir, local_keys)) => dir.get_many_whole(local_keys, budget).await,
            None => self.get_some(keys, budget).await,
        }
    }

    /// The local directory all of `keys` are in, with the keys as that
    /// directory knows them; `None` when they are not all in one.
    fn one_local_dir<'a>(
        &'a self,
        keys: &'a [StoreKey],
    ) -> Result<Option<(&'a local::LocalReads, Vec<StoreKey>)>, StoreError> {
        let mut local_keys = Vec::with_capacity(keys.len());
        let mut dir = None;
        for key in keys {
            let (store, inner) = self.route(key)?;
            match (&store.local, dir) {
                (Some(local), None) => dir = Some(local),
                (Some(local), Some(d)) if local.same_dir(d) => {}
                _ => return Ok(None),
            }
            local_keys.push(inner.into_owned());
        }
        Ok(dir.map(|d| (d, local_keys)))
    }

    /// [`Store::get_many`] for keys not all in one local directory: a few
    /// at a time, no more once the values read pass `budget`.
    async fn get_some(
        &self,
        keys: &[StoreKey],
        budget: u64,
    ) -> Result<Vec<Option<Versioned>>, StoreError> {
        let mut values = Vec::with_capacity(keys.len());
        let mut read = 0u64;
        for some in keys.chunks(GETS_AT_ONCE) {
            if read > budget {
                break;
            }
            let gets = some.iter().map(|k| self.get_versioned(k));
            for value in futures::future::try_join_all(gets).await? {
                read += value.as_ref().map_or(0, |v| v.bytes.len() as u64);
                values.push(value);
            }
        }
        Ok(values)
    }

    /// A byte range of a value.
    pub async fn get_range(&self, key: &StoreKey, range: Range<u64>) -> Result<Bytes, StoreError> {
        let (store, key) = self.route(key)?;
        store
            .inner
            .get_range(&store.path(&key), range)
            .await
            .map_err(|e| StoreError::from_backend(&key, e))
    }

    /// The last `n` bytes of a value (or all of it when shorter), with its size.
    /// `None` when the key is missing.
    pub async fn get_suffix(
        &self,
        key: &StoreKey,
        n: u64,
    ) -> Result<Option<(Bytes, KeyMeta)>, StoreError> {
        let (store, key) = self.route(key)?;
        if let Some(local) = &store.local {
            return local.get_suffix(&key, n).await;
        }
        let options = GetOptions {
            range: Some(GetRange::Suffix(n)),
            ..Default::default()
        };
        match store.inner.get_opts(&store.path(&key), options).await {
            Ok(result) => read_whole(result, &key)
                .await
                .map(|v| Some((v.bytes, v.meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) if refuses_suffix(&e) => {
                // Azure has no suffix ranges, and some HTTP servers answer
                // them with 416: the size first, then a bounded range of
                // that version.
                let Some(meta) = store.head(&key).await? else {
                    return Ok(None);
                };
                let start = meta.size.saturating_sub(n);
                let bytes = if start < meta.size {
                    let pin = meta.version.e_tag.as_deref();
                    store.get_range_at(&key, start..meta.size, pin).await?
                } else {
                    Bytes::new()
                };
                Ok(Some((bytes, meta)))
            }
            Err(e) => Err(StoreError::from_backend(&key, e)),
        }
    }

    /// Several ranges of one value in one call, so the backend can coalesce them.
    pub async fn get_ranges(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, StoreError> {
        self.get_ranges_at(key, ranges, None).await
    }

    /// One range of the version of a value whose ETag is `e_tag` (see
    /// [`Store::get_ranges_at`]).
    pub async fn get_range_at(
        &self,
        key: &StoreKey,
        range: Range<u64>,
        e_tag: Option<&str>,
    ) -> Result<Bytes, StoreError> {
        let ranges = [range];
        let mut got = self.get_ranges_at(key, &ranges, e_tag).await?;
        Ok(got.pop().unwrap_or_default())
    }

    /// Several ranges of the version of a value whose ETag is `e_tag`
    /// (any version when `None`). When the value has changed since,
    /// [`StoreError::Precondition`]: ranges found through an index read
    /// earlier (a shard's) must come from the same version as the index.
    pub async fn get_ranges_at(
        &self,
        key: &StoreKey,
        ranges: &[Range<u64>],
        e_tag: Option<&str>,
    ) -> Result<Vec<Bytes>, StoreError> {
        let (store, key) = self.route(key)?;
        let path = store.path(&key);
        let Some(e_tag) = e_tag else {
            return store
                .inner
                .get_ranges(&path, ranges)
                .await
                .map_err(|e| StoreError::from_backend(&key, e));
        };
        if let Some(local) = &store.local {
            // One open file: the version checked is the version read.
            return local.get_ranges_at(&key, ranges, e_tag).await;
        }
        let inner = &store.inner;
        object_store::coalesce_ranges(
            ranges,
            |range| {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(range)),
                    if_match: Some(e_tag.to_string()),
                    ..Default::default()
                };
                let path = &path;
                async move { inner.get_opts(path, options).await?.bytes().await }
            },
            object_store::OBJECT_STORE_COALESCE_DEFAULT,
        )
        .await
        .map_err(|e| StoreError::from_backend(&key, e))
    }

    /// Size and version of a value, `None` when missing.
    pub async fn head(&self, key: &StoreKey) -> Result<Option<KeyMeta>, StoreError> {
        let (store, key) = self.route(key)?;
        match store.inner.head(&store.path(&key)).await {
            Ok(meta) => Ok(Some(key_meta(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::from_backend(&key, e)),
        }
    }

    /// Stream a value or a range of it. A range that starts past the end is
    /// [`StoreError::RangeNotSatisfiable`].
    pub async fn get_with(
        &self,
        key: &StoreKey,
        request: GetRequest,
    ) -> Result<GetResponse, StoreError> {
        let (store, key) = self.route(key)?;
        if let Some(local) = &store.local {
            return local
                .get(&key, request.range)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    key: key.to_string(),
                });
        }
        let range = request.range.clone().map(|r| match r {
            StoreRange::Bounded(r) => GetRange::Bounded(r),
            StoreRange::From(o) => GetRange::Offset(o),
            StoreRange::Suffix(n) => GetRange::Suffix(n),
        });
        let options = GetOptions {
            range,
            ..Default::default()
        };
        let result = store.inner.get_opts(&store.path(&key), options).await;
        if let (Err(e), Some(StoreRange::Suffix(n))) = (&result, &request.range) {
            if refuses_suffix(e) {
                return Box::pin(store.get_suffix_as_bounded(&key, *n)).await;
            }
        }
        match result {
            Ok(result) => {
                let meta = key_meta(&result.meta);
                let range = result.range.clone();
                let owned = key.clone().into_owned();
                let body = match result.payload {
                    object_store::GetResultPayload::File(file, _) => {
                        local::handed_file_stream(file, meta.clone(), range.clone(), owned)
                    }
                    object_store::GetResultPayload::Stream(stream) => stream
                        .map(move |chunk| chunk.map_err(|e| StoreError::from_backend(&owned, e)))
                        .boxed(),
                };
                Ok(GetResponse { meta, range, body })
            }
            Err(
                e @ (object_store::Error::NotFound { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotModified { .. }),
            ) => Err(StoreError::from_backend(&key, e)),
            Err(e) => {
                // Backends report a range past the end differently; check it here.
                if let (Some(r), Some(meta)) = (&request.range, store.head(&key).await?) {
                    let start = match r {
                        StoreRange::Bounded(r) => r.start,
                        StoreRange::From(o) => *o,
                        StoreRange::Suffix(_) => 0,
                    };
                    if start >= meta.size {
                        return Err(StoreError::RangeNotSatisfiable {
                            key: key.to_string(),
                            start,
                            end: start,
                            size: meta.size,
                        });
                    }
                }
                Err(StoreError::from_backend(&key, e))
            }
        }
    }

    /// A suffix range for stores that cannot read one (Azure): the size by a
    /// HEAD, then the equivalent bounded range.
    async fn get_suffix_as_bounded(
        &self,
        key: &StoreKey,
        n: u64,
    ) -> Result<GetResponse, StoreError> {
        let meta = self.head(key).await?.ok_or_else(|| StoreError::NotFound {
            key: key.to_string(),
        })?;
        if meta.size == 0 {
            let body = futures::stream::empty().boxed();
            return Ok(GetResponse {
                meta,
                range: 0..0,
                body,
            });
        }
        let range = StoreRange::Bounded(meta.size.saturating_sub(n)..meta.size);
        self.get_with(key, GetRequest { range: Some(range) }).await
    }

    /// Ask the store whether `key` still has ETag `e_tag`, without reading it
    /// (a conditional HEAD: `If-None-Match`).
    pub async fn changed_since(&self, key: &StoreKey, e_tag: &str) -> Result<Change, StoreError> {
        let (store, key) = self.route(key)?;
        let options = GetOptions {
            if_none_match: Some(e_tag.to_string()),
            head: true,
            ..Default::default()
        };
        match store.inner.get_opts(&store.path(&key), options).await {
            Ok(result) => Ok(Change::Changed(key_meta(&result.meta))),
            Err(object_store::Error::NotModified { .. }) => Ok(Change::Unchanged),
            Err(object_store::Error::NotFound { .. }) => Ok(Change::Missing),
            Err(e) => Err(StoreError::from_backend(&key, e)),
        }
    }

    /// [`Store::changed_since`] for several keys, in the order given; a key
    /// with no ETag is `Missing` while it is missing and `Changed` once it
    /// exists. Keys of one local directory are checked in one trip to the
    /// blocking pool (revalidating the small chunks of a window otherwise
    /// costs a trip each, more than reading them from the cache); others
    /// concurrently.
    pub async fn changed_since_many(
        &self,
        asks: &[(StoreKey, Option<String>)],
    ) -> Result<Vec<Change>, StoreError> {
        let keys: Vec<StoreKey> = asks.iter().map(|(k, _)| k.clone()).collect();
        if let Some((dir, local_keys)) = self.one_local_dir(&keys)? {
            let e_tags = asks.iter().map(|(_, e)| e.clone()).collect();
            return dir.changed_since_many(local_keys, e_tags).await;
        }
        let checks = asks.iter().map(|(key, e_tag)| async move {
            match e_tag {
                Some(e_tag) => self.changed_since(key, e_tag).await,
                None => Ok(match self.head(key).await? {
                    Some(meta) => Change::Changed(meta),
                    None => Change::Missing,
                }),
            }
        });
        futures::future::try_join_all(checks).await
    }
}

/// The bytes of a read the backend answered, with their version.
async fn read_whole(
    result: object_store::GetResult,
    key: &StoreKey,
) -> Result<Versioned, StoreError> {
    let meta = key_meta(&result.meta);
    let bytes = result
        .bytes()
        .await
        .map_err(|e| StoreError::from_backend(key, e))?;
    Ok(Versioned { bytes, meta })
}

/// A read's answer as object_store gives it, for the backends zarrd
/// implements itself.
pub(super) fn answer(
    payload: object_store::GetResultPayload,
    meta: object_store::ObjectMeta,
    range: Range<u64>,
) -> object_store::GetResult {
    object_store::GetResult {
        payload,
        meta,
        range,
        attributes: Default::default(),
        extensions: Default::default(),
    }
}

/// [`answer`] with bytes held in memory.
pub(super) fn in_memory(
    bytes: Bytes,
    meta: object_store::ObjectMeta,
    range: Range<u64>,
) -> object_store::GetResult {
    let payload = object_store::GetResultPayload::Stream(
        futures::stream::once(async move { Ok(bytes) }).boxed(),
    );
    answer(payload, meta, range)
}

/// The bytes of a value of `size` bytes that `range` asks for, for the
/// backends zarrd implements itself (zip files, reference sets, Icechunk).
/// A range that starts past the end is refused as object_store's own
/// backends refuse it; [`Store::get_with`] then checks the size and answers
/// [`StoreError::RangeNotSatisfiable`].
pub(super) fn requested(
    store: &'static str,
    key: &str,
    range: Option<&GetRange>,
    size: u64,
) -> object_store::Result<Range<u64>> {
    Ok(match range {
        None => 0..size,
        Some(GetRange::Bounded(r)) if r.start < size && r.start <= r.end => {
            r.start..r.end.min(size)
        }
        Some(GetRange::Offset(o)) if *o < size => *o..size,
        Some(GetRange::Suffix(n)) => size.saturating_sub(*n)..size,
        Some(r) => {
            return Err(object_store::Error::Generic {
                store,
                source: format!("range {r} is outside '{key}' of {size} bytes").into(),
            })
        }
    })
}

/// Whether a store's error says it does not answer suffix ranges: it says
/// so (Azure, or an HTTP server sending the whole value), or an HTTP
/// server answered 416, which object_store reports only in its message.
fn refuses_suffix(err: &object_store::Error) -> bool {
    match err {
        object_store::Error::NotSupported { .. } => true,
        object_store::Error::Generic { source, .. } => {
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
            while let Some(e) = cause {
                if e.to_string().contains("416 Range Not Satisfiable") {
                    return true;
                }
                cause = e.source();
            }
            false
        }
        _ => false,
    }
}
