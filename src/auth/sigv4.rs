//! AWS Signature Version 4, as S3 clients sign requests: the `Authorization`
//! header form and the presigned-URL form. A token with an access key id
//! signs with the token itself as its secret access key.
//!
//! What is checked: the signature over the method, the path as sent, the
//! query, every header named in `SignedHeaders` (which must include `host`)
//! and the payload hash the client declared; the credential scope's date
//! against `X-Amz-Date`; the request time within 15 minutes of the server's
//! clock; a presigned URL's expiry. The region is not checked (zarrd has
//! none), and the service must be `s3`. Bodies are not hashed: the routes
//! that accept signatures are reads without a body.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// How far a request's time may be from the server's.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// The longest validity a presigned URL may claim (S3's own limit: 7 days).
const MAX_EXPIRES: u64 = 7 * 24 * 3600;

/// What S3 leaves unescaped in canonical query strings: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The parts of a request a signature covers, without HTTP types.
#[derive(Debug)]
pub struct SignedRequest<'a> {
    pub method: &'a str,
    /// The path as sent (still percent-encoded).
    pub path: &'a str,
    /// The query as sent, without `?`.
    pub query: &'a str,
    /// Header names (any case) and values.
    pub headers: Vec<(&'a str, &'a str)>,
    /// The `Authorization` header, when the signature is there.
    pub authorization: Option<&'a str>,
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigError {
    #[error("the signature is malformed: {0}")]
    Malformed(String),
    #[error("the request time is more than 15 minutes from the server's")]
    Skewed,
    #[error("the presigned URL has expired")]
    Expired,
    #[error("the signature does not match the request")]
    Mismatch,
}

/// A signature's claims, read from the header or the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub access_key: String,
    date: String,
    region: String,
    service: String,
    signed_headers: Vec<String>,
    signature: String,
    /// `X-Amz-Date` (`20261123T101500Z`).
    amz_date: String,
    /// Seconds a presigned URL is valid for; `None` for the header form.
    expires: Option<u64>,
}

fn malformed(why: impl Into<String>) -> SigError {
    SigError::Malformed(why.into())
}

impl SignedRequest<'_> {
    /// Whether the request carries a SigV4 signature at all.
    pub fn is_signed(&self) -> bool {
        self.authorization
            .is_some_and(|a| a.starts_with(&format!("{ALGORITHM} ")))
            || self.query_pairs().any(|(k, _)| k == "X-Amz-Algorithm")
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The query's names and values, decoded as the handlers decode them
    /// (`+` is a space), as bytes: what the signature must cover.
    fn raw_pairs(&self) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
        self.query.split('&').filter(|p| !p.is_empty()).map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let decode = |s: &str| percent_decode_str(&s.replace('+', "%20")).collect::<Vec<u8>>();
            (decode(k), decode(v))
        })
    }

    fn query_pairs(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.raw_pairs().map(|(k, v)| {
            (
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
    }

    /// The claims of the signature, from the header or a presigned query.
    pub fn credential(&self) -> Result<Credential, SigError> {
        if let Some(rest) = self
            .authorization
            .and_then(|a| a.strip_prefix(&format!("{ALGORITHM} ")))
        {
            let mut credential = None;
            let mut signed = None;
            let mut signature = None;
            for part in rest.split(',') {
                let (k, v) = part
                    .trim()
                    .split_once('=')
                    .ok_or_else(|| malformed("the Authorization header has a part without '='"))?;
                match k {
                    "Credential" => credential = Some(v),
                    "SignedHeaders" => signed = Some(v),
                    "Signature" => signature = Some(v),
                    _ => {}
                }
            }
            let amz_date = self
                .header("x-amz-date")
                .ok_or_else(|| malformed("X-Amz-Date is missing"))?;
            return Credential::new(
                credential.ok_or_else(|| malformed("Credential is missing"))?,
                signed.ok_or_else(|| malformed("SignedHeaders is missing"))?,
                signature.ok_or_else(|| malformed("Signature is missing"))?,
                amz_date,
                None,
            );
        }
        let pairs: Vec<(String, String)> = self.query_pairs().collect();
        if pairs
            .iter()
            .filter(|(k, _)| k.starts_with("X-Amz-"))
            .count()
            != pairs
                .iter()
                .filter(|(k, _)| k.starts_with("X-Amz-"))
                .map(|(k, _)| k)
                .collect::<std::collections::HashSet<_>>()
                .len()
        {
            return Err(malformed("a signing parameter is given twice"));
        }
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .ok_or_else(|| malformed(format!("{name} is missing from the query")))
        };
        if get("X-Amz-Algorithm")? != ALGORITHM {
            return Err(malformed(format!("only {ALGORITHM} is supported")));
        }
        let expires = get("X-Amz-Expires")?
            .parse::<u64>()
            .ok()
            .filter(|e| *e <= MAX_EXPIRES)
            .ok_or_else(|| malformed("X-Amz-Expires must be seconds up to 604800"))?;
        Credential::new(
            get("X-Amz-Credential")?,
            get("X-Amz-SignedHeaders")?,
            get("X-Amz-Signature")?,
            get("X-Amz-Date")?,
            Some(expires),
        )
    }

    /// The canonical request (the AWS documentation's name and layout).
    fn canonical(&self, credential: &Credential) -> Result<String, SigError> {
        let presigned = credential.expires.is_some();
        let mut query: Vec<(String, String)> = self
            .raw_pairs()
            .filter(|(k, _)| !(presigned && k == b"X-Amz-Signature"))
            .map(|(k, v)| {
                (
                    percent_encode(&k, UNRESERVED).to_string(),
                    percent_encode(&v, UNRESERVED).to_string(),
                )
            })
            .collect();
        query.sort();
        let query = query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let mut headers = String::new();
        for name in &credential.signed_headers {
            let value = self.header(name).ok_or_else(|| {
                malformed(format!("signed header '{name}' is not in the request"))
            })?;
            let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
            headers.push_str(&format!("{name}:{value}\n"));
        }
        let payload = match self.header("x-amz-content-sha256") {
            Some(hash) => hash.to_string(),
            None if presigned => "UNSIGNED-PAYLOAD".to_string(),
            None => hex::encode(Sha256::digest(b"")),
        };
        Ok(format!(
            "{}\n{}\n{query}\n{headers}\n{}\n{payload}",
            self.method,
            if self.path.is_empty() { "/" } else { self.path },
            credential.signed_headers.join(";"),
        ))
    }

    /// Check the signature against `secret`, at time `now`.
    pub fn verify(
        &self,
        credential: &Credential,
        secret: &str,
        now: SystemTime,
    ) -> Result<(), SigError> {
        let at = parse_amz_date(&credential.amz_date)?;
        let now_secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        match credential.expires {
            Some(expires) => {
                // Not valid before it was signed (give or take the skew), nor after it expires.
                if now_secs + SKEW.as_secs() < at {
                    return Err(SigError::Skewed);
                }
                if now_secs > at.saturating_add(expires) {
                    return Err(SigError::Expired);
                }
            }
            None => {
                if now_secs.abs_diff(at) > SKEW.as_secs() {
                    return Err(SigError::Skewed);
                }
            }
        }
        let canonical = self.canonical(credential)?;
        let scope = format!(
            "{}/{}/{}/aws4_request",
            credential.date, credential.region, credential.service
        );
        let to_sign = format!(
            "{ALGORITHM}\n{}\n{scope}\n{}",
            credential.amz_date,
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{secret}").as_bytes(),
            credential.date.as_bytes(),
        );
        for part in [&credential.region, &credential.service, "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let expected = hex::encode(hmac(&key, to_sign.as_bytes()));
        if bool::from(expected.as_bytes().ct_eq(credential.signature.as_bytes())) {
            Ok(())
        } else {
            Err(SigError::Mismatch)
        }
    }
}

impl Credential {
    fn new(
        credential: &str,
        signed_headers: &str,
        signature: &str,
        amz_date: &str,
        expires: Option<u64>,
    ) -> Result<Credential, SigError> {
        let parts: Vec<&str> = credential.split('/').collect();
        let [access_key, date, region, service, "aws4_request"] = parts[..] else {
            return Err(malformed(
                "Credential must be KEY/DATE/REGION/SERVICE/aws4_request",
            ));
        };
        if service != "s3" {
            return Err(malformed(format!(
                "the credential is for service '{service}', not s3"
            )));
        }
        if !amz_date.starts_with(date) || date.len() != 8 {
            return Err(malformed(
                "the credential's date is not the date of X-Amz-Date",
            ));
        }
        let signed_headers: Vec<String> = signed_headers
            .split(';')
            .map(|h| h.to_ascii_lowercase())
            .collect();
        if !signed_headers.iter().any(|h| h == "host") {
            return Err(malformed("SignedHeaders must include host"));
        }
        Ok(Credential {
            access_key: access_key.to_string(),
            date: date.to_string(),
            region: region.to_string(),
            service: service.to_string(),
            signed_headers,
            signature: signature.to_ascii_lowercase(),
            amz_date: amz_date.to_string(),
            expires,
        })
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length; this cannot fail.
    let mut mac =
        <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Seconds since the epoch of an `X-Amz-Date` (`YYYYMMDDTHHMMSSZ`).
fn parse_amz_date(s: &str) -> Result<u64, SigError> {
    let bad = || malformed(format!("X-Amz-Date '{s}' is not YYYYMMDDTHHMMSSZ"));
    let parsed = chrono::NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%SZ").map_err(|_| bad())?;
    u64::try_from(parsed.and_utc().timestamp()).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GET Object example of the AWS SigV4 documentation for S3
    /// ("Example: GET Object"), with its published signature.
    fn aws_example() -> (Vec<(&'static str, &'static str)>, &'static str) {
        (
            vec![
                ("Host", "examplebucket.s3.amazonaws.com"),
                ("Range", "bytes=0-9"),
                (
                    "x-amz-content-sha256",
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                ),
                ("x-amz-date", "20130524T000000Z"),
            ],
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        )
    }

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn at(amz: &str) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(parse_amz_date(amz).unwrap())
    }

    #[test]
    fn the_documented_example_verifies_and_any_change_breaks_it() {
        let (headers, authorization) = aws_example();
        let request = SignedRequest {
            method: "GET",
            path: "/test.txt",
            query: "",
            headers: headers.clone(),
            authorization: Some(authorization),
        };
        assert!(request.is_signed());
        let credential = request.credential().unwrap();
        assert_eq!(credential.access_key, "AKIAIOSFODNN7EXAMPLE");
        let now = at("20130524T000500Z");
        assert_eq!(request.verify(&credential, SECRET, now), Ok(()));
        assert_eq!(
            request.verify(&credential, "another secret", now),
            Err(SigError::Mismatch)
        );
        let other_path = SignedRequest {
            path: "/test.txb",
            ..request
        };
        assert_eq!(
            other_path.verify(&credential, SECRET, now),
            Err(SigError::Mismatch)
        );
        let mut other_range = headers.clone();
        other_range[1].1 = "bytes=0-99";
        let other_range = SignedRequest {
            headers: other_range,
            ..other_path
        };
        let other_range = SignedRequest {
            path: "/test.txt",
            ..other_range
        };
        assert_eq!(
            other_range.verify(&credential, SECRET, now),
            Err(SigError::Mismatch)
        );
        assert_eq!(
            other_range.verify(&credential, SECRET, at("20130524T003000Z")),
            Err(SigError::Skewed)
        );
    }

    /// The presigned-URL example of the AWS documentation ("Authenticating
    /// Requests: Using Query Parameters").
    #[test]
    fn the_documented_presigned_url_verifies_until_it_expires() {
        let query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
        let request = SignedRequest {
            method: "GET",
            path: "/test.txt",
            query,
            headers: vec![("host", "examplebucket.s3.amazonaws.com")],
            authorization: None,
        };
        assert!(request.is_signed());
        let credential = request.credential().unwrap();
        assert_eq!(
            request.verify(&credential, SECRET, at("20130524T120000Z")),
            Ok(())
        );
        assert_eq!(
            request.verify(&credential, SECRET, at("20130525T000001Z")),
            Err(SigError::Expired)
        );
    }

    #[test]
    fn the_query_is_covered_as_the_handlers_read_it() {
        let signed = |query: &'static str| SignedRequest {
            method: "GET",
            path: "/s3/zarr",
            query,
            headers: vec![("host", "h")],
            authorization: None,
        };
        let canonical = |query| {
            let credential = Credential::new(
                "AK/20130524/us-east-1/s3/aws4_request",
                "host",
                "00",
                "20130524T000000Z",
                None,
            )
            .unwrap();
            signed(query).canonical(&credential).unwrap()
        };
        // `+` is a space to the handlers; `%2B` is a plus: they must sign differently.
        assert_ne!(canonical("prefix=a%2Bb"), canonical("prefix=a+b"));
        assert_eq!(canonical("prefix=a+b"), canonical("prefix=a%20b"));
        assert_ne!(canonical("prefix=%FF"), canonical("prefix=%FE"));
        let twice = signed("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=1&X-Amz-Signature=2");
        assert!(matches!(twice.credential(), Err(SigError::Malformed(_))));
    }

    #[test]
    fn malformed_signatures_are_named() {
        for authorization in [
            "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request",
            "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/ec2/aws4_request,SignedHeaders=host,Signature=00",
            "AWS4-HMAC-SHA256 Credential=AK/20130525/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=00",
            "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request,SignedHeaders=range,Signature=00",
            "AWS4-HMAC-SHA256 garbage",
        ] {
            let request = SignedRequest {
                method: "GET",
                path: "/",
                query: "",
                headers: vec![("x-amz-date", "20130524T000000Z"), ("host", "h")],
                authorization: Some(authorization),
            };
            assert!(
                matches!(request.credential(), Err(SigError::Malformed(_))),
                "{authorization}"
            );
        }
        let bearer = SignedRequest {
            method: "GET",
            path: "/",
            query: "prefix=a",
            headers: vec![],
            authorization: Some("Bearer x"),
        };
        assert!(!bearer.is_signed());
    }
}
