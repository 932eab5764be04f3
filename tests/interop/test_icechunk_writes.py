"""Writes to an Icechunk repository through zarrd's REST API are commits.

Each test has its own repository, written by icechunk-python: a float32
(64, 64) array in (16, 16) chunks and an empty (0, 4) int32 array, one
commit on `main`, a tag `v1` and a branch `dev` on it. zarrd mounts it
writable (`repo`) and read-only (`ro`). Proven here, each time by reading
the repository back with icechunk-python:

- a region written at `repo@dev` is one commit on `dev`: the branch moves to
  the snapshot the response names, the commit carries the message the client
  gave (else one naming the request), its parent is the previous tip, the
  written values and only those change, `main` and `v1` stay as they were,
  and zarrd serves the new values at the branch and the old ones at the old
  snapshot; a write without `@` commits to `main`;
- append, create (group, array), attribute patch, resize and delete are one
  commit each, with the expected nodes, values and attributes; a patch that
  changes nothing makes no commit;
- 8 concurrent writers on one branch lose no acknowledged write, through
  one zarrd (the repository in a directory, on S3 (moto) or on Azure Blob
  Storage (Azurite)) and through two
  zarrd processes sharing a repository on S3: writes to disjoint chunks are
  rebased, never refused; writes into one chunk either land or are refused
  with 409 `commit_conflict` and retried; each acknowledged write is
  exactly one commit; 8 concurrent appenders each get their own row;
- writes at a tag or a snapshot id, to a read-only mount, of raw keys, of a
  Zarr v2 node, at an unknown branch, or with data that does not fit are
  refused with clear errors and make no commit;
- commits by icechunk-python and by zarrd on one branch interleave: each is
  rebased on the other and both changes stay."""

import functools
import io
import json
import random
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import icechunk as ic
import numpy as np
import pytest
import zarr

from conftest import azure_env, create_bucket, create_container, start_azurite, start_zarrd, stop
from test_icechunk import call, error_of, get_json, npy, toml_string

# Icechunk warns that local storage is not for concurrent commits.
pytestmark = pytest.mark.filterwarnings("ignore")

INITIAL = (np.arange(64 * 64, dtype="f4") / 4).reshape(64, 64)
NPY, JSON = "application/x-npy", "application/json"


class Server:
    """The repository and the zarrd processes serving it; every read
    reopens the repository, so it sees what zarrd committed."""

    def __init__(self, storage, urls, first):
        self.storage, self.urls, self.first = storage, urls, first
        self.url = urls[0]

    def repo(self):
        return ic.Repository.open(self.storage())

    def tip(self, branch="dev"):
        return self.repo().lookup_branch(branch)

    def history(self, branch="dev"):
        return list(self.repo().ancestry(branch=branch))

    def refs(self):
        repo = self.repo()
        return ({b: repo.lookup_branch(b) for b in repo.list_branches()},
                {t: repo.lookup_tag(t) for t in repo.list_tags()})

    def group(self, **ref):
        session = self.repo().readonly_session(**(ref or {"branch": "dev"}))
        return zarr.open_group(session.store, mode="r", zarr_format=3)

    def send(self, method, target, body=None, ctype=None, message=None, via=0):
        """A request to zarrd number `via` (modulo how many there are)."""
        headers = {"Content-Type": ctype} if ctype else {}
        if message:
            headers["X-Zarr-Commit-Message"] = message
        return call(method, self.urls[via % len(self.urls)] + target, headers, body)


@pytest.fixture
def server(request, tmp_path):
    """A repository in a directory, or (parameter "s3") in a bucket of the
    S3 server (moto), or ("azure") in a container of Azurite, whose
    conditional writes Icechunk commits rely on;
    "s3-two-servers": two zarrd processes serve it, so their commits race
    and are rebased or refused as conflicts (Icechunk's local storage is
    not safe for commits from several processes)."""
    kind = getattr(request, "param", "local")
    emulator = None
    if kind == "azure":
        endpoint, emulator = start_azurite(str(tmp_path / "azurite"))
        env = azure_env(endpoint)
        monkeypatch = request.getfixturevalue("monkeypatch")
        for k, v in env.items():  # where icechunk-python's Azure client finds Azurite
            monkeypatch.setenv(k, v)
        create_container(endpoint, "repos")
        storage = functools.partial(ic.azure_storage, account="devstoreaccount1", container="repos", prefix="repo",
                                    config={"use_emulator": "true"})
        location = "az://repos/repo"
    elif kind.startswith("s3"):
        env = request.getfixturevalue("s3")
        bucket = f"writes-{uuid.uuid4().hex[:12]}"
        create_bucket(env["endpoint"], bucket)
        storage = functools.partial(ic.s3_storage, bucket=bucket, prefix="repo", region="us-east-1",
                                    endpoint_url=env["endpoint"], allow_http=True, force_path_style=True,
                                    access_key_id="test", secret_access_key="test")
        location = f"s3://{bucket}/repo"
    else:
        env, location = None, str(tmp_path / "repo")
        storage = functools.partial(ic.local_filesystem_storage, location)
    repo = ic.Repository.create(storage())
    s = repo.writable_session("main")
    root = zarr.create_group(s.store, zarr_format=3, attributes={"title": "writes"})
    root.create_array("a", shape=(64, 64), chunks=(16, 16), dtype="f4", fill_value=0)[:] = INITIAL
    root.create_array("rows", shape=(0, 4), chunks=(4, 4), dtype="i4", fill_value=0)
    first = s.commit("initial")
    repo.create_tag("v1", first)
    repo.create_branch("dev", first)
    config = tmp_path / "zarrd.toml"
    config.write_text(f"[mounts]\nrepo = {{ icechunk = {toml_string(location)} }}\n"
                      f"ro = {{ icechunk = {toml_string(location)}, read_only = true }}\n")
    (tmp_path / "root").mkdir()
    # Anonymous writes allowed, so a refused write is the repository's refusal.
    started = [start_zarrd("--config", str(config), str(tmp_path / "root"), "--allow-anonymous-writes", env=env)
               for _ in range(2 if kind == "s3-two-servers" else 1)]
    yield Server(storage, [url for url, _ in started], first)
    for _, proc in started:
        stop(proc)
    if emulator:
        stop(emulator)


def npy_bytes(values):
    buf = io.BytesIO()
    np.save(buf, np.asarray(values))
    return buf.getvalue()


def committed(server, answer, want_status, before, branch="dev", message=None):
    """Assert that `answer` made one commit on `branch` on top of `before`;
    its snapshot id."""
    status, headers, body = answer
    assert status == want_status, (status, body[:500])
    sid = headers["X-Zarr-Snapshot"]
    assert sid, dict(headers)
    history = server.history(branch)
    assert server.tip(branch) == sid == history[0].id
    assert history[0].parent_id == before and history[1].id == before, [(h.id, h.parent_id) for h in history]
    if message:
        assert history[0].message == message
    return sid


def region(server, select, values, mount="repo@dev", message=None):
    return server.send("PUT", f"/api/v1/data/{mount}/a?select={select}", npy_bytes(values), NPY, message)


# --------------------------------------------------------------------------

def test_region_write_is_one_commit_on_the_branch(server):
    before = server.tip("dev")
    old = [h.id for h in server.history("dev")]
    block = np.full((16, 32), -5, "f4")
    answer = region(server, "16:32,0:32", block, message="fill a block")
    sid = committed(server, answer, 200, before, message="fill a block")
    doc = json.loads(answer[2])
    assert doc["snapshot"] == sid and doc["shape"] == [16, 32] and doc["elements"] == 512, doc
    assert doc["chunks_written"] == 2 and doc["chunks_deleted"] == 0, doc
    assert [h.id for h in server.history("dev")][1:] == old, "the history below the new commit is intact"

    want = INITIAL.copy()
    want[16:32, 0:32] = -5
    np.testing.assert_array_equal(server.group(branch="dev")["a"][...], want)
    np.testing.assert_array_equal(server.group(branch="main")["a"][...], INITIAL)
    np.testing.assert_array_equal(server.group(tag="v1")["a"][...], INITIAL)
    assert server.refs() == ({"main": server.first, "dev": sid}, {"v1": server.first})

    api = f"{server.url}/api/v1/data"
    np.testing.assert_array_equal(npy(f"{api}/repo@dev/a?format=npy"), want)
    np.testing.assert_array_equal(npy(f"{api}/repo@{sid}/a?format=npy"), want)
    for ref in (before, "v1", "main"):
        np.testing.assert_array_equal(npy(f"{api}/repo@{ref}/a?format=npy"), INITIAL, err_msg=ref)
    np.testing.assert_array_equal(npy(f"{api}/repo/a?format=npy"), INITIAL)
    doc = get_json(f"{server.url}/api/v1/versions/repo")
    assert {b["name"]: b["snapshot"] for b in doc["branches"]} == {"main": server.first, "dev": sid}


def test_default_message_names_the_request_and_no_at_writes_main(server):
    answer = region(server, "0:10", np.ones((10, 64), "f4"), mount="repo")
    tip = committed(server, answer, 200, server.first, branch="main")
    message = server.history("main")[0].message
    assert "PUT" in message and "/api/v1/data/repo/a" in message, message
    assert server.tip("dev") == server.first
    want = INITIAL.copy()
    want[:10] = 1
    np.testing.assert_array_equal(server.group(branch="main")["a"][...], want)
    committed(server, region(server, "10", np.full(64, 2, "f4"), mount="repo@main"), 200, tip, branch="main")
    want[10] = 2
    np.testing.assert_array_equal(npy(f"{server.url}/api/v1/data/repo/a?format=npy"), want)


def test_node_changes_are_one_commit_each(server):
    tip = server.first

    def step(method, target, body, ctype, status):
        nonlocal tip
        message = f"{method} {target}"
        tip = committed(server, server.send(method, target, body, ctype, message), status, tip, message=message)
        return tip

    def as_json(doc):
        return json.dumps(doc).encode()

    step("PUT", "/api/v1/meta/repo@dev/g", as_json({"node_type": "group", "attributes": {"k": 1}}), JSON, 201)
    assert dict(server.group()["g"].attrs) == {"k": 1}
    step("PUT", "/api/v1/meta/repo@dev/g/t", as_json({"node_type": "array", "shape": [0, 3], "chunks": [2, 3],
                                                     "dtype": "int16", "fill_value": 0,
                                                     "attributes": {"units": "m"}}), JSON, 201)
    t = server.group()["g/t"]
    assert t.shape == (0, 3) and t.dtype == np.int16 and dict(t.attrs) == {"units": "m"}
    added = np.arange(6, dtype="i2").reshape(2, 3) + 1
    sid = step("POST", "/api/v1/append/repo@dev/g/t?axis=0", npy_bytes(added), NPY, 200)
    assert get_json(f"{server.url}/api/v1/meta/repo@{sid}/g/t")["shape"] == [2, 3]
    np.testing.assert_array_equal(server.group()["g/t"][...], added)
    step("PATCH", "/api/v1/meta/repo@dev/a", as_json({"attributes": {"units": "K"}}), JSON, 200)
    assert dict(server.group()["a"].attrs) == {"units": "K"}
    # What changes nothing makes no commit.
    for body in ({"attributes": {"units": "K"}}, {"attributes": {}}, {"shape": [64, 64]}):
        status, headers, _ = server.send("PATCH", "/api/v1/meta/repo@dev/a", as_json(body), JSON)
        assert status == 200 and "X-Zarr-Snapshot" not in headers and server.tip() == tip, body
    step("PATCH", "/api/v1/meta/repo@dev/a", as_json({"shape": [80, 64]}), JSON, 200)
    a = server.group()["a"][...]
    assert a.shape == (80, 64)
    np.testing.assert_array_equal(a[:64], INITIAL)
    assert not a[64:].any()
    assert get_json(f"{server.url}/api/v1/meta/repo@dev/a")["shape"] == [80, 64]
    step("DELETE", "/api/v1/meta/repo@dev/g", None, None, 204)
    assert sorted(server.group().keys()) == ["a", "rows"]

    history = server.history("dev")
    assert len(history) == 2 + 6 and history[-2].id == server.first
    assert [h.message.split(" ")[0] for h in history[:6]] == ["DELETE", "PATCH", "PATCH", "POST", "PUT", "PUT"]
    main = server.group(branch="main")
    assert sorted(main.keys()) == ["a", "rows"] and main["a"].shape == (64, 64) and not dict(main["a"].attrs)


# --------------------------------------------------------------------------
# Concurrent writers on one branch.

def until_not_conflicting(server, method, target, body, via, attempts=200):
    """Send until the answer is not 409 commit_conflict: (answer, conflicts)."""
    for conflicts in range(attempts):
        answer = server.send(method, target, body, NPY, via=via)
        if answer[0] != 409:
            return answer, conflicts
        assert error_of(answer[2])["code"] == "commit_conflict", answer[2][:300]
        time.sleep(random.uniform(0.0, 0.05))
    pytest.fail(f"{method} {target}: still conflicting after {attempts} attempts")


def run_writers(server, jobs_of):
    """8 threads, thread w sending jobs_of(w) one after another to zarrd
    number w (of one or two); the acknowledged writes as (job, answer
    document, conflicts)."""
    def writer(w):
        done = []
        for method, target, body in jobs_of(w):
            answer, conflicts = until_not_conflicting(server, method, target, body, w)
            assert answer[0] == 200, (method, target, answer[0], answer[2][:300])
            doc = json.loads(answer[2])
            assert doc["snapshot"] == answer[1]["X-Zarr-Snapshot"], doc
            done.append(((method, target), doc, conflicts))
        return done

    with ThreadPoolExecutor(8) as pool:
        return [d for f in [pool.submit(writer, w) for w in range(8)] for d in f.result()]


@pytest.mark.parametrize("server", ["local", "s3", "s3-two-servers", "azure"], indirect=True)
def test_eight_concurrent_writers_lose_no_acknowledged_write(server):
    def chunk_jobs(w):
        for k in (2 * w, 2 * w + 1):
            r, c = 16 * (k // 4), 16 * (k % 4)
            values = npy_bytes(np.full((16, 16), 1000 + k, "f4"))
            yield "PUT", f"/api/v1/data/repo@dev/a?select={r}:{r + 16},{c}:{c + 16}", values

    def element_jobs(w):
        # All in chunk (3, 3), which every writer shares.
        for i, (r, c) in enumerate(((48 + w, 48 + w), (48 + w, 63 - w))):
            yield "PUT", f"/api/v1/data/repo@dev/a?select={r},{c}", npy_bytes(np.float32(-(2 * w + i + 1)))

    disjoint = run_writers(server, chunk_jobs)
    assert len(disjoint) == 16
    assert sum(c for _, _, c in disjoint) == 0, "writes to different chunks are rebased, never conflicts"
    shared = run_writers(server, element_jobs)
    assert len(shared) == 16
    want = np.repeat(np.repeat(1000 + np.arange(16, dtype="f4").reshape(4, 4), 16, 0), 16, 1)
    for w in range(8):
        want[48 + w, 48 + w], want[48 + w, 63 - w] = -(2 * w + 1), -(2 * w + 2)
    np.testing.assert_array_equal(server.group()["a"][...], want)
    for url in server.urls:
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@dev/a?format=npy"), want)
    history = server.history("dev")
    acknowledged = [doc["snapshot"] for _, doc, _ in disjoint + shared]
    assert len(history) == 2 + 32 and history[-2].id == server.first
    assert sorted(h.id for h in history[:32]) == sorted(acknowledged), "one commit per acknowledged write"
    assert server.tip("main") == server.first


@pytest.mark.parametrize("server", ["local", "s3", "s3-two-servers"], indirect=True)
def test_eight_concurrent_appenders_each_get_their_row(server):
    def jobs(w):
        yield "POST", "/api/v1/append/repo@dev/rows?axis=0", npy_bytes(np.full((1, 4), w + 1, "i4"))

    done = run_writers(server, jobs)
    assert len(done) == 8
    assert sorted(doc["shape"][0] for _, doc, _ in done) == list(range(1, 9)), [d for _, d, _ in done]
    rows = server.group()["rows"][...]
    assert rows.shape == (8, 4)
    assert (rows == rows[:, :1]).all() and sorted(rows[:, 0]) == list(range(1, 9)), rows
    for url in server.urls:
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@dev/rows?format=npy"), rows)
    history = server.history("dev")
    assert len(history) == 2 + 8
    assert sorted(h.id for h in history[:8]) == sorted(doc["snapshot"] for _, doc, _ in done)


# --------------------------------------------------------------------------
# Refusals.

def test_refused_writes_make_no_commit(server):
    refs = server.refs()
    history = [h.id for h in server.history("dev")]
    block = npy_bytes(np.ones((16, 16), "f4"))
    patch = json.dumps({"attributes": {"x": 1}}).encode()
    row = npy_bytes(np.ones((1, 4), "i4"))

    def refused(method, target, body, ctype, status, code):
        got, headers, answer = server.send(method, target, body, ctype)
        assert got == status, (method, target, got, answer[:300])
        assert headers["Content-Type"].startswith("application/json"), (method, target)
        assert "X-Zarr-Snapshot" not in headers, (method, target)
        err = error_of(answer)
        assert err["code"] == code, (method, target, err)
        return err["message"]

    for at in ("v1", server.first):
        for method, target, body, ctype in (
            ("PUT", f"/api/v1/data/repo@{at}/a?select=0:16,0:16", block, NPY),
            ("POST", f"/api/v1/append/repo@{at}/rows?axis=0", row, NPY),
            ("PATCH", f"/api/v1/meta/repo@{at}/a", patch, JSON),
            ("PUT", f"/api/v1/meta/repo@{at}/g", b'{"node_type": "group"}', JSON),
            ("DELETE", f"/api/v1/meta/repo@{at}/a", None, None),
        ):
            message = refused(method, target, body, ctype, 403, "read_only")
            assert "branch" in message, (method, target, message)
    for target in ("/api/v1/data/repo@nope/a?select=0:16,0:16", "/api/v1/meta/repo@nope/a"):
        method, body, ctype = ("PUT", block, NPY) if "data" in target else ("PATCH", patch, JSON)
        assert "'nope'" in refused(method, target, body, ctype, 404, "unknown_version")
    for mount in ("ro", "ro@dev", "ro@main"):
        refused("PUT", f"/api/v1/data/{mount}/a?select=0:16,0:16", block, NPY, 403, "read_only")
        refused("PATCH", f"/api/v1/meta/{mount}/a", patch, JSON, 403, "read_only")
    for target in ("/zarr/repo@dev/a/c/0/0", "/zarr/repo/a/c/0/0"):
        refused("PUT", target, b"\0" * 1024, "application/octet-stream", 403, "read_only")
    status, _, answer = server.send("PUT", "/api/v1/meta/repo@dev/old", json.dumps(
        {"node_type": "array", "zarr_format": 2, "shape": [4], "dtype": "<i4"}).encode(), JSON)
    assert 400 <= status < 500, (status, answer[:300])
    message = error_of(answer)["message"]
    assert re.search(r"v3|version 3|format 3|zarr_format", message, re.I), message
    refused("PUT", "/api/v1/data/repo@dev/a?select=0:16,0:16", npy_bytes(np.ones((4, 4), "f4")), NPY, 422,
            "shape_mismatch")
    refused("PUT", "/api/v1/data/repo@dev/absent?select=0", npy_bytes(np.float32(1)), NPY, 404, "not_found")

    assert server.refs() == refs
    assert [h.id for h in server.history("dev")] == history
    assert call("GET", f"{server.url}/api/v1/meta/repo@dev/old")[0] == 404
    np.testing.assert_array_equal(server.group()["a"][...], INITIAL)


# --------------------------------------------------------------------------
# icechunk-python and zarrd on one branch.

def test_commits_from_icechunk_python_and_zarrd_interleave(server):
    # zarrd has read the branch's tip before icechunk-python moves it.
    np.testing.assert_array_equal(npy(f"{server.url}/api/v1/data/repo@dev/a?format=npy"), INITIAL)
    s = server.repo().writable_session("dev")
    zarr.open_array(s.store, path="a", mode="r+")[0:16, 0:16] = 7
    theirs = s.commit("from icechunk-python")
    ours = committed(server, region(server, "48:64,48:64", np.full((16, 16), 9, "f4"), message="from zarrd"),
                     200, theirs)

    # A session opened before zarrd's commit, committed after it, rebased.
    s = server.repo().writable_session("dev")
    zarr.open_array(s.store, path="a", mode="r+")[16:32, 16:32] = 11
    again = committed(server, region(server, "32:48,32:48", np.full((16, 16), 13, "f4")), 200, ours)
    last = s.commit("icechunk-python after zarrd", rebase_with=ic.ConflictDetector())

    want = INITIAL.copy()
    for i, v in enumerate((7, 11, 13, 9)):
        want[16 * i:16 * i + 16, 16 * i:16 * i + 16] = v
    np.testing.assert_array_equal(server.group()["a"][...], want)
    np.testing.assert_array_equal(npy(f"{server.url}/api/v1/data/repo@dev/a?format=npy"), want)
    history = server.history("dev")
    assert [h.id for h in history[:5]] == [last, again, ours, theirs, server.first]
    assert [history[0].message, history[2].message, history[3].message] == [
        "icechunk-python after zarrd", "from zarrd", "from icechunk-python"]
    assert "PUT" in history[1].message
