//! The route table: every route, who may call each of its methods, the
//! handler that answers it, and the store path a request is about. The
//! router, the authorization middleware and the check of `openapi.yaml`
//! all read this one table, so a new endpoint is its handler file and one
//! row, and cannot be reachable without a scope, or limited tokens
//! refused on it.

use std::sync::LazyLock;

use axum::routing::MethodRouter;
use percent_encoding::percent_decode_str;

use super::handlers::{
    api, data, dav, edr, keys, opendap, policy, preview, probes, raw, s3, shares, signin,
    statistics, tiles, versions, viewer, watch, wms, write,
};
use super::state::AppState;
use crate::auth::{Reach, Scope};

/// Who may call a method of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, tokens or not (probes and the API description).
    Public,
    /// Callers with this scope (see `auth::escalate` for the requests that
    /// need more than their method's scope).
    Needs(Scope),
}

/// Which store path a request is about, for prefix-limited tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The route's `{key}` or `{path}` parameter.
    Param,
    /// The root of the store.
    Root,
    /// No store path: information about the server.
    Server,
    /// The `{key}` of an object in a bucket (`/s3/{bucket}/{key}`).
    Object,
    /// The `prefix` query parameter of a bucket listing: a listing shows
    /// only keys that start with it. A HEAD of the bucket (HeadBucket)
    /// tells only that it exists, as ListBuckets does: no store path.
    ListPrefix,
    /// The node an OPeNDAP path names: `{path}` without its answer's
    /// suffix (`climate.dds` is about `climate`).
    Dap,
    /// The group an EDR collection path names: `{path}` without its query
    /// type (`climate/position` is about `climate`).
    Collection,
    /// The caller's own things (their API keys): no store path; a
    /// parameter names one of them.
    Caller,
    /// A path below a share link's node (`/share/{token}/{key}`): the
    /// middleware finds the node from the link's record.
    Shared,
    /// The viewer's page and files: the same bytes whatever the path names,
    /// no store data in them (the page reads data through the API, with the
    /// caller's token).
    Page,
}

/// A method of a route: its name as `openapi.yaml` writes it, who may
/// call it, and the handler that answers it.
pub struct Op {
    pub method: &'static str,
    pub access: Access,
    mount: fn(MethodRouter<AppState>) -> MethodRouter<AppState>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.method, self.access)
    }
}

/// `op!(get, READ, raw::get_key)`: the method, its access and its handler.
/// PROPFIND is no method axum routes by name: its handler answers every
/// method the route lacks, and checks that it was asked PROPFIND.
macro_rules! op {
    (propfind, $access:expr, $handler:expr) => {
        Op {
            method: "propfind",
            access: $access,
            mount: |r| r.fallback($handler),
        }
    };
    ($method:ident, $access:expr, $handler:expr) => {
        Op {
            method: stringify!($method),
            access: $access,
            mount: |r| r.$method($handler),
        }
    };
}

#[derive(Debug)]
pub struct Route {
    /// As `openapi.yaml` writes it.
    pub path: &'static str,
    pub methods: &'static [Op],
    pub resource: Resource,
}

const READ: Access = Access::Needs(Scope::Read);
const WRITE: Access = Access::Needs(Scope::Write);
const ADMIN: Access = Access::Needs(Scope::Admin);
const PUBLIC: Access = Access::Public;

/// A bucket's reads. Its writes (CreateBucket, DeleteBucket,
/// DeleteObjects, uploads) are answered NotImplemented, as S3 answers an
/// operation it lacks: the view is read-only.
const S3_BUCKET: &[Op] = &[
    op!(get, READ, s3::get_bucket),
    op!(head, READ, s3::head_bucket),
    op!(put, READ, s3::not_served),
    op!(post, READ, s3::not_served),
    op!(delete, READ, s3::not_served),
];

/// Every route.
pub static ROUTES: &[Route] = &[
    // Redirected to `/zarr/`, as a folder without its slash is.
    Route {
        path: "/zarr",
        methods: &[
            op!(get, READ, raw::to_root),
            op!(head, READ, raw::to_root),
            op!(propfind, READ, dav::propfind_root),
        ],
        resource: Resource::Root,
    },
    Route {
        path: "/zarr/",
        methods: &[
            op!(get, READ, raw::list_root),
            op!(head, READ, raw::list_root),
            op!(propfind, READ, dav::propfind_root),
        ],
        resource: Resource::Root,
    },
    Route {
        path: "/zarr/{key}",
        methods: &[
            op!(get, READ, raw::get_key),
            op!(head, READ, raw::head_key),
            op!(put, WRITE, write::put_key),
            op!(delete, WRITE, write::delete_key),
            // WebDAV's listing (`handlers/dav.rs`).
            op!(propfind, READ, dav::propfind_key),
        ],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/tree",
        methods: &[op!(get, READ, api::tree_root)],
        resource: Resource::Root,
    },
    Route {
        path: "/api/v1/tree/{path}",
        methods: &[op!(get, READ, api::tree)],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/meta",
        methods: &[op!(get, READ, api::meta_root)],
        resource: Resource::Root,
    },
    Route {
        path: "/api/v1/meta/{path}",
        methods: &[
            op!(get, READ, api::meta),
            op!(put, WRITE, write::put_meta),
            op!(patch, WRITE, write::patch_meta),
            // Deleting a node deletes everything below it.
            op!(delete, ADMIN, write::delete_meta),
        ],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/data/{path}",
        methods: &[
            op!(get, READ, data::data_get),
            // A read with its parameters in the body.
            op!(post, READ, data::data_post),
            op!(put, WRITE, write::put_data),
        ],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/statistics/{path}",
        methods: &[op!(get, READ, statistics::statistics)],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/histogram/{path}",
        methods: &[op!(get, READ, statistics::histogram)],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/append/{path}",
        methods: &[op!(post, WRITE, write::append)],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/preview/{path}",
        methods: &[op!(get, READ, preview::preview)],
        resource: Resource::Param,
    },
    Route {
        path: "/api/v1/versions/{path}",
        methods: &[op!(get, READ, versions::versions)],
        resource: Resource::Param,
    },
    // A caller's own API keys: about them, not about the store's paths.
    Route {
        path: "/api/v1/keys",
        methods: &[op!(get, READ, keys::list), op!(post, READ, keys::mint)],
        resource: Resource::Caller,
    },
    Route {
        path: "/api/v1/keys/{id}",
        methods: &[op!(delete, READ, keys::revoke)],
        resource: Resource::Caller,
    },
    // The access rules kept on the store: for administrators of it all.
    Route {
        path: "/api/v1/policy",
        methods: &[op!(get, ADMIN, policy::get), op!(put, ADMIN, policy::put)],
        resource: Resource::Root,
    },
    // Share links a caller made: about them, not about the store's paths
    // (minting one judges its node in the handler).
    Route {
        path: "/api/v1/shares",
        methods: &[op!(get, READ, shares::list), op!(post, READ, shares::mint)],
        resource: Resource::Caller,
    },
    Route {
        path: "/api/v1/shares/{id}",
        methods: &[op!(delete, READ, shares::revoke)],
        resource: Resource::Caller,
    },
    // What a share link reads: stored values below its node, as
    // `/zarr/` serves them, for any Zarr client.
    Route {
        path: "/share/{token}",
        methods: &[op!(get, READ, raw::to_root), op!(head, READ, raw::to_root)],
        resource: Resource::Shared,
    },
    Route {
        path: "/share/{token}/",
        methods: &[
            op!(get, READ, shares::list_root),
            op!(head, READ, shares::list_root),
        ],
        resource: Resource::Shared,
    },
    Route {
        path: "/share/{token}/{key}",
        methods: &[
            op!(get, READ, shares::get_key),
            op!(head, READ, shares::head_key),
        ],
        resource: Resource::Shared,
    },
    // Browser sign-in: open to all, as signing in is how one gets rights.
    Route {
        path: "/auth/login",
        methods: &[op!(get, PUBLIC, signin::login)],
        resource: Resource::Server,
    },
    Route {
        path: "/auth/callback",
        methods: &[op!(get, PUBLIC, signin::callback)],
        resource: Resource::Server,
    },
    Route {
        path: "/auth/session",
        methods: &[op!(get, PUBLIC, signin::session)],
        resource: Resource::Server,
    },
    Route {
        path: "/auth/logout",
        methods: &[op!(post, PUBLIC, signin::logout)],
        resource: Resource::Server,
    },
    Route {
        path: "/api/v1/watch",
        methods: &[op!(get, READ, watch::watch_root)],
        resource: Resource::Root,
    },
    Route {
        path: "/api/v1/watch/{path}",
        methods: &[op!(get, READ, watch::watch)],
        resource: Resource::Param,
    },
    // Tile matrix sets are definitions, the same whatever is stored.
    Route {
        path: "/tiles/tileMatrixSets",
        methods: &[op!(get, PUBLIC, tiles::matrix_sets)],
        resource: Resource::Page,
    },
    Route {
        path: "/tiles/tileMatrixSets/{id}",
        methods: &[op!(get, PUBLIC, tiles::matrix_set)],
        resource: Resource::Page,
    },
    Route {
        path: "/tiles/{path}",
        methods: &[op!(get, READ, tiles::tiles)],
        resource: Resource::Param,
    },
    // EDR's landing page and conformance classes describe the server.
    Route {
        path: "/edr",
        methods: &[op!(get, PUBLIC, edr::landing)],
        resource: Resource::Server,
    },
    Route {
        path: "/edr/conformance",
        methods: &[op!(get, PUBLIC, edr::conformance)],
        resource: Resource::Server,
    },
    Route {
        path: "/edr/collections",
        methods: &[op!(get, READ, edr::collections)],
        resource: Resource::Root,
    },
    Route {
        path: "/edr/collections/{path}",
        methods: &[op!(get, READ, edr::collection)],
        resource: Resource::Collection,
    },
    Route {
        path: "/opendap/{path}",
        methods: &[op!(get, READ, opendap::opendap)],
        resource: Resource::Dap,
    },
    Route {
        path: "/wms",
        methods: &[op!(get, READ, wms::wms)],
        resource: Resource::Root,
    },
    Route {
        path: "/api/v1/stats",
        methods: &[op!(get, READ, api::stats)],
        resource: Resource::Server,
    },
    Route {
        path: "/healthz",
        methods: &[op!(get, PUBLIC, probes::healthz)],
        resource: Resource::Server,
    },
    Route {
        path: "/readyz",
        methods: &[op!(get, PUBLIC, probes::readyz)],
        resource: Resource::Server,
    },
    Route {
        path: "/openapi.yaml",
        methods: &[op!(get, PUBLIC, probes::openapi)],
        resource: Resource::Server,
    },
    Route {
        path: "/metrics",
        methods: &[op!(get, PUBLIC, probes::metrics)],
        resource: Resource::Server,
    },
    Route {
        path: "/s3",
        methods: &[op!(get, READ, s3::list_buckets)],
        resource: Resource::Server,
    },
    Route {
        path: "/s3/",
        methods: &[op!(get, READ, s3::list_buckets)],
        resource: Resource::Server,
    },
    Route {
        path: "/s3/{bucket}",
        methods: S3_BUCKET,
        resource: Resource::ListPrefix,
    },
    Route {
        path: "/s3/{bucket}/",
        methods: S3_BUCKET,
        resource: Resource::ListPrefix,
    },
    Route {
        path: "/s3/{bucket}/{key}",
        methods: &[
            op!(get, READ, s3::get_object),
            op!(head, READ, s3::head_object),
            // PutObject, DeleteObject and uploads: NotImplemented.
            op!(put, READ, s3::not_served),
            op!(post, READ, s3::not_served),
            op!(delete, READ, s3::not_served),
        ],
        resource: Resource::Object,
    },
    Route {
        path: "/",
        methods: &[op!(get, PUBLIC, viewer::page)],
        resource: Resource::Page,
    },
    Route {
        path: "/view/{path}",
        methods: &[op!(get, PUBLIC, viewer::view)],
        resource: Resource::Page,
    },
    Route {
        path: "/viewer/settings.json",
        methods: &[op!(get, PUBLIC, viewer::settings)],
        resource: Resource::Server,
    },
    Route {
        path: "/viewer/{file}",
        methods: &[op!(get, PUBLIC, viewer::file)],
        resource: Resource::Page,
    },
];

impl Route {
    /// The path in axum's syntax (parameters match the rest of the path).
    pub fn axum_path(&self) -> String {
        self.path
            .replace("{key}", "{*key}")
            .replace("{path}", "{*path}")
    }

    /// Who may call `method` (lower case, as [`method_name`] gives it);
    /// `None` for a method the route lacks.
    pub fn access(&self, method: &str) -> Option<Access> {
        self.methods
            .iter()
            .find(|op| op.method == method)
            .map(|op| op.access)
    }

    /// The handlers of its methods, for the router.
    pub fn handler(&self) -> MethodRouter<AppState> {
        self.methods
            .iter()
            .fold(MethodRouter::new(), |router, op| (op.mount)(router))
    }

    /// How much below its store path a request's answer tells of: listings
    /// are filtered to what the caller sees; an OPeNDAP dataset or an EDR
    /// collection tells of a whole group, so needs all of it readable.
    pub fn reach(&self, method: &str, request_path: &str) -> Reach {
        match self.path {
            "/zarr"
            | "/zarr/"
            | "/api/v1/tree"
            | "/api/v1/tree/{path}"
            | "/api/v1/watch"
            | "/api/v1/watch/{path}"
            | "/wms"
            | "/edr/collections" => Reach::Lists,
            "/s3/{bucket}" | "/s3/{bucket}/" | "/share/{token}/" => Reach::Lists,
            "/share/{token}/{key}" if request_path.ends_with('/') => Reach::Lists,
            "/zarr/{key}" if method == "propfind" || request_path.ends_with('/') => Reach::Lists,
            // A group's description lists its members.
            "/api/v1/meta" | "/api/v1/meta/{path}" if method == "get" => Reach::Lists,
            _ => match self.resource {
                Resource::Dap | Resource::Collection => Reach::Whole,
                _ => Reach::Named,
            },
        }
    }

    /// The store path a request (its path and query) is about, decoded as
    /// the handler sees it.
    /// `method` as [`method_name`] names it.
    pub fn resource_of(
        &self,
        method: &str,
        request_path: &str,
        query: Option<&str>,
    ) -> Option<String> {
        let param = || {
            let prefix = &self.path[..self.path.find('{').unwrap_or(self.path.len())];
            let rest = request_path.strip_prefix(prefix)?;
            Some(percent_decode_str(rest).decode_utf8_lossy().into_owned())
        };
        match self.resource {
            Resource::Server | Resource::Page | Resource::Caller => None,
            // Below the link's node: what follows its text.
            Resource::Shared => {
                let rest = request_path.strip_prefix("/share/")?;
                let below = rest.split_once('/').map_or("", |(_, b)| b);
                Some(
                    percent_decode_str(below)
                        .decode_utf8_lossy()
                        .trim_matches('/')
                        .to_string(),
                )
            }
            Resource::Root => Some(String::new()),
            Resource::Param => Some(param()?.trim_matches('/').to_string()),
            Resource::Dap => Some(opendap::node_of(&param()?).trim_matches('/').to_string()),
            Resource::Collection => Some(edr::collection_of(&param()?).to_string()),
            // After the bucket's name (which is decoded like the key: the
            // handler names the same split).
            Resource::Object => Some(param()?.split_once('/')?.1.trim_matches('/').to_string()),
            // The deepest folder holding every key the prefix matches:
            // `era5/t` lists `era5/t2m/...` too, so it is about `era5`, and
            // `era5` lists `era5.bak/...`, so it is about the root.
            Resource::ListPrefix if method == "head" => None,
            Resource::ListPrefix => {
                let prefix = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                    .find(|(k, _)| k == "prefix")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                let folder = prefix.rfind('/').map_or("", |i| &prefix[..i]);
                Some(folder.trim_matches('/').to_string())
            }
        }
    }
}

/// A method as the table names it; methods no route has are `"other"`.
pub fn method_name(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "get",
        Method::HEAD => "head",
        Method::PUT => "put",
        Method::POST => "post",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ if method.as_str() == "PROPFIND" => "propfind",
        _ => "other",
    }
}

/// The route a request matched, by its axum path. Asked on every request,
/// so the axum forms are built once (building them per call was a twentieth
/// of a cached metadata GET).
pub fn matched(axum_path: &str) -> Option<&'static Route> {
    static BY_AXUM_PATH: LazyLock<Vec<(String, &'static Route)>> =
        LazyLock::new(|| ROUTES.iter().map(|r| (r.axum_path(), r)).collect());
    BY_AXUM_PATH
        .iter()
        .find(|(path, _)| path == axum_path)
        .map(|(_, route)| *route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_scope_and_a_resource() {
        for route in ROUTES {
            assert!(!route.methods.is_empty(), "{}", route.path);
            for Op { method, access, .. } in route.methods {
                assert!(
                    ["get", "head", "put", "post", "patch", "delete", "propfind"].contains(method),
                    "{} {method}",
                    route.path
                );
                // Public routes carry no store data; routes about a
                // store path are never public.
                if *access == Access::Public {
                    assert!(
                        matches!(route.resource, Resource::Server | Resource::Page),
                        "{}",
                        route.path
                    );
                }
            }
            // A route about a store path names it as its parameter.
            if matches!(
                route.resource,
                Resource::Param
                    | Resource::Object
                    | Resource::Dap
                    | Resource::Collection
                    | Resource::Shared
            ) {
                assert!(route.path.contains('{'), "{}", route.path);
            }
            if route.resource == Resource::Server {
                assert!(!route.path.contains('{'), "{}", route.path);
            }
            assert!(matched(&route.axum_path()).is_some_and(|r| std::ptr::eq(r, route)));
        }
    }

    #[test]
    fn resources_are_decoded_store_paths() {
        let data = matched("/api/v1/data/{*path}").unwrap();
        assert_eq!(
            data.resource_of("get", "/api/v1/data/a%20b/", None)
                .as_deref(),
            Some("a b")
        );
        let raw = matched("/zarr/{*key}").unwrap();
        assert_eq!(
            raw.resource_of("get", "/zarr/era5/t/c/0", None).as_deref(),
            Some("era5/t/c/0")
        );
        assert_eq!(
            matched("/zarr/")
                .unwrap()
                .resource_of("get", "/zarr/", None)
                .as_deref(),
            Some("")
        );
        assert_eq!(
            matched("/api/v1/stats")
                .unwrap()
                .resource_of("get", "/api/v1/stats", None),
            None
        );
        // A protocol's suffix or query type is not part of the node.
        let dap = matched("/opendap/{*path}").unwrap();
        assert_eq!(
            dap.resource_of("get", "/opendap/climate/t2m.dmr.xml", None)
                .as_deref(),
            Some("climate/t2m")
        );
        let edr = matched("/edr/collections/{*path}").unwrap();
        assert_eq!(
            edr.resource_of("get", "/edr/collections/era5/surface/cube", None)
                .as_deref(),
            Some("era5/surface")
        );
        assert_eq!(
            edr.resource_of("get", "/edr/collections/root", None)
                .as_deref(),
            Some("")
        );
        let object = matched("/s3/{bucket}/{*key}").unwrap();
        assert_eq!(
            object
                .resource_of("get", "/s3/zarr/era5/t%2Fc/0", None)
                .as_deref(),
            Some("era5/t/c/0")
        );
        let listing = matched("/s3/{bucket}").unwrap();
        assert_eq!(
            listing
                .resource_of(
                    "get",
                    "/s3/zarr",
                    Some("list-type=2&prefix=era5%2Ft%2F&delimiter=/")
                )
                .as_deref(),
            Some("era5/t")
        );
        for (prefix, about) in [("era5%2Ft2", "era5"), ("era5", ""), ("era5%2F", "era5")] {
            assert_eq!(
                listing
                    .resource_of("get", "/s3/zarr", Some(&format!("prefix={prefix}")))
                    .as_deref(),
                Some(about),
                "{prefix}: a listing is about the folder holding all it may list"
            );
        }
        assert_eq!(
            listing.resource_of("get", "/s3/zarr", None).as_deref(),
            Some(""),
            "a listing without a prefix is about the whole store"
        );
        assert_eq!(
            listing.resource_of("head", "/s3/zarr", None),
            None,
            "HeadBucket tells only that the bucket exists"
        );
        let shared = matched("/share/{token}/{*key}").unwrap();
        assert_eq!(
            shared
                .resource_of("get", "/share/zs_a_b/t2m/c/0%2F1", None)
                .as_deref(),
            Some("t2m/c/0/1"),
            "below a share link's node"
        );
        assert_eq!(
            matched("/share/{token}/")
                .unwrap()
                .resource_of("get", "/share/zs_a_b/", None)
                .as_deref(),
            Some("")
        );
        assert_eq!(
            data.access("post"),
            Some(Access::Needs(Scope::Read)),
            "POST /api/v1/data is a read"
        );
    }
}
