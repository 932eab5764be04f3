//! Who a request says it comes from: what the authorization middleware
//! found ([`Caller`], for handlers whose scope depends on the stored data)
//! and the parts of a request a SigV4 signature covers.

use axum::http::{header, HeaderMap, Method};

/// Who the caller is and what they may do, for handlers whose answer
/// depends on it: scopes that depend on the stored data (a resize that
/// shrinks, a create that would make missing parents), and listings,
/// which show only what the caller may see.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Whether the caller may administer the path the request is about.
    pub admin: bool,
    /// Where groups a create makes may begin (`None`: at the root).
    pub within: Option<String>,
    /// `token:NAME` or `user:SUB`; `None` for an anonymous caller.
    pub name: Option<String>,
    pub rights: std::sync::Arc<crate::auth::Rights>,
    /// The rates the caller is held to, and whose buckets they draw from
    /// (their name, or for anonymous callers their address).
    pub rate: Option<crate::auth::fair::Rate>,
    pub bucket: Option<String>,
    /// A user's groups (kept in the API keys they mint).
    pub groups: Vec<String>,
    /// When the credential stops being valid (seconds since the Unix epoch).
    pub expires: Option<u64>,
    /// The record on the store the credential was found by.
    pub stored: Option<crate::auth::Stored>,
}

/// The node a share link reads: the root of the paths below it.
#[derive(Debug, Clone)]
pub struct SharedRoot(pub String);

/// The address a request's connection comes from.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::IpAddr);

impl Caller {
    /// Whether the caller may read `path`; `None` (no caller: a request
    /// the middleware did not judge) may.
    pub fn reads(caller: Option<&Caller>, path: &str) -> bool {
        caller.is_none_or(|c| c.rights.may(crate::auth::Scope::Read, path))
    }

    /// Whether `path` shows in a listing for the caller.
    pub fn sees(caller: Option<&Caller>, path: &str) -> bool {
        caller.is_none_or(|c| c.rights.sees(path))
    }

    /// Whether the caller may read all of the group at `path`: what an
    /// array's coordinates (its group's other arrays) are read from.
    pub fn reads_whole(caller: Option<&Caller>, path: &str) -> bool {
        caller.is_none_or(|c| c.rights.reads_all_below(path))
    }

    /// Whether a listing at `path` needs filtering for the caller.
    pub fn filters(caller: Option<&Caller>, path: &str) -> bool {
        caller.is_some_and(|c| !c.rights.reads_all_below(path))
    }
}

/// The headers a SigV4 signature covers, for the authorization middleware.
pub fn signed_parts<'a>(
    method: &'a Method,
    uri: &'a axum::http::Uri,
    headers: &'a HeaderMap,
) -> crate::auth::sigv4::SignedRequest<'a> {
    let mut pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
        .collect();
    // HTTP/2 carries the host in the request's authority, not a header.
    if !headers.contains_key(header::HOST) {
        if let Some(authority) = uri.authority() {
            pairs.push(("host", authority.as_str()));
        }
    }
    crate::auth::sigv4::SignedRequest {
        method: method.as_str(),
        path: uri.path(),
        query: uri.query().unwrap_or(""),
        headers: pairs,
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    }
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", "a=1; zarrd_session=zss_x_y".parse().unwrap());
        headers.append("cookie", "b=2".parse().unwrap());
        assert_eq!(
            cookie(&headers, crate::auth::session::COOKIE),
            Some("zss_x_y")
        );
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "c"), None);
    }
}
