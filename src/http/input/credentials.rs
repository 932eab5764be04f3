//! Who a request says it comes from: what the authorization middleware
//! found ([`Caller`], for handlers whose scope depends on the stored data)
//! and the parts of a request a SigV4 signature covers.

use axum::http::{header, HeaderMap, Method};

/// What the authenticated caller may do beyond what the route needs, for
/// handlers whose scope depends on the stored data (a resize that shrinks,
/// a create that would make missing parents).
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub admin: bool,
    /// The prefix the caller's token is limited to here (see [`crate::auth::Grant`]).
    pub within: Option<String>,
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
