"""zarr-python (fsspec HTTP), xarray and TensorStore (http kvstore) read the
fixture corpus through zarrd's /zarr/ and get the expected values."""

import json
import os
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorstore as ts
import xarray as xr
import zarr

from conftest import as_comparable, expected_values, load_manifest, start_zarrd, stop

ROOT, MANIFEST = load_manifest("ZARRD_CORPUS")

# What each client cannot read at all (not a zarrd limitation): zarr-python 3
# has no v1 support and no TensorStore extension dtypes or structured subarrays.
ZARR_PYTHON_SKIP = {
    "v1/": "zarr-python 3 does not read Zarr v1",
    "ts.zarr/bfloat16": "zarr-python lacks TensorStore's bfloat16 v2 dtype",
    "ts.zarr/float8_e4m3fn": "zarr-python lacks TensorStore's float8 v2 dtypes",
    "ts.zarr/int4": "zarr-python lacks TensorStore's int4 v2 dtype",
    "ts.zarr/structured": "zarr-python cannot open structured dtypes with subarray fields",
    "hand_v2.zarr/nested_structured": "zarr-python cannot open structured dtypes with subarray fields",
    "archive": "a zip file is one key of the directory store; test_zip_file_served_directly serves it",
}
# TensorStore implements core codecs and v2 blosc/zlib/gzip/bz2/zstd, fixed-size types only.
TS_UNSUPPORTED = (
    "v1/", "numcodecs", "filter_", "lzma", "lz4", "crc32", "adler32", "fletcher32", "string", "bytes",
    "jenkins_lookup3", "pcodec", "zfpy",
    "object", "structured", "dtype_S", "dtype_U", "dtype_V", "le_U", "be_U", "S6", "V4", "packbits", "m8", "M8",
    "hand_v2", "xarray", "archive",
    # TensorStore refuses bytes->bytes codecs over a whole shard.
    "shard_whole_compressed",
    # TensorStore's v2 zstd takes no "checksum" member.
    "zstd_checksum",
)


def name(entry):
    return f"{entry['store']}/{entry['path']}"


def skipped(entry, table):
    return next((why for key, why in table.items() if name(entry).startswith(key)), None)


@pytest.mark.parametrize("entry", MANIFEST, ids=name)
def test_zarr_python_over_http(entry, corpus_server):
    why = skipped(entry, ZARR_PYTHON_SKIP)
    if why:
        pytest.skip(why)
    url = f"{corpus_server}/zarr/{entry['store']}/{entry['path']}".rstrip("/")
    arr = zarr.open_array(url, mode="r", zarr_format=entry["zarr_format"])
    assert list(arr.shape) == entry["shape"]
    assert as_comparable(arr[...], entry["kind"]) == expected_values(ROOT, entry)


TS_CASES = [e for e in MANIFEST if not any(t in name(e) for t in TS_UNSUPPORTED)]


def test_tensorstore_covers_enough():
    assert len(TS_CASES) >= 60, len(TS_CASES)
    assert any("shard" in name(e) for e in TS_CASES)
    assert any(e["zarr_format"] == 2 for e in TS_CASES)


@pytest.mark.parametrize("entry", TS_CASES, ids=name)
def test_tensorstore_over_http(entry, corpus_server):
    driver = "zarr3" if entry["zarr_format"] == 3 else "zarr"
    base = f"{corpus_server}/zarr/{entry['store']}/{entry['path']}"
    arr = ts.open({"driver": driver, "kvstore": {"driver": "http", "base_url": base}, "open": True}).result()
    assert list(arr.shape) == entry["shape"]
    got = np.asarray(arr.read().result())
    assert as_comparable(got, entry["kind"]) == expected_values(ROOT, entry)


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_open_zarr_over_http(fmt, corpus_server):
    url = f"{corpus_server}/zarr/xarray_v{fmt}.zarr"
    remote = xr.open_zarr(url, zarr_format=fmt)
    local = xr.open_zarr(f"{ROOT}/xarray_v{fmt}.zarr", zarr_format=fmt)
    assert remote.attrs["title"] == "xarray fixture"
    assert remote["temperature"].dims == ("time", "y", "x")
    assert remote["temperature"].attrs["units"] == "K"
    xr.testing.assert_identical(remote.load(), local.load())
    window = remote["temperature"].isel(time=slice(1, 4), x=slice(3, 9)).values
    np.testing.assert_array_equal(window, local["temperature"].values[1:4, :, 3:9])


def test_zip_file_served_directly(corpus):
    root, manifest = corpus
    url, proc = start_zarrd(os.path.join(root, "archive.zip"))
    try:
        group = zarr.open_group(f"{url}/zarr/", mode="r")
        assert group.attrs["title"] == "zipped"
        for entry in [e for e in manifest if e["store"] == "archive.zip"]:  # deflated: see the corpus test
            arr = zarr.open_array(f"{url}/zarr/{entry['path']}", mode="r")
            assert as_comparable(arr[...], entry["kind"]) == expected_values(root, entry)
            t = ts.open({"driver": "zarr3", "kvstore": {"driver": "http", "base_url": f"{url}/zarr/{entry['path']}"}}).result()
            assert as_comparable(np.asarray(t.read().result()), entry["kind"]) == expected_values(root, entry)
        req = urllib.request.Request(f"{url}/zarr/plain/zarr.json", data=b"{}", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req)
        assert refused.value.code == 403
    finally:
        stop(proc)


def test_zarr_python_walks_groups_over_http(corpus_server):
    group = zarr.open_group(f"{corpus_server}/zarr/v3.zarr", mode="r")
    assert group.attrs["title"] == "v3 corpus"
    names = set(group.array_keys())
    assert {"shard_end", "dtype_i4", "codec_gzip"} <= names
    nested = zarr.open_group(f"{corpus_server}/zarr/v2.zarr/group", mode="r", zarr_format=2)
    assert "sub" in set(nested.group_keys())


def test_http_store_upstream(corpus):
    """A zarrd whose store is another HTTP server (here another zarrd): read-only."""
    root, manifest = corpus
    upstream, up_proc = start_zarrd(root)
    url, proc = start_zarrd(f"{upstream}/zarr/")
    try:
        for entry in [e for e in manifest if e["store"] == "v3.zarr" and e["path"] in ("shard_end", "codec_gzip", "dtype_string")]:
            arr = zarr.open_array(f"{url}/zarr/v3.zarr/{entry['path']}", mode="r")
            assert as_comparable(arr[...], entry["kind"]) == expected_values(root, entry)
        with urllib.request.urlopen(f"{url}/api/v1/data/v2.zarr/compressor_zlib?select=1:3&format=json") as r:
            assert len(json.loads(r.read())["data"]) == 2
        with urllib.request.urlopen(f"{url}/readyz") as r:
            assert r.status == 200
        req = urllib.request.Request(f"{url}/zarr/v3.zarr/x", data=b"1", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req)
        assert refused.value.code == 403
    finally:
        stop(proc)
        stop(up_proc)
