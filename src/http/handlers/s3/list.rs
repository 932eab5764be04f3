//! ListObjectsV2 and ListObjects (v1) of the `zarr` bucket: the query,
//! pages of a listing, and S3's XML for them.

use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::{BUCKET, XMLNS};
use crate::http::error::{ApiError, ApiResult};
use crate::http::output::xml;
use crate::service::Listed;
use crate::store::chrono_like::Timestamp;

/// S3's most keys per page, and the default.
pub const MAX_KEYS: usize = 1000;

/// What `encoding-type=url` leaves as it is (what S3 leaves: unreserved and `/`).
const URL_KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// The parameters of a listing request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub v2: bool,
    pub prefix: String,
    pub delimiter: Option<String>,
    pub max_keys: usize,
    /// Where the page starts: after this key (`start-after`, `marker`, or
    /// the continuation token's key, whichever is furthest).
    pub after: Option<String>,
    /// The continuation token as sent, echoed in the answer.
    pub continuation: Option<String>,
    pub start_after: Option<String>,
    pub marker: Option<String>,
    pub url_encoded: bool,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_argument", message)
}

impl ListQuery {
    pub fn parse(pairs: &[(String, String)]) -> ApiResult<ListQuery> {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let v2 = match get("list-type").as_deref() {
            None | Some("1") => false,
            Some("2") => true,
            Some(other) => return Err(invalid(format!("list-type '{other}' is not 1 or 2"))),
        };
        let max_keys = match get("max-keys") {
            None => MAX_KEYS,
            Some(n) => n
                .parse::<usize>()
                .map_err(|_| invalid(format!("max-keys '{n}' is not a count of keys")))?
                .min(MAX_KEYS),
        };
        let url_encoded = match get("encoding-type").as_deref() {
            None => false,
            Some("url") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "encoding-type '{other}' is not supported (only 'url')"
                )))
            }
        };
        // No key holds a control character or U+FFFE / U+FFFF, and XML 1.0
        // cannot carry them.
        for name in ["prefix", "delimiter", "start-after", "marker"] {
            let unfit = |c: char| c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}';
            if get(name).is_some_and(|v| v.chars().any(unfit)) {
                return Err(invalid(format!(
                    "{name} holds a character XML cannot carry (a control character, U+FFFE or U+FFFF)"
                )));
            }
        }
        let continuation = get("continuation-token").filter(|_| v2);
        let token_key = match &continuation {
            Some(token) => Some(decode_token(token)?),
            None => None,
        };
        let start_after = get("start-after").filter(|_| v2);
        let marker = get("marker").filter(|_| !v2);
        let after = [token_key, start_after.clone(), marker.clone()]
            .into_iter()
            .flatten()
            .max();
        Ok(ListQuery {
            v2,
            prefix: get("prefix").unwrap_or_default(),
            delimiter: get("delimiter").filter(|d| !d.is_empty()),
            max_keys,
            after,
            continuation,
            start_after,
            marker,
            url_encoded,
        })
    }
}

/// The continuation token of a page that ended at `key`: opaque to clients.
fn encode_token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

fn decode_token(token: &str) -> ApiResult<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| invalid("the continuation token is not one this server gave"))
}

fn iso8601(t: Timestamp) -> String {
    chrono::DateTime::from_timestamp_millis(t.millis())
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// The XML document of a page.
pub fn render(query: &ListQuery, entries: &[Listed], truncated: bool) -> String {
    let text = |s: &str| {
        if query.url_encoded {
            xml::escape(&utf8_percent_encode(s, URL_KEY).to_string())
        } else {
            xml::escape(s)
        }
    };
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"{XMLNS}\"><Name>{BUCKET}</Name><Prefix>{}</Prefix>",
        text(&query.prefix)
    );
    if let Some(d) = &query.delimiter {
        xml.push_str(&format!("<Delimiter>{}</Delimiter>", text(d)));
    }
    xml.push_str(&format!(
        "<MaxKeys>{}</MaxKeys><IsTruncated>{truncated}</IsTruncated>",
        query.max_keys
    ));
    if query.url_encoded {
        xml.push_str("<EncodingType>url</EncodingType>");
    }
    let last = entries.last().map(|e| e.key());
    if query.v2 {
        xml.push_str(&format!("<KeyCount>{}</KeyCount>", entries.len()));
        if let Some(token) = &query.continuation {
            xml.push_str(&format!(
                "<ContinuationToken>{}</ContinuationToken>",
                xml::escape(token)
            ));
        }
        if let Some(s) = &query.start_after {
            xml.push_str(&format!("<StartAfter>{}</StartAfter>", text(s)));
        }
        if let (true, Some(last)) = (truncated, last) {
            xml.push_str(&format!(
                "<NextContinuationToken>{}</NextContinuationToken>",
                encode_token(last)
            ));
        }
    } else {
        xml.push_str(&format!(
            "<Marker>{}</Marker>",
            text(query.marker.as_deref().unwrap_or(""))
        ));
        if let (true, Some(last)) = (truncated, last) {
            xml.push_str(&format!("<NextMarker>{}</NextMarker>", text(last)));
        }
    }
    for entry in entries {
        match entry {
            Listed::Value { key, meta } => {
                xml.push_str(&format!(
                    "<Contents><Key>{}</Key><LastModified>{}</LastModified>",
                    text(key),
                    iso8601(meta.last_modified)
                ));
                if let Some(tag) = &meta.version.e_tag {
                    xml.push_str(&format!(
                        "<ETag>{}</ETag>",
                        xml::escape(&crate::http::handlers::raw::quote_etag(tag))
                    ));
                }
                xml.push_str(&format!(
                    "<Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
                    meta.size
                ));
            }
            Listed::Prefix(p) => {
                xml.push_str(&format!(
                    "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
                    text(p)
                ));
            }
        }
    }
    xml.push_str("</ListBucketResult>\n");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::KeyMeta;

    fn pairs(q: &str) -> Vec<(String, String)> {
        url::form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    fn listed(keys: &[&str]) -> Vec<Listed> {
        keys.iter()
            .map(|k| match k.strip_suffix('/') {
                Some(_) => Listed::Prefix(k.to_string()),
                None => Listed::Value {
                    key: k.to_string(),
                    meta: KeyMeta {
                        size: 3,
                        version: crate::store::Version {
                            e_tag: Some("e1".into()),
                            version: None,
                        },
                        last_modified: Timestamp::from_millis(1_700_000_000_123),
                    },
                },
            })
            .collect()
    }

    #[test]
    fn what_xml_cannot_carry_is_refused_or_replaced() {
        let refused = ListQuery::parse(&pairs("list-type=2&prefix=a%EF%BF%BE"));
        assert!(refused.is_err());
        assert_eq!(
            xml::escape("a\u{FFFF}<b\u{1}\t"),
            "a\u{FFFD}&lt;b\u{FFFD}\t"
        );
    }

    #[test]
    fn continuation_tokens_name_the_last_entry_even_a_common_prefix() {
        let all = listed(&["a/", "b", "c/", "d"]);
        let first = ListQuery::parse(&pairs("list-type=2&max-keys=2&delimiter=/")).unwrap();
        let xml = render(&first, &all[..2], true);
        let token = xml
            .split("<NextContinuationToken>")
            .nth(1)
            .and_then(|s| s.split('<').next())
            .unwrap();
        let second = ListQuery::parse(&pairs(&format!(
            "list-type=2&max-keys=2&delimiter=/&continuation-token={token}"
        )))
        .unwrap();
        assert_eq!(
            second.after.as_deref(),
            Some("b"),
            "the token names the last entry"
        );
        let xml = render(&second, &all[2..], false);
        assert!(xml.contains("<KeyCount>2</KeyCount>"), "{xml}");
        assert!(xml.contains("<CommonPrefixes><Prefix>c/</Prefix></CommonPrefixes>"));
        assert!(xml.contains("<Contents><Key>d</Key><LastModified>2023-11-14T22:13:20.123Z</LastModified><ETag>&quot;e1&quot;</ETag><Size>3</Size>"), "{xml}");
        assert!(!xml.contains("NextContinuationToken"));
    }

    #[test]
    fn start_after_markers_and_url_encoding() {
        let all = listed(&["a b+c", "x/"]);
        let q = ListQuery::parse(&pairs("start-after=a&encoding-type=url&list-type=2")).unwrap();
        assert_eq!(q.after.as_deref(), Some("a"));
        let xml = render(&q, &all, false);
        assert!(xml.contains("<Key>a%20b%2Bc</Key>"), "{xml}");
        assert!(xml.contains("<EncodingType>url</EncodingType>"));
        let v1 = ListQuery::parse(&pairs("marker=a%20b%2Bc&max-keys=5")).unwrap();
        assert!(!v1.v2);
        assert_eq!(v1.after.as_deref(), Some("a b+c"));
        assert!(render(&v1, &[], false).contains("<Marker>a b+c</Marker>"));
    }

    #[test]
    fn bad_parameters_are_named() {
        for q in [
            "list-type=3",
            "max-keys=-1",
            "max-keys=ten",
            "encoding-type=base64",
            "list-type=2&continuation-token=%%%",
            "prefix=%00%01",
            "delimiter=%0A",
        ] {
            let e = ListQuery::parse(&pairs(q)).unwrap_err();
            assert_eq!(e.code, "invalid_argument", "{q}");
        }
        let capped = ListQuery::parse(&pairs("max-keys=100000")).unwrap();
        assert_eq!(capped.max_keys, MAX_KEYS);
    }
}
