"""Consolidated metadata, synthesized: v2 and v3 hierarchies written without
consolidation open through `xarray.open_zarr(consolidated=True)` and
`zarr.open_consolidated` over zarrd, equal to local reads, in far fewer
requests than without consolidation. v2 groups get a `.zmetadata`; a v3
group's `zarr.json` is served with the `consolidated_metadata` zarr-python 3
writes (unless `--consolidated-v3=false`), with HEAD, ranges and ETags of
the served bytes. The documents follow writes made through zarrd, and a
stored one wins."""

import json
import re
import shutil
import urllib.request

import numpy as np
import pytest
import xarray as xr
import zarr

from conftest import start_zarrd, stop


def requests_served(url):
    """GET/HEAD requests zarrd has answered on /zarr/ so far."""
    text = urllib.request.urlopen(f"{url}/metrics").read().decode()
    total = 0
    for line in text.splitlines():
        m = re.match(r'zarrd_http_requests_total\{route="/zarr/\{\*key\}",method="(GET|HEAD)",status="\d+"\} (\d+)', line)
        if m:
            total += int(m.group(2))
    return total


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("consolidated")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), np.arange(4 * 6 * 8, dtype="f4").reshape(4, 6, 8), {"units": "K"}),
         "mask": (("lat", "lon"), (np.arange(48) % 2).astype("i1").reshape(6, 8))},
        coords={"time": np.arange(4), "lat": np.linspace(-60, 60, 6), "lon": np.linspace(0, 315, 8)},
        attrs={"title": "not consolidated"},
    )
    ds.to_zarr(str(root / "era"), zarr_format=2, consolidated=False, encoding={"t2m": {"chunks": (1, 3, 4)}})
    g = zarr.open_group(str(root / "raw"), mode="w", zarr_format=2)
    g.attrs["level"] = 0
    sub = g.create_group("deeper")
    sub.create_array("a", shape=(5,), chunks=(2,), dtype="i4")[:] = np.arange(5)
    assert not (root / "era" / ".zmetadata").exists()
    url, proc = start_zarrd(str(root), "--allow-anonymous-writes")
    yield url, root, ds
    stop(proc)


def test_xarray_opens_a_group_written_without_consolidation(served):
    url, root, ds = served
    before = requests_served(url)
    got = xr.open_zarr(f"{url}/zarr/era", consolidated=True, chunks=None).load()
    consolidated = requests_served(url) - before
    xr.testing.assert_identical(got, xr.open_zarr(str(root / "era"), consolidated=False, chunks=None).load())
    before = requests_served(url)
    xr.open_zarr(f"{url}/zarr/era", consolidated=False, chunks=None).load()
    plain = requests_served(url) - before
    # One document instead of a look at every array's metadata.
    assert consolidated < plain, (consolidated, plain)


def test_zarr_open_consolidated_sees_every_node(served):
    url, root, _ = served
    g = zarr.open_consolidated(f"{url}/zarr/raw", zarr_format=2)
    assert dict(g.attrs) == {"level": 0}
    np.testing.assert_array_equal(g["deeper/a"][...], np.arange(5))
    doc = json.loads(urllib.request.urlopen(f"{url}/zarr/raw/.zmetadata").read())
    assert doc["zarr_consolidated_format"] == 1
    # The same documents zarr-python's consolidate_metadata gathers.
    copy = root / "raw-copy"
    shutil.copytree(root / "raw", copy)
    zarr.consolidate_metadata(str(copy), zarr_format=2)
    theirs = json.loads((copy / ".zmetadata").read_text())["metadata"]
    # zarr-python 3 also nests an (empty) consolidated_metadata in each
    # subgroup's .zgroup there; the stored documents do not have it.
    for d in theirs.values():
        d.pop("consolidated_metadata", None)
    assert doc["metadata"] == theirs
    body = urllib.request.urlopen(f"{url}/zarr/raw/.zmetadata").read()
    head = urllib.request.urlopen(urllib.request.Request(f"{url}/zarr/raw/.zmetadata", method="HEAD"))
    assert int(head.headers["Content-Length"]) == len(body)
    assert head.headers["ETag"]


def test_the_document_follows_writes_and_a_stored_one_wins(served):
    url, root, _ = served
    req = urllib.request.Request(f"{url}/api/v1/meta/raw", data=json.dumps({"attributes": {"level": 7}}).encode(),
                                 method="PATCH", headers={"Content-Type": "application/merge-patch+json"})
    assert urllib.request.urlopen(req).status == 200
    doc = json.loads(urllib.request.urlopen(f"{url}/zarr/raw/.zmetadata").read())
    assert doc["metadata"][".zattrs"] == {"level": 7}
    stored = {"metadata": {".zgroup": {"zarr_format": 2}}, "zarr_consolidated_format": 1}
    req = urllib.request.Request(f"{url}/zarr/raw/.zmetadata", data=json.dumps(stored).encode(), method="PUT")
    assert urllib.request.urlopen(req).status in (200, 201, 204)
    assert json.loads(urllib.request.urlopen(f"{url}/zarr/raw/.zmetadata").read()) == stored


def test_only_v2_groups_get_one(served):
    url, _, _ = served
    for path in ("era/t2m/.zmetadata", "nothing/.zmetadata"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}/zarr/{path}")
        assert e.value.code == 404


def get(url, headers=None):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
        return r.status, r.headers, r.read()


@pytest.fixture(scope="module")
def served_v3(tmp_path_factory):
    root = tmp_path_factory.mktemp("consolidated-v3")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), np.arange(4 * 6 * 8, dtype="f4").reshape(4, 6, 8), {"units": "K"})},
        coords={"time": np.arange(4), "lat": np.linspace(-60, 60, 6), "lon": np.linspace(0, 315, 8)},
        attrs={"title": "v3, not consolidated"},
    )
    ds.to_zarr(str(root / "era"), zarr_format=3, consolidated=False, encoding={"t2m": {"chunks": (1, 3, 4)}})
    g = zarr.open_group(str(root / "tree"), mode="w", zarr_format=3, attributes={"level": 0})
    g.create_array("a", shape=(4, 4), chunks=(2, 2), dtype="f4")[:] = np.arange(16).reshape(4, 4)
    sub = g.create_group("sub", attributes={"k": 1})
    sub.create_array("b", shape=(3,), chunks=(3,), dtype="i2")[:] = [1, 2, 3]
    sub.create_group("deepest")
    url, proc = start_zarrd(str(root), "--allow-anonymous-writes")
    off_url, off = start_zarrd(str(root), "--consolidated-v3=false")
    yield url, off_url, root, ds
    stop(off)
    stop(proc)


def test_xarray_opens_a_v3_group_written_without_consolidation(served_v3):
    url, _, root, ds = served_v3
    before = requests_served(url)
    got = xr.open_zarr(f"{url}/zarr/era", consolidated=True, chunks=None).load()
    consolidated = requests_served(url) - before
    xr.testing.assert_identical(got, xr.open_zarr(str(root / "era"), consolidated=False, chunks=None).load())
    before = requests_served(url)
    xr.open_zarr(f"{url}/zarr/era", consolidated=False, chunks=None).load()
    plain = requests_served(url) - before
    assert consolidated < plain, (consolidated, plain)


def test_the_v3_document_is_zarr_pythons(served_v3):
    url, _, root, _ = served_v3
    _, headers, body = get(f"{url}/zarr/tree/zarr.json")
    served = json.loads(body)
    copy = root / "tree-copy"
    shutil.copytree(root / "tree", copy)
    zarr.consolidate_metadata(str(copy), zarr_format=3)
    assert served == json.loads((copy / "zarr.json").read_text())
    assert sorted(served["consolidated_metadata"]["metadata"]) == ["a", "sub", "sub/b", "sub/deepest"]
    g = zarr.open_consolidated(f"{url}/zarr/tree", zarr_format=3)
    assert dict(g.attrs) == {"level": 0} and dict(g["sub"].attrs) == {"k": 1}
    np.testing.assert_array_equal(g["sub/b"][...], [1, 2, 3])
    # HEAD and ranges are of the served bytes; its ETag is theirs, not the file's.
    head = urllib.request.urlopen(urllib.request.Request(f"{url}/zarr/tree/zarr.json", method="HEAD"))
    assert int(head.headers["Content-Length"]) == len(body)
    assert head.headers["ETag"] == headers["ETag"]
    status, _, part = get(f"{url}/zarr/tree/zarr.json", {"Range": "bytes=10-29"})
    assert (status, part) == (206, body[10:30])
    status, _, tail = get(f"{url}/zarr/tree/zarr.json", {"Range": "bytes=-15"})
    assert (status, tail) == (206, body[-15:])
    status, _, whole = get(f"{url}/zarr/tree/zarr.json", {"Range": "bytes=0-3,10-12", "Accept": "multipart/byteranges"})
    assert status in (200, 206) and (status == 206 or whole == body)
    # A subgroup's document describes what is below it.
    sub = json.loads(get(f"{url}/zarr/tree/sub/zarr.json")[2])
    assert sorted(sub["consolidated_metadata"]["metadata"]) == ["b", "deepest"]


def test_arrays_and_stored_consolidation_are_served_as_stored(served_v3):
    url, off_url, root, _ = served_v3
    assert get(f"{url}/zarr/tree/a/zarr.json")[2] == (root / "tree" / "a" / "zarr.json").read_bytes()
    # Turned off, every document is the stored bytes.
    assert get(f"{off_url}/zarr/tree/zarr.json")[2] == (root / "tree" / "zarr.json").read_bytes()
    copy = root / "stored"
    shutil.copytree(root / "tree", copy)
    zarr.consolidate_metadata(str(copy), zarr_format=3)
    shutil.rmtree(copy / "sub")  # the stored document now says more than the store holds: it still wins
    assert get(f"{url}/zarr/stored/zarr.json")[2] == (copy / "zarr.json").read_bytes()


def test_the_v3_document_follows_writes(served_v3):
    url, _, _, _ = served_v3
    req = urllib.request.Request(f"{url}/api/v1/meta/tree/sub", data=json.dumps({"attributes": {"k": 2}}).encode(),
                                 method="PATCH", headers={"Content-Type": "application/merge-patch+json"})
    assert urllib.request.urlopen(req).status == 200
    req = urllib.request.Request(f"{url}/api/v1/meta/tree/new", data=json.dumps(
        {"node_type": "array", "zarr_format": 3, "shape": [2], "dtype": "uint8"}).encode(), method="PUT")
    assert urllib.request.urlopen(req).status == 201
    members = json.loads(get(f"{url}/zarr/tree/zarr.json")[2])["consolidated_metadata"]["metadata"]
    assert members["sub"]["attributes"] == {"k": 2}
    assert members["new"]["shape"] == [2]
    g = zarr.open_consolidated(f"{url}/zarr/tree", zarr_format=3)
    assert g["new"].shape == (2,)
