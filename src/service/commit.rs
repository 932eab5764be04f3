//! Writes as commits. On a branch of a versioned store (an Icechunk
//! repository) a write runs in a transaction of its own, against a service
//! over the transaction's store, and becomes one commit, or nothing if it
//! fails; everywhere else it runs directly against this service.

use std::ops::Deref;

use super::{Result, Service};
use crate::config::Recheck;
use crate::store::{Pending, StoreKey};

/// Decoded chunks one transaction keeps while it runs (its own reads of
/// the chunks it rewrites).
const TRANSACTION_CACHE_BYTES: u64 = 64 << 20;

/// A write in progress: the service to run it against, and what to do
/// when it is done.
pub struct Writing<'a> {
    parent: &'a Service,
    transaction: Option<(Service, Pending)>,
}

impl Service {
    /// Start a write at `path`: in a transaction when `path` lies in a
    /// branch of a versioned store, else directly.
    pub async fn writing(&self, path: &StoreKey) -> Result<Writing<'_>> {
        let transaction = match self.store.begin(path).await? {
            Some(pending) => {
                let mut service = Service::new(
                    pending.store.clone(),
                    TRANSACTION_CACHE_BYTES,
                    Recheck::Always,
                    self.limits,
                )
                .with_budget(self.budget.clone());
                service.transactional = true;
                // Watchers hear of the write once it is committed.
                service.events = std::sync::Arc::new(super::events::Events::held());
                Some((service, pending))
            }
            None => None,
        };
        Ok(Writing {
            parent: self,
            transaction,
        })
    }
}

impl Writing<'_> {
    /// Publish the write: commit the transaction with `message` and forget
    /// what this server cached of the branch. The new snapshot's id, when a
    /// commit was made (not for direct writes, nor when nothing changed).
    pub async fn finish(self, message: &str) -> Result<Option<String>> {
        let Some((service, pending)) = self.transaction else {
            return Ok(None);
        };
        let committed = pending.transaction.commit(message).await;
        for root in &pending.roots {
            self.parent.cache.invalidate_node(root.as_str()).await;
        }
        self.parent.cache.invalidate_all_metadata();
        let snapshot = committed?;
        for mut change in service.events.release() {
            change.snapshot = snapshot.clone();
            self.parent.notify(change);
        }
        Ok(snapshot)
    }
}

impl Deref for Writing<'_> {
    type Target = Service;

    fn deref(&self) -> &Service {
        match &self.transaction {
            Some((service, _)) => service,
            None => self.parent,
        }
    }
}
