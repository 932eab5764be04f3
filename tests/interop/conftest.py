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
