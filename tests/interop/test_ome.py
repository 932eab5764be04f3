"""OME-Zarr: images written by ome-zarr-py (NGFF 0.4 on Zarr v2, 0.5 on Zarr
v3) are recognised as multiscale images by the tree and node metadata,
read by level through /api/v1/data, read back through zarrd by ome-zarr-py
and zarr-python, and served from a zipped OME-Zarr (.ozx) file."""

import io
import json
import os
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest
import zarr
from ome_zarr.format import FormatV04, FormatV05
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr.writer import write_image

from conftest import start_zarrd, stop

DATA = (np.arange(2 * 128 * 96, dtype="uint16").reshape(2, 128, 96) * 7) % 1000
IMAGES = {"v04.zarr": FormatV04(), "v05.zarr": FormatV05()}
SHAPES = [[2, 128, 96], [2, 64, 48], [2, 32, 24]]


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.headers, r.read()


def get_json(url):
    return json.loads(get(url)[2])


def error(url):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=60)
    return e.value.code, json.loads(e.value.read())["error"]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("ome")
    for name, fmt in IMAGES.items():
        location = parse_url(str(root / name), mode="w", fmt=fmt)
        group = zarr.group(store=location.store, zarr_format=fmt.zarr_format)
        write_image(DATA, group, scale_factors=(2, 4), axes="cyx", fmt=fmt,
                    storage_options=dict(chunks=(1, 32, 32)))
    zarr.create_array(str(root / "plain"), shape=(4,), dtype="i4")
    # Zipped OME-Zarr (RFC-9): the 0.5 image's hierarchy at the root of a zip
    # of stored (uncompressed) entries, zarr.json first, with the OME comment.
    ozx = tmp_path_factory.mktemp("ozx") / "image.ozx"
    base = root / "v05.zarr"
    files = sorted(os.path.relpath(os.path.join(d, f), base) for d, _, fs in os.walk(base) for f in fs)
    files.sort(key=lambda f: (f != "zarr.json", f))
    with zipfile.ZipFile(ozx, "w", compression=zipfile.ZIP_STORED) as z:
        for f in files:
            z.write(base / f, f)
        z.comment = json.dumps({"ome": {"version": "0.5", "zipFile": {"centralDirectory": {"jsonFirst": True}}}}).encode()
    return root, ozx


@pytest.fixture(scope="module")
def server(images):
    url, proc = start_zarrd(str(images[0]))
    yield url
    stop(proc)


@pytest.mark.parametrize("name", IMAGES)
def test_tree_and_metadata_recognise_the_image(server, name):
    tree = {n["path"]: n for n in get_json(f"{server}/api/v1/tree")["nodes"]}
    assert tree[name]["multiscale"]["levels"] == 3
    assert "multiscale" not in tree[f"{name}/s0"]
    meta = get_json(f"{server}/api/v1/meta/{name}")
    (image,) = meta["multiscales"]
    assert image["version"] == ("0.4" if name == "v04.zarr" else "0.5")
    assert [a["name"] for a in image["axes"]] == ["c", "y", "x"]
    assert [lv["path"] for lv in image["levels"]] == [f"{name}/s0", f"{name}/s1", f"{name}/s2"]
    assert [lv["shape"] for lv in image["levels"]] == SHAPES
    assert image["levels"][1]["scale"] == [1.0, 2.0, 2.0]
    level = get_json(f"{server}/api/v1/meta/{name}/s1")
    assert level["multiscale"]["group"] == name and level["multiscale"]["level"] == 1
    assert "multiscale" not in get_json(f"{server}/api/v1/meta/plain")


@pytest.mark.parametrize("name", IMAGES)
def test_levels_are_read_by_index(server, images, name):
    local = zarr.open_group(str(images[0] / name), mode="r")
    for level, path in [(0, "s0"), (1, "s1"), (2, "s2"), (-1, "s2"), (-3, "s0")]:
        _, headers, body = get(f"{server}/api/v1/data/{name}?level={level}&select=1,:,:")
        assert np.array_equal(np.load(io.BytesIO(body)), local[path][1]), (level, path)
    _, headers, body = get(f"{server}/api/v1/data/{name}?level=-1&select=0&format=png&cmap=gray")
    assert headers["Content-Type"] == "image/png" and body[:4] == b"\x89PNG"
    status, e = error(f"{server}/api/v1/data/{name}?level=3")
    assert (status, e["code"]) == (400, "bad_level") and "0 to 2" in e["message"]
    status, e = error(f"{server}/api/v1/data/plain?level=0")
    assert (status, e["code"]) == (400, "not_multiscale")


@pytest.mark.parametrize("name", IMAGES)
def test_ome_zarr_py_and_zarr_python_read_through_zarrd(server, name):
    location = parse_url(f"{server}/zarr/{name}", fmt=IMAGES[name])
    assert location is not None
    node = next(iter(Reader(location)()))
    assert [list(level.shape) for level in node.data] == SHAPES
    assert np.array_equal(np.asarray(node.data[0]), DATA)
    group = zarr.open_group(f"{server}/zarr/{name}", mode="r")
    assert np.array_equal(group["s0"][...], DATA)
    assert np.array_equal(group["s1"][...], np.asarray(node.data[1]))


def test_ozx_is_served_read_only(images):
    url, proc = start_zarrd(str(images[1]))
    try:
        meta = get_json(f"{url}/api/v1/meta")
        assert [lv["shape"] for lv in meta["multiscales"][0]["levels"]] == SHAPES
        node = next(iter(Reader(parse_url(f"{url}/zarr", fmt=FormatV05()))()))
        assert np.array_equal(np.asarray(node.data[0]), DATA)
        assert np.array_equal(zarr.open_array(f"{url}/zarr/s2", mode="r")[...], np.asarray(node.data[2]))
        req = urllib.request.Request(f"{url}/zarr/s0/zarr.json", data=b"{}", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code in (403, 405)
    finally:
        stop(proc)
