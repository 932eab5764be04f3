//! `Cache-Control` of stored values under `/zarr/`, per mount: what browsers
//! and CDNs may keep without asking again. `no-cache` by default (keep, but
//! revalidate by ETag every time), since most stores change; an operator
//! sets `max-age` for a mount that changes rarely, or `immutable` for one
//! that never does. Values read at an Icechunk snapshot id are immutable
//! whatever the policy (see `raw::value_headers`).

use std::collections::HashMap;

use axum::http::{header, HeaderValue};
use axum::response::Response;

use crate::config::Config;

#[derive(Debug, Clone)]
pub struct CachePolicies {
    root: HeaderValue,
    mounts: HashMap<String, HeaderValue>,
}

fn value(text: &str) -> HeaderValue {
    // The configuration checked the text; should it not have, revalidate.
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("no-cache"))
}

impl CachePolicies {
    pub fn new(config: &Config) -> Self {
        CachePolicies {
            root: value(&config.cache_control),
            mounts: config
                .mounts
                .iter()
                .filter_map(|m| Some((m.name.clone(), value(m.cache_control.as_deref()?))))
                .collect(),
        }
    }

    /// The policy of the store that holds `path`: its mount's (`name` or
    /// `name@ref` as first segment), else the root's.
    pub fn of(&self, path: &str) -> &HeaderValue {
        let first = path.split('/').next().unwrap_or_default();
        let name = first.split_once('@').map_or(first, |(name, _)| name);
        self.mounts.get(name).unwrap_or(&self.root)
    }

    /// `response` with the policy of `path`, when it is a value or a
    /// listing (2xx, or 304) that does not say already.
    pub fn apply(&self, path: &str, mut response: Response) -> Response {
        let status = response.status();
        let answered = status.is_success() || status == axum::http::StatusCode::NOT_MODIFIED;
        if answered && !response.headers().contains_key(header::CACHE_CONTROL) {
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, self.of(path).clone());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Mount, Source};

    #[test]
    fn a_mount_has_its_own_policy_at_every_version_and_others_the_roots() {
        let mount = |name: &str, cache_control: Option<&str>| Mount {
            name: name.into(),
            source: Source::Store("memory://".into()),
            read_only: false,
            cache_control: cache_control.map(String::from),
        };
        let config = Config {
            cache_control: "public, max-age=60".into(),
            mounts: vec![
                mount("era5", Some("public, max-age=3600")),
                mount("scratch", None),
            ],
            ..Config::default()
        };
        let p = CachePolicies::new(&config);
        assert_eq!(p.of("era5/t2m/zarr.json"), "public, max-age=3600");
        assert_eq!(p.of("era5@v1/t2m/c/0"), "public, max-age=3600");
        assert_eq!(p.of("scratch/a/zarr.json"), "public, max-age=60");
        assert_eq!(p.of("other/zarr.json"), "public, max-age=60");
        assert_eq!(p.of(""), "public, max-age=60");
        assert_eq!(
            CachePolicies::new(&Config::default()).of("x/zarr.json"),
            "no-cache"
        );
    }
}
