"""/api/v1/data against numpy: for every fixture array, a set of selections
(integers, negatives, steps, lists, points, fields) in all three formats
gives what numpy gives on the expected values."""

import io
import json
import urllib.parse
import urllib.request

import numpy as np
import pytest

from conftest import expected_array, load_manifest

ROOT, MANIFEST = load_manifest("ZARRD_CORPUS")


def name(entry):
    return f"{entry['store']}/{entry['path']}"


def fetch(url, body=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read(), resp.headers


def selections(shape):
    """(select string, numpy index) pairs for an array of `shape`."""
    if not shape or 0 in shape:
        return [("", ...)]
    n = shape[0]
    out = [("", ...), ("-1", -1), ("1:", np.s_[1:]), ("::2", np.s_[::2]), ("1:-1:3", np.s_[1:-1:3]),
           ("...,-1", np.s_[..., -1]), (f"[{n - 1},0,{n // 2}]", [n - 1, 0, n // 2]),
           ("::-1", np.s_[::-1]), ("-2:0:-3", np.s_[-2:0:-3])]
    if len(shape) >= 2:
        out += [("1:4,::3", np.s_[1:4, ::3]), (f"{n // 2},[1,0]", np.s_[n // 2, [1, 0]]),
                ("-2:,-3:", np.s_[-2:, -3:]), ("::-2,5:1:-1", np.s_[::-2, 5:1:-1])]
    return out


def numpy_select(arr, index):
    if isinstance(index, list):
        return arr[index]
    if isinstance(index, tuple) and any(isinstance(i, list) for i in index):
        # Orthogonal indexing, one axis at a time.
        out = arr
        axis = 0
        for i in index:
            if isinstance(i, list):
                out = np.take(out, i, axis=axis)
                axis += 1
            elif isinstance(i, int):
                out = np.take(out, i, axis=axis)
            else:
                out = out[(slice(None),) * axis + (i,)]
                axis += 1
        return out
    return arr[index]


def comparable_bytes(arr):
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind == "O":
        return arr.tolist()
    return arr.astype(arr.dtype.newbyteorder("<")).tobytes()


def plain_nans(arr):
    """`arr` with every NaN (whatever its payload) as numpy's NaN."""
    if arr.dtype.kind not in "fc":
        return arr
    out = np.array(arr, copy=True)
    if arr.dtype.kind == "c":
        re, im = out.real.copy(), out.imag.copy()
        re[np.isnan(re)] = np.nan
        im[np.isnan(im)] = np.nan
        out.real, out.imag = re, im
    else:
        out[np.isnan(out)] = np.nan
    return out


def from_json(data, like):
    """JSON data back into an array shaped and typed like `like`."""
    dtype = like.dtype

    def conv(v):
        if isinstance(v, str) and dtype.kind in "fc":
            return {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}.get(v, v)
        if dtype.kind == "c" and isinstance(v, list) and len(v) == 2 and not isinstance(v[0], list):
            return complex(conv(v[0]), conv(v[1]))
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return tuple(np.array(x) if isinstance(x, list) else x for x in v.values())
        return v

    return np.array(conv(data), dtype=dtype).reshape(like.shape)


# The zip file is one key of the served directory (its own server is tested elsewhere).
FIXED = [e for e in MANIFEST if e["kind"] == "fixed" and not e.get("ml_dtype") and not e["store"].startswith("archive")]


@pytest.mark.parametrize("entry", FIXED, ids=name)
def test_selections_match_numpy(entry, corpus_server):
    arr = expected_array(ROOT, entry)
    base = f"{corpus_server}/api/v1/data/{entry['store']}/{entry['path']}".rstrip("/")
    for select, index in selections(entry["shape"]):
        want = np.asarray(numpy_select(arr, index), dtype=arr.dtype)
        q = urllib.parse.quote(select)
        body, _ = fetch(f"{base}?select={q}")
        got = np.load(io.BytesIO(body))
        assert got.shape == want.shape, (select, got.shape, want.shape)
        assert comparable_bytes(got) == comparable_bytes(want), select
        raw, headers = fetch(f"{base}?select={q}&format=raw")
        assert headers["X-Zarr-Shape"] == ",".join(map(str, want.shape))
        assert raw == comparable_bytes(want), select
        if arr.dtype.kind not in "SVmM" and arr.dtype.fields is None:
            doc = json.loads(fetch(f"{base}?select={q}&format=json")[0])
            assert doc["shape"] == list(want.shape)
            # JSON has one NaN: payloads are kept by .npy and raw, not by JSON numbers.
            assert comparable_bytes(from_json(doc["data"], want)) == comparable_bytes(plain_nans(want)), select


@pytest.mark.parametrize("entry", [e for e in FIXED if e["shape"] and 0 not in e["shape"]], ids=name)
def test_points_match_numpy(entry, corpus_server):
    arr = expected_array(ROOT, entry)
    shape = entry["shape"]
    points = [[s - 1 for s in shape], [0] * len(shape), [s // 2 for s in shape], [-1] * len(shape)]
    want = np.array([arr[tuple(p)] for p in points], dtype=arr.dtype)
    base = f"{corpus_server}/api/v1/data/{entry['store']}/{entry['path']}"
    got = np.load(io.BytesIO(fetch(f"{base}?points={urllib.parse.quote(json.dumps(points))}")[0]))
    assert comparable_bytes(got) == comparable_bytes(want)
    posted = np.load(io.BytesIO(fetch(base, {"points": points})[0]))
    assert comparable_bytes(posted) == comparable_bytes(want)


STRUCTURED = [e for e in FIXED if isinstance(e["descr"], list)]


def test_structured_cases_exist():
    assert len(STRUCTURED) >= 4


@pytest.mark.parametrize("entry", STRUCTURED, ids=name)
def test_fields_match_numpy(entry, corpus_server):
    arr = expected_array(ROOT, entry)
    base = f"{corpus_server}/api/v1/data/{entry['store']}/{entry['path']}"
    for field in arr.dtype.names:
        got = np.load(io.BytesIO(fetch(f"{base}?field={field}&select=1:")[0]))
        assert comparable_bytes(got) == comparable_bytes(arr[field][1:]), field


STRINGS = [e for e in MANIFEST if e["kind"] == "str"]


@pytest.mark.parametrize("entry", STRINGS, ids=name)
def test_strings_as_json_and_npy(entry, corpus_server):
    arr = expected_array(ROOT, entry)
    base = f"{corpus_server}/api/v1/data/{entry['store']}/{entry['path']}"
    doc = json.loads(fetch(f"{base}?format=json")[0])
    assert doc["data"] == arr.tolist()
    got = np.load(io.BytesIO(fetch(base)[0]))
    assert got.tolist() == arr.tolist()
