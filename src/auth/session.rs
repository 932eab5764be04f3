//! Browser sessions: the viewer signs in with the authorization-code flow
//! and PKCE (RFC 7636) against a configured provider, and zarrd keeps a
//! session whose text the browser holds in an `HttpOnly` cookie. Its
//! record (on the store, so every replica knows it, and signing out ends
//! it everywhere) keeps the secret's SHA-256 and the CSRF token that
//! writes made with the cookie must repeat in a header.
//!
//! Between the redirect to the provider and the way back, the flow's
//! state, PKCE verifier and nonce wait in a short-lived cookie of their
//! own ([`Pending`]): only the browser that started a sign-in can finish it.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::credential::{self, Presented};

/// How long a session lasts.
pub const LIFE_SECONDS: u64 = 8 * 3600;
/// How long a sign-in may take at the provider.
pub const PENDING_SECONDS: u64 = 600;
/// The cookie that holds a session, and the one that holds a sign-in under way.
pub const COOKIE: &str = "zarrd_session";
pub const PENDING_COOKIE: &str = "zarrd_signin";
/// The header writes made with the session cookie repeat its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
pub const KIND: &str = "zss";

/// A session's record, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Begins with the expiry in hex, so expired records are found by
    /// listing their ids, without reading them.
    pub id: String,
    pub user: String,
    pub groups: Vec<String>,
    pub issuer: String,
    pub digest: String,
    pub csrf: String,
    pub created: u64,
    pub expires: u64,
}

/// A session's text (`zss_{id}_{secret}`) as a cookie holds it.
pub fn presented(text: &str) -> Option<Presented<'_>> {
    credential::presented(KIND, text)
}

/// Whether the record `id` has expired at `now` (by its id alone).
pub fn expired_id(id: &str, now: u64) -> bool {
    id.split_once('-')
        .and_then(|(at, _)| u64::from_str_radix(at, 16).ok())
        .is_some_and(|at| at <= now)
}

impl SessionRecord {
    /// A new session for `user` of `issuer`, and its text (the cookie's value).
    pub fn mint(
        issuer: &str,
        user: String,
        groups: Vec<String>,
        now: u64,
        life: u64,
    ) -> Result<(SessionRecord, String), String> {
        let expires = now + life;
        let id = format!("{expires:x}-{}", credential::random(8)?);
        let (digest, text) = credential::mint(KIND, &id)?;
        let record = SessionRecord {
            id,
            user,
            groups,
            issuer: issuer.to_string(),
            digest,
            csrf: credential::random(16)?,
            created: now,
            expires,
        };
        Ok((record, text))
    }

    /// Whether `cookie` is this session's, and still valid at `now`.
    pub fn admits(&self, cookie: &Presented, now: u64) -> Result<(), String> {
        if !cookie.is(&self.id, &self.digest) {
            return Err("the session is not valid: sign in again".into());
        }
        if now >= self.expires {
            return Err("the session has ended: sign in again".into());
        }
        Ok(())
    }

    /// Whether `header` (the request's `X-CSRF-Token`) is this session's token.
    pub fn csrf_matches(&self, header: Option<&str>) -> bool {
        use subtle::ConstantTimeEq;
        header.is_some_and(|h| bool::from(h.as_bytes().ct_eq(self.csrf.as_bytes())))
    }
}

/// A sign-in under way: what the way back from the provider must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub state: String,
    pub verifier: String,
    pub nonce: String,
    /// Which `[[oidc]]` table (by its position).
    pub issuer: usize,
    /// The local path to return to.
    pub next: String,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The PKCE challenge of a verifier (S256).
pub fn challenge(verifier: &str) -> String {
    b64(&Sha256::digest(verifier.as_bytes()))
}

impl Pending {
    pub fn new(issuer: usize, next: String) -> Result<Pending, String> {
        let random = |n| credential::random(n).map(|h| b64(&hex::decode(h).unwrap_or_default()));
        Ok(Pending {
            state: random(16)?,
            verifier: random(32)?,
            nonce: random(16)?,
            issuer,
            next,
        })
    }

    /// The cookie's value: fields joined by `.` (none of them holds one).
    pub fn to_cookie(&self) -> String {
        format!(
            "{}.{}.{}.{}.{}",
            self.state,
            self.verifier,
            self.nonce,
            self.issuer,
            b64(self.next.as_bytes())
        )
    }

    pub fn from_cookie(value: &str) -> Option<Pending> {
        let mut parts = value.split('.');
        let (state, verifier, nonce, issuer, next) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        let next = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(next)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())?;
        (parts.next().is_none() && !state.is_empty() && !verifier.is_empty()).then(|| Pending {
            state: state.into(),
            verifier: verifier.into(),
            nonce: nonce.into(),
            issuer: issuer.parse().ok().unwrap_or(usize::MAX),
            next: local_path(Some(&next)),
        })
    }
}

/// Where to return after signing in: a path on this server, never
/// another site (`//evil.example`, `/\evil.example` and absolute URLs are
/// the root).
pub fn local_path(next: Option<&str>) -> String {
    match next {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.starts_with("/\\")
                && !p.chars().any(|c| c.is_control()) =>
        {
            p.to_string()
        }
        _ => "/".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn a_pending_sign_in_survives_its_cookie() {
        let pending = Pending::new(1, "/view/lab/obs?x=1".into()).unwrap();
        assert!(
            pending.verifier.len() >= 43,
            "RFC 7636: 43 to 128 characters"
        );
        assert_eq!(Pending::from_cookie(&pending.to_cookie()), Some(pending));
        assert_eq!(Pending::from_cookie("a.b"), None);
    }

    #[test]
    fn sign_in_returns_only_to_local_paths() {
        assert_eq!(local_path(Some("/view/a")), "/view/a");
        for bad in [
            "//evil.example/x",
            "/\\evil.example",
            "https://evil.example",
            "x",
            "/a\nb",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn sessions_expire_by_their_id_and_check_their_csrf_token() {
        let (record, text) =
            SessionRecord::mint("https://id.example", "ana".into(), vec![], 1000, 60).unwrap();
        assert!(!expired_id(&record.id, 1059));
        assert!(expired_id(&record.id, 1060));
        assert!(!expired_id("nonsense", 5000));
        let cookie = presented(&text).unwrap();
        assert!(record.admits(&cookie, 1000).is_ok());
        assert!(record.admits(&cookie, 1060).is_err());
        assert!(record.csrf_matches(Some(&record.csrf.clone())));
        assert!(!record.csrf_matches(Some("x")));
        assert!(!record.csrf_matches(None));
    }
}
