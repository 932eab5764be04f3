"""Sign-in through a real OpenID provider (oidc-provider-mock, from PyPI) and
access rules per node: two users in different groups and anonymous callers
each see exactly what the `[[policy]]` grants, through zarr-python, xarray,
boto3 on /s3 and plain HTTP; forged, expired, wrong-audience and
wrong-issuer tokens are refused; a key rotation at the provider is picked
up; what a caller may not read is absent from every listing and 404 by name;
writes and refusals leave audit lines."""

import base64
import json
import os
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

import boto3
import numpy as np
import pytest
import requests
import xarray as xr
import yaml
import zarr
from botocore import UNSIGNED
from botocore.config import Config
from joserfc import jwk, jwt

from conftest import start_zarrd, stop
from oidc_provider import Provider

CLIENT = "zarrd-viewer"
REDIRECT = "http://127.0.0.1:9/callback"
ADMIN = "admin-token-0123456789"


@pytest.fixture(scope="module")
def provider():
    """The OpenID provider on loopback (oidc_provider.py)."""
    provider = Provider()
    yield provider.url
    provider.stop()


def sign_in(issuer, sub):
    """The authorization-code flow as a browser runs it: the provider's
    login form (posting the subject), then the code for tokens."""
    session = requests.Session()
    answer = session.post(
        f"{issuer}/oauth2/authorize",
        params={"client_id": CLIENT, "redirect_uri": REDIRECT, "response_type": "code",
                "scope": "openid email", "state": "s"},
        data={"sub": sub},
        allow_redirects=False,
    )
    assert answer.status_code == 302, answer.text
    code = urllib.parse.parse_qs(urllib.parse.urlparse(answer.headers["location"]).query)["code"][0]
    tokens = session.post(
        f"{issuer}/oauth2/token",
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT},
        auth=(CLIENT, "secret"),
    )
    assert tokens.status_code == 200, tokens.text
    return tokens.json()["id_token"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy-store")
    top = zarr.open_group(str(root), mode="w", zarr_format=3)
    for path in ["public/temps", "lab/obs", "lab/shared", "lab/embargo/secret"]:
        group_path, name = path.rsplit("/", 1)
        group = top.require_group(group_path)
        a = group.create_array(name, shape=(4, 4), chunks=(2, 2), dtype="f4", dimension_names=["y", "x"])
        a[:] = np.arange(16, dtype="f4").reshape(4, 4) + len(path)
    return root


POLICY = """
[[oidc]]
issuer = "{issuer}"
audience = "{client}"

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

[[policy]]
path = "lab/embargo"
grant = "read"
to = ["group:lab"]
deny = true

[[policy]]
path = "lab/shared"
grant = "read"
to = ["user:bob"]
"""


@pytest.fixture(scope="module")
def server(provider, store, tmp_path_factory):
    config = tmp_path_factory.mktemp("policy-config") / "zarrd.toml"
    config.write_text(POLICY.format(issuer=provider, client=CLIENT, admin=ADMIN))
    log = tmp_path_factory.mktemp("policy-log") / "zarrd.log"
    with open(log, "w") as err:
        url, proc = start_zarrd(str(store), "--config", str(config), "--recheck-cached", "always",
                                stderr=err)
    yield url, log
    stop(proc)


@pytest.fixture(scope="module")
def tokens(provider):
    return {"ana": sign_in(provider, "ana"), "bob": sign_in(provider, "bob")}


def bearer(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


def get(url, token=None, **kw):
    return requests.get(url, headers={**bearer(token), **kw.pop("headers", {})}, timeout=30, **kw)


def test_each_user_reads_what_the_policy_grants_through_zarr_python(server, tokens):
    url, _ = server
    for who, readable, hidden in [
        ("ana", ["public/temps", "lab/obs", "lab/shared"], ["lab/embargo/secret"]),
        ("bob", ["public/temps", "lab/shared"], ["lab/obs", "lab/embargo/secret"]),
        (None, ["public/temps"], []),
    ]:
        opts = {"headers": bearer(tokens.get(who))}
        for path in readable:
            a = zarr.open_array(f"{url}/zarr/{path}", mode="r", storage_options=opts)
            np.testing.assert_array_equal(a[:], np.arange(16, dtype="f4").reshape(4, 4) + len(path))
        for path in hidden:
            with pytest.raises(Exception):
                zarr.open_array(f"{url}/zarr/{path}", mode="r", storage_options=opts)
            assert get(f"{url}/zarr/{path}/zarr.json", tokens.get(who)).status_code == 404, (who, path)
    assert get(f"{url}/zarr/lab/obs/zarr.json").status_code == 401, "anonymous callers are asked to sign in"


def test_xarray_opens_a_group_the_user_may_read_whole(server, tokens):
    url, _ = server
    ds = xr.open_zarr(f"{url}/zarr/public", consolidated=False,
                      storage_options={"headers": bearer(tokens["bob"])})
    assert list(ds.data_vars) == ["temps"]
    np.testing.assert_array_equal(ds["temps"].values, np.arange(16).reshape(4, 4) + len("public/temps"))


def test_listings_show_only_what_each_caller_sees(server, tokens):
    url, _ = server
    listing = get(f"{url}/zarr/lab/", tokens["bob"], headers={"Accept": "application/json"}).json()
    assert listing["prefixes"] == ["shared"], listing
    listing = get(f"{url}/zarr/lab/", tokens["ana"], headers={"Accept": "application/json"}).json()
    assert listing["prefixes"] == ["obs", "shared"], listing
    tree = get(f"{url}/api/v1/tree", tokens["bob"]).json()
    paths = [n["path"] for n in tree["nodes"]]
    assert "lab/shared" in paths and "lab/obs" not in paths and "lab/embargo" not in paths, paths
    lab = get(f"{url}/api/v1/meta/lab", tokens["ana"]).json()
    assert [m["name"] for m in lab["members"]] == ["obs", "shared"], lab
    # Consolidated metadata built for the group leaves out what Ana may not read.
    consolidated = get(f"{url}/zarr/lab/zarr.json", tokens["ana"]).json()
    kept = consolidated.get("consolidated_metadata", {}).get("metadata", {})
    assert not any(k.startswith("embargo") for k in kept), kept
    # PROPFIND at any depth.
    dav = requests.request("PROPFIND", f"{url}/zarr/lab/", headers={**bearer(tokens["bob"]), "Depth": "infinity"})
    assert dav.status_code == 207 and "embargo" not in dav.text and "obs" not in dav.text and "shared" in dav.text


def test_boto3_on_s3_lists_and_reads_only_what_is_granted(server, tokens):
    url, _ = server
    s3 = boto3.client("s3", endpoint_url=f"{url}/s3", region_name="us-east-1",
                      config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"}))

    def add_token(request, **_):
        request.headers["Authorization"] = f"Bearer {tokens['bob']}"

    s3.meta.events.register("before-send.s3", add_token)
    top = s3.list_objects_v2(Bucket="zarr", Delimiter="/")
    assert sorted(p["Prefix"] for p in top.get("CommonPrefixes", [])) == ["lab/", "public/"], top
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="zarr", Prefix="lab/", MaxKeys=2)
            for o in page.get("Contents", [])]
    assert keys and all(k.startswith("lab/shared/") for k in keys), keys
    body = s3.get_object(Bucket="zarr", Key="lab/shared/zarr.json")["Body"].read()
    assert json.loads(body)["node_type"] == "array"
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="zarr", Key="lab/obs/zarr.json")


def test_hidden_nodes_leak_through_no_route(server, tokens):
    """Every path of the API description, naming a node Bob may not read:
    404 (or the route's own not-found form), never 403 or the node."""
    url, _ = server
    spec = yaml.safe_load(get(f"{url}/openapi.yaml").text)
    hidden = "lab/obs"
    for path, ops in spec["paths"].items():
        # The viewer's page and files, and definitions, hold no store data;
        # a share link is its own credential (test_signin.py).
        if "{" not in path or path.startswith(("/view", "/tiles/tileMatrixSets", "/share/")):
            continue
        concrete = path.replace("{key}", f"{hidden}/zarr.json").replace("{path}", hidden)
        if path.startswith("/s3/{bucket}"):
            concrete = concrete.replace("{bucket}", "zarr")
            if "{key}" not in path:
                continue  # the bucket's listings: below
        if path.startswith("/opendap/"):
            concrete = f"/opendap/{hidden}.dds"
        if path.startswith("/edr/collections/"):
            concrete = "/edr/collections/lab"
        for method in ops:
            if method not in ("get", "head", "put", "post", "patch", "delete"):
                continue
            answer = requests.request(method.upper(), f"{url}{concrete}", headers=bearer(tokens["bob"]),
                                      data=b"{}", timeout=30)
            assert answer.status_code == 404, (method, concrete, answer.status_code, answer.text[:200])
            assert b"obs" not in answer.content.replace(hidden.encode(), b"") or method == "head", answer.text
    # And the listings of every form, at the root.
    for listing in ["/zarr/?", "/api/v1/tree", "/s3/zarr?list-type=2", "/wms?service=WMS&request=GetCapabilities",
                    "/edr/collections"]:
        answer = get(f"{url}{listing}", tokens["bob"], headers={"Accept": "application/json"})
        assert answer.status_code == 200, (listing, answer.text)
        assert "lab/obs" not in answer.text and "embargo" not in answer.text, (listing, answer.text[:500])


def test_bad_tokens_are_refused(server, provider, tokens):
    url, _ = server
    target = f"{url}/zarr/public/temps/zarr.json"
    assert get(target, tokens["ana"]).status_code == 200
    private = jwk.import_key(get(f"{provider}/test/key").json())
    kid = private.as_dict()["kid"]
    now = int(time.time())
    claims = {"iss": provider, "aud": CLIENT, "sub": "ana", "groups": ["lab"], "iat": now, "exp": now + 600}

    def signed(key, **changes):
        return jwt.encode({"alg": "RS256", "kid": kid}, {**claims, **changes}, key)

    assert get(target, signed(private)).status_code == 200, "the provider's own key signs"
    forged_key = jwk.RSAKey.generate_key(2048)
    b64 = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    cases = {
        "expired": signed(private, exp=now - 300, iat=now - 900),
        "not yet valid": signed(private, nbf=now + 600),
        "wrong audience": signed(private, aud="someone-else"),
        "wrong issuer": signed(private, iss="http://127.0.0.1:1"),
        "re-signed": signed(forged_key),
        "alg none": f"{b64({'alg': 'none', 'kid': kid})}.{b64(claims)}.",
        "tampered": (lambda t: t.split(".")[0] + "." + b64({**claims, "groups": ["admins"]}) + "." + t.split(".")[2])(
            signed(private)),
        "unknown kid": jwt.encode({"alg": "RS256", "kid": "made-up"}, claims, forged_key),
    }
    for what, token in cases.items():
        answer = get(f"{url}/zarr/lab/obs/zarr.json", token)
        assert answer.status_code == 401, (what, answer.status_code, answer.text)
        assert answer.headers["WWW-Authenticate"].startswith("Bearer"), what
        assert answer.json()["error"]["code"] == "unauthorized", what


def test_a_key_rotation_at_the_provider_is_picked_up(server, provider, tokens):
    url, _ = server
    target = f"{url}/zarr/lab/obs/zarr.json"
    old = tokens["ana"]
    assert get(target, old).status_code == 200
    assert requests.post(f"{provider}/test/rotate").status_code == 204
    # Refetches for unknown key ids are spaced out: wait for the next one.
    time.sleep(10.5)
    fresh = sign_in(provider, "ana")
    assert get(target, fresh).status_code == 200, "a token signed by the new key"
    assert get(target, old).status_code == 401, "the withdrawn key signs no more"


def test_writes_follow_the_policy_and_are_audited(server, provider):
    url, log = server
    # Signed in afresh: the rotation above withdrew the first tokens' key.
    tokens = {"ana": sign_in(provider, "ana"), "bob": sign_in(provider, "bob")}
    body = np.full((2, 2), 7, dtype="<f4").tobytes()
    ok = requests.put(f"{url}/api/v1/data/lab/obs?select=0:2,0:2", data=body,
                      headers={**bearer(tokens["ana"]), "Content-Type": "application/octet-stream"})
    assert ok.status_code in (200, 204), ok.text
    refused = requests.put(f"{url}/api/v1/data/lab/shared?select=0:2,0:2", data=body,
                           headers={**bearer(tokens["bob"]), "Content-Type": "application/octet-stream"})
    assert refused.status_code == 403, refused.text
    time.sleep(0.5)
    lines = [line for line in open(log) if "zarrd::audit" in line]
    assert any("user:ana" in line and "/api/v1/data/lab/obs" in line and "written" in line for line in lines), lines
    # A write with a key names the key and its owner.
    key = requests.post(f"{url}/api/v1/keys", json={"name": "audited", "grant": "write", "prefixes": ["lab/obs"]},
                        headers=bearer(tokens["ana"])).json()["key"]
    by_key = requests.put(f"{url}/api/v1/data/lab/obs?select=0:2,0:2", data=body,
                          headers={**bearer(key), "Content-Type": "application/octet-stream"})
    assert by_key.status_code in (200, 204), by_key.text
    time.sleep(0.5)
    lines = [line for line in open(log) if "zarrd::audit" in line]
    assert any("key:" in line and "user:ana" in line and "written" in line for line in lines), lines
    assert any("user:bob" in line and "/api/v1/data/lab/shared" in line and "refused" in line for line in lines), lines


def test_watchers_hear_only_of_changes_they_may_read(server, provider):
    url, _ = server
    ana, bob = sign_in(provider, "ana"), sign_in(provider, "bob")
    heard = []
    stream = requests.get(f"{url}/api/v1/watch", headers=bearer(bob), stream=True, timeout=30)
    assert stream.status_code == 200

    def listen():
        for line in stream.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                heard.append(json.loads(line[5:]))

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(0.5)
    body = np.full((2, 2), 3, dtype="<f4").tobytes()
    headers = {"Content-Type": "application/octet-stream"}
    for path, token in [("lab/obs", ana), ("lab/shared", ana), ("public/temps", ADMIN)]:
        answer = requests.put(f"{url}/api/v1/data/{path}?select=0:2,0:2", data=body,
                              headers={**bearer(token), **headers})
        assert answer.status_code in (200, 204), answer.text
    deadline = time.time() + 10
    while time.time() < deadline and not any(h["path"] == "public/temps" for h in heard):
        time.sleep(0.1)
    stream.close()
    paths = {h["path"] for h in heard}
    assert {"lab/shared", "public/temps"} <= paths, heard
    assert "lab/obs" not in paths, heard


def test_api_keys_work_on_every_replica_and_stop_when_revoked(store, provider, tmp_path):
    """A key minted on one replica works on another serving the same store,
    and stops there within the documented 10 s of its revocation."""
    config = tmp_path / "zarrd.toml"
    config.write_text(POLICY.format(issuer=provider, client=CLIENT, admin=ADMIN))
    replicas = [start_zarrd(str(store), "--config", str(config)) for _ in range(2)]
    try:
        (a, _), (b, _) = replicas
        ana = sign_in(provider, "ana")
        minted = requests.post(f"{a}/api/v1/keys", json={"name": "notebook", "prefixes": ["lab/obs"]},
                               headers=bearer(ana))
        assert minted.status_code == 201, minted.text
        key = minted.json()["key"]
        arr = zarr.open_array(f"{b}/zarr/lab/obs", mode="r", storage_options={"headers": bearer(key)})
        assert arr.shape == (4, 4)
        assert get(f"{b}/zarr/lab/shared/zarr.json", key).status_code == 404, "outside the key's prefix"
        # A watch opened with the key ends once the key is revoked.
        watch = requests.get(f"{b}/api/v1/watch/lab/obs", headers=bearer(key), stream=True, timeout=60)
        assert watch.status_code == 200
        ended = threading.Event()

        def drain():
            try:
                for _ in watch.iter_content(chunk_size=None):
                    pass
            except Exception:
                pass
            ended.set()

        threading.Thread(target=drain, daemon=True).start()
        assert requests.delete(f"{a}/api/v1/keys/{minted.json()['id']}", headers=bearer(ana)).status_code == 204
        assert get(f"{a}/zarr/lab/obs/zarr.json", key).status_code == 401, "at once where it was revoked"
        deadline = time.time() + 12
        while get(f"{b}/zarr/lab/obs/zarr.json", key).status_code == 200:
            assert time.time() < deadline, "still accepted past the documented 10 s"
            time.sleep(0.5)
        assert get(f"{b}/zarr/lab/obs/zarr.json", key).status_code == 401
        assert ended.wait(25), "the watch outlived the key's revocation"
    finally:
        for _, proc in replicas:
            stop(proc)
