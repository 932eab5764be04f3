//! Where API keys' records live: on the store (`__zarrd/keys/`), so every
//! replica serving it knows them. A record read is kept for at most
//! [`KEPT_FOR`], so a key revoked on one replica stops working on every
//! other within that time (on this one at once).

use std::time::Duration;

use bytes::Bytes;

use crate::store::{Store, StoreError};

/// How long a replica trusts a key record it read.
pub const KEPT_FOR: Duration = Duration::from_secs(10);
const KIND: &str = "keys";

pub struct Keys {
    store: Store,
    kept: moka::future::Cache<String, Option<Bytes>>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({} kept)", self.kept.entry_count())
    }
}

impl Keys {
    pub fn new(store: Store) -> Keys {
        Keys {
            store,
            kept: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(KEPT_FOR)
                .build(),
        }
    }

    /// The record of key `id`, if there is one.
    pub async fn get(&self, id: &str) -> Result<Option<Bytes>, StoreError> {
        if let Some(kept) = self.kept.get(id).await {
            return Ok(kept);
        }
        let read = self.store.record(KIND, id).await?;
        self.kept.insert(id.to_string(), read.clone()).await;
        Ok(read)
    }

    pub async fn put(&self, id: &str, record: Bytes) -> Result<(), StoreError> {
        self.store.put_record(KIND, id, record.clone()).await?;
        self.kept.insert(id.to_string(), Some(record)).await;
        Ok(())
    }

    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.store.delete_record(KIND, id).await?;
        self.kept.insert(id.to_string(), None).await;
        Ok(())
    }

    /// Every record, read afresh.
    pub async fn all(&self) -> Result<Vec<Bytes>, StoreError> {
        let mut out = Vec::new();
        for id in self.store.record_ids(KIND).await? {
            if let Some(record) = self.store.record(KIND, &id).await? {
                out.push(record);
            }
        }
        Ok(out)
    }
}
