//! The audit log: one line (target `zarrd::audit`) for every write and
//! every refused request, with who asked (and for an API key, whose it
//! is), the route, the path and what came of it. Reads that pass are the
//! access log's.

use std::borrow::Cow;

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;

/// A request path as logs write it: a share link's secret left out (its
/// id kept), since the link's text is its credential.
pub fn loggable(path: &str) -> Cow<'_, str> {
    let Some(rest) = path.strip_prefix("/share/") else {
        return Cow::Borrowed(path);
    };
    let (link, below) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let id = crate::auth::shares::presented(link).map_or("?", |l| l.id);
    Cow::Owned(format!("/share/zs_{id}_…{below}"))
}

fn route(request: &Request) -> &str {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or("", |m| m.as_str())
}

/// A refused request; `who` is `None` when the caller is anonymous or
/// could not be identified, `owner` whose share they draw on.
pub fn refused(request: &Request, who: Option<&str>, owner: Option<&str>, status: StatusCode) {
    tracing::info!(
        target: "zarrd::audit",
        who = who.unwrap_or("anonymous"),
        owner = owner.unwrap_or("-"),
        method = %request.method(),
        route = route(request),
        path = %loggable(request.uri().path()),
        status = status.as_u16(),
        outcome = "refused",
    );
}

/// A write let through, logged once its handler answered.
pub struct Written {
    who: Option<String>,
    owner: Option<String>,
    method: axum::http::Method,
    route: String,
    path: String,
}

impl Written {
    pub fn of(request: &Request, who: Option<String>, owner: Option<String>) -> Written {
        Written {
            who,
            owner,
            method: request.method().clone(),
            route: route(request).to_string(),
            path: loggable(request.uri().path()).into_owned(),
        }
    }

    pub fn log(self, status: StatusCode) {
        tracing::info!(
            target: "zarrd::audit",
            who = self.who.as_deref().unwrap_or("anonymous"),
            owner = self.owner.as_deref().unwrap_or("-"),
            method = %self.method,
            route = self.route,
            path = self.path,
            status = status.as_u16(),
            outcome = if status.is_success() { "written" } else { "failed" },
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn share_links_are_logged_without_their_secret() {
        assert_eq!(
            super::loggable("/share/zs_ab12_c0ffee/t2m/c/0"),
            "/share/zs_ab12_…/t2m/c/0"
        );
        assert_eq!(super::loggable("/share/nonsense"), "/share/zs_?_…");
        assert_eq!(super::loggable("/zarr/a"), "/zarr/a");
    }
}
