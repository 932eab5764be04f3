//! Access rules per node on every route of the route table: a caller who
//! may read only `climate` finds nothing else by name (404 for every method
//! of every route that names a node, as for a node that is not there) and
//! nothing else in any listing at the root; policy rules grant, deny and
//! inherit as `docs/security.md` says.

use axum::body::Body;
use axum::http::Method;
use zarrd::auth::fair::{FairUseConfig, Size};
use zarrd::auth::{Identities, RuleConfig, Scope};
use zarrd::config::Config;
use zarrd::http::routes::{Access, Resource, ROUTES};

use crate::common::app::{demo_config, reader_within, token, writable, TestApp};

const AS_CLIMATE: (&str, &str) = ("authorization", "Bearer climate-token-0123456789");

/// A request to `route` naming `node`.
fn naming(route: &str, node: &str) -> String {
    match route {
        "/opendap/{path}" => format!("/opendap/{node}.dds"),
        "/wms" => "/wms?SERVICE=WMS&REQUEST=GetCapabilities".into(),
        "/s3/{bucket}" | "/s3/{bucket}/" => {
            format!("{}?list-type=2", route.replace("{bucket}", "zarr"))
        }
        "/s3/{bucket}/{key}" => format!("/s3/zarr/{node}/zarr.json"),
        _ => route
            .replace("{key}", &format!("{node}/zarr.json"))
            .replace("{path}", node)
            .replace("{bucket}", "zarr"),
    }
}

#[tokio::test]
async fn hidden_nodes_are_404_on_every_route_and_absent_from_every_listing() {
    let app = TestApp::demo(Config {
        tokens: vec![reader_within("climate", "climate")],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let hidden = "groups";
    assert_eq!(app.get("/zarr/groups/a/zarr.json").await.status, 401);
    let mut walked = 0;
    for route in ROUTES {
        for op in route.methods {
            if op.access == Access::Public
                || matches!(route.resource, Resource::Page | Resource::Server)
                // The root's change stream never ends (test_oidc.py hears it).
                || route.path == "/api/v1/watch"
            {
                continue;
            }
            let method = Method::from_bytes(op.method.to_uppercase().as_bytes()).unwrap();
            let uri = naming(route.path, hidden);
            let answer = app
                .request(
                    method.clone(),
                    &uri,
                    &[AS_CLIMATE, ("accept", "application/json")],
                    Body::from("{}"),
                )
                .await;
            let body = String::from_utf8_lossy(&answer.body).into_owned();
            match route.resource {
                // Listings of the root: shown, without the hidden node.
                Resource::Root | Resource::ListPrefix => {
                    assert!(
                        [200, 207, 301, 405, 501].contains(&answer.status.as_u16()),
                        "{method} {uri}: {} {body}",
                        answer.status
                    );
                    assert!(
                        !body.contains(hidden),
                        "{method} {uri} tells of '{hidden}': {body}"
                    );
                }
                _ => {
                    assert_eq!(answer.status, 404, "{method} {uri}: {body}");
                    walked += 1;
                }
            }
        }
    }
    assert!(walked > 20, "{walked} requests named the hidden node");
    // What the token may read is there, and listings lead to it.
    let root = app
        .request(
            Method::GET,
            "/zarr/",
            &[AS_CLIMATE, ("accept", "application/json")],
            Body::empty(),
        )
        .await;
    let listing: serde_json::Value = serde_json::from_slice(&root.body).unwrap();
    assert_eq!(
        listing["prefixes"],
        serde_json::json!(["climate"]),
        "{listing}"
    );
    assert_eq!(
        app.get_as("climate", "/api/v1/meta/climate/t2m")
            .await
            .status,
        200
    );
    let tree = app.get_as("climate", "/api/v1/tree").await.json();
    let paths: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"climate/t2m") && !paths.iter().any(|p| p.starts_with(hidden)),
        "{paths:?}"
    );
}

fn rule(path: &str, grant: Scope, to: &str, deny: bool) -> RuleConfig {
    RuleConfig {
        path: path.into(),
        grant,
        to: vec![to.into()],
        deny,
    }
}

#[tokio::test]
async fn anonymous_callers_get_what_the_policy_grants_them() {
    let app = TestApp::demo(Config {
        identities: Identities {
            policy: vec![
                rule("", Scope::Read, "anonymous", false),
                rule("climate/t2m", Scope::Read, "anonymous", true),
            ],
            ..Default::default()
        },
        allow_anonymous_writes: false,
        ..demo_config()
    })
    .await;
    assert_eq!(app.get("/zarr/climate/lat/zarr.json").await.status, 200);
    assert_eq!(
        app.get("/zarr/climate/t2m/zarr.json").await.status,
        401,
        "anonymous callers are asked to sign in, whether or not the node exists"
    );
    assert_eq!(app.get("/zarr/climate/nothing/zarr.json").await.status, 404);
    let meta = app.get("/api/v1/meta/climate").await.json();
    let members: Vec<&str> = meta["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        !members.contains(&"t2m") && members.contains(&"lat"),
        "{members:?}"
    );
    assert!(meta.get("dataset").is_none(), "a dataset would tell of t2m");
    let consolidated = app.get("/zarr/climate/zarr.json").await;
    assert_eq!(consolidated.status, 200);
    let text = String::from_utf8_lossy(&consolidated.body);
    assert!(!text.contains("\"t2m\""), "{text}");
    assert_eq!(
        consolidated.headers["cache-control"], "private, no-cache",
        "a filtered document is the caller's own"
    );
    let written = app
        .put(
            "/zarr/climate/new/zarr.json",
            r#"{"zarr_format":3,"node_type":"group"}"#,
        )
        .await;
    assert_eq!(written.status, 401, "nobody granted anonymous writes");
    assert_eq!(app.get("/edr/collections/climate").await.status, 401);
}

fn share(to: &str) -> FairUseConfig {
    FairUseConfig {
        to: vec![to.into()],
        bytes_per_second: Size(1 << 20),
        requests_per_second: None,
        burst_seconds: Some(2.0),
        request_bytes: Some(Size(1024)),
    }
}

#[tokio::test]
async fn a_bulk_downloader_is_held_to_its_share_and_a_viewer_within_it_is_not() {
    const BULK: &str = "bulk-token-0123456789";
    let app = TestApp::with(
        zarrd::store::Store::memory(),
        Config {
            tokens: vec![token(BULK, &[Scope::Read])],
            allow_anonymous_reads: Some(true),
            identities: Identities {
                fair_use: vec![share(&format!("user:{BULK}")), share("anonymous")],
                ..Default::default()
            },
            ..writable()
        },
    );
    let created = app
        .put(
            "/api/v1/meta/big",
            r#"{"node_type":"array","shape":[512,512],"chunks":[64,64],"dtype":"float64"}"#,
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let auth = format!("Bearer {BULK}");
    let headers = [("authorization", auth.as_str())];
    let bulk = || app.request(Method::GET, "/api/v1/data/big", &headers, Body::empty());
    // 2 MiB of burst, refilled at 1 MiB/s: whole reads of 2 MiB are
    // answered until the bucket is owed more than refills meanwhile.
    let mut answered = 0;
    let refused = loop {
        let answer = bulk().await;
        if answer.status == 429 {
            break answer;
        }
        assert_eq!(answer.status, 200);
        answered += 1;
        assert!(answered < 5, "a bulk downloader is never held back");
    };
    assert_eq!(refused.code(), "rate_limited");
    let wait: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3).contains(&wait), "{wait}");
    // A viewer's burst of small ranges is weighed by its bytes: 300
    // requests of 100 bytes cost 330 KB of its 2 MiB.
    for _ in 0..300 {
        let range = app
            .request(
                Method::GET,
                "/zarr/big/zarr.json",
                &[("range", "bytes=0-99")],
                Body::empty(),
            )
            .await;
        assert_eq!(range.status, 206);
    }
    let metrics = String::from_utf8_lossy(&app.get("/metrics").await.body).into_owned();
    assert!(
        metrics.contains("zarrd_fair_use_refused_total"),
        "{metrics}"
    );
}
