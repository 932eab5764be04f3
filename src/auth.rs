//! Who a request comes from and what they may do. Callers are:
//! - bearer tokens from the config file or a mounted secret file, each with
//!   scopes (`read`, `write`, `admin`) and optional path prefixes it is
//!   limited to, kept only as SHA-256 digests, compared in constant time and
//!   never logged (a token that signs S3 requests, with an
//!   `access_key_id`, is also kept itself: checking a signature needs the
//!   secret it was made with, [`sigv4`]);
//! - users of an OpenID provider, by the JWTs it signs ([`oidc`]), whose
//!   rights the `[[policy]]` rules give ([`policy`]);
//! - anonymous callers, whose rights are the policy's for `anonymous`, or
//!   when there is no policy, what `--allow-anonymous-*` opens.
//!
//! Every caller's rights are one [`Rights`], asked the same way on every
//! route.

pub mod credential;
pub mod fair;
pub mod keys;
pub mod oidc;
pub mod policy;
pub mod session;
pub mod shares;
pub mod sigv4;

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use policy::{Entry, Policy, Rights, RuleConfig, Who};

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
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

/// Errors in the configuration of who may do what.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("tokens file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("token {name}: {reason}")]
    Token { name: String, reason: String },
    #[error("[[policy]] number {index}: {reason}")]
    Policy { index: usize, reason: String },
    #[error("[[fair_use]] number {index}: {reason}")]
    FairUse { index: usize, reason: String },
    #[error("[[oidc]] {issuer}: {reason}")]
    Oidc { issuer: String, reason: String },
}

#[derive(Debug, Clone)]
struct Token {
    name: String,
    digest: [u8; 32],
    /// Its scope on its prefixes (or everywhere).
    rights: Arc<Rights>,
    rate: Option<fair::Rate>,
    /// Access key id and secret, for tokens that sign S3 requests.
    signing: Option<(String, String)>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No credentials, or unknown or invalid ones: 401.
    Unauthenticated(String),
    /// A caller without the scope on something they may see: 403.
    Forbidden(String),
    /// Something the caller may not read: 404, as if it were not there.
    Hidden,
    /// A SigV4 signature that is malformed, does not match, is too old or
    /// names an unknown access key: 403, with S3's reason.
    Signature { code: &'static str, message: String },
    /// The identity provider's keys could not be fetched: 503.
    Unavailable(String),
}

/// Who may sign in, what they may do and at what rate: the `[[oidc]]`,
/// `[[policy]]` and `[[fair_use]]` tables.
#[derive(Debug, Clone, Default)]
pub struct Identities {
    pub oidc: Vec<oidc::OidcConfig>,
    pub policy: Vec<RuleConfig>,
    pub fair_use: Vec<fair::FairUseConfig>,
}

/// How much of the store below its path a request's answer tells of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The node or key it names.
    Named,
    /// A listing: what the caller may see of what lies below, filtered, so
    /// seeing the way to something readable is enough.
    Lists,
    /// Everything below, unfiltered (a dataset of a group's arrays): the
    /// caller must read all of it.
    Whole,
    /// Everything below, changed: deleting or replacing a node, or writing
    /// a document that describes the nodes below it (consolidated
    /// metadata). The caller needs the scope on every node below.
    Subtree,
}

/// Who a request comes from, and what they may do.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `token:NAME` or `user:SUB`; `None` for an anonymous caller.
    pub name: Option<String>,
    pub rights: Arc<Rights>,
    /// The rates `[[fair_use]]` holds the caller to; `None`: no limit.
    pub rate: Option<fair::Rate>,
    /// A user's groups (what an API key they mint keeps).
    pub groups: Vec<String>,
    /// Whose fair-use share the caller draws on: an API key's owner, or
    /// the caller themself; `None` for an anonymous caller (their address).
    pub owner: Option<String>,
    /// When the credential stops being valid (a JWT's `exp`, an API key's
    /// expiry), in seconds since the Unix epoch: what a long-lived answer
    /// (a watch) must not outlive.
    pub expires: Option<u64>,
    /// The record on the store it was found by (an API key, a share link,
    /// a session), whose revocation ends what it opened.
    pub stored: Option<Stored>,
}

/// A credential's record on the store: its kind (`keys`, `shares`,
/// `sessions`) and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub kind: &'static str,
    pub id: String,
}

/// A policy and what it gives anonymous callers.
#[derive(Debug, Clone, Default)]
struct Judged {
    policy: Arc<Policy>,
    anonymous: Arc<Rights>,
}

/// The configured callers and what anonymous ones may do.
#[derive(Debug, Default)]
pub struct Auth {
    tokens: Vec<Token>,
    issuers: Vec<oidc::Issuer>,
    /// The config file's rules and the store document's, as one policy,
    /// and what it gives anonymous callers; replaced when the document
    /// changes.
    rules: std::sync::RwLock<Judged>,
    /// The config file's `[[policy]]` rules.
    configured: Vec<RuleConfig>,
    /// What anonymous callers may do when no rule exists anywhere
    /// (`--allow-anonymous-*`).
    flags: Arc<Rights>,
    fair: fair::FairUse,
    /// No tokens, no provider, no policy: writes are refused for want of
    /// `--allow-anonymous-writes`, not of a token.
    open: bool,
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
        Auth::with_identities(
            configured,
            file,
            anonymous_reads,
            anonymous_writes,
            &Identities::default(),
        )
    }

    /// Tokens, OpenID issuers, the policy for their users and anonymous
    /// callers, and the rates they are held to.
    pub fn with_identities(
        configured: &[TokenConfig],
        file: Option<&Path>,
        anonymous_reads: Option<bool>,
        anonymous_writes: bool,
        identities: &Identities,
    ) -> Result<Auth, AuthConfigError> {
        let (issuers, rules) = (&identities.oidc[..], &identities.policy[..]);
        let fair = fair::FairUse::new(&identities.fair_use)?;
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
                let Some(&top) = t.scopes.iter().max() else {
                    return Err(bad("a token needs at least one scope"));
                };
                let prefixes: Vec<String> = if t.prefixes.is_empty() {
                    vec![String::new()]
                } else {
                    t.prefixes.clone()
                };
                let rights = Rights::new(prefixes.iter().map(|p| Entry::grant(p, top)).collect());
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
                let rate = fair.rate(&Who {
                    user: Some(name.clone()),
                    groups: vec![],
                });
                Ok(Token {
                    name,
                    digest,
                    rate,
                    rights: Arc::new(rights),
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
        let policy = Policy::new(rules)?;
        if !issuers.is_empty() && policy.is_empty() {
            return Err(AuthConfigError::Oidc {
                issuer: issuers[0].issuer.clone(),
                reason: "[[policy]] tables must say what its users may do".into(),
            });
        }
        let issuers = issuers
            .iter()
            .map(|c| oidc::Issuer::new(c.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        // With no tokens, reads are open; with tokens, only if asked.
        let reads = anonymous_reads.unwrap_or(tokens.is_empty());
        let mut entries = vec![];
        if anonymous_writes {
            let top = if tokens.is_empty() {
                Scope::Admin
            } else {
                Scope::Write
            };
            entries.push(Entry::grant("", top));
        } else if reads {
            entries.push(Entry::grant("", Scope::Read));
        }
        let flags = Arc::new(Rights::new(entries));
        let auth = Auth {
            open: tokens.is_empty() && issuers.is_empty() && policy.is_empty(),
            tokens,
            issuers,
            rules: Default::default(),
            configured: rules.to_vec(),
            flags,
            fair,
        };
        auth.set_stored_rules(&[])?;
        Ok(auth)
    }

    /// Takes the store's policy document's rules (beside the config
    /// file's, as one policy), or refuses them, leaving the policy as it
    /// was.
    pub fn set_stored_rules(&self, stored: &[RuleConfig]) -> Result<(), AuthConfigError> {
        let all: Vec<RuleConfig> = self.configured.iter().chain(stored).cloned().collect();
        let policy = Policy::new(&all)?;
        let anonymous = if policy.is_empty() {
            self.flags.clone()
        } else {
            Arc::new(policy.rights(&Who::default()))
        };
        let judged = Judged {
            policy: Arc::new(policy),
            anonymous,
        };
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = judged;
        Ok(())
    }

    /// The config file's rules.
    pub fn configured_rules(&self) -> &[RuleConfig] {
        &self.configured
    }

    /// The policy in force, read under its lock (held only while `f` runs:
    /// asked on every request, so nothing is cloned that is not returned).
    fn with_rules<T>(&self, f: impl FnOnce(&Judged) -> T) -> T {
        f(&self.rules.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn policy_rights(&self, who: &Who) -> Rights {
        self.with_rules(|j| j.policy.rights(who))
    }

    pub fn has_tokens(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The anonymous caller.
    pub fn anonymous(&self) -> Identity {
        Identity {
            name: None,
            rights: self.with_rules(|j| j.anonymous.clone()),
            rate: self.fair.rate(&Who::default()),
            groups: vec![],
            owner: None,
            expires: None,
            stored: None,
        }
    }

    /// Who `authorization` (an `Authorization` header) says the caller is:
    /// a static token, or a JWT of a configured issuer.
    pub async fn identify(&self, authorization: Option<&str>) -> Result<Identity, Denied> {
        let presented = authorization.and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        });
        let Some(secret) = presented.map(str::trim) else {
            return Ok(self.anonymous());
        };
        if !self.issuers.is_empty() {
            match oidc::claimed_issuer(secret) {
                Err(oidc::TokenError::NotJwt) => {}
                Err(e) => return Err(Denied::Unauthenticated(e.to_string())),
                Ok(iss) => {
                    let Some(issuer) = self.issuers.iter().find(|i| i.config.issuer == iss) else {
                        return Err(Denied::Unauthenticated(format!(
                            "tokens of the issuer '{iss}' are not accepted here"
                        )));
                    };
                    return match issuer.verify(secret).await {
                        Ok(verified) => Ok(Identity {
                            name: verified.who.user.as_ref().map(|u| format!("user:{u}")),
                            rights: Arc::new(self.policy_rights(&verified.who)),
                            rate: self.fair.rate(&verified.who),
                            groups: verified.who.groups.clone(),
                            owner: verified.who.user.as_ref().map(|u| format!("user:{u}")),
                            expires: Some(verified.expires),
                            stored: None,
                        }),
                        Err(oidc::TokenError::Unavailable { issuer, reason }) => {
                            Err(Denied::Unavailable(format!(
                                "the identity provider {issuer} could not be reached: {reason}"
                            )))
                        }
                        Err(e) => Err(Denied::Unauthenticated(e.to_string())),
                    };
                }
            }
        }
        let presented = digest(secret);
        // Compare against every token without stopping early.
        let mut found: Option<&Token> = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&presented)) {
                found = Some(token);
            }
        }
        let token =
            found.ok_or_else(|| Denied::Unauthenticated("the bearer token is not valid".into()))?;
        Ok(token.identity())
    }

    /// The rights of `owner` now (a static token's, or the policy's for
    /// the user and `groups`, what they had when they made a key or link),
    /// and who they are to fair use. `None` when the owner is no more (a
    /// token taken out of the configuration).
    fn owner_rights(&self, owner: &str, groups: &[String]) -> Option<(Arc<Rights>, Who)> {
        match owner.split_once(':') {
            Some(("token", name)) => {
                let token = self.tokens.iter().find(|t| t.name == name)?;
                let who = Who {
                    user: Some(name.to_string()),
                    groups: vec![],
                };
                Some((token.rights.clone(), who))
            }
            Some(("user", sub)) => {
                let who = Who {
                    user: Some(sub.to_string()),
                    groups: groups.to_vec(),
                };
                Some((Arc::new(self.policy_rights(&who)), who))
            }
            _ => None,
        }
    }

    /// The identity an API key gives: its owner's rights now, limited as
    /// the key says.
    pub fn key_identity(&self, key: &keys::KeyRecord) -> Option<Identity> {
        let (rights, who) = self.owner_rights(&key.owner, &key.groups)?;
        Some(Identity {
            name: Some(format!("key:{}", key.id)),
            rights: Arc::new(rights.limited(key.grant, &key.prefixes)),
            rate: self.fair.rate(&who),
            groups: vec![],
            owner: Some(key.owner.clone()),
            expires: Some(key.expires),
            stored: Some(Stored {
                kind: "keys",
                id: key.id.clone(),
            }),
        })
    }

    /// The identity a share link gives: reads of its node, as far as its
    /// maker may read there now. Its users draw on a fair-use share of
    /// the link's own.
    pub fn share_identity(&self, share: &shares::ShareRecord) -> Option<Identity> {
        let (rights, who) = self.owner_rights(&share.owner, &share.groups)?;
        let name = format!("share:{}", share.id);
        Some(Identity {
            name: Some(name.clone()),
            rights: Arc::new(rights.limited(Scope::Read, std::slice::from_ref(&share.path))),
            rate: self.fair.rate(&who),
            groups: vec![],
            owner: Some(name),
            expires: Some(share.expires),
            stored: Some(Stored {
                kind: "shares",
                id: share.id.clone(),
            }),
        })
    }

    /// The identity a browser session gives: its user's, with the groups
    /// the provider said at sign-in.
    pub fn session_identity(&self, session: &session::SessionRecord) -> Identity {
        let who = Who {
            user: Some(session.user.clone()),
            groups: session.groups.clone(),
        };
        let name = format!("user:{}", session.user);
        Identity {
            name: Some(name.clone()),
            rights: Arc::new(self.policy_rights(&who)),
            rate: self.fair.rate(&who),
            groups: session.groups.clone(),
            owner: Some(name),
            expires: Some(session.expires),
            stored: Some(Stored {
                kind: "sessions",
                id: session.id.clone(),
            }),
        }
    }

    /// The providers browsers may sign in with (those with a `client_id`),
    /// with their positions among the `[[oidc]]` tables.
    pub fn sign_in_issuers(&self) -> impl Iterator<Item = (usize, &oidc::Issuer)> {
        self.issuers
            .iter()
            .enumerate()
            .filter(|(_, i)| i.config.client_id.is_some())
    }

    /// The `[[oidc]]` table at `index`, if browsers may sign in with it.
    pub fn sign_in_issuer(&self, index: usize) -> Option<&oidc::Issuer> {
        self.issuers
            .get(index)
            .filter(|i| i.config.client_id.is_some())
    }

    /// Who signed an S3 request (SigV4), at time `now`: the signature must
    /// be the one the token of its access key id makes.
    pub fn identify_signed(
        &self,
        request: &sigv4::SignedRequest,
        now: std::time::SystemTime,
    ) -> Result<Identity, Denied> {
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
        Ok(token.identity())
    }

    /// Whether `who` may do `scope` on `path` (`None`: a route about the
    /// server, not a store path), reaching as far as `reach` says.
    pub fn judge(
        &self,
        who: &Identity,
        scope: Scope,
        path: Option<&str>,
        reach: Reach,
    ) -> Result<(), Denied> {
        let rights = &who.rights;
        let allowed = match (path, reach) {
            (None, _) => rights.has(scope),
            (Some(p), Reach::Lists) if scope == Scope::Read => rights.sees(p),
            (Some(p), Reach::Whole) if scope == Scope::Read => rights.reads_all_below(p),
            // What needs admin deletes or replaces what is below the path.
            (Some(p), Reach::Subtree) => rights.may_all_below(scope, p),
            (Some(p), _) => rights.may(scope, p),
        };
        if allowed {
            return Ok(());
        }
        // A group the caller may read only part of has no whole answer for
        // them, as if it were not there.
        let visible = reach != Reach::Whole && path.is_none_or(|p| rights.sees(p));
        match &who.name {
            None if self.open && scope != Scope::Read => Err(Denied::Forbidden("this server does not accept anonymous writes; start it with --allow-anonymous-writes or configure tokens".into())),
            None => Err(Denied::Unauthenticated(
                "this request needs a bearer token (Authorization: Bearer ...)".into(),
            )),
            Some(_) if !visible => Err(Denied::Hidden),
            Some(name) => Err(Denied::Forbidden(format!(
                "{name} may not {} here",
                match scope {
                    Scope::Read => "read",
                    Scope::Write => "write",
                    Scope::Admin => "administer",
                }
            ))),
        }
    }
}

impl Token {
    fn identity(&self) -> Identity {
        Identity {
            name: Some(format!("token:{}", self.name)),
            rights: self.rights.clone(),
            rate: self.rate,
            groups: vec![],
            owner: Some(format!("token:{}", self.name)),
            expires: None,
            stored: None,
        }
    }
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

    /// `auth` judging `header` for `scope` on `path`, as a by-name request.
    fn judged(
        auth: &Auth,
        header: Option<&str>,
        scope: Scope,
        path: Option<&str>,
    ) -> Result<(), Denied> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let who = runtime.block_on(auth.identify(header))?;
        auth.judge(&who, scope, path, Reach::Named)
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
        let reader = Some("Bearer reader-0123456789");
        let writer = Some("Bearer writer-0123456789");
        assert!(
            matches!(
                judged(&auth, None, Scope::Read, Some("x")),
                Err(Denied::Unauthenticated(_))
            ),
            "tokens close anonymous reads"
        );
        assert!(judged(&auth, reader, Scope::Read, Some("x")).is_ok());
        assert!(matches!(
            judged(&auth, reader, Scope::Write, Some("x")),
            Err(Denied::Forbidden(_))
        ));
        assert!(judged(&auth, writer, Scope::Write, Some("era5/t/c/0")).is_ok());
        assert!(
            judged(&auth, writer, Scope::Read, Some("era5")).is_ok(),
            "write implies read"
        );
        assert_eq!(
            judged(&auth, writer, Scope::Write, Some("era50/x")),
            Err(Denied::Hidden),
            "what a token may not read is not there for it"
        );
        // The server's own counters and S3's bucket list hold no keys.
        assert!(judged(&auth, writer, Scope::Read, None).is_ok());
        assert!(
            matches!(
                judged(&auth, writer, Scope::Read, Some("")),
                Err(Denied::Forbidden(_))
            ),
            "the root is the way to era5: seen, not read"
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let who = runtime.block_on(auth.identify(writer)).unwrap();
        assert!(
            auth.judge(&who, Scope::Read, Some(""), Reach::Lists)
                .is_ok(),
            "a listing of the root shows the way to era5"
        );
        assert!(matches!(
            judged(&auth, Some("Bearer wrong-0123456789"), Scope::Read, None),
            Err(Denied::Unauthenticated(_))
        ));
    }

    #[test]
    fn no_tokens_means_open_reads_and_closed_writes() {
        let auth = Auth::new(&[], None, None, false).unwrap();
        assert!(judged(&auth, None, Scope::Read, Some("a")).is_ok());
        assert!(matches!(
            judged(&auth, None, Scope::Write, Some("a")),
            Err(Denied::Forbidden(_))
        ));
        let open = Auth::new(&[], None, None, true).unwrap();
        assert!(judged(&open, None, Scope::Write, Some("a")).is_ok());
        assert!(judged(&open, None, Scope::Admin, Some("a")).is_ok());
    }

    #[test]
    fn the_policy_judges_anonymous_callers_and_providers_need_one() {
        let rules = [RuleConfig {
            path: "public".into(),
            grant: Scope::Read,
            to: vec!["anonymous".into()],
            deny: false,
        }];
        let policy = Identities {
            policy: rules.to_vec(),
            ..Default::default()
        };
        let auth = Auth::with_identities(&[], None, None, false, &policy).unwrap();
        assert!(judged(&auth, None, Scope::Read, Some("public/a")).is_ok());
        assert!(matches!(
            judged(&auth, None, Scope::Read, Some("private")),
            Err(Denied::Unauthenticated(_))
        ));
        let issuer = oidc::OidcConfig {
            issuer: "https://id.example".into(),
            audience: "zarrd".into(),
            groups_claim: "groups".into(),
            roles_claim: None,
            user_claim: "sub".into(),
            client_id: None,
            client_secret: None,
            scopes: vec![],
        };
        let lonely = Identities {
            oidc: vec![issuer],
            ..Default::default()
        };
        assert!(Auth::with_identities(&[], None, None, false, &lonely).is_err());
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
        assert!(judged(
            &auth,
            Some("Bearer hashed-secret-token-1"),
            Scope::Admin,
            None
        )
        .is_ok());
    }
}
