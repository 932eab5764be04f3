"""zarr-python and TensorStore read what zarrd wrote (tests/it/roundtrip.rs)."""

import os

import numpy as np
import pytest
import tensorstore as ts
import zarr

from conftest import as_comparable, expected_values, load_manifest

ROOT, MANIFEST = load_manifest("ZARRD_ROUNDTRIP_OUT")
STORE = os.path.join(ROOT, "store.zarr")

# TensorStore implements the core codecs, not numcodecs' filters or its
# lzma/lz4 compressors, nor variable-length types in v2.
TS_UNSUPPORTED = ("numcodecs", "pcodec", "zfpy", "filter_", "lzma", "lz4", "strings", "bytes", "unicode", "structured", "float16")


# zarr-python 3 cannot open structured dtypes with subarray fields; TensorStore checks those.
ZARR_PYTHON_UNSUPPORTED = ("structured_subarray",)


def ids(entry):
    return entry["path"]


@pytest.mark.parametrize("entry", [e for e in MANIFEST if not any(t in e["path"] for t in ZARR_PYTHON_UNSUPPORTED)], ids=ids)
def test_zarr_python_reads(entry):
    arr = zarr.open_array(STORE, path=entry["path"], mode="r")
    assert list(arr.shape) == entry["shape"]
    got = as_comparable(arr[...], entry["kind"])
    assert got == expected_values(ROOT, entry)


TS_CASES = [e for e in MANIFEST if not any(tag in e["path"] for tag in TS_UNSUPPORTED)]


def test_tensorstore_covers_enough():
    assert len(TS_CASES) >= 20, [e["path"] for e in TS_CASES]


@pytest.mark.parametrize("entry", TS_CASES, ids=ids)
def test_tensorstore_reads(entry):
    driver = "zarr3" if entry["zarr_format"] == 3 else "zarr"
    spec = {"driver": driver, "kvstore": {"driver": "file", "path": os.path.join(STORE, entry["path"])}, "open": True}
    arr = ts.open(spec).result()
    assert list(arr.shape) == entry["shape"]
    got = as_comparable(np.asarray(arr.read().result()), entry["kind"])
    assert got == expected_values(ROOT, entry)


def test_tensorstore_reads_structured_fields():
    entry = next(e for e in MANIFEST if e["path"] == "v2/structured_subarray")
    raw = np.frombuffer(expected_values(ROOT, entry), dtype=[("a", "<i4"), ("b", "<f8", (2,))])
    for field in ["a", "b"]:
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(STORE, entry["path"])}, "field": field}
        got = np.asarray(ts.open(spec).result().read().result())
        assert np.array_equal(got, raw[field], equal_nan=True)


def test_hierarchy_edits_are_visible():
    group = zarr.open_group(STORE, mode="r")
    assert group.attrs["written_by"] == "zarrd"
    assert dict(zarr.open_array(STORE, path="v3/default", mode="r").attrs) == {"edited": True}
    assert "tmp" not in zarr.open_group(STORE, path="v3", mode="r")
    named = zarr.open_array(STORE, path="v3/dims", mode="r")
    assert named.metadata.dimension_names == ("t", None, "x")
    assert named.attrs["units"] == "m"
