//! The server's own records on the store: small values under
//! `__zarrd/{kind}/{id}` (API keys), beside the lock files, where no route
//! reaches and no listing looks. Replicas serving one store share them.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt as _, PutPayload};

use super::{Store, StoreError, StoreKey, INTERNAL_PREFIX};

fn failed(path: &Path, e: object_store::Error) -> StoreError {
    let key = StoreKey::new(path.as_ref()).unwrap_or_else(|_| StoreKey::root());
    StoreError::from_backend(&key, e)
}

/// Whether `s` may name a kind of record or a record.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Store {
    fn record_path(kind: &str, id: &str) -> Result<Path, StoreError> {
        if !plain(kind) || !plain(id) {
            return Err(StoreError::InvalidKey {
                key: format!("{kind}/{id}"),
                reason: "records are named by letters, digits, '-' and '_'".into(),
            });
        }
        Ok(Path::from(format!("{INTERNAL_PREFIX}/{kind}/{id}")))
    }

    /// The record `id` of `kind`; `None` when there is none.
    pub async fn record(&self, kind: &str, id: &str) -> Result<Option<Bytes>, StoreError> {
        let path = Self::record_path(kind, id)?;
        match self.inner.get(&path).await {
            Ok(got) => Ok(Some(got.bytes().await.map_err(|e| failed(&path, e))?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(failed(&path, e)),
        }
    }

    /// Writes the record `id` of `kind`, replacing what was there.
    pub async fn put_record(&self, kind: &str, id: &str, value: Bytes) -> Result<(), StoreError> {
        let path = Self::record_path(kind, id)?;
        self.inner
            .put(&path, PutPayload::from_bytes(value))
            .await
            .map(|_| ())
            .map_err(|e| failed(&path, e))
    }

    /// Deletes the record `id` of `kind`; a missing one is no error.
    pub async fn delete_record(&self, kind: &str, id: &str) -> Result<(), StoreError> {
        let path = Self::record_path(kind, id)?;
        match self.inner.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(failed(&path, e)),
        }
    }

    /// The ids of every record of `kind`.
    pub async fn record_ids(&self, kind: &str) -> Result<Vec<String>, StoreError> {
        Self::record_path(kind, "x")?;
        let prefix = Path::from(format!("{INTERNAL_PREFIX}/{kind}"));
        let listed: Vec<object_store::ObjectMeta> = self
            .inner
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| failed(&prefix, e))?;
        Ok(listed
            .iter()
            .filter_map(|m| m.location.filename().map(String::from))
            .filter(|id| plain(id))
            .collect())
    }
}
