//! API keys: users mint keys for their scripts and pipelines, each limited
//! to a scope and path prefixes within the minter's own rights and to an
//! expiry. A key is `zk_{id}_{secret}`; its record (kept on the store by
//! the service, so every replica knows it) holds the secret's SHA-256
//! only, never the secret. A key's rights are its owner's at the time of
//! use (a static token's, or the policy's for the user and the groups they
//! had when minting), limited as the key says.

use serde::{Deserialize, Serialize};

use super::{credential, Scope};

/// Longest life of a key, and the default one.
pub const MAX_LIFE_SECONDS: u64 = 366 * 24 * 3600;
pub const DEFAULT_LIFE_SECONDS: u64 = 90 * 24 * 3600;

/// A key's record, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: String,
    pub name: String,
    /// Who minted it: `token:NAME` or `user:SUB`.
    pub owner: String,
    /// The owner's groups when minting (a user's rights depend on them).
    #[serde(default)]
    pub groups: Vec<String>,
    pub grant: Scope,
    pub prefixes: Vec<String>,
    /// SHA-256 of the secret, hex.
    pub digest: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub expires: u64,
}

pub use super::credential::Presented;

/// `zk_{id}_{secret}`, or `None` for what is no API key.
pub fn presented(token: &str) -> Option<Presented<'_>> {
    super::credential::presented("zk", token)
}

impl KeyRecord {
    /// A new key for `owner`, and its secret text (shown once).
    pub fn mint(
        owner: &str,
        groups: Vec<String>,
        name: String,
        grant: Scope,
        prefixes: Vec<String>,
        now: u64,
        life: u64,
    ) -> Result<(KeyRecord, String), String> {
        let id = credential::random(8)?;
        let (digest, text) = credential::mint("zk", &id)?;
        let record = KeyRecord {
            id: id.clone(),
            name,
            owner: owner.to_string(),
            groups,
            grant,
            prefixes,
            digest,
            created: now,
            expires: now + life,
        };
        Ok((record, text))
    }

    /// Whether `key` is this record's, and still valid at `now`.
    pub fn admits(&self, key: &Presented, now: u64) -> Result<(), String> {
        if !key.is(&self.id, &self.digest) {
            return Err("the API key is not valid".into());
        }
        if now >= self.expires {
            return Err(format!("the API key '{}' has expired", self.name));
        }
        Ok(())
    }

    /// What listing a key shows: everything but the digest.
    pub fn public(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "name": self.name, "owner": self.owner, "grant": self.grant,
            "prefixes": self.prefixes, "created": self.created, "expires": self.expires,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_its_secret_until_it_expires() {
        let (record, text) = KeyRecord::mint(
            "user:ana",
            vec!["lab".into()],
            "pipeline".into(),
            Scope::Read,
            vec!["lab/obs".into()],
            1000,
            60,
        )
        .unwrap();
        let key = presented(&text).unwrap();
        assert_eq!(key.id, record.id);
        assert!(record.admits(&key, 1000).is_ok());
        assert!(record.admits(&key, 1060).unwrap_err().contains("expired"));
        assert!(
            !record.public().to_string().contains(&record.digest),
            "the digest stays on the store"
        );
        assert!(
            !serde_json::to_string(&record)
                .unwrap()
                .contains(&text[20..]),
            "the secret is never stored"
        );
        let forged = format!("zk_{}_{}", record.id, "0".repeat(64));
        assert!(record.admits(&presented(&forged).unwrap(), 1000).is_err());
        assert!(presented("zk_only").is_none());
        assert!(presented("not-a-key").is_none());
        assert!(presented("zk_a/b_c").is_none());
    }
}
