"""zarrd on object stores: S3 (moto, single-threaded so its conditional
PUTs are atomic) and Azure Blob Storage (Azurite), each on loopback. Reads,
ranges, writes and conditional puts through zarrd, then two zarrd processes
sharing one bucket with overlapping concurrent writers and appenders, where
compare-and-swap is what keeps every acknowledged write; and what a store
outage does to requests and readiness."""

import json
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from conftest import azure_env, create_bucket, create_container, s3_env, start_azurite, start_moto, start_zarrd, stop

@pytest.fixture(scope="module", params=["s3", "azure"])
def backend(request, tmp_path_factory):
    """(root URL, environment) of a fresh bucket or container."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        create_bucket(s3["endpoint"], "zarrd-test")
        yield "s3://zarrd-test/root", s3
        return
    endpoint, proc = start_azurite(str(tmp_path_factory.mktemp("azurite")))
    create_container(endpoint, "zarrd-test")
    yield "az://zarrd-test/root", azure_env(endpoint)
    stop(proc)


def call(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def put_json(url, doc, method="PUT"):
    return call(method, url, json.dumps(doc).encode(), {"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def servers(backend):
    root, env = backend
    started = [start_zarrd(root, "--allow-anonymous-writes", env=env) for _ in range(2)]
    yield [url for url, _ in started]
    for _, proc in started:
        stop(proc)


def test_reads_writes_ranges_and_conditional_puts(servers):
    a, b = servers
    status, _, body = put_json(f"{a}/api/v1/meta/grid", {"node_type": "array", "shape": [20, 30], "chunks": [8, 8],
                                                         "dtype": "float64", "fill_value": "NaN"})
    assert status == 201, body
    data = np.arange(600, dtype="<f8").reshape(20, 30)
    status, _, body = call("PUT", f"{a}/api/v1/data/grid", data.tobytes(), {"Content-Type": "application/octet-stream"})
    assert status == 200, body
    status, _, raw = call("GET", f"{b}/api/v1/data/grid?select=3:7,-5:&format=raw")
    assert status == 200 and raw == data[3:7, -5:].tobytes()
    status, headers, part = call("GET", f"{b}/zarr/grid/zarr.json", headers={"Range": "bytes=-10"})
    assert status == 206 and len(part) == 10 and headers["Content-Range"].startswith("bytes ")
    assert call("GET", f"{b}/zarr/grid/c/9/9")[0] == 404
    assert call("PUT", f"{a}/zarr/blob", b"one", {"If-None-Match": "*"})[0] == 201
    assert call("PUT", f"{b}/zarr/blob", b"two", {"If-None-Match": "*"})[0] == 412
    status, headers, _ = call("GET", f"{b}/zarr/blob")
    assert call("PUT", f"{a}/zarr/blob", b"two", {"If-Match": '"nope"'})[0] == 412
    assert call("PUT", f"{a}/zarr/blob", b"two", {"If-Match": headers["ETag"]})[0] == 204
    assert call("GET", f"{b}/zarr/blob")[2] == b"two"
    assert call("GET", f"{a}/readyz")[0] == 200


N, WRITERS = 48, 12


def test_two_servers_one_bucket_lose_no_write(servers):
    """Overlapping unaligned writes from 12 clients through two servers: every
    element ends with a value some writer wrote last (none lost), and the
    servers had to retry compare-and-swaps to get there."""
    a, _ = servers
    assert put_json(f"{a}/api/v1/meta/shared", {"node_type": "array", "shape": [N, N], "chunks": [16, 16],
                                                "dtype": "uint32", "fill_value": 0})[0] == 201
    writes, lock = [], threading.Lock()
    deadline = time.monotonic() + 3.0

    def writer(w):
        rng = np.random.default_rng(w)
        url = servers[w % 2]
        seq = 0
        while time.monotonic() < deadline:
            seq += 1
            r0, c0 = rng.integers(0, N - 1, 2)
            r1, c1 = r0 + 1 + rng.integers(0, min(20, N - r0)), c0 + 1 + rng.integers(0, min(20, N - c0))
            value = ((w + 1) << 20) | seq
            body = np.full((r1 - r0) * (c1 - c0), value, dtype="<u4").tobytes()
            sent = time.monotonic()
            status, _, text = call("PUT", f"{url}/api/v1/data/shared?select={r0}:{r1},{c0}:{c1}", body,
                                   {"Content-Type": "application/octet-stream"})
            assert status == 200, text
            with lock:
                writes.append((value, r0, r1, c0, c1, sent, time.monotonic()))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(writes) > 50
    got = np.frombuffer(call("GET", f"{servers[1]}/api/v1/data/shared?format=raw")[2], dtype="<u4").reshape(N, N)
    for r in range(N):
        for c in range(N):
            covering = [w for w in writes if w[1] <= r < w[2] and w[3] <= c < w[4]]
            allowed = {w[0] for w in covering if not any(o[5] > w[6] for o in covering)}
            assert (got[r, c] in allowed) if covering else got[r, c] == 0, (r, c, hex(got[r, c]))
    metrics = call("GET", f"{a}/metrics")[2].decode() + call("GET", f"{servers[1]}/metrics")[2].decode()
    retries = sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("zarrd_cas_retries_total"))
    assert retries > 0, "compare-and-swap conflicts were expected with overlapping writers on two servers"


def test_concurrent_appends(servers):
    a, _ = servers
    assert put_json(f"{a}/api/v1/meta/log", {"node_type": "array", "shape": [0, 2], "chunks": [4, 2], "dtype": "uint32"})[0] == 201

    def appender(k):
        for i in range(4):
            body = np.full(4, 100 * (k + 1) + i, dtype="<u4").tobytes()
            status, _, text = call("POST", f"{servers[k % 2]}/api/v1/append/log?axis=0", body,
                                   {"Content-Type": "application/octet-stream"})
            assert status == 200, text

    threads = [threading.Thread(target=appender, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = np.frombuffer(call("GET", f"{a}/api/v1/data/log?format=raw")[2], dtype="<u4").reshape(-1, 2)
    assert rows.shape[0] == 6 * 4 * 2
    values, counts = np.unique(rows[:, 0], return_counts=True)
    assert len(values) == 24 and (counts == 2).all()


def test_store_outage_fails_readiness_and_requests_then_recovers():
    """With the store down, /readyz is 503 and reads are 5xx with a JSON error
    (after the backend's retries); when it is back, both recover by themselves."""
    endpoint, moto = start_moto()
    port = int(endpoint.rsplit(":", 1)[1])
    create_bucket(endpoint, "outage")
    url, proc = start_zarrd("s3://outage", "--allow-anonymous-writes", env=s3_env(endpoint))
    try:
        assert call("PUT", f"{url}/zarr/a/zarr.json", b'{"zarr_format": 3, "node_type": "group"}')[0] in (200, 201, 204)
        assert call("GET", f"{url}/readyz")[0] == 200
        stop(moto)
        status, headers, body = call("GET", f"{url}/readyz")
        assert status == 503, body
        assert json.loads(body)["error"]["code"] == "store_unavailable"
        status, headers, body = call("GET", f"{url}/zarr/a/zarr.json")
        assert status in (502, 503, 504), (status, body)
        assert headers["Content-Type"].startswith("application/json")
        assert "error" in json.loads(body)
        moto = start_moto(port)[1]
        deadline = time.monotonic() + 30
        while call("GET", f"{url}/readyz")[0] != 200:
            assert time.monotonic() < deadline, "readiness did not recover"
            time.sleep(0.5)
        # The restarted server is empty; the store answers again, with a 404 for the missing key.
        assert call("GET", f"{url}/zarr/a/zarr.json")[0] == 404
    finally:
        stop(proc)
        stop(moto)


def test_s3_api_pages_a_level_of_the_bucket(servers):
    # Keys written through zarrd, then listed back through its S3 API in
    # small pages, with and without `/`: what the bucket's own paged
    # listing answers, rolled up and ordered as S3 orders it.
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    a, _ = servers
    names = ["a.b", "a/x", "a/y/z", "a0", "b", "c/d/e", "c/d0"] + [f"k{i:02}" for i in range(23)]
    for name in names:
        assert call("PUT", f"{a}/zarr/level/{name}", name.encode())[0] in (201, 204)
    s3 = boto3.client("s3", endpoint_url=f"{a}/s3", region_name="us-east-1", config=Config(signature_version=UNSIGNED))
    level = sorted({n.split("/")[0] + "/" if "/" in n else n for n in names})
    for size in (1, 4, 1000):
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket="zarr", Prefix="level/", Delimiter="/", PaginationConfig={"PageSize": size})
        got = []
        for page in pages:
            got.extend(o["Key"] for o in page.get("Contents", []))
            got.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
            assert len(page.get("Contents", [])) + len(page.get("CommonPrefixes", [])) <= size
        assert sorted(got) == [f"level/{n}" for n in level], size
    listed = s3.list_objects_v2(Bucket="zarr", Prefix="level/a", Delimiter="/", StartAfter="level/a.b")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["level/a/"]
    assert [o["Key"] for o in listed["Contents"]] == ["level/a0"]
    listed = s3.list_objects_v2(Bucket="zarr", Prefix="level/c/", Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["level/c/d/"]
    assert [o["Key"] for o in listed["Contents"]] == ["level/c/d0"]
    assert s3.get_object(Bucket="zarr", Key="level/a/y/z")["Body"].read() == b"a/y/z"
