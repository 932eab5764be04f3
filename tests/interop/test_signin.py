"""Browsers: the viewer in Chromium signs in through a real OpenID
provider's login page (the authorization-code flow with PKCE), browses a
private tree and draws an array with its session cookie; pages of other
origins cannot use the session, and writes made with it need its CSRF
token. Share links open in zarrita.js from another origin without any
account, and stop working when revoked or expired."""

import base64
import json
import os
import time

import numpy as np
import pytest
import requests
import zarr

from conftest import bundle_zarrita, serve_folder, start_zarrd, stop
from oidc_provider import Provider

CHROMIUM = os.environ.get("ZARRD_CHROMIUM")
ZARRITA = os.environ.get("ZARRD_ZARRITA")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and ZARRITA) and not os.environ.get("ZARRD_REQUIRE_CORPUS"),
    reason="Chromium and zarrita.js are installed by scripts/test",
)

CLIENT = "zarrd-viewer"
ADMIN = "admin-token-0123456789"

CONFIG = """
[[oidc]]
issuer = "{issuer}"
audience = "{client}"
client_id = "{client}"
client_secret = "viewer-secret"
scopes = ["openid", "email"]

[cors]
credentials = ["{allowed}"]

[[tokens]]
name = "admin"
token = "{admin}"
scopes = ["admin"]

[[policy]]
path = "public"
grant = "read"
to = ["anonymous", "authenticated"]

[[policy]]
path = "lab"
grant = "write"
to = ["group:lab"]
"""

# A page of another origin: zarrita.js, and fetch() with the browser's cookies.
PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>elsewhere</title></head>
<body><script type="module">
import * as zarr from "./zarrita.js";
window.readArray = async (url, overrides) => {
  try {
    const arr = await zarr.open(new zarr.FetchStore(url, { overrides: overrides || {} }), { kind: "array" });
    const got = await zarr.get(arr);
    return { shape: got.shape, data: Array.from(got.data) };
  } catch (e) {
    return { error: String(e) };
  }
};
window.withCookies = async (url) => {
  try {
    const r = await fetch(url, { credentials: "include" });
    return { status: r.status, body: await r.text() };
  } catch (e) {
    return { blocked: String(e) };
  }
};
window.ready = true;
</script></body></html>
"""


@pytest.fixture(scope="module")
def provider():
    provider = Provider()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("signin-store")
    top = zarr.open_group(str(root), mode="w", zarr_format=3)
    for path in ["public/temps", "lab/obs"]:
        group_path, name = path.rsplit("/", 1)
        a = top.require_group(group_path).create_array(
            name, shape=(6, 8), chunks=(3, 4), dtype="f4", dimension_names=["y", "x"])
        a[:] = np.arange(48, dtype="f4").reshape(6, 8) + len(path)
    return root


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Two pages of other origins: one `[cors] credentials` names, one not."""
    site = tmp_path_factory.mktemp("signin-site")
    bundle_zarrita(site)
    (site / "index.html").write_text(PAGE)
    allowed, a = serve_folder(site)
    other, b = serve_folder(site)
    yield allowed, other
    a.shutdown()
    b.shutdown()


@pytest.fixture(scope="module")
def server(provider, store, sites, tmp_path_factory):
    config = tmp_path_factory.mktemp("signin-config") / "zarrd.toml"
    config.write_text(CONFIG.format(issuer=provider.url, client=CLIENT, admin=ADMIN, allowed=sites[0]))
    url, proc = start_zarrd(str(store), "--config", str(config))
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def signed_in(browser, server, provider):
    """A browser context whose viewer signed in as ana (group lab) through
    the provider's own page."""
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/view/public/temps")
    page.wait_for_selector("#signin-link")
    page.wait_for_function("document.querySelector('#tree').textContent.includes('public')")
    assert "lab" not in page.inner_text("#tree"), "anonymous callers do not see lab"
    page.click("#signin-link")
    page.wait_for_url(f"{provider.url}/**")
    page.fill("input[name=sub]", "ana")
    page.click("button[type=submit]:has-text('Authorize')")
    page.wait_for_url(f"{server}/view/public/temps*")
    page.wait_for_selector("#signin-user")
    yield context, page, errors
    context.close()


def wait_for_image(page):
    page.wait_for_function(
        """() => {
            const img = document.querySelector('img#heatmap-image');
            return img && img.dataset.state === 'ready' && img.complete && img.naturalWidth > 0;
        }""",
        timeout=30000,
    )


def test_the_viewer_signs_in_browses_a_private_tree_and_draws_an_array(signed_in, provider, server):
    context, page, errors = signed_in
    assert page.inner_text("#signin-user") == "ana"
    page.wait_for_function("document.querySelector('#tree').textContent.includes('lab')")
    page.goto(f"{server}/view/lab/obs")
    wait_for_image(page)
    assert page.eval_on_selector("img#heatmap-image", "img => img.naturalWidth") > 0
    # The session is an HttpOnly, SameSite cookie, out of scripts' reach.
    cookie = next(c for c in context.cookies() if c["name"] == "zarrd_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    assert page.evaluate("document.cookie").find("zarrd_session") < 0
    # zarrd asked with a PKCE challenge and proved it with its verifier.
    assert provider.challenges and all(method == "S256" for _, method in provider.challenges)
    assert provider.exchanges and all(len(v) >= 43 for v, _, _ in provider.exchanges)
    # A confidential client: its secret with HTTP Basic (RFC 6749 2.3.1).
    basic = "Basic " + base64.b64encode(f"{CLIENT}:viewer-secret".encode()).decode()
    assert all(form.get("client_id") == CLIENT and auth == basic for _, form, auth in provider.exchanges)
    assert errors == []


def test_pages_of_other_origins_cannot_use_the_session(signed_in, sites, server):
    context, _, _ = signed_in
    allowed, other = sites
    page = context.new_page()
    page.goto(f"{other}/index.html")
    page.wait_for_function("window.ready === true")
    got = page.evaluate("(url) => window.withCookies(url)", f"{server}/api/v1/meta/lab/obs")
    assert "blocked" in got or got["status"] in (401, 404), got
    got = page.evaluate("(url) => window.withCookies(url)", f"{server}/auth/session")
    assert "blocked" in got or json.loads(got["body"])["signed_in"] is False, got
    # What the server itself answers such a page (its Origin, the cookie):
    # anonymous, whatever the browser would then let it read.
    cookie = next(c for c in context.cookies() if c["name"] == "zarrd_session")
    jar = {"zarrd_session": cookie["value"]}
    assert requests.get(f"{server}/api/v1/meta/lab/obs", cookies=jar, headers={"Origin": other}).status_code == 401
    assert requests.get(f"{server}/auth/session", cookies=jar, headers={"Origin": other}).json()["signed_in"] is False
    assert requests.get(f"{server}/api/v1/meta/lab/obs", cookies=jar, headers={"Origin": server}).status_code == 200
    # The origin `[cors] credentials` names is answered as the user.
    page.goto(f"{allowed}/index.html")
    page.wait_for_function("window.ready === true")
    got = page.evaluate("(url) => window.withCookies(url)", f"{server}/api/v1/meta/lab/obs")
    assert got.get("status") == 200, got
    assert json.loads(got["body"])["shape"] == [6, 8]
    page.close()


def test_zarrita_sees_what_the_policy_grants_the_session(signed_in, browser, sites, server, store):
    """zarrita.js reading with the browser's session (credentials: include)
    from the origin `[cors] credentials` names: the private array; from
    any other origin, or without the session, only what anonymous callers
    may read."""
    context, _, _ = signed_in
    allowed, other = sites
    include = {"credentials": "include"}
    want = zarr.open_array(str(store / "lab" / "obs"))[:]

    def read(ctx, origin, path):
        page = ctx.new_page()
        page.goto(f"{origin}/index.html")
        page.wait_for_function("window.ready === true")
        got = page.evaluate("([url, o]) => window.readArray(url, o)", [f"{server}/zarr/{path}", include])
        page.close()
        return got

    got = read(context, allowed, "lab/obs")
    assert "error" not in got, got
    assert np.array_equal(np.array(got["data"], dtype="f4").reshape(6, 8), want)
    assert "error" in read(context, other, "lab/obs")
    anonymous = browser.new_context()
    assert "error" in read(anonymous, allowed, "lab/obs")
    assert "error" not in read(anonymous, allowed, "public/temps")
    anonymous.close()


def test_writes_with_the_session_need_its_csrf_token_and_signing_out_ends_it(signed_in, server):
    context, _, _ = signed_in
    cookie = next(c for c in context.cookies() if c["name"] == "zarrd_session")
    jar = {"zarrd_session": cookie["value"]}
    assert requests.get(f"{server}/zarr/lab/obs/zarr.json", cookies=jar).status_code == 200
    refused = requests.put(f"{server}/zarr/lab/notes.txt", data=b"x", cookies=jar)
    assert refused.status_code == 403 and "x-csrf-token" in refused.json()["error"]["message"]
    session = requests.get(f"{server}/auth/session", cookies=jar).json()
    assert session["user"] == "ana" and session["groups"] == ["lab"]
    written = requests.put(f"{server}/zarr/lab/notes.txt", data=b"x", cookies=jar,
                           headers={"X-CSRF-Token": session["csrf"]})
    assert written.status_code in (200, 201, 204), written.text
    assert requests.post(f"{server}/auth/logout", cookies=jar).status_code == 403
    out = requests.post(f"{server}/auth/logout", cookies=jar, headers={"X-CSRF-Token": session["csrf"]})
    assert out.status_code == 204
    assert requests.get(f"{server}/zarr/lab/obs/zarr.json", cookies=jar).status_code == 401


def test_a_sign_in_returns_only_to_this_server(server, provider):
    answer = requests.get(f"{server}/auth/login", params={"next": "//evil.example/x"}, allow_redirects=False)
    assert answer.status_code == 302
    assert answer.headers["location"].startswith(f"{provider.url}/oauth2/authorize?")
    pending = {"Cookie": f"zarrd_signin={answer.cookies['zarrd_signin']}"}
    page = requests.post(answer.headers["location"], data={"sub": "bob"}, allow_redirects=False)
    back = requests.get(page.headers["location"], headers=pending, allow_redirects=False)
    assert back.status_code == 302 and back.headers["location"] == "/", back.text
    # A way back without the browser's sign-in cookie, or with another state, is refused.
    assert requests.get(page.headers["location"], allow_redirects=False).json()["error"]["code"] == "no_sign_in"
    again = requests.get(f"{server}/auth/login", allow_redirects=False)
    pending = {"Cookie": f"zarrd_signin={again.cookies['zarrd_signin']}"}
    forged = requests.get(f"{server}/auth/callback", params={"code": "x", "state": "not-the-one"},
                          headers=pending, allow_redirects=False)
    assert forged.status_code == 400 and forged.json()["error"]["code"] == "sign_in_state"


def share(server, path, expires_in):
    made = requests.post(f"{server}/api/v1/shares", json={"path": path, "expires_in": expires_in},
                         headers={"Authorization": f"Bearer {ADMIN}"})
    assert made.status_code == 201, made.text
    return made.json()


def test_share_links_open_in_zarrita_and_expire_or_are_revoked(browser, server, sites, store):
    _, other = sites
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{other}/index.html")
    page.wait_for_function("window.ready === true")
    want = zarr.open_array(str(store / "lab" / "obs"))[:]
    lasting = share(server, "lab/obs", 3600)
    brief = share(server, "lab/obs", 3)
    made = time.time()
    for link in (lasting, brief):
        got = page.evaluate("(url) => window.readArray(url)", server + link["url"])
        assert "error" not in got, got
        assert got["shape"] == [6, 8]
        assert np.array_equal(np.array(got["data"], dtype="f4").reshape(6, 8), want)
    # Outside the node, nothing: the link is its node's root.
    # (Dots encoded, as clients would otherwise resolve them before sending.)
    escape = requests.get(f"{server}{lasting['url']}%2E%2E/%2E%2E/public/temps/zarr.json")
    assert escape.status_code in (400, 404) and "zarr_format" not in escape.text
    time.sleep(max(0.0, made + 3.5 - time.time()))
    assert "error" in page.evaluate("(url) => window.readArray(url)", server + brief["url"])
    revoked = requests.delete(f"{server}/api/v1/shares/{lasting['id']}", headers={"Authorization": f"Bearer {ADMIN}"})
    assert revoked.status_code == 204
    assert "error" in page.evaluate("(url) => window.readArray(url)", server + lasting["url"])
    context.close()
