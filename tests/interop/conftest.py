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
import subprocess

import pytest


def start_zarrd(*args, env=None):
    """Start zarrd on a free loopback port; returns (base_url, process)."""
    binary = os.environ.get("ZARRD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "zarrd"))
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"zarrd did not start: {line!r}")
    return f"http://127.0.0.1:{match.group(1)}", proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def corpus():
    return load_manifest("ZARRD_CORPUS")


@pytest.fixture(scope="session")
def corpus_server(corpus):
    root, _ = corpus
    url, proc = start_zarrd(root)
    yield url
    stop(proc)


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
