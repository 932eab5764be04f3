//! Bearer-token authentication: tokens from the config file or a mounted
//! secret file, each with scopes (`read`, `write`, `admin`) and optional path
//! prefixes it is limited to. Tokens are kept only as SHA-256 digests,
//! compared in constant time, and never logged. A token that signs S3
//! requests (it has an `access_key_id`) is also kept itself, since checking
//! a signature needs the secret it was made with ([`sigv4`]).

pub mod sigv4;

use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
    Admin,
}

/// One token as configured: the secret itself or its SHA-256 (hex).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub name: Option<String>,
    pub token: Option<String>,
    pub token_sha256: Option<String>,
    pub scopes: Vec<Scope>,
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// The access key id S3 clients sign with (the token is the secret access key).
    #[serde(default)]
    pub access_key_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenConfig>,
}

/// Errors in token configuration.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("tokens file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("token {name}: {reason}")]
    Token { name: String, reason: String },
}

#[derive(Debug, Clone)]
struct Token {
    name: String,
    digest: [u8; 32],
    scopes: Vec<Scope>,
    prefixes: Vec<String>,
    /// Access key id and secret, for tokens that sign S3 requests.
    signing: Option<(String, String)>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No credentials, or unknown ones: 401.
    Unauthenticated(String),
    /// Known token without the scope or prefix: 403.
    Forbidden(String),
    /// A SigV4 signature that is malformed, does not match, is too old or
    /// names an unknown access key: 403, with S3's reason.
    Signature { code: &'static str, message: String },
}

/// The configured tokens and what anonymous clients may do.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<Token>,
    pub anonymous_reads: bool,
    pub anonymous_writes: bool,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl Auth {
    /// Load tokens from the config and an optional tokens file (TOML with `[[tokens]]`).
    pub fn new(
        configured: &[TokenConfig],
        file: Option<&Path>,
        anonymous_reads: Option<bool>,
        anonymous_writes: bool,
    ) -> Result<Auth, AuthConfigError> {
        let mut all: Vec<TokenConfig> = configured.to_vec();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| AuthConfigError::File {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            let parsed: TokensFile = toml::from_str(&text).map_err(|e| AuthConfigError::File {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            all.extend(parsed.tokens);
        }
        let tokens = all
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let name = t.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
                let bad = |reason: &str| AuthConfigError::Token {
                    name: name.clone(),
                    reason: reason.to_string(),
                };
                let digest = match (&t.token, &t.token_sha256) {
                    (Some(secret), None) if secret.len() >= 16 => digest(secret),
                    (Some(_), None) => return Err(bad("tokens must be at least 16 characters")),
                    (None, Some(hexed)) => {
                        let bytes =
                            hex::decode(hexed).map_err(|_| bad("token_sha256 is not hex"))?;
                        bytes
                            .try_into()
                            .map_err(|_| bad("token_sha256 must be 64 hex digits"))?
                    }
                    _ => return Err(bad("give exactly one of token and token_sha256")),
                };
                if t.scopes.is_empty() {
                    return Err(bad("a token needs at least one scope"));
                }
                let prefixes = t
                    .prefixes
                    .iter()
                    .map(|p| p.trim_matches('/').to_string())
                    .collect();
                let signing = match (&t.access_key_id, &t.token) {
                    (None, _) => None,
                    (Some(id), Some(secret)) if !id.is_empty() => Some((id.clone(), secret.clone())),
                    (Some(_), Some(_)) => return Err(bad("access_key_id is empty")),
                    (Some(_), None) => {
                        return Err(bad(
                            "access_key_id needs the token itself (token, not token_sha256): signatures are checked with it",
                        ))
                    }
                };
                Ok(Token {
                    name,
                    digest,
                    scopes: t.scopes,
                    prefixes,
                    signing,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut ids: Vec<&str> = tokens
            .iter()
            .filter_map(|t| t.signing.as_ref().map(|(id, _)| id.as_str()))
            .collect();
        ids.sort();
        if let Some(twice) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(AuthConfigError::Token {
                name: twice[0].to_string(),
                reason: "two tokens have this access_key_id".into(),
            });
        }
        // With no tokens, reads are open; with tokens, only if asked.
        let anonymous_reads = anonymous_reads.unwrap_or(tokens.is_empty());
        Ok(Auth {
            tokens,
            anonymous_reads,
            anonymous_writes,
        })
    }

    pub fn has_tokens(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Whether a request with `authorization` may do `scope` on `path`
    /// (`None` for routes not about one path).
    pub fn check(
        &self,
        authorization: Option<&str>,
        scope: Scope,
        path: Option<&str>,
    ) -> Result<Grant, Denied> {
        let presented = authorization.and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        });
        let Some(secret) = presented else {
            let open = match scope {
                Scope::Read => self.anonymous_reads,
                Scope::Write => self.anonymous_writes,
                Scope::Admin => self.anonymous_writes && !self.has_tokens(),
            };
            return if open {
                Ok(Grant::default())
            } else if scope == Scope::Read || self.has_tokens() {
                Err(Denied::Unauthenticated(
                    "this request needs a bearer token (Authorization: Bearer ...)".into(),
                ))
            } else {
                Err(Denied::Forbidden("this server does not accept anonymous writes; start it with --allow-anonymous-writes or configure tokens".into()))
            };
        };
        let presented = digest(secret.trim());
        // Compare against every token without stopping early.
        let mut found: Option<&Token> = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&presented)) {
                found = Some(token);
            }
        }
        let token =
            found.ok_or_else(|| Denied::Unauthenticated("the bearer token is not valid".into()))?;
        permit(token, scope, path)
    }

    /// Whether a request signed with SigV4 may do `scope` on `path`, at
    /// time `now`: the signature must be the one the token of its access
    /// key id makes.
    pub fn check_signed(
        &self,
        request: &sigv4::SignedRequest,
        scope: Scope,
        path: Option<&str>,
        now: std::time::SystemTime,
    ) -> Result<Grant, Denied> {
        let denied = |e: sigv4::SigError| Denied::Signature {
            code: match e {
                sigv4::SigError::Malformed(_) => "authorization_header_malformed",
                sigv4::SigError::Skewed => "request_time_too_skewed",
                sigv4::SigError::Expired => "access_denied",
                sigv4::SigError::Mismatch => "signature_does_not_match",
            },
            message: e.to_string(),
        };
        let credential = request.credential().map_err(denied)?;
        let (token, secret) = self
            .tokens
            .iter()
            .find_map(|t| match &t.signing {
                Some((id, secret)) if *id == credential.access_key => Some((t, secret)),
                _ => None,
            })
            .ok_or_else(|| Denied::Signature {
                code: "invalid_access_key_id",
                message: format!("no token has the access key id '{}'", credential.access_key),
            })?;
        request.verify(&credential, secret, now).map_err(denied)?;
        permit(token, scope, path)
    }
}

/// What a request was allowed, for the checks that depend on more than
/// its path (a create that would make parents above a token's prefix).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// The token's name; `None` for an anonymous request.
    pub token: Option<String>,
    /// The shortest of the token's prefixes the path is in; `None` when the
    /// token is not limited to prefixes (or the request is anonymous).
    pub within: Option<String>,
}

/// Whether a known token may do `scope` on `path` (`None`: on no store path).
fn permit(token: &Token, scope: Scope, path: Option<&str>) -> Result<Grant, Denied> {
    let granted = token
        .scopes
        .iter()
        .any(|s| *s >= scope || *s == Scope::Admin);
    if !granted {
        return Err(Denied::Forbidden(
            format!("token '{}' lacks the {scope:?} scope", token.name).to_lowercase(),
        ));
    }
    let mut within = None;
    // No path: the request is about the server (its counters, S3's one
    // bucket), not about keys a prefix could hold.
    if let Some(path) = path.filter(|_| !token.prefixes.is_empty()) {
        let path = path.trim_matches('/');
        within = token
            .prefixes
            .iter()
            .filter(|p| p.is_empty() || path == *p || path.starts_with(&format!("{p}/")))
            // The broadest: all the token may do here lies below it.
            .min_by_key(|p| p.len())
            .cloned();
        if within.is_none() {
            return Err(Denied::Forbidden(format!(
                "token '{}' is limited to {}",
                token.name,
                token.prefixes.join(", ")
            )));
        }
    }
    Ok(Grant {
        token: Some(token.name.clone()),
        within,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(secret: &str, scopes: &[Scope], prefixes: &[&str]) -> TokenConfig {
        TokenConfig {
            name: Some(secret[..4].into()),
            token: Some(secret.into()),
            token_sha256: None,
            scopes: scopes.to_vec(),
            prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
            access_key_id: None,
        }
    }

    #[test]
    fn scopes_and_prefixes() {
        let auth = Auth::new(
            &[
                token("reader-0123456789", &[Scope::Read], &[]),
                token("writer-0123456789", &[Scope::Write], &["era5"]),
            ],
            None,
            None,
            false,
        )
        .unwrap();
        assert!(
            matches!(
                auth.check(None, Scope::Read, Some("x")),
                Err(Denied::Unauthenticated(_))
            ),
            "tokens close anonymous reads"
        );
        assert!(auth
            .check(Some("Bearer reader-0123456789"), Scope::Read, Some("x"))
            .is_ok());
        assert!(matches!(
            auth.check(Some("Bearer reader-0123456789"), Scope::Write, Some("x")),
            Err(Denied::Forbidden(_))
        ));
        assert_eq!(
            auth.check(
                Some("Bearer writer-0123456789"),
                Scope::Write,
                Some("era5/t/c/0")
            )
            .unwrap()
            .within
            .as_deref(),
            Some("era5"),
            "a limited token's grant says which prefix the path is in"
        );
        assert_eq!(
            auth.check(Some("Bearer reader-0123456789"), Scope::Read, Some("x"))
                .unwrap()
                .within,
            None
        );
        assert!(
            auth.check(Some("Bearer writer-0123456789"), Scope::Read, Some("era5"))
                .is_ok(),
            "write implies read"
        );
        assert!(matches!(
            auth.check(
                Some("Bearer writer-0123456789"),
                Scope::Write,
                Some("era50/x")
            ),
            Err(Denied::Forbidden(_))
        ));
        // The server's own counters and S3's bucket list hold no keys.
        assert!(auth
            .check(Some("Bearer writer-0123456789"), Scope::Read, None)
            .is_ok());
        assert!(matches!(
            auth.check(Some("Bearer writer-0123456789"), Scope::Read, Some("")),
            Err(Denied::Forbidden(_))
        ));
        assert!(matches!(
            auth.check(Some("Bearer wrong-0123456789"), Scope::Read, None),
            Err(Denied::Unauthenticated(_))
        ));
    }

    #[test]
    fn no_tokens_means_open_reads_and_closed_writes() {
        let auth = Auth::new(&[], None, None, false).unwrap();
        assert!(auth.check(None, Scope::Read, Some("a")).is_ok());
        assert!(matches!(
            auth.check(None, Scope::Write, Some("a")),
            Err(Denied::Forbidden(_))
        ));
        let open = Auth::new(&[], None, None, true).unwrap();
        assert!(open.check(None, Scope::Write, Some("a")).is_ok());
    }

    #[test]
    fn bad_token_configs_are_refused() {
        assert!(Auth::new(
            &[token("short-token", &[Scope::Read], &[])],
            None,
            None,
            false
        )
        .is_err());
        let mut t = token("long-enough-token-xyz", &[], &[]);
        assert!(Auth::new(&[t.clone()], None, None, false).is_err());
        t.scopes = vec![Scope::Read];
        t.token_sha256 = Some("00".repeat(32));
        assert!(Auth::new(&[t], None, None, false).is_err());
        let hashed = TokenConfig {
            name: None,
            token: None,
            token_sha256: Some(hex::encode(digest("hashed-secret-token-1"))),
            scopes: vec![Scope::Admin],
            prefixes: vec![],
            access_key_id: None,
        };
        let auth = Auth::new(&[hashed], None, None, false).unwrap();
        assert!(auth
            .check(Some("Bearer hashed-secret-token-1"), Scope::Admin, None)
            .is_ok());
    }
}
