//! What API keys, share links and browser sessions have in common: each is
//! a text `{kind}_{id}_{secret}` handed out once, whose record (on the
//! store, so every replica knows it) keeps the secret's SHA-256 only.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A credential as presented: its id and secret.
pub struct Presented<'a> {
    pub id: &'a str,
    secret: &'a str,
}

/// `{kind}_{id}_{secret}`, or `None` for what is not one of `kind`.
pub fn presented<'a>(kind: &str, text: &'a str) -> Option<Presented<'a>> {
    let rest = text.strip_prefix(kind)?.strip_prefix('_')?;
    let (id, secret) = rest.split_once('_')?;
    let plain =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    (plain(id) && id.len() <= 48 && plain(secret) && secret.len() <= 128)
        .then_some(Presented { id, secret })
}

/// SHA-256 of a secret, hex.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// `bytes` random bytes from the operating system, as hex.
pub fn random(bytes: usize) -> Result<String, String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| format!("no random bytes: {e}"))?;
    Ok(hex::encode(buf))
}

/// A new credential of `kind` with the id `id`: its secret's digest (to
/// keep) and its text (to hand out once).
pub fn mint(kind: &str, id: &str) -> Result<(String, String), String> {
    let secret = random(32)?;
    Ok((digest(&secret), format!("{kind}_{id}_{secret}")))
}

impl Presented<'_> {
    /// Whether this is the credential whose record has `id` and `digest`
    /// (compared in constant time).
    pub fn is(&self, id: &str, digest_hex: &str) -> bool {
        let same: bool = digest(self.secret)
            .as_bytes()
            .ct_eq(digest_hex.as_bytes())
            .into();
        same && self.id == id
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_their_kind_and_match_their_digest() {
        let (digest_hex, text) = mint("zs", "abc").unwrap();
        let shown = presented("zs", &text).unwrap();
        assert_eq!(shown.id, "abc");
        assert!(shown.is("abc", &digest_hex));
        assert!(!shown.is("abd", &digest_hex));
        assert!(presented("zk", &text).is_none(), "another kind");
        assert!(presented("zs", "zs_abc").is_none());
        assert!(presented("zs", "zs_a/b_c").is_none());
        assert!(presented("zs", "zsx_a_b").is_none());
        let forged = format!("zs_abc_{}", "0".repeat(64));
        assert!(!presented("zs", &forged).unwrap().is("abc", &digest_hex));
    }
}
