//! Share links: made by whoever administers a node, they read that node
//! and what lies below it without any other credential, as `/zarr/` does;
//! listed without their secret and revoked at once. Browser sessions:
//! writes made with the cookie need its CSRF token, and pages of other
//! origins are not answered as its user (the whole sign-in runs against a
//! real provider in test_signin.py).

use axum::body::Body;
use axum::http::Method;
use zarrd::auth::Scope;
use zarrd::config::Config;

use crate::common::app::{demo_config, reader_within, TestApp};

const ADMIN: &str = "climate-admin-0123456789";

fn climate_admin() -> zarrd::auth::TokenConfig {
    zarrd::auth::TokenConfig {
        name: Some("climate-admin".into()),
        token: Some(ADMIN.into()),
        token_sha256: None,
        scopes: vec![Scope::Admin],
        prefixes: vec!["climate".into()],
        access_key_id: None,
    }
}

#[tokio::test]
async fn share_links_read_their_node_alone_until_revoked() {
    let app = TestApp::demo(Config {
        tokens: vec![climate_admin(), reader_within("climate", "climate")],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let bearer = format!("Bearer {ADMIN}");
    let as_admin = [("authorization", bearer.as_str())];
    let make = |body: &'static str| {
        app.request(Method::POST, "/api/v1/shares", &as_admin, Body::from(body))
    };
    let made =
        make(r#"{"path": "climate/t2m", "name": "for a colleague", "expires_in": 600}"#).await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let made = made.json();
    let url = made["url"].as_str().unwrap().to_string();
    let id = made["id"].as_str().unwrap().to_string();
    assert!(url.starts_with("/share/zs_") && url.ends_with('/'), "{url}");
    assert_eq!(made["path"], "climate/t2m");

    // Read with no other credential, as a plain store rooted at the node.
    let document = app.get(&format!("{url}zarr.json")).await;
    assert_eq!(document.status, 200);
    assert_eq!(
        document.body,
        app.get_as("climate", "/zarr/climate/t2m/zarr.json")
            .await
            .body
    );
    let head = app
        .request(Method::HEAD, &format!("{url}zarr.json"), &[], Body::empty())
        .await;
    assert_eq!(
        head.headers["content-length"].to_str().unwrap(),
        document.body.len().to_string()
    );
    let ranged = app
        .request(
            Method::GET,
            &format!("{url}zarr.json"),
            &[("range", "bytes=0-9")],
            Body::empty(),
        )
        .await;
    assert_eq!(ranged.status, 206);
    assert_eq!(ranged.body, document.body[..10]);
    let listing = app.get(&url).await;
    assert_eq!(listing.status, 200);
    assert!(String::from_utf8_lossy(&listing.body).contains("zarr.json"));
    let bare = app.get(url.trim_end_matches('/')).await;
    assert_eq!(bare.status, 301, "the link's root is its folder");
    // Nothing outside the node can be named through it.
    for outside in [
        "../lat/zarr.json",
        "%2E%2E/lat/zarr.json",
        "..%2Flat%2Fzarr.json",
    ] {
        let answer = app.get(&format!("{url}{outside}")).await;
        assert!(
            [400, 404].contains(&answer.status.as_u16()),
            "{outside}: {}",
            answer.status
        );
        assert!(!String::from_utf8_lossy(&answer.body).contains("\"zarr_format\""));
    }
    // Writes are not served there.
    let write = app
        .request(
            Method::PUT,
            &format!("{url}zarr.json"),
            &[],
            Body::from("{}"),
        )
        .await;
    assert_eq!(write.status, 405);

    // Making one needs admin on a node that is there.
    let reader = [("authorization", "Bearer climate-token-0123456789")];
    let by_reader = app
        .request(
            Method::POST,
            "/api/v1/shares",
            &reader,
            Body::from(r#"{"path": "climate"}"#),
        )
        .await;
    assert_eq!(by_reader.status, 403, "reading is not sharing");
    assert_eq!(make(r#"{"path": "climate/nothing"}"#).await.status, 404);
    let elsewhere = make(r#"{"path": "groups"}"#).await;
    assert_eq!(elsewhere.status, 404, "what the maker may not see");
    for bad in [
        r#"{"path": "climate", "expires_in": 0}"#,
        r#"{"path": "climate", "expires_in": 99999999999}"#,
        r#"{"path": "climate/../groups"}"#,
        r#"{"pat": "climate"}"#,
        "[]",
    ] {
        let answer = make(bad).await;
        assert_eq!(answer.status, 400, "{bad}");
        assert_eq!(answer.code(), "bad_body");
    }
    let anonymous = app
        .request(
            Method::POST,
            "/api/v1/shares",
            &[],
            Body::from(r#"{"path": "climate"}"#),
        )
        .await;
    assert_eq!(anonymous.status, 401);
    let by_link = app
        .request(
            Method::GET,
            "/api/v1/shares",
            &[(
                "authorization",
                &format!("Bearer {}", &url[7..url.len() - 1]),
            )],
            Body::empty(),
        )
        .await;
    assert_eq!(by_link.status, 401, "a link's text is no bearer token");

    // Listed without its secret, and revoked at once.
    let listed = app
        .request(Method::GET, "/api/v1/shares", &as_admin, Body::empty())
        .await;
    let text = String::from_utf8_lossy(&listed.body).into_owned();
    let secret = url.trim_end_matches('/').rsplit('_').next().unwrap();
    assert!(text.contains(&id) && !text.contains(secret), "{text}");
    assert!(!text.contains("digest"));
    let revoked = app
        .request(
            Method::DELETE,
            &format!("/api/v1/shares/{id}"),
            &as_admin,
            Body::empty(),
        )
        .await;
    assert_eq!(revoked.status, 204);
    let after = app.get(&format!("{url}zarr.json")).await;
    assert_eq!(after.status, 401);
    assert!(String::from_utf8_lossy(&after.body).contains("share link"));
    let forged = format!("/share/zs_{id}_{}/zarr.json", "0".repeat(64));
    assert_eq!(app.get(&forged).await.status, 401);
    assert_eq!(app.get("/share/nonsense/zarr.json").await.status, 401);
}

#[tokio::test]
async fn a_share_link_reads_no_more_than_its_maker_may_now() {
    let app = TestApp::demo(Config {
        tokens: vec![climate_admin()],
        allow_anonymous_reads: Some(false),
        ..demo_config()
    })
    .await;
    let bearer = format!("Bearer {ADMIN}");
    let made = app
        .request(
            Method::POST,
            "/api/v1/shares",
            &[("authorization", bearer.as_str())],
            Body::from(r#"{"path": "climate"}"#),
        )
        .await
        .json();
    let url = made["url"].as_str().unwrap().to_string();
    assert_eq!(app.get(&format!("{url}t2m/zarr.json")).await.status, 200);
    // The same store served without the maker's token: the link is dead.
    let without = TestApp::with(
        app.store.clone(),
        Config {
            tokens: vec![reader_within("climate", "climate")],
            allow_anonymous_reads: Some(false),
            ..demo_config()
        },
    );
    let answer = without.get(&format!("{url}t2m/zarr.json")).await;
    assert_eq!(answer.status, 401);
}

/// The status of a GET of `uri` with `headers`.
async fn status(app: &TestApp, method: Method, uri: &str, headers: &[(&str, &str)]) -> u16 {
    app.request(method, uri, headers, Body::from("hi"))
        .await
        .status
        .as_u16()
}

#[tokio::test]
async fn a_session_cookie_serves_its_own_pages_and_writes_only_with_its_csrf_token() {
    let rule = |grant, to: &str| zarrd::auth::RuleConfig {
        path: "climate".into(),
        grant,
        to: vec![to.into()],
        deny: false,
    };
    let app_config = || Config {
        identities: zarrd::auth::Identities {
            oidc: vec![zarrd::auth::oidc::OidcConfig {
                issuer: "https://id.example".into(),
                audience: "zarrd".into(),
                groups_claim: "groups".into(),
                roles_claim: None,
                user_claim: "sub".into(),
                client_id: Some("zarrd-viewer".into()),
                client_secret: None,
                scopes: vec!["openid".into()],
            }],
            policy: vec![rule(Scope::Write, "user:ana")],
            ..Default::default()
        },
        ..demo_config()
    };
    let app = TestApp::demo(app_config()).await;
    let now = zarrd::auth::credential::now();
    let (record, text) = zarrd::auth::session::SessionRecord::mint(
        "https://id.example",
        "ana".into(),
        vec![],
        now,
        600,
    )
    .unwrap();
    app.store
        .put_record(
            "sessions",
            &record.id,
            serde_json::to_vec(&record).unwrap().into(),
        )
        .await
        .unwrap();
    let cookie_text = format!("theme=dark; zarrd_session={text}");
    let cookie = ("cookie", cookie_text.as_str());
    let host = ("host", "data.example");
    let key = "/zarr/climate/t2m/zarr.json";
    let get = Method::GET;
    assert_eq!(
        status(&app, get.clone(), key, &[host]).await,
        401,
        "the policy gives anonymous callers nothing"
    );
    assert_eq!(status(&app, get.clone(), key, &[cookie, host]).await, 200);
    let own = ("origin", "http://data.example");
    assert_eq!(
        status(&app, get.clone(), key, &[cookie, host, own]).await,
        200,
        "its own pages"
    );
    let evil = ("origin", "http://evil.example");
    assert_eq!(
        status(&app, get.clone(), key, &[cookie, host, evil]).await,
        401,
        "another origin's page is answered as anonymous"
    );
    let null = ("origin", "null");
    assert_eq!(
        status(&app, get.clone(), key, &[cookie, host, null]).await,
        401
    );
    let cross = ("sec-fetch-site", "cross-site");
    assert_eq!(
        status(
            &app,
            get.clone(),
            key,
            &[cookie, host, cross, ("sec-fetch-mode", "no-cors")]
        )
        .await,
        401,
        "nor what another site embeds"
    );
    assert_eq!(
        status(
            &app,
            get.clone(),
            key,
            &[cookie, host, cross, ("sec-fetch-mode", "navigate")]
        )
        .await,
        200,
        "a link followed shows the user their own data"
    );

    // Writes repeat the CSRF token.
    let note = "/zarr/climate/notes.txt";
    let refused = app
        .request(Method::PUT, note, &[cookie], Body::from("hi"))
        .await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("x-csrf-token"));
    let wrong = ("x-csrf-token", "wrong");
    assert_eq!(status(&app, Method::PUT, note, &[cookie, wrong]).await, 403);
    assert_eq!(status(&app, Method::DELETE, note, &[cookie]).await, 403);
    let csrf = ("x-csrf-token", record.csrf.as_str());
    let written = status(&app, Method::PUT, note, &[cookie, host, own, csrf]).await;
    assert!((200..300).contains(&written), "{written}");
    assert_eq!(
        status(&app, Method::PUT, note, &[cookie, host, evil, csrf]).await,
        401,
        "another origin's write is anonymous, token or not"
    );
    // A session mints keys and links as its user, with the token too.
    let link = r#"{"path": "climate"}"#;
    assert_eq!(
        app.request(
            Method::POST,
            "/api/v1/keys",
            &[cookie],
            Body::from(r#"{"name": "k"}"#)
        )
        .await
        .status,
        403
    );
    assert_eq!(
        app.request(
            Method::POST,
            "/api/v1/shares",
            &[cookie, csrf],
            Body::from(link)
        )
        .await
        .status,
        403,
        "ana may write climate, not administer it"
    );
    // A bearer token beside the cookie is what the request is judged by.
    assert_eq!(
        status(
            &app,
            get.clone(),
            key,
            &[cookie, ("authorization", "Bearer nonsense-0123456789")]
        )
        .await,
        401
    );

    // The session document tells the page who it is, and only its own pages.
    let mine = app
        .request(
            Method::GET,
            "/auth/session",
            &[cookie, host, own],
            Body::empty(),
        )
        .await
        .json();
    assert_eq!(mine["signed_in"], true);
    assert_eq!(mine["user"], "ana");
    assert_eq!(mine["csrf"], record.csrf.as_str());
    let theirs = app
        .request(
            Method::GET,
            "/auth/session",
            &[cookie, host, evil],
            Body::empty(),
        )
        .await
        .json();
    assert_eq!(theirs["signed_in"], false);
    assert!(theirs.get("csrf").is_none());
    let elsewhere = app
        .get("/auth/login?issuer=https%3A%2F%2Fother.example")
        .await;
    assert_eq!(
        elsewhere.status, 404,
        "not a provider browsers sign in with here"
    );
    let callback = app.get("/auth/callback?code=x&state=y").await;
    assert_eq!(callback.status, 400);
    assert_eq!(callback.code(), "no_sign_in");

    // Behind a proxy that names another host, the public URL is the
    // server's origin, scheme included; over HTTPS the cookie is `__Host-`.
    let proxied = TestApp::with(
        app.store.clone(),
        Config {
            public_url: Some("https://data.example.org".into()),
            ..app_config()
        },
    );
    let secure_text = format!("__Host-zarrd_session={text}");
    let secure = ("cookie", secure_text.as_str());
    let inner = ("host", "zarrd:8000");
    let public = ("origin", "https://data.example.org");
    let plain = ("origin", "http://data.example.org");
    assert_eq!(
        status(&proxied, get.clone(), key, &[secure, inner, public]).await,
        200
    );
    assert_eq!(
        status(&proxied, get.clone(), key, &[secure, inner, plain]).await,
        401
    );
    assert_eq!(
        status(&proxied, get.clone(), key, &[cookie, inner, public]).await,
        401,
        "over HTTPS only the __Host- cookie counts"
    );

    // Signing out needs the token too, and ends the session everywhere.
    assert_eq!(
        status(&app, Method::POST, "/auth/logout", &[cookie, wrong]).await,
        403
    );
    let done = app
        .request(Method::POST, "/auth/logout", &[cookie, csrf], Body::empty())
        .await;
    assert_eq!(done.status, 204);
    let cleared = done.headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("zarrd_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(status(&app, get, key, &[cookie, host]).await, 401);
    assert!(app
        .store
        .record("sessions", &record.id)
        .await
        .unwrap()
        .is_none());
}
