//! Versioned stores (Icechunk repositories) seen from the rest of the
//! server. Writes are transactions: a copy of the store in which one branch
//! reads and writes an uncommitted session, and the commit that publishes
//! it. Reads of many keys pin the branch or tag to the snapshot it points
//! at, so that they all come from one commit.

use std::sync::Arc;

use super::icechunk_repo::DEFAULT_BRANCH;
use super::icechunk_session::Transaction;
use super::update::{Coordination, Updater};
use super::{Store, StoreError, StoreKey};

/// A transaction in progress: the store to write through, the commit to
/// make, and the paths (`name@branch`, and `name` for `main`) whose cached
/// contents the commit makes stale.
pub struct Pending {
    pub store: Store,
    pub transaction: Transaction,
    pub roots: Vec<StoreKey>,
}

impl Store {
    /// Whether writes at `key` go into a transaction (a session of an
    /// Icechunk branch, committed whole) rather than straight to the store.
    pub fn in_transaction(&self, key: &StoreKey) -> bool {
        self.route(key)
            .is_ok_and(|(store, _)| matches!(store.updater.coordination(), Coordination::Session))
    }

    /// A transaction for a write at `key`, when `key` lies in a branch of an
    /// Icechunk repository (a mount addressed `name@branch` or `name`, or the
    /// root). `None` for every other store, which writes directly.
    pub async fn begin(&self, key: &StoreKey) -> Result<Option<Pending>, StoreError> {
        if let Some(repo) = &self.repo {
            if !self.commits {
                return Err(refused(self));
            }
            let (session, transaction) = repo.begin(DEFAULT_BRANCH).await?;
            let mut store = self.clone();
            store.inner = Arc::new(session);
            store.read_only = false;
            store.updater = Arc::new(Updater::new(Coordination::Session));
            return Ok(Some(Pending {
                store,
                transaction,
                roots: vec![StoreKey::root()],
            }));
        }
        let Some((name, version, _)) = self.mount_parts(key) else {
            return Ok(None);
        };
        let Some(index) = self.mounts.iter().position(|(n, _)| n == name) else {
            return Ok(None);
        };
        let mount = &self.mounts[index].1;
        let Some(repo) = &mount.repo else {
            return Ok(None);
        };
        if !mount.commits {
            return Err(refused(mount));
        }
        let branch = version.unwrap_or(DEFAULT_BRANCH);
        let (session, transaction) = repo.begin(branch).await?;
        let mut written = mount.clone();
        written.inner = Arc::new(session);
        written.read_only = false;
        written.updater = Arc::new(Updater::new(Coordination::Session));
        let mut mounts = (*self.mounts).clone();
        mounts[index].1 = written;
        let mut store = self.clone();
        store.mounts = Arc::new(mounts);
        let mut roots = vec![StoreKey::new(&format!("{name}@{branch}"))?];
        if branch == DEFAULT_BRANCH {
            roots.push(StoreKey::new(name)?);
        }
        Ok(Some(Pending {
            store,
            transaction,
            roots,
        }))
    }
}

impl Store {
    /// `key` with the branch or tag it reads in an Icechunk repository
    /// replaced by the snapshot that ref points at now (`name@ref/...`
    /// becomes `name@{id}/...`; at a repository ROOT, `__version/{id}/...`),
    /// so that reading many keys below it sees one commit, not the ones a
    /// writer makes meanwhile. Any other key as it is.
    pub async fn pin(&self, key: &StoreKey) -> Result<StoreKey, StoreError> {
        if let Some(repo) = &self.repo {
            let id = repo.snapshot_of(DEFAULT_BRANCH).await?;
            let base = format!("{}/{id}", super::icechunk_repo::VERSION_FOLDER);
            return StoreKey::new(&if key.is_root() {
                base
            } else {
                format!("{base}/{key}")
            });
        }
        let Some((name, version, rest)) = self.mount_parts(key) else {
            return Ok(key.clone());
        };
        let Some(repo) = self
            .mounts
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, m)| m.repo.as_ref())
        else {
            return Ok(key.clone());
        };
        let id = repo.snapshot_of(version.unwrap_or(DEFAULT_BRANCH)).await?;
        StoreKey::new(&if rest.is_empty() {
            format!("{name}@{id}")
        } else {
            format!("{name}@{id}/{rest}")
        })
    }

    /// Whether `key` lies in an Icechunk repository (which holds Zarr v3
    /// only).
    pub fn is_versioned(&self, key: &StoreKey) -> bool {
        if self.repo.is_some() {
            return true;
        }
        self.mount_parts(key)
            .and_then(|(name, _, _)| self.mounts.iter().find(|(n, _)| n == name))
            .is_some_and(|(_, mount)| mount.repo.is_some())
    }
}

fn refused(store: &Store) -> StoreError {
    StoreError::ReadOnly {
        what: store.description.clone(),
    }
}
