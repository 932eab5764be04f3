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
                || matches!(
                    route.resource,
                    Resource::Page | Resource::Server | Resource::Caller
                )
                // A share link is its own credential and reads only below
                // its node (sharing.rs).
                || route.resource == Resource::Shared
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
                // What administers the whole store (the policy document):
                // refused, telling nothing.
                Resource::Root if op.access == Access::Needs(Scope::Admin) => {
                    assert_eq!(answer.status, 403, "{method} {uri}: {body}");
                    assert!(!body.contains(hidden), "{method} {uri}: {body}");
                }
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
    // Paged one node at a time, the cursor never names a hidden node and
    // every page but the last holds one.
    let mut after: Option<String> = None;
    let mut paged = vec![];
    loop {
        let cursor = after
            .as_ref()
            .map_or(String::new(), |a| format!("&after={a}"));
        let page = app
            .get_as("climate", &format!("/api/v1/tree?limit=1{cursor}"))
            .await
            .json();
        let nodes = page["nodes"].as_array().unwrap();
        paged.extend(
            nodes
                .iter()
                .map(|n| n["path"].as_str().unwrap().to_string()),
        );
        match page["next"].as_str() {
            Some(next) => {
                assert!(!next.starts_with(hidden), "the cursor names {next}");
                assert_eq!(nodes.len(), 1);
                after = Some(next.to_string());
            }
            None => break,
        }
    }
    assert_eq!(paged, paths, "pages of one hold the same nodes");
    // A hidden key is answered as a missing one is, word for word.
    let hidden_key = app.get_as("climate", "/zarr/groups/zarr.json").await;
    let missing_key = app
        .get_as("climate", "/zarr/climate/nothing/zarr.json")
        .await;
    assert_eq!(
        hidden_key.json()["error"]["message"],
        serde_json::json!("no value at key 'groups/zarr.json'")
    );
    assert_eq!(
        missing_key.json()["error"]["message"],
        serde_json::json!("no value at key 'climate/nothing/zarr.json'")
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

#[tokio::test]
async fn what_deletes_below_a_path_needs_every_node_below_it() {
    let app = TestApp::demo(Config {
        identities: Identities {
            policy: vec![
                rule("", Scope::Admin, "anonymous", false),
                rule("climate/lat", Scope::Read, "anonymous", true),
            ],
            ..Default::default()
        },
        ..demo_config()
    })
    .await;
    for (method, uri) in [
        (Method::DELETE, "/api/v1/meta/climate"),
        (Method::PUT, "/api/v1/meta/climate?overwrite=true"),
        (Method::DELETE, "/zarr/climate/zarr.json"),
        // A group document may carry consolidated metadata of all below.
        (Method::PUT, "/zarr/climate/zarr.json"),
    ] {
        let answer = app
            .request(
                method.clone(),
                uri,
                &[],
                Body::from(r#"{"node_type":"group"}"#),
            )
            .await;
        assert!(
            !answer.status.is_success(),
            "{method} {uri}: {}",
            answer.status
        );
    }
    assert_eq!(app.get("/zarr/climate/t2m/zarr.json").await.status, 200);
    // An array beside a hidden one is read without the group's
    // coordinates: the hidden array is one of them.
    let csv = app
        .get("/api/v1/data/climate/t2m?select=0,0:2,0:2&format=csv")
        .await;
    assert_eq!(csv.status, 200);
    // Rows are labelled by index (0, 1), not by the hidden latitudes.
    let text = String::from_utf8_lossy(&csv.body).into_owned();
    let firsts: std::collections::BTreeSet<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(firsts, ["0", "1"].into(), "{text}");
    assert_eq!(
        app.request(
            Method::DELETE,
            "/api/v1/meta/climate/t2m",
            &[],
            Body::empty()
        )
        .await
        .status,
        204,
        "nothing is denied below climate/t2m"
    );
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
    // Keys the downloader mints draw on its share, not a new one.
    let minted = app
        .request(
            Method::POST,
            "/api/v1/keys",
            &headers,
            Body::from(r#"{"name": "more"}"#),
        )
        .await;
    if minted.status == 201 {
        let key = format!("Bearer {}", minted.json()["key"].as_str().unwrap());
        let by_key = app
            .request(
                Method::GET,
                "/api/v1/data/big",
                &[("authorization", key.as_str())],
                Body::empty(),
            )
            .await;
        assert_eq!(by_key.status, 429, "a key shares its owner's bucket");
    } else {
        assert_eq!(
            minted.status, 429,
            "minting is a request of the owner's too"
        );
    }
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

#[tokio::test]
async fn api_keys_are_minted_within_their_owners_rights_listed_and_revoked() {
    const OWNER: &str = "climate-token-0123456789";
    let app = TestApp::demo(Config {
        tokens: vec![zarrd::auth::TokenConfig {
            name: Some("climate".into()),
            token: Some(OWNER.into()),
            token_sha256: None,
            scopes: vec![Scope::Write],
            prefixes: vec!["climate".into()],
            access_key_id: None,
        }],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let owner = format!("Bearer {OWNER}");
    let as_owner = [("authorization", owner.as_str())];
    let minted = app
        .request(
            Method::POST,
            "/api/v1/keys",
            &as_owner,
            Body::from(
                r#"{"name": "t2m reader", "prefixes": ["climate/t2m"], "expires_in": 3600}"#,
            ),
        )
        .await;
    assert_eq!(
        minted.status,
        201,
        "{:?}",
        String::from_utf8_lossy(&minted.body)
    );
    let minted = minted.json();
    let key = minted["key"].as_str().unwrap().to_string();
    let id = minted["id"].as_str().unwrap().to_string();
    assert!(key.starts_with("zk_"));
    let bearer = format!("Bearer {key}");
    let as_key = [("authorization", bearer.as_str())];
    let get = |uri: &'static str| app.request(Method::GET, uri, &as_key, Body::empty());
    assert_eq!(get("/zarr/climate/t2m/zarr.json").await.status, 200);
    assert_eq!(
        get("/zarr/climate/lat/zarr.json").await.status,
        404,
        "outside the key's prefix"
    );
    let listing = get("/zarr/climate/").await;
    let text = String::from_utf8_lossy(&listing.body).into_owned();
    assert!(text.contains("t2m") && !text.contains("lat"), "{text}");
    let write = app
        .request(
            Method::PUT,
            "/zarr/climate/t2m/zarr.json",
            &as_key,
            Body::from("{}"),
        )
        .await;
    assert_eq!(
        write.status, 403,
        "a read key writes nothing its owner could"
    );
    // A key gives no more than its owner has, and cannot mint keys.
    let wider = app
        .request(
            Method::POST,
            "/api/v1/keys",
            &as_owner,
            Body::from(r#"{"name": "x", "grant": "admin"}"#),
        )
        .await;
    assert_eq!(wider.status, 403);
    let by_key = app
        .request(
            Method::POST,
            "/api/v1/keys",
            &as_key,
            Body::from(r#"{"name": "x"}"#),
        )
        .await;
    assert_eq!(by_key.status, 403);
    for bad in [
        r#"{"name": ""}"#,
        r#"{"name": "x", "expires_in": 0}"#,
        r#"{"nam": "x"}"#,
        "[]",
    ] {
        let answer = app
            .request(Method::POST, "/api/v1/keys", &as_owner, Body::from(bad))
            .await;
        assert_eq!(answer.status, 400, "{bad}");
    }
    let anonymous = app
        .request(
            Method::POST,
            "/api/v1/keys",
            &[],
            Body::from(r#"{"name": "x"}"#),
        )
        .await;
    assert_eq!(anonymous.status, 401);
    // Listed without the secret, and revoked at once.
    let listed = app
        .request(Method::GET, "/api/v1/keys", &as_owner, Body::empty())
        .await;
    let listed_text = String::from_utf8_lossy(&listed.body).into_owned();
    assert!(
        listed_text.contains(&id) && !listed_text.contains(&key[20..]),
        "{listed_text}"
    );
    assert!(!listed_text.contains("digest"));
    let revoked = app
        .request(
            Method::DELETE,
            &format!("/api/v1/keys/{id}"),
            &as_owner,
            Body::empty(),
        )
        .await;
    assert_eq!(revoked.status, 204);
    assert_eq!(get("/zarr/climate/t2m/zarr.json").await.status, 401);
    let forged = format!("Bearer zk_{id}_{}", "0".repeat(64));
    let answer = app
        .request(
            Method::GET,
            "/zarr/climate/t2m/zarr.json",
            &[("authorization", forged.as_str())],
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, 401);
    // The record is on the store, out of every route's reach.
    let reserved = app.get_as("climate", "/zarr/__zarrd/keys/").await;
    assert!([400, 404].contains(&reserved.status.as_u16()));
    assert!(!String::from_utf8_lossy(&reserved.body).contains(&id));
}

#[tokio::test]
async fn the_policy_document_on_the_store_is_edited_by_administrators_and_followed_by_replicas() {
    let config = || Config {
        tokens: vec![
            token("admin-token-0123456789", &[Scope::Admin]),
            reader_within("climate", "climate"),
        ],
        identities: Identities {
            policy: vec![rule("climate/t2m", Scope::Read, "anonymous", false)],
            ..Default::default()
        },
        ..demo_config()
    };
    let app = TestApp::demo(config()).await;
    let admin = [("authorization", "Bearer admin-token-0123456789")];
    let lat = "/zarr/climate/lat/zarr.json";
    assert_eq!(app.get("/zarr/climate/t2m/zarr.json").await.status, 200);
    assert_eq!(app.get(lat).await.status, 401);
    let put = |body: &'static str, who: &'static [(&'static str, &'static str)]| {
        app.request(Method::PUT, "/api/v1/policy", who, Body::from(body))
    };
    const ADMIN: &[(&str, &str)] = &[("authorization", "Bearer admin-token-0123456789")];
    const READER: &[(&str, &str)] = &[("authorization", "Bearer climate-token-0123456789")];
    let opened = put(
        r#"{"rules": [{"path": "climate", "grant": "read", "to": ["anonymous"]}]}"#,
        ADMIN,
    )
    .await;
    assert_eq!(
        opened.status,
        200,
        "{}",
        String::from_utf8_lossy(&opened.body)
    );
    assert_eq!(app.get(lat).await.status, 200, "in force here at once");
    let shown = app
        .request(Method::GET, "/api/v1/policy", &admin, Body::empty())
        .await
        .json();
    assert_eq!(shown["config"][0]["path"], "climate/t2m");
    assert_eq!(shown["stored"][0]["path"], "climate");
    assert_eq!(shown["by"], "token:admin-token-0123456789");

    // Only administrators of the whole store, and only valid rules.
    let by_reader = put(r#"{"rules": []}"#, READER).await;
    assert_eq!(by_reader.status, 403);
    let anonymous = put(r#"{"rules": []}"#, &[]).await;
    assert_eq!(anonymous.status, 401);
    let nobody = put(
        r#"{"rules": [{"path": "x", "grant": "read", "to": ["nobody:x"]}]}"#,
        ADMIN,
    )
    .await;
    assert_eq!(
        (nobody.status.as_u16(), nobody.code().as_str()),
        (400, "bad_policy")
    );
    let misspelt = put(r#"{"rulez": []}"#, ADMIN).await;
    assert_eq!(
        (misspelt.status.as_u16(), misspelt.code().as_str()),
        (400, "bad_body")
    );
    assert_eq!(
        app.get(lat).await.status,
        200,
        "refused documents change nothing"
    );

    // Another replica on the same store follows the document.
    let replica = TestApp::with(app.store.clone(), config());
    let mut followed = false;
    for _ in 0..50 {
        if replica.get(lat).await.status == 200 {
            followed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(followed, "the replica read the document when it started");
    assert_eq!(put(r#"{"rules": []}"#, ADMIN).await.status, 200);
    assert_eq!(app.get(lat).await.status, 401);
    assert_eq!(app.get("/zarr/climate/t2m/zarr.json").await.status, 200);
}
