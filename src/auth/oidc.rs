//! OpenID Connect: bearer JWTs from the configured issuers. Each issuer's
//! signing keys are found by discovery (`/.well-known/openid-configuration`,
//! then its `jwks_uri`) on first use and kept; a token signed with a key
//! the set lacks (the provider rotated its keys) fetches the set again, at
//! most once per [`REFETCH_EVERY`], and a set older than [`KEYS_MAX_AGE`] is
//! fetched again on its next use. A token's signature (RS*, PS*, ES256,
//! ES384 or EdDSA; never HMAC or `none`), `iss`, `aud`, `exp` and `nbf` are
//! checked, with [`LEEWAY`] for clocks that differ.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::policy::Who;
use super::AuthConfigError;

/// Clock difference allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(60);
/// A key set is fetched again at most this often for unknown key ids, so
/// tokens with made-up ids cannot make the server hammer the provider.
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);
/// A key set this old is fetched again on its next use, so a key the
/// provider withdrew stops working.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);
/// Discovery documents and key sets larger than this are refused.
const MAX_DOCUMENT: usize = 1 << 20;

/// An `[[oidc]]` table as configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer URL, exactly as tokens' `iss` claims it.
    pub issuer: String,
    /// What tokens' `aud` must contain (the client id, for ID tokens).
    pub audience: String,
    /// The claim that lists a user's groups (a dotted path reaches into
    /// objects: `realm_access.roles`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// A claim of roles, added to the groups.
    #[serde(default)]
    pub roles_claim: Option<String>,
    /// The claim that names the user (`sub`, or `email`, `preferred_username`).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The viewer's client at this provider: with it, browsers sign in
    /// here (the authorization-code flow with PKCE), and its ID tokens
    /// must name it as their audience.
    #[serde(default)]
    pub client_id: Option<String>,
    /// For a confidential client (sent with HTTP Basic to the token endpoint).
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The scopes a browser sign-in asks for.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
}

fn default_scopes() -> Vec<String> {
    ["openid", "profile", "email"].map(String::from).to_vec()
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_user_claim() -> String {
    "sub".into()
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT at all: the caller may have meant a static token.
    #[error("not a JWT")]
    NotJwt,
    #[error("{0}")]
    Invalid(String),
    /// The issuer's keys could not be fetched.
    #[error("the identity provider {issuer} could not be reached: {reason}")]
    Unavailable { issuer: String, reason: String },
}

struct Keys {
    /// Where browsers sign in and codes are exchanged, if the provider says.
    endpoints: Option<Endpoints>,
    keys: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without a `kid`, tried in turn.
    anonymous: Vec<(DecodingKey, Option<Algorithm>)>,
    fetched: Instant,
}

/// One configured issuer and its cached keys.
pub struct Issuer {
    pub config: OidcConfig,
    keys: tokio::sync::RwLock<Option<Keys>>,
    /// Held while fetching, so concurrent requests share one fetch; it
    /// holds when the last fetch was tried and, if it failed, why: no
    /// fetch is tried again within [`REFETCH_EVERY`] of a failed one, so a
    /// provider that is down or slow is not asked once per request.
    fetching: tokio::sync::Mutex<Option<(Instant, Option<String>)>>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.config.issuer)
            .finish()
    }
}

/// A provider's endpoints for the authorization-code flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
}

/// The claims of a verified token that zarrd reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub who: Who,
    pub expires: u64,
}

impl Issuer {
    pub fn new(config: OidcConfig) -> Result<Issuer, AuthConfigError> {
        let bad = |reason: &str| AuthConfigError::Oidc {
            issuer: config.issuer.clone(),
            reason: reason.into(),
        };
        let url = url::Url::parse(&config.issuer).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(bad("the issuer must be an http(s) URL"));
        }
        if config.audience.is_empty() {
            return Err(bad("audience is empty"));
        }
        if config.client_id.as_deref() == Some("") {
            return Err(bad("client_id is empty"));
        }
        if config.client_secret.is_some() && config.client_id.is_none() {
            return Err(bad("client_secret needs the client_id it is for"));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| bad(&e.to_string()))?;
        Ok(Issuer {
            config,
            keys: tokio::sync::RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
            client,
        })
    }

    /// Verifies `token` (already known to name this issuer).
    pub async fn verify(&self, token: &str) -> Result<Verified, TokenError> {
        self.verify_for(token, &self.config.audience, None).await
    }

    /// Verifies an ID token of a browser sign-in: for the viewer's client,
    /// carrying the sign-in's nonce.
    pub async fn verify_id_token(&self, token: &str, nonce: &str) -> Result<Verified, TokenError> {
        let client = self
            .config
            .client_id
            .as_deref()
            .unwrap_or(&self.config.audience);
        self.verify_for(token, client, Some(nonce)).await
    }

    async fn verify_for(
        &self,
        token: &str,
        audience: &str,
        nonce: Option<&str>,
    ) -> Result<Verified, TokenError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| TokenError::Invalid(format!("the token's header: {e}")))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(TokenError::Invalid(
                "tokens signed with a shared secret (HS*) are not accepted".into(),
            ));
        }
        let kid = header.kid.as_deref();
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        let mut refetched = false;
        loop {
            let candidates = self.keys_for(kid).await?;
            let mut last = match kid {
                Some(kid) => format!(
                    "no key of {} has the id '{}'",
                    self.config.issuer,
                    kid.chars().take(64).collect::<String>()
                ),
                None => format!("no key of {} fits the token", self.config.issuer),
            };
            let mut signature_failed = candidates.is_empty();
            for (key, alg) in candidates {
                if alg.is_some_and(|a| a != header.alg) {
                    last = "the key's algorithm is not the token's".to_string();
                    continue;
                }
                match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                    token,
                    &key,
                    &validation,
                ) {
                    Ok(data) => {
                        if let Some(nonce) = nonce {
                            let said = data.claims.get("nonce").and_then(|n| n.as_str());
                            if said != Some(nonce) {
                                return Err(TokenError::Invalid(
                                    "the ID token is not of this sign-in (nonce)".into(),
                                ));
                            }
                        }
                        return self.claims(&data.claims);
                    }
                    Err(e) => {
                        signature_failed |=
                            matches!(e.kind(), jsonwebtoken::errors::ErrorKind::InvalidSignature);
                        last = describe(e.kind());
                    }
                }
            }
            // A key the set lacks, or (for tokens that name no key) one
            // no kept key verifies: the provider may have rotated its keys.
            let rotated = signature_failed && (kid.is_none() || last.starts_with("no key"));
            if refetched || !rotated || !self.may_refetch().await {
                return Err(TokenError::Invalid(last));
            }
            self.fetch().await?;
            refetched = true;
        }
    }

    fn claims(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Verified, TokenError> {
        let user = match claim(claims, &self.config.user_claim) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(TokenError::Invalid(format!(
                    "the token has no '{}' claim naming the user",
                    self.config.user_claim
                )))
            }
        };
        let mut groups = strings(claim(claims, &self.config.groups_claim));
        if let Some(roles) = &self.config.roles_claim {
            groups.extend(strings(claim(claims, roles)));
        }
        let expires = claims.get("exp").and_then(|v| v.as_u64()).unwrap_or(0);
        Ok(Verified {
            who: Who {
                user: Some(user),
                groups,
            },
            expires,
        })
    }

    /// The keys that may have signed a token with `kid`; fetched first if
    /// none are kept yet, or they are old.
    async fn keys_for(
        &self,
        kid: Option<&str>,
    ) -> Result<Vec<(DecodingKey, Option<Algorithm>)>, TokenError> {
        let stale = self
            .keys
            .read()
            .await
            .as_ref()
            .is_none_or(|k| k.fetched.elapsed() > KEYS_MAX_AGE);
        if stale {
            let fetched = self.fetch().await;
            // Keys kept from before serve on while the provider is away.
            if fetched.is_err() && self.keys.read().await.is_none() {
                fetched?;
            }
        }
        let keys = self.keys.read().await;
        let Some(keys) = keys.as_ref() else {
            return Ok(vec![]);
        };
        Ok(match kid {
            Some(kid) => keys.keys.get(kid).cloned().into_iter().collect(),
            // A token that names no key: any of them may have signed it.
            None => keys.keys.values().chain(&keys.anonymous).cloned().collect(),
        })
    }

    /// Whether a fetch for an unknown key id may go out now.
    async fn may_refetch(&self) -> bool {
        self.keys
            .read()
            .await
            .as_ref()
            .is_none_or(|k| k.fetched.elapsed() >= REFETCH_EVERY)
    }

    /// Discovery, then the key set; replaces the kept keys.
    async fn fetch(&self) -> Result<(), TokenError> {
        let before = self.keys.read().await.as_ref().map(|k| k.fetched);
        let mut last = self.fetching.lock().await;
        // Another request fetched while this one waited.
        if self.keys.read().await.as_ref().map(|k| k.fetched) != before {
            return Ok(());
        }
        let unavailable = |reason: String| TokenError::Unavailable {
            issuer: self.config.issuer.clone(),
            reason,
        };
        if let Some((at, Some(why))) = last.as_ref() {
            if at.elapsed() < REFETCH_EVERY {
                return Err(unavailable(why.clone()));
            }
        }
        let fetched = self.fetch_now().await;
        *last = Some((
            Instant::now(),
            fetched.as_ref().err().map(|e| match e {
                TokenError::Unavailable { reason, .. } => reason.clone(),
                other => other.to_string(),
            }),
        ));
        fetched
    }

    /// Discovery, then the key set, asked now.
    async fn fetch_now(&self) -> Result<(), TokenError> {
        let unavailable = |reason: String| TokenError::Unavailable {
            issuer: self.config.issuer.clone(),
            reason,
        };
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        #[derive(Deserialize)]
        struct Discovery {
            issuer: String,
            jwks_uri: String,
            authorization_endpoint: Option<String>,
            token_endpoint: Option<String>,
        }
        let discovery: Discovery =
            serde_json::from_slice(&self.get(&discovery_url).await.map_err(unavailable)?)
                .map_err(|e| unavailable(format!("{discovery_url}: {e}")))?;
        if discovery.issuer != self.config.issuer {
            return Err(unavailable(format!(
                "{discovery_url} names the issuer '{}'",
                discovery.issuer
            )));
        }
        // Each key read on its own: one of a kind the crate lacks (a curve,
        // a post-quantum key) must not hide the others.
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<serde_json::Value>,
        }
        let listed: Set =
            serde_json::from_slice(&self.get(&discovery.jwks_uri).await.map_err(unavailable)?)
                .map_err(|e| unavailable(format!("{}: {e}", discovery.jwks_uri)))?;
        let set = JwkSet {
            keys: listed
                .keys
                .into_iter()
                .filter_map(|k| serde_json::from_value(k).ok())
                .collect(),
        };
        let endpoints = match (discovery.authorization_endpoint, discovery.token_endpoint) {
            (Some(authorization), Some(token)) => Some(Endpoints {
                authorization,
                token,
            }),
            _ => None,
        };
        let mut keys = Keys {
            endpoints,
            keys: HashMap::new(),
            anonymous: vec![],
            fetched: Instant::now(),
        };
        for jwk in &set.keys {
            // Keys for encryption, or of kinds the crate lacks, sign nothing here.
            if jwk.common.public_key_use == Some(jsonwebtoken::jwk::PublicKeyUse::Encryption) {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.keys.insert(kid.clone(), (key, alg));
                }
                None => keys.anonymous.push((key, alg)),
            }
        }
        tracing::info!(issuer = %self.config.issuer, keys = set.keys.len(), "fetched the identity provider's keys");
        *self.keys.write().await = Some(keys);
        Ok(())
    }

    /// The provider's endpoints for browser sign-in, by discovery.
    pub async fn endpoints(&self) -> Result<Endpoints, TokenError> {
        self.keys_for(None).await?;
        self.keys
            .read()
            .await
            .as_ref()
            .and_then(|k| k.endpoints.clone())
            .ok_or_else(|| TokenError::Unavailable {
                issuer: self.config.issuer.clone(),
                reason: "its discovery document names no authorization_endpoint and token_endpoint"
                    .into(),
            })
    }

    /// Exchanges a sign-in's code (with its PKCE verifier) for tokens, and
    /// verifies the ID token among them.
    pub async fn exchange(
        &self,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
        nonce: &str,
    ) -> Result<Verified, TokenError> {
        let endpoints = self.endpoints().await?;
        let client_id = self.config.client_id.as_deref().unwrap_or_default();
        // Built whole before any await: the serializer is not Send.
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_verifier", verifier)
            .append_pair("client_id", client_id)
            .finish();
        let mut request = self
            .client
            .post(&endpoints.token)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        if let Some(secret) = &self.config.client_secret {
            // RFC 6749 2.3.1: both parts form-encoded first.
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(client_id),
                encode(secret)
            ));
            request = request.header("authorization", format!("Basic {basic}"));
        }
        let url = &endpoints.token;
        let body = self.read(request.body(form), url).await.map_err(|reason| {
            TokenError::Invalid(format!("the provider refused the sign-in: {reason}"))
        })?;
        #[derive(Deserialize)]
        struct Tokens {
            id_token: String,
        }
        let tokens: Tokens = serde_json::from_slice(&body)
            .map_err(|e| TokenError::Invalid(format!("{url}: no ID token in the answer: {e}")))?;
        self.verify_id_token(&tokens.id_token, nonce).await
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        let request = self.client.get(url).header("accept", "application/json");
        self.read(request, url).await
    }

    /// A request's answer, if a success no larger than [`MAX_DOCUMENT`].
    async fn read(&self, request: reqwest::RequestBuilder, url: &str) -> Result<Vec<u8>, String> {
        let mut response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            let status = response.status();
            // A refusal's own words (OAuth's `error`), briefly: at most a
            // few KiB of its body are read.
            let mut said = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                said.extend_from_slice(&chunk);
                if said.len() >= 4096 {
                    break;
                }
            }
            let said: String = String::from_utf8_lossy(&said).chars().take(200).collect();
            return Err(format!("{url}: {status} {said}").trim_end().to_string());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT {
                return Err(format!("{url}: larger than {MAX_DOCUMENT} bytes"));
            }
        }
        Ok(body)
    }
}

/// A claim by its dotted path.
fn claim<'a>(
    claims: &'a serde_json::Map<String, serde_json::Value>,
    path: &str,
) -> Option<&'a serde_json::Value> {
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    let mut parts = path.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some(value)
}

/// A claim's strings: a list of them, or one.
fn strings(value: Option<&serde_json::Value>) -> Vec<String> {
    match value {
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => vec![],
    }
}

fn describe(kind: &jsonwebtoken::errors::ErrorKind) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidAudience => "the token is for another audience".into(),
        K::InvalidIssuer => "the token is from another issuer".into(),
        K::InvalidSignature => "the token's signature does not match".into(),
        K::MissingRequiredClaim(c) => format!("the token has no '{c}' claim"),
        other => format!("the token is not valid: {other:?}"),
    }
}

/// The `iss` a token claims, read without checking anything: which
/// issuer's keys to check it with. `Err(NotJwt)` for what is no JWT.
pub fn claimed_issuer(token: &str) -> Result<String, TokenError> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::NotJwt);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| TokenError::NotJwt)?;
    #[derive(Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    let iss: Iss = serde_json::from_slice(&bytes).map_err(|_| TokenError::NotJwt)?;
    iss.iss
        .ok_or_else(|| TokenError::Invalid("the token has no 'iss' claim".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issuer_is_read_from_the_payload_and_non_jwts_are_told_apart() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"iss":"https://id.example","sub":"a"}"#);
        assert_eq!(
            claimed_issuer(&format!("e30.{payload}.sig")).unwrap(),
            "https://id.example"
        );
        assert_eq!(
            claimed_issuer("static-token-0123456789"),
            Err(TokenError::NotJwt)
        );
        assert_eq!(claimed_issuer("a.b.c.d"), Err(TokenError::NotJwt));
        let no_iss = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"a"}"#);
        assert!(matches!(
            claimed_issuer(&format!("e30.{no_iss}.sig")),
            Err(TokenError::Invalid(_))
        ));
    }

    #[test]
    fn claims_are_found_by_dotted_paths() {
        let claims: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
            r#"{"sub":"u1","email":"u@x","groups":["a","b"],"realm_access":{"roles":["r"]},"one":"g"}"#,
        )
        .unwrap();
        assert_eq!(strings(claim(&claims, "groups")), ["a", "b"]);
        assert_eq!(strings(claim(&claims, "realm_access.roles")), ["r"]);
        assert_eq!(strings(claim(&claims, "one")), ["g"]);
        assert!(strings(claim(&claims, "missing.x")).is_empty());
        let issuer = Issuer::new(OidcConfig {
            issuer: "https://id.example".into(),
            audience: "zarrd".into(),
            groups_claim: "groups".into(),
            roles_claim: Some("realm_access.roles".into()),
            user_claim: "email".into(),
            client_id: None,
            client_secret: None,
            scopes: vec![],
        })
        .unwrap();
        let v = issuer.claims(&claims).unwrap();
        assert_eq!(v.who.user.as_deref(), Some("u@x"));
        assert_eq!(v.who.groups, ["a", "b", "r"]);
    }
}
