"""Shared helpers for the interop tests: load manifests and expected values."""

import base64
import json
import os

import numpy as np


def load_manifest(env_var):
    root = os.environ.get(env_var)
    if not root:
        raise RuntimeError(f"{env_var} is not set; run the tests through scripts/test")
    with open(os.path.join(root, "manifest.json")) as f:
        return root, json.load(f)


def expected_values(root, entry):
    path = os.path.join(root, entry["expected"])
    if entry["kind"] == "fixed":
        with open(path, "rb") as f:
            return f.read()
    with open(path) as f:
        values = json.load(f)
    if entry["kind"] == "bytes":
        return [base64.b64decode(v) for v in values]
    return values


def as_comparable(arr, kind):
    """Little-endian C-order bytes for fixed types, a flat list otherwise."""
    arr = np.asarray(arr)
    if kind == "fixed":
        little = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"))
        return little.tobytes()
    flat = arr.reshape(-1).tolist()
    return [v.encode() if kind == "bytes" and isinstance(v, str) else v for v in flat]


import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest


def start_zarrd(*args, env=None, stderr=subprocess.DEVNULL):
    """Start zarrd on a free loopback port; returns (base_url, process)."""
    binary = os.environ.get("ZARRD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "zarrd"))
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = proc.stdout.readline()
    match = re.search(r"(https?)://127\.0\.0\.1:(\d+)/", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"zarrd did not start: {line!r}")
    return f"{match.group(1)}://127.0.0.1:{match.group(2)}", proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bundle_zarrita(site):
    """zarrita.js (from npm, ZARRD_ZARRITA) bundled for a browser page as
    `site/zarrita.js`."""
    zarrita = os.environ["ZARRD_ZARRITA"]
    entry = site / "entry.js"
    entry.write_text('export * from "zarrita";\n')
    subprocess.run([os.path.join(zarrita, "node_modules", ".bin", "esbuild"), str(entry), "--bundle", "--format=esm",
                    f"--outfile={site / 'zarrita.js'}", "--log-level=warning"],
                   check=True, cwd=zarrita, env={**os.environ, "NODE_PATH": os.path.join(zarrita, "node_modules")})


def serve_folder(site):
    """A static file server for `site` on loopback; returns (origin, server)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd


@pytest.fixture(scope="session")
def corpus():
    return load_manifest("ZARRD_CORPUS")


MOTO = """
import sys
from werkzeug.serving import run_simple
from moto.server import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=False, use_reloader=False)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(port=None):
    """moto's S3 server on loopback, single-threaded (so its conditional PUTs
    are atomic); returns (endpoint, process)."""
    port = port or free_port()
    proc = subprocess.Popen([sys.executable, "-c", MOTO, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            time.sleep(0.1)
    return endpoint, proc


def s3_env(endpoint):
    """What object_store's S3 backend reads to reach `endpoint`."""
    return {"AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}


def create_bucket(endpoint, bucket):
    req = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")
    urllib.request.urlopen(req, timeout=10)


@pytest.fixture(scope="session")
def s3():
    """One S3 server for the session; returns the environment zarrd needs."""
    endpoint, proc = start_moto()
    yield {**s3_env(endpoint), "endpoint": endpoint}
    stop(proc)


AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def start_azurite(location):
    """Azurite's blob service (npm, installed by scripts/test; its path in
    ZARRD_AZURITE) on loopback, keeping its data in `location`; returns
    (endpoint, process)."""
    binary = os.environ.get("ZARRD_AZURITE")
    if not binary:
        pytest.skip("ZARRD_AZURITE is not set; scripts/test installs Azurite and sets it")
    port = free_port()
    proc = subprocess.Popen([binary, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", location,
                             "--skipApiVersionCheck", "--silent"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    return endpoint, proc


def azure_env(endpoint):
    """What object_store's Azure backend reads to use Azurite at `endpoint`."""
    return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint}


def create_container(endpoint, name):
    from azure.storage.blob import BlobServiceClient

    conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/devstoreaccount1;")
    BlobServiceClient.from_connection_string(conn).create_container(name)


def files_under(root):
    """(path, store key) of every file below `root`."""
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            yield path, os.path.relpath(path, root).replace(os.sep, "/")


def upload_tree(endpoint, bucket, root):
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                          region_name="us-east-1")
    for path, key in files_under(root):
        client.upload_file(path, bucket, key)


def upload_tree_azure(endpoint, container, root):
    from azure.storage.blob import BlobServiceClient

    conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/devstoreaccount1;")
    client = BlobServiceClient.from_connection_string(conn).get_container_client(container)
    for path, key in files_under(root):
        with open(path, "rb") as data:
            client.upload_blob(key, data)


@pytest.fixture(scope="session", params=["dir", "s3", "azure"])
def corpus_server(request, corpus, tmp_path_factory):
    """zarrd serving the fixture corpus from a directory, from S3 and from
    Azure Blob Storage (the same files uploaded), so every client test runs
    on all three."""
    root, _ = corpus
    emulator = None
    if request.param == "dir":
        url, proc = start_zarrd(root)
    elif request.param == "s3":
        s3 = request.getfixturevalue("s3")
        create_bucket(s3["endpoint"], "corpus")
        upload_tree(s3["endpoint"], "corpus", root)
        url, proc = start_zarrd("s3://corpus", env=s3)
    else:
        endpoint, emulator = start_azurite(str(tmp_path_factory.mktemp("azurite-corpus")))
        create_container(endpoint, "corpus")
        upload_tree_azure(endpoint, "corpus", root)
        url, proc = start_zarrd("az://corpus", env=azure_env(endpoint))
    yield url
    stop(proc)
    if emulator:
        stop(emulator)


def expected_array(root, entry):
    """The expected values as a numpy array (fixed-size types) or a list."""
    values = expected_values(root, entry)
    if entry["kind"] != "fixed":
        return np.array(values, dtype=object).reshape(entry["shape"])
    if entry.get("ml_dtype"):
        import ml_dtypes

        dtype = np.dtype(getattr(ml_dtypes, entry["ml_dtype"]))
    else:
        dtype = np.lib.format.descr_to_dtype(tuplify(entry["descr"]))
    return np.frombuffer(values, dtype=dtype).reshape(entry["shape"])


def tuplify(descr):
    """JSON lists back into the tuples numpy's descr format uses."""
    if isinstance(descr, str):
        return descr
    return [tuple(_field(x) for x in field) for field in descr]


def _field(x):
    if isinstance(x, list) and x and isinstance(x[0], list):
        return tuplify(x)
    if isinstance(x, list):
        return tuple(x)
    return x


def _expected_failures():
    """`zarr_expected_failures.txt`: test id -> cause and link."""
    path = os.path.join(os.path.dirname(__file__), "zarr_expected_failures.txt")
    listed = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                test, cause, link = (part.strip() for part in line.split("|"))
                listed[test] = f"{cause} ({link})"
    return listed


def pytest_collection_modifyitems(config, items):
    listed = _expected_failures()
    for item in items:
        test = item.nodeid.split("tests/interop/")[-1]
        if test in listed:
            item.add_marker(pytest.mark.xfail(reason=listed[test], strict=True))
