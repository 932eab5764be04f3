//! Where the records of API keys, share links and browser sessions live:
//! on the store (`__zarrd/{kind}/`), so every replica serving it knows
//! them. A record read is kept for at most [`KEPT_FOR`], so a credential
//! revoked on one replica stops working on every other within that time
//! (on this one at once).

use std::time::Duration;

use bytes::Bytes;

use crate::store::{Store, StoreError};

/// The id of the policy document's record (kind `policy`).
pub const POLICY: &str = "rules";

/// How long a replica trusts a record it read.
pub const KEPT_FOR: Duration = Duration::from_secs(10);

/// The records of one kind.
pub struct Records {
    store: Store,
    kind: &'static str,
    kept: moka::future::Cache<String, Option<Bytes>>,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Records({}, {} kept)",
            self.kind,
            self.kept.entry_count()
        )
    }
}

impl Records {
    /// `kind`: `keys`, `shares`, `sessions` or `policy`.
    pub fn new(store: Store, kind: &'static str) -> Records {
        Records {
            store,
            kind,
            kept: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(KEPT_FOR)
                .build(),
        }
    }

    /// The record `id`, if there is one.
    pub async fn get(&self, id: &str) -> Result<Option<Bytes>, StoreError> {
        if let Some(kept) = self.kept.get(id).await {
            return Ok(kept);
        }
        let read = self.store.record(self.kind, id).await?;
        self.kept.insert(id.to_string(), read.clone()).await;
        Ok(read)
    }

    pub async fn put(&self, id: &str, record: Bytes) -> Result<(), StoreError> {
        self.store.put_record(self.kind, id, record.clone()).await?;
        self.kept.insert(id.to_string(), Some(record)).await;
        Ok(())
    }

    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.store.delete_record(self.kind, id).await?;
        self.kept.insert(id.to_string(), None).await;
        Ok(())
    }

    /// The ids of every record, listed afresh.
    pub async fn ids(&self) -> Result<Vec<String>, StoreError> {
        self.store.record_ids(self.kind).await
    }

    /// Every record, read afresh.
    pub async fn all(&self) -> Result<Vec<Bytes>, StoreError> {
        let mut out = Vec::new();
        for id in self.store.record_ids(self.kind).await? {
            if let Some(record) = self.store.record(self.kind, &id).await? {
                out.push(record);
            }
        }
        Ok(out)
    }
}
