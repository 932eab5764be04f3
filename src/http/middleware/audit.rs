//! The audit log: one line (target `zarrd::audit`) for every write and
//! every refused request, with who asked (and for an API key, whose it
//! is), the route, the path and what came of it. Reads that pass are the
//! access log's.

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;

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
        path = request.uri().path(),
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
            path: request.uri().path().to_string(),
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
