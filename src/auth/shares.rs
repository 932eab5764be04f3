//! Share links: a signed, expiring URL prefix that reads one node and what
//! lies below it, for a viewer or a colleague without an account. A link
//! is `/share/zs_{id}_{secret}/`; its record (on the store, beside API
//! keys') keeps the secret's SHA-256 only. A link reads what its creator
//! may read there at the time of use, so taking the creator's rights away
//! closes their links too; revoking the record closes it at once.

use serde::{Deserialize, Serialize};

use super::credential::{self, Presented};

/// Longest life of a link, and the default one.
pub const MAX_LIFE_SECONDS: u64 = 366 * 24 * 3600;
pub const DEFAULT_LIFE_SECONDS: u64 = 7 * 24 * 3600;
/// What share links' texts begin with.
pub const KIND: &str = "zs";

/// A link's record, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareRecord {
    pub id: String,
    pub name: String,
    /// Who made it: `token:NAME` or `user:SUB`.
    pub owner: String,
    /// The owner's groups when making it (a user's rights depend on them).
    #[serde(default)]
    pub groups: Vec<String>,
    /// The node it reads (`""`: the whole store).
    pub path: String,
    /// SHA-256 of the secret, hex.
    pub digest: String,
    pub created: u64,
    pub expires: u64,
}

/// `zs_{id}_{secret}`, or `None` for what is no share link.
pub fn presented(text: &str) -> Option<Presented<'_>> {
    credential::presented(KIND, text)
}

impl ShareRecord {
    /// A new link to `path` for `owner`, and its text (shown once).
    pub fn mint(
        owner: &str,
        groups: Vec<String>,
        name: String,
        path: String,
        now: u64,
        life: u64,
    ) -> Result<(ShareRecord, String), String> {
        let id = credential::random(8)?;
        let (digest, text) = credential::mint(KIND, &id)?;
        let record = ShareRecord {
            id,
            name,
            owner: owner.to_string(),
            groups,
            path,
            digest,
            created: now,
            expires: now + life,
        };
        Ok((record, text))
    }

    /// Whether `link` is this record's, and still valid at `now`.
    pub fn admits(&self, link: &Presented, now: u64) -> Result<(), String> {
        if !link.is(&self.id, &self.digest) {
            return Err("the share link is not valid".into());
        }
        if now >= self.expires {
            return Err(format!("the share link '{}' has expired", self.name));
        }
        Ok(())
    }

    /// What listing a link shows: everything but the digest.
    pub fn public(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "name": self.name, "owner": self.owner, "path": self.path,
            "created": self.created, "expires": self.expires,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_its_secret_until_it_expires() {
        let (record, text) = ShareRecord::mint(
            "user:ana",
            vec![],
            "for bob".into(),
            "lab/obs".into(),
            1000,
            60,
        )
        .unwrap();
        let link = presented(&text).unwrap();
        assert!(record.admits(&link, 1059).is_ok());
        assert!(record.admits(&link, 1060).unwrap_err().contains("expired"));
        assert!(!record.public().to_string().contains(&record.digest));
        let forged = format!("zs_{}_{}", record.id, "f".repeat(64));
        assert!(record.admits(&presented(&forged).unwrap(), 1000).is_err());
        assert!(super::super::keys::presented(&text).is_none());
    }
}
