"""Icechunk repositories (versioned, transactional Zarr) served by zarrd.

icechunk-python writes a repository with several commits on `main`, a tag,
and a branch with its own commit; it holds native chunks (xarray's
`to_zarr` and zarr-python through the session's store), inline chunks
(small chunks Icechunk keeps in its manifests) and virtual chunks (byte
ranges of a raw little-endian file and of a NetCDF4 file's chunks, found
with kerchunk, in a `file://` virtual chunk container the repository's
config declares). zarrd mounts it with `{ icechunk = "..." }` and serves
every ref (`name@branch`, `name@tag`, `name@snapshot-id`, and no `@` for
`main`): zarr-python (fsspec HTTP), xarray and TensorStore read through
`/zarr/`, and `/api/v1/data` slices, each compared with what
icechunk-python reads at the same ref. `/api/v1/versions` is compared with
icechunk-python's branches, tags and ancestry; caching headers follow the
ref (immutable at a snapshot id only) and a commit made while the server
runs is seen at the branch and not at the old snapshot. A repository on S3
(moto) is read the same way; bad refs, writes and mounts that are not
repositories are refused with clear errors (REST writes, which are
commits, are proven in test_icechunk_writes.py)."""

import datetime
import io
import json
import os
import subprocess
import urllib.error
import urllib.request

import icechunk as ic
import netCDF4
import numpy as np
import pandas as pd
import pytest
import tensorstore as ts
import xarray as xr
import zarr
from zarr.codecs import BytesCodec
from zarr.codecs.numcodecs import Shuffle, Zlib
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from conftest import create_bucket, s3_env, start_moto, start_zarrd, stop

# zarr-python warns that numcodecs codecs are not in the v3 spec (the NetCDF
# chunks need them); Icechunk warns that local storage is not for concurrent
# commits.
pytestmark = pytest.mark.filterwarnings("ignore")

IMMUTABLE = "public, max-age=31536000, immutable"


def call(method, url, headers=None, body=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def error_of(body):
    """The `error` object of a JSON error response."""
    doc = json.loads(body)
    assert set(doc["error"]) >= {"code", "message"}, doc
    return doc["error"]


def npy(url):
    status, _, body = call("GET", url)
    assert status == 200, (url, status, body[:500])
    return np.load(io.BytesIO(body), allow_pickle=False)


def get_json(url):
    status, _, body = call("GET", url, {"Accept": "application/json"})
    assert status == 200, (url, status, body[:500])
    return json.loads(body)


def toml_string(s):
    return json.dumps(str(s))


def zarrd_binary():
    return os.environ.get("ZARRD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug",
                                                    "zarrd"))


# --------------------------------------------------------------------------
# The repository.

LAT, LON = np.linspace(-40.0, 40.0, 18), np.linspace(0.0, 350.0, 36)


def write_sources(folder):
    """The files virtual chunks point into: raw little-endian float64 after
    an 8-byte header, and a NetCDF4 file with a zlib + shuffle chunked
    variable and an uncompressed chunked one; kerchunk's references of the
    NetCDF file's chunks."""
    from kerchunk.hdf import SingleHdf5ToZarr

    raw = np.arange(64, dtype="<f8") * 0.5 - 7.0
    (folder / "raw.bin").write_bytes(b"ZARRDHDR" + raw.tobytes())
    nc_path = folder / "grid.nc"
    rng = np.random.default_rng(5)
    with netCDF4.Dataset(nc_path, "w", format="NETCDF4") as nc:
        nc.createDimension("y", 18)
        nc.createDimension("x", 24)
        z = nc.createVariable("zlib", "f4", ("y", "x"), zlib=True, shuffle=True, complevel=4, chunksizes=(9, 8))
        z[:] = rng.normal(280, 10, (18, 24)).astype("f4")
        p = nc.createVariable("plain", "i4", ("y", "x"), chunksizes=(6, 12))
        p[:] = rng.integers(-1000, 1000, (18, 24))
    refs = SingleHdf5ToZarr(str(nc_path), inline_threshold=0).translate()["refs"]
    zlib_meta = json.loads(refs["zlib/.zarray"])
    assert zlib_meta["compressor"] is None and [f["id"] for f in zlib_meta["filters"]] == ["shuffle", "zlib"]
    assert json.loads(refs["plain/.zarray"])["filters"] is None
    return raw, nc_path, refs


def nc_chunks(refs, var):
    """(chunk index, offset, length) of a NetCDF variable's chunks."""
    out = []
    for key, value in refs.items():
        name, _, index = key.partition("/")
        if name == var and not index.startswith(".") and isinstance(value, list):
            out.append((tuple(int(i) for i in index.split(".")), value[1], value[2]))
    return sorted(out)


def temperature(days, seed):
    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {"temp": (("time", "lat", "lon"), rng.normal(280, 15, (days, LAT.size, LON.size)).astype("f4"),
                  {"units": "K", "long_name": "air temperature"})},
        coords={"time": pd.date_range("2024-01-01", periods=days, freq="D"),
                "lat": ("lat", LAT, {"units": "degrees_north"}),
                "lon": ("lon", LON, {"units": "degrees_east"})},
        attrs={"title": "daily temperature"},
    )


class Built:
    """A repository icechunk-python wrote, and what it is made of."""

    def __init__(self, path, sources, prefix, raw, nc_path, ids):
        self.path, self.sources, self.prefix = path, sources, prefix
        self.raw, self.nc_path, self.ids = raw, nc_path, ids

    def open(self):
        return open_local(self.path, self.prefix)


def open_local(path, prefix=None):
    """The repository at `path`, allowed to read the `file://` container
    `prefix` (icechunk-python reads no virtual chunk otherwise)."""
    storage = ic.local_filesystem_storage(str(path))
    if prefix is None:
        return ic.Repository.open(storage)
    return ic.Repository.open(storage, authorize_virtual_chunk_access=ic.containers_credentials({prefix: None}))


def build_repository(base):
    """main: initial -> warmer (tag v1, branch experiment) -> append two days
    -> drop raw/small; experiment: one commit of its own."""
    sources = base / "sources"
    sources.mkdir()
    raw, nc_path, refs = write_sources(sources)
    prefix = f"file://{sources}/"
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(str(sources))))
    repo = ic.Repository.create(ic.local_filesystem_storage(str(base / "repo")), config=config,
                                authorize_virtual_chunk_access=ic.containers_credentials({prefix: None}))
    ids = {}

    # 1. The dataset with xarray, arrays with zarr-python, virtual arrays.
    s = repo.writable_session("main")
    root = zarr.create_group(s.store, zarr_format=3, attributes={"title": "icechunk interop", "revision": 1})
    temperature(4, 1).to_zarr(s.store, group="ds", zarr_format=3, consolidated=False,
                              encoding={"temp": {"chunks": (2, 9, 12)}})
    # Three 2-byte values a chunk: Icechunk inlines them in the manifest.
    small = root.create_array("raw/small", shape=(12,), chunks=(3,), dtype="i2", attributes={"kind": "inline"})
    small[:] = np.arange(12, dtype="i2") * 3
    # 1200 uncompressed bytes a chunk: native chunks; half the grid unwritten.
    counts = root.create_array("raw/counts", shape=(40, 30), chunks=(20, 15), dtype="i4", compressors=None,
                               fill_value=-1)
    counts[:20] = np.random.default_rng(3).integers(0, 10**6, (20, 30))
    root.create_array("virtual/le", shape=(64,), chunks=(16,), dtype="<f8", compressors=None, fill_value=0,
                           attributes={"source": "raw.bin"})
    for i in range(4):
        s.store.set_virtual_ref(f"virtual/le/c/{i}", f"{prefix}raw.bin", offset=8 + 128 * i, length=128)
    root.create_array("virtual/nc_zlib", shape=(18, 24), chunks=(9, 8), dtype="<f4",
                      serializer=BytesCodec(endian="little"), compressors=[Shuffle(elementsize=4), Zlib(level=4)],
                      fill_value=0)
    for index, offset, length in nc_chunks(refs, "zlib"):
        s.store.set_virtual_ref("virtual/nc_zlib/c/" + "/".join(map(str, index)), f"{prefix}grid.nc",
                                offset=offset, length=length)
    root.create_array("virtual/nc_plain", shape=(18, 24), chunks=(6, 12), dtype="<i4",
                      serializer=BytesCodec(endian="little"), compressors=None, fill_value=0)
    for index, offset, length in nc_chunks(refs, "plain"):
        s.store.set_virtual_ref("virtual/nc_plain/c/" + "/".join(map(str, index)), f"{prefix}grid.nc",
                                offset=offset, length=length)
    ids["initial"] = s.commit("initial: dataset, raw and virtual arrays")

    # 2. A region rewritten, attributes, an inline chunk, a virtual chunk re-pointed.
    s = repo.writable_session("main")
    root = zarr.open_group(s.store, mode="r+")
    temp = root["ds/temp"]
    temp[0:2] = temp[0:2] + 10
    root["ds"].attrs["history"] = "warmed by 10 K"
    root["raw/small"][3] = 99
    s.store.set_virtual_ref("virtual/le/c/1", f"{prefix}raw.bin", offset=8 + 128 * 3, length=128)
    ids["warmer"] = s.commit("warmer")
    repo.create_tag("v1", ids["warmer"])
    repo.create_branch("experiment", ids["warmer"])

    # On the branch: a corner marked, an array deleted, one added.
    s = repo.writable_session("experiment")
    root = zarr.open_group(s.store, mode="r+")
    root["ds/temp"][:, 0, 0] = -1
    del root["raw/counts"]
    extra = root.create_array("raw/extra", shape=(5,), chunks=(5,), dtype="u1")
    extra[:] = [1, 2, 3, 4, 5]
    ids["experiment"] = s.commit("experiment: mark a corner, drop counts")

    # 3. Two more days appended with xarray.
    s = repo.writable_session("main")
    more = temperature(2, 2).assign_coords(time=pd.date_range("2024-01-05", periods=2, freq="D"))
    more.to_zarr(s.store, group="ds", append_dim="time", consolidated=False)
    ids["append"] = s.commit("append two days")

    # 4. An array deleted, root attributes changed.
    s = repo.writable_session("main")
    root = zarr.open_group(s.store, mode="r+")
    del root["raw/small"]
    root.attrs["revision"] = 4
    ids["drop"] = s.commit("drop raw/small")
    return Built(base / "repo", sources, prefix, raw, nc_path, ids)


# --------------------------------------------------------------------------
# What icechunk-python reads.

def stored(session):
    """Every key of a session's snapshot and its bytes, through Icechunk's store."""
    async def read():
        out = {}
        keys = [k async for k in session.store.list()]
        for k in keys:
            value = await session.store.get(k, default_buffer_prototype())
            out[k] = value.to_bytes()
        return out

    return sync(read())


def python_view(session):
    """{"root": attrs, "groups": {path: attrs}, "arrays": {path: (attrs, values)}},
    or None when the snapshot holds no root group."""
    try:
        root = zarr.open_group(session.store, mode="r", zarr_format=3)
    except FileNotFoundError:
        return None
    view = {"root": dict(root.attrs), "groups": {}, "arrays": {}}
    for path, node in root.members(max_depth=None):
        if isinstance(node, zarr.Array):
            view["arrays"][path] = (dict(node.attrs), node[...])
        else:
            view["groups"][path] = dict(node.attrs)
    return view


class Ref:
    """A ref as zarrd names it (`mount@ref`, or the mount alone for main)
    and as icechunk-python opens it."""

    def __init__(self, label, at, kwargs):
        self.label, self.at, self.kwargs = label, at, kwargs

    def mount(self, name="repo"):
        return f"{name}@{self.at}" if self.at else name


# snapshot-N is the Nth snapshot of main's ancestry, newest first: snapshot-0
# is main's tip, snapshot-4 the empty "Repository initialized".
LABELS = ["no-@", "main", "experiment", "v1", "experiment-tip", "snapshot-0", "snapshot-1", "snapshot-2",
          "snapshot-3", "snapshot-4"]


def make_ref(label, repo):
    if label == "no-@":
        return Ref(label, None, {"branch": "main"})
    if label in ("main", "experiment"):
        return Ref(label, label, {"branch": label})
    if label == "v1":
        return Ref(label, "v1", {"tag": "v1"})
    if label == "experiment-tip":
        sid = repo.lookup_branch("experiment")
        return Ref(label, sid, {"snapshot_id": sid})
    sid = [s.id for s in repo.ancestry(branch="main")][int(label.split("-")[1])]
    return Ref(label, sid, {"snapshot_id": sid})


class World:
    """The repository, the server mounting it, and icechunk-python's reads."""

    def __init__(self, built, url, plain):
        self.built, self.url, self.plain = built, url, plain
        self.repo = built.open()
        self._views, self._stored = {}, {}

    def ref(self, label):
        return make_ref(label, self.repo)

    def session(self, ref):
        return self.repo.readonly_session(**ref.kwargs)

    def view(self, ref):
        if ref.label not in self._views:
            self._views[ref.label] = python_view(self.session(ref))
        return self._views[ref.label]

    def stored(self, ref):
        if ref.label not in self._stored:
            self._stored[ref.label] = stored(self.session(ref))
        return self._stored[ref.label]

    def all_arrays(self):
        names = set()
        for label in LABELS:
            v = self.view(self.ref(label))
            names |= set(v["arrays"]) if v else set()
        return sorted(names)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("icechunk")
    built = build_repository(base)
    plain = base / "plain"
    g = zarr.create_group(str(plain), zarr_format=3)
    g.create_array("a", shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
    root = base / "root"
    root.mkdir()
    config = base / "zarrd.toml"
    config.write_text(
        f"root = {toml_string(root)}\n"
        "[mounts]\n"
        f"repo = {{ icechunk = {toml_string(built.path)}, virtual_chunks = [{toml_string(built.prefix)}] }}\n"
        f"byurl = {{ icechunk = {toml_string('file://' + str(built.path))}, virtual_chunks = [{toml_string(built.prefix)}] }}\n"
        f"nov = {{ icechunk = {toml_string(built.path)} }}\n"
        f"ro = {{ icechunk = {toml_string(built.path)}, read_only = true }}\n"
        f"plain = {toml_string(plain)}\n"
    )
    # Anonymous writes allowed, so a refused write is the repository's refusal.
    url, proc = start_zarrd("--config", str(config), "--allow-anonymous-writes")
    yield World(built, url, plain)
    stop(proc)


# --------------------------------------------------------------------------
# The repository holds every kind of chunk.

def test_repository_has_native_inline_and_virtual_chunks(world):
    """Checked on icechunk-python's side first, so the other tests read what
    they mean to: native chunks are files in the repository's `chunks/`,
    inline ones are not, virtual ones are the sources' bytes."""
    built, repo = world.built, world.repo
    stats = repo.chunk_storage_stats()
    assert stats.native_bytes > 0 and stats.inlined_bytes > 0 and stats.virtual_bytes > 0, stats
    files = {p.read_bytes() for p in (built.path / "chunks").iterdir()}
    v1 = stored(repo.readonly_session(tag="v1"))
    native = [k for k in v1 if k.startswith(("ds/temp/c/", "raw/counts/c/"))]
    inline = [k for k in v1 if k.startswith("raw/small/c/")]
    assert len(native) == 2 * 2 * 3 + 2 and len(inline) == 4
    assert all(v1[k] in files for k in native), "xarray's and zarr-python's chunks are native"
    assert not any(v1[k] in files for k in inline), "raw/small's chunks are inline"
    raw = (built.sources / "raw.bin").read_bytes()
    assert v1["virtual/le/c/0"] == raw[8:136] and v1["virtual/le/c/1"] == raw[8 + 384:8 + 512]
    # icechunk-python needs the container authorized to read virtual chunks.
    with pytest.raises(Exception, match="authorize"):
        zarr.open_array(open_local(built.path).readonly_session(tag="v1").store, path="virtual/le", mode="r")[...]
    # What the virtual arrays read is the sources' data.
    view = world.view(world.ref("v1"))
    with netCDF4.Dataset(built.nc_path) as nc:
        np.testing.assert_array_equal(view["arrays"]["virtual/nc_zlib"][1], nc["zlib"][:].data)
        np.testing.assert_array_equal(view["arrays"]["virtual/nc_plain"][1], nc["plain"][:].data)
    le = built.raw.copy()
    le[16:32] = built.raw[48:64]
    np.testing.assert_array_equal(view["arrays"]["virtual/le"][1], le)
    first = world.view(world.ref("snapshot-3"))
    np.testing.assert_array_equal(first["arrays"]["virtual/le"][1], built.raw)


@pytest.mark.parametrize("label", LABELS)
def test_raw_keys_are_icechunks_bytes(world, label):
    """Every key of the snapshot (metadata, native, inline and virtual
    chunks), byte for byte, with ranges; the listings of a few folders."""
    ref = world.ref(label)
    want = world.stored(ref)
    base = f"{world.url}/zarr/{ref.mount()}"
    if not want:
        status, _, body = call("GET", f"{base}/zarr.json")
        assert status == 404, (label, status, body)
        return
    for key, value in want.items():
        status, headers, body = call("GET", f"{base}/{key}")
        assert status == 200, (label, key, status, body[:300])
        if key.endswith("zarr.json") and json.loads(value).get("node_type") == "group":
            # A group's document comes with the consolidated metadata of
            # every node below it (zarr-python 3's form); ranges are of that.
            doc = json.loads(body)
            below = doc.pop("consolidated_metadata")["metadata"]
            assert doc == json.loads(value), (label, key)
            folder = key[: -len("zarr.json")]
            nodes = [k[len(folder): -len("/zarr.json")] for k in want
                     if k.startswith(folder) and k.endswith("/zarr.json") and k != key]
            assert sorted(below) == sorted(nodes), (label, key)
            value = body
        assert body == value, (label, key)
        assert int(headers["Content-Length"]) == len(value)
        if len(value) > 4:
            status, headers, part = call("GET", f"{base}/{key}", {"Range": "bytes=1-3"})
            assert status == 206 and part == value[1:4], (label, key, status)
            assert headers["Content-Range"] == f"bytes 1-3/{len(value)}"
    for folder in ("", "raw", "virtual/nc_zlib/c/1"):
        listing = get_json(f"{base}/{folder}/" if folder else f"{base}/")
        below = [k[len(folder) + 1:] if folder else k for k in want if not folder or k.startswith(folder + "/")]
        assert sorted(listing["keys"]) == sorted(k for k in below if "/" not in k), (label, folder, listing)
        assert sorted(listing["prefixes"]) == sorted({k.split("/")[0] for k in below if "/" in k}), (label, folder)
    # A chunk never written is missing, as in Icechunk.
    if "raw/counts/zarr.json" in want:
        assert "raw/counts/c/1/0" not in want
        assert call("GET", f"{base}/raw/counts/c/1/0")[0] == 404


# Keys the snapshot does not hold: another Zarr version's documents (what
# servers and clients probe for), a name Zarr v3 never uses, a chunk of a
# node that does not exist, a chunk outside the grid.
ABSENT = ["meta", "ds/temp/meta", "ds/temp/foo", "zarr.json/x", "nothing/c/0", "nothing/zarr.json",
          "ds/temp/c/99/0/0", "ds/temp/.zarray"]


@pytest.mark.parametrize("label", LABELS)
def test_absent_raw_keys_are_404(world, label):
    ref = world.ref(label)
    want = world.stored(ref)
    failures = {}
    for key in ABSENT:
        assert key not in want
        target = f"/zarr/{ref.mount()}/{key}"
        status, headers, body = call("GET", world.url + target)
        if status != 404:
            failures[f"GET {target}"] = (status, error_of(body)["code"])
        status = call("HEAD", world.url + target)[0]
        if status != 404:
            failures[f"HEAD {target}"] = status
    assert call("GET", f"{world.url}/healthz")[0] == 200
    if failures:
        pytest.fail("expected 404 not_found, got:\n" + "\n".join(f"  {k}: {v}" for k, v in failures.items()))


# --------------------------------------------------------------------------
# Clients at every ref.

@pytest.mark.parametrize("label", LABELS)
def test_zarr_python_reads_every_ref(world, label):
    ref = world.ref(label)
    want = world.view(ref)
    url = f"{world.url}/zarr/{ref.mount()}"
    if want is None:
        with pytest.raises(FileNotFoundError):
            zarr.open_group(url, mode="r", zarr_format=3)
        return
    g = zarr.open_group(url, mode="r")
    assert dict(g.attrs) == want["root"]
    for path, attrs in want["groups"].items():
        assert dict(g[path].attrs) == attrs, (label, path)
    for path, (attrs, values) in want["arrays"].items():
        a = g[path]
        assert isinstance(a, zarr.Array), path
        assert dict(a.attrs) == attrs, (label, path)
        assert a.shape == values.shape and a.dtype == values.dtype, (label, path, a.shape, a.dtype)
        np.testing.assert_array_equal(a[...], values, err_msg=f"{label} {path}")
    for path in set(world.all_arrays()) - set(want["arrays"]):
        with pytest.raises(KeyError):
            g[path]


@pytest.mark.parametrize("label", LABELS)
def test_xarray_reads_every_ref(world, label):
    ref = world.ref(label)
    url = f"{world.url}/zarr/{ref.mount()}/ds"
    if world.view(ref) is None:
        with pytest.raises(FileNotFoundError):
            xr.open_zarr(url, consolidated=False, chunks=None, zarr_format=3)
        return
    want = xr.open_zarr(world.session(ref).store, group="ds", consolidated=False, chunks=None,
                        zarr_format=3).load()
    got = xr.open_zarr(url, consolidated=False, chunks=None, zarr_format=3).load()
    xr.testing.assert_identical(got, want)
    assert got.sizes["time"] in (4, 6)
    assert got["time"].dtype.kind == "M"


# TensorStore's zarr3 driver has no numcodecs codecs (virtual/nc_zlib's
# shuffle and zlib); it reads every other array.
TS_SKIP = {"virtual/nc_zlib"}


@pytest.mark.parametrize("label", LABELS)
def test_tensorstore_reads_every_ref(world, label):
    ref = world.ref(label)
    want = world.view(ref)
    if want is None:
        with pytest.raises(ValueError):
            ts.open({"driver": "zarr3", "kvstore": {"driver": "http",
                                                     "base_url": f"{world.url}/zarr/{ref.mount()}/ds/temp"}},
                    open=True).result()
        return
    checked = 0
    for path, (_, values) in want["arrays"].items():
        if path in TS_SKIP:
            continue
        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "http",
                                                     "base_url": f"{world.url}/zarr/{ref.mount()}/{path}"}},
                    open=True).result()
        assert tuple(t.shape) == values.shape, (label, path)
        np.testing.assert_array_equal(np.asarray(t.read().result()), values, err_msg=f"{label} {path}")
        if values.ndim:
            np.testing.assert_array_equal(np.asarray(t[1:3].read().result()), values[1:3])
        checked += 1
    assert checked >= 6


SELECTIONS = {
    "ds/temp": [("1:4,2:17:3,::5", np.s_[1:4, 2:17:3, ::5]), ("-1,0,:", np.s_[-1, 0, :]), ("", np.s_[...])],
    "ds/time": [("", np.s_[...])],
    "ds/lat": [("::4", np.s_[::4])],
    "ds/lon": [("3:30:7", np.s_[3:30:7])],
    "raw/counts": [("15:25,::4", np.s_[15:25, ::4]), ("", np.s_[...])],
    "raw/small": [("2:9", np.s_[2:9]), ("", np.s_[...])],
    "raw/extra": [("", np.s_[...])],
    "virtual/le": [("10:50:3", np.s_[10:50:3]), ("", np.s_[...])],
    "virtual/nc_zlib": [("3:15,::2", np.s_[3:15, ::2]), ("", np.s_[...])],
    "virtual/nc_plain": [("-5:,7", np.s_[-5:, 7]), ("", np.s_[...])],
}


@pytest.mark.parametrize("label", LABELS)
def test_rest_api_at_every_ref(world, label):
    """Slices, each node's metadata, the tree and a preview at the ref."""
    ref = world.ref(label)
    want = world.view(ref)
    api = f"{world.url}/api/v1"
    mount = ref.mount()
    if want is None:
        pytest.skip("the initial snapshot holds no nodes: test_missing_nodes_are_404 reads it")
    assert set(want["arrays"]) <= set(SELECTIONS)
    for path, (attrs, values) in want["arrays"].items():
        for select, sel in SELECTIONS[path]:
            query = f"select={select}&format=npy" if select else "format=npy"
            got = npy(f"{api}/data/{mount}/{path}?{query}")
            assert got.dtype == values.dtype and got.shape == values[sel].shape, (label, path, select)
            np.testing.assert_array_equal(got, values[sel], err_msg=f"{label} {path}?select={select}")
        meta = get_json(f"{api}/meta/{mount}/{path}")
        assert meta["node_type"] == "array" and meta["shape"] == list(values.shape), (label, path)
        assert meta["attributes"] == attrs, (label, path)
    tree = get_json(f"{api}/tree/{mount}")
    arrays = {n["path"] for n in tree["nodes"] if n["node_type"] == "array"}
    assert arrays == {f"{mount}/{p}" for p in want["arrays"]}, (label, arrays)
    groups = {n["path"] for n in tree["nodes"] if n["node_type"] == "group"}
    assert groups >= {f"{mount}/{p}" for p in want["groups"]} | {mount}, (label, groups)
    status, headers, body = call("GET", f"{api}/preview/{mount}/ds/temp")
    assert status == 200 and headers["Content-Type"] == "image/png" and body[:8] == b"\x89PNG\r\n\x1a\n", label


@pytest.mark.parametrize("label", LABELS)
def test_missing_nodes_are_404(world, label):
    """A node the snapshot does not hold (deleted on this branch, added
    later, or any node of the empty initial snapshot) is a 404 not_found,
    as a path that names nothing is on a plain mount."""
    ref = world.ref(label)
    want = world.view(ref)
    mount = ref.mount()
    missing = sorted(set(world.all_arrays()) - set(want["arrays"] if want else ())) + ["nothing"]
    failures = {}
    for path in missing:
        status, _, body = call("GET", f"{world.url}/zarr/{mount}/{path}/zarr.json")
        assert status == 404, (label, path, status)
        for target in (f"/api/v1/data/{mount}/{path}?format=npy", f"/api/v1/meta/{mount}/{path}",
                       f"/api/v1/tree/{mount}/{path}"):
            status, _, body = call("GET", world.url + target)
            code = error_of(body)["code"]
            if (status, code) != (404, "not_found"):
                failures[f"GET {target}"] = (status, code, error_of(body)["message"][-90:])
    assert call("GET", f"{world.url}/healthz")[0] == 200
    if failures:
        pytest.fail("expected 404 not_found, got:\n" + "\n".join(f"  {k}: {v}" for k, v in failures.items()))


@pytest.mark.parametrize("label", LABELS)
def test_meta_counts_the_stored_chunks_at_every_ref(world, label):
    """`/api/v1/meta` counts an array's stored chunks and their bytes: the
    same at every ref as the keys Icechunk lists."""
    ref = world.ref(label)
    want = world.view(ref)
    if want is None:
        pytest.skip("the initial snapshot holds no arrays")
    keys = world.stored(ref)
    failures = {}
    for path in want["arrays"]:
        chunks = {k: len(v) for k, v in keys.items() if k.startswith(f"{path}/c/")}
        meta = get_json(f"{world.url}/api/v1/meta/{ref.mount()}/{path}")
        expected = (len(chunks), sum(chunks.values()), sorted(k[len(path) + 3:] for k in chunks))
        got = (meta["chunks_initialized"], meta["stored_bytes"],
               sorted("/".join(map(str, c)) for c in meta["chunks_present"]))
        if got != expected:
            failures[f"GET /api/v1/meta/{ref.mount()}/{path}"] = (
                f"chunks_initialized, stored_bytes {got[:2]}, expected {expected[:2]}")
    if failures:
        pytest.fail("stored chunks miscounted:\n" + "\n".join(f"  {k}: {v}" for k, v in failures.items()))


def test_mount_by_file_url_reads_the_same(world):
    ref = world.ref("v1")
    got = xr.open_zarr(f"{world.url}/zarr/{ref.mount('byurl')}/ds", consolidated=False, chunks=None,
                       zarr_format=3).load()
    want = xr.open_zarr(world.session(ref).store, group="ds", consolidated=False, chunks=None, zarr_format=3)
    xr.testing.assert_identical(got, want.load())
    np.testing.assert_array_equal(npy(f"{world.url}/api/v1/data/byurl@v1/virtual/nc_zlib?format=npy"),
                                  world.view(ref)["arrays"]["virtual/nc_zlib"][1])


# --------------------------------------------------------------------------
# Versions.

def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_versions_listing_equals_icechunk(world):
    repo, ids = world.repo, world.built.ids
    doc = get_json(f"{world.url}/api/v1/versions/repo")
    assert doc["path"] == "repo"
    branches = {b["name"]: b["snapshot"] for b in doc["branches"]}
    assert branches == {b: repo.lookup_branch(b) for b in repo.list_branches()}
    assert branches == {"main": ids["drop"], "experiment": ids["experiment"]}
    tags = {t["name"]: t["snapshot"] for t in doc["tags"]}
    assert tags == {t: repo.lookup_tag(t) for t in repo.list_tags()} == {"v1": ids["warmer"]}
    history = list(repo.ancestry(branch="main"))
    assert len(history) == 5
    assert [s["id"] for s in doc["snapshots"]] == [s.id for s in history]
    assert [s["id"] for s in doc["snapshots"]][:4] == [ids["drop"], ids["append"], ids["warmer"], ids["initial"]]
    for got, want in zip(doc["snapshots"], history):
        assert got["parent_id"] == want.parent_id, got
        assert got["message"] == want.message, got
        assert parse_time(got["written_at"]) == want.written_at, (got, want.written_at)
    assert doc["snapshots"][-1]["parent_id"] is None
    assert doc["snapshots"][-1]["message"] == "Repository initialized"
    # `limit` keeps the newest.
    doc = get_json(f"{world.url}/api/v1/versions/repo?limit=2")
    assert [s["id"] for s in doc["snapshots"]] == [ids["drop"], ids["append"]]
    assert len(doc["branches"]) == 2 and len(doc["tags"]) == 1


# --------------------------------------------------------------------------
# Caching, and commits made while the server runs.

def test_snapshot_urls_are_immutable_branches_follow_commits(tmp_path):
    storage = ic.local_filesystem_storage(str(tmp_path / "repo"))
    repo = ic.Repository.create(storage)
    rng = np.random.default_rng(9)
    old = rng.integers(-10**6, 10**6, (32, 32)).astype("i4")
    s = repo.writable_session("main")
    a = zarr.create_array(s.store, name="a", shape=(32, 32), chunks=(16, 16), dtype="i4", compressors=None,
                          fill_value=0)
    a[:] = old
    first = s.commit("first")
    repo.create_tag("t1", first)
    config = tmp_path / "zarrd.toml"
    config.write_text(f"[mounts]\nrepo = {{ icechunk = {toml_string(tmp_path / 'repo')} }}\n")
    (tmp_path / "root").mkdir()
    url, proc = start_zarrd("--config", str(config), str(tmp_path / "root"))
    try:
        chunk = "a/c/0/0"
        old_bytes = stored(repo.readonly_session(snapshot_id=first))[chunk]
        pinned = f"{url}/zarr/repo@{first}/{chunk}"
        status, headers, body = call("GET", pinned)
        assert status == 200 and body == old_bytes
        assert headers["Cache-Control"] == IMMUTABLE, dict(headers)
        pinned_etag = headers["ETag"]
        assert pinned_etag.startswith('"') and not pinned_etag.startswith("W/"), pinned_etag
        assert call("GET", pinned, {"If-None-Match": pinned_etag})[0] == 304
        status, headers, _ = call("HEAD", pinned)
        assert status == 200 and headers["Cache-Control"] == IMMUTABLE and headers["ETag"] == pinned_etag
        status, headers, _ = call("GET", f"{url}/zarr/repo@{first}/a/zarr.json")
        assert status == 200 and headers["Cache-Control"] == IMMUTABLE

        branch_etags = {}
        for branch_url in (f"{url}/zarr/repo/{chunk}", f"{url}/zarr/repo@main/{chunk}"):
            status, headers, body = call("GET", branch_url)
            assert status == 200 and body == old_bytes, branch_url
            assert "immutable" not in headers.get("Cache-Control", ""), (branch_url, headers.get("Cache-Control"))
            branch_etags[branch_url] = headers["ETag"]
        assert call("GET", f"{url}/zarr/repo@t1/{chunk}")[2] == old_bytes
        branch = f"{url}/zarr/repo/{chunk}"
        assert call("GET", branch, {"If-None-Match": branch_etags[branch]})[0] == 304
        # Decoded values are cached by the server from here on.
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo/a?format=npy"), old)
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@main/a?select=0:16,0:16&format=npy"),
                                      old[:16, :16])

        # A commit on main while the server runs.
        new = old.copy()
        new[:16, :16] = -new[:16, :16] - 1
        s = repo.writable_session("main")
        zarr.open_array(s.store, path="a", mode="r+")[:16, :16] = new[:16, :16]
        second = s.commit("second")
        new_bytes = stored(repo.readonly_session(snapshot_id=second))[chunk]
        assert new_bytes != old_bytes

        for branch_url in (f"{url}/zarr/repo/{chunk}", f"{url}/zarr/repo@main/{chunk}"):
            status, headers, body = call("GET", branch_url)
            assert status == 200 and body == new_bytes, branch_url
            assert headers["ETag"] != branch_etags[branch_url], branch_url
            status, _, body = call("GET", branch_url, {"If-None-Match": branch_etags[branch_url]})
            assert status == 200 and body == new_bytes, branch_url
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo/a?format=npy"), new)
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@main/a?select=0:16,0:16&format=npy"),
                                      new[:16, :16])
        np.testing.assert_array_equal(zarr.open_array(f"{url}/zarr/repo/a", mode="r")[...], new)

        # The old snapshot and the tag on it still serve the old values.
        status, headers, body = call("GET", pinned)
        assert status == 200 and body == old_bytes and headers["ETag"] == pinned_etag
        assert headers["Cache-Control"] == IMMUTABLE
        assert call("GET", pinned, {"If-None-Match": pinned_etag})[0] == 304
        assert call("GET", f"{url}/zarr/repo@t1/{chunk}")[2] == old_bytes
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@{first}/a?format=npy"), old)
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/repo@t1/a?format=npy"), old)
        # The new snapshot by id is immutable too.
        status, headers, body = call("GET", f"{url}/zarr/repo@{second}/{chunk}")
        assert status == 200 and body == new_bytes and headers["Cache-Control"] == IMMUTABLE
        doc = get_json(f"{url}/api/v1/versions/repo")
        assert doc["branches"] == [{"name": "main", "snapshot": second}]
        assert [s["id"] for s in doc["snapshots"]][:2] == [second, first]
    finally:
        stop(proc)


# --------------------------------------------------------------------------
# A repository on S3.

def test_repository_on_s3(tmp_path):
    endpoint, moto = start_moto()
    proc = None
    try:
        create_bucket(endpoint, "ice")
        storage = ic.s3_storage(bucket="ice", prefix="repos/one", region="us-east-1", endpoint_url=endpoint,
                                allow_http=True, force_path_style=True, access_key_id="test",
                                secret_access_key="test")
        repo = ic.Repository.create(storage)
        s = repo.writable_session("main")
        temperature(4, 7).to_zarr(s.store, zarr_format=3, consolidated=False,
                                  encoding={"temp": {"chunks": (2, 9, 12)}})
        first = s.commit("first on S3")
        repo.create_tag("v1", first)
        s = repo.writable_session("main")
        zarr.open_array(s.store, path="temp", mode="r+")[1:3] = 0
        second = s.commit("second on S3")

        config = tmp_path / "zarrd.toml"
        config.write_text('[mounts]\ns3repo = { icechunk = "s3://ice/repos/one" }\n')
        (tmp_path / "root").mkdir()
        url, proc = start_zarrd("--config", str(config), str(tmp_path / "root"), env=s3_env(endpoint))
        for at, kwargs in ((None, {"branch": "main"}), ("v1", {"tag": "v1"}), (first, {"snapshot_id": first}),
                           (second, {"snapshot_id": second})):
            mount = f"s3repo@{at}" if at else "s3repo"
            session = repo.readonly_session(**kwargs)
            want = xr.open_zarr(session.store, consolidated=False, chunks=None, zarr_format=3).load()
            got = xr.open_zarr(f"{url}/zarr/{mount}", consolidated=False, chunks=None, zarr_format=3).load()
            xr.testing.assert_identical(got, want)
            values = want["temp"].values
            g = zarr.open_group(f"{url}/zarr/{mount}", mode="r")
            np.testing.assert_array_equal(g["temp"][...], values)
            np.testing.assert_array_equal(npy(f"{url}/api/v1/data/{mount}/temp?select=0:3,::2,5&format=npy"),
                                          values[0:3, ::2, 5])
            t = ts.open({"driver": "zarr3", "kvstore": {"driver": "http", "base_url": f"{url}/zarr/{mount}/temp"}},
                        open=True).result()
            np.testing.assert_array_equal(np.asarray(t.read().result()), values)
            keys = stored(session)
            status, headers, body = call("GET", f"{url}/zarr/{mount}/temp/c/1/0/0")
            assert status == 200 and body == keys["temp/c/1/0/0"], mount
            if at in (first, second):
                assert headers["Cache-Control"] == IMMUTABLE, (mount, dict(headers))
            elif at is None:
                assert "immutable" not in headers.get("Cache-Control", ""), (mount, dict(headers))
        assert not np.array_equal(npy(f"{url}/api/v1/data/s3repo@v1/temp?format=npy"),
                                  npy(f"{url}/api/v1/data/s3repo/temp?format=npy"))
        doc = get_json(f"{url}/api/v1/versions/s3repo")
        assert doc["branches"] == [{"name": "main", "snapshot": second}]
        assert doc["tags"] == [{"name": "v1", "snapshot": first}]
        history = list(repo.ancestry(branch="main"))
        assert [(s["id"], s["parent_id"], s["message"]) for s in doc["snapshots"]] == [
            (h.id, h.parent_id, h.message) for h in history]
        status, _, body = call("GET", f"{url}/zarr/s3repo@nope/zarr.json")
        assert status == 404 and error_of(body)["code"] == "unknown_version", body
    finally:
        if proc:
            stop(proc)
        stop(moto)


# --------------------------------------------------------------------------
# A repository as ROOT.

def test_repository_as_root(world):
    """ROOT naming a repository's directory serves its branch main (its
    virtual chunks from the containers --reference-targets allows)."""
    url, proc = start_zarrd(str(world.built.path), "--reference-targets", world.built.prefix)
    try:
        ref = world.ref("main")
        want = world.view(ref)
        g = zarr.open_group(f"{url}/zarr/", mode="r")
        assert dict(g.attrs) == want["root"]
        for path, (_, values) in want["arrays"].items():
            np.testing.assert_array_equal(g[path][...], values, err_msg=path)
            np.testing.assert_array_equal(npy(f"{url}/api/v1/data/{path}?format=npy"), values, err_msg=path)
        got = xr.open_zarr(f"{url}/zarr/ds", consolidated=False, chunks=None, zarr_format=3).load()
        xr.testing.assert_identical(got, xr.open_zarr(world.session(ref).store, group="ds", consolidated=False,
                                                      chunks=None, zarr_format=3).load())
        status, headers, body = call("GET", f"{url}/zarr/ds/temp/c/0/0/0")
        assert status == 200 and body == world.stored(ref)["ds/temp/c/0/0/0"]
        assert "immutable" not in headers.get("Cache-Control", "")
        # No versions by `@` at the root: such a path names no node.
        for path in ("ds@v1/temp/zarr.json", "@v1/zarr.json"):
            status, _, body = call("GET", f"{url}/zarr/{path}")
            assert status == 404, (path, status, body[:200])
        assert call("GET", f"{url}/healthz")[0] == 200
    finally:
        stop(proc)


# --------------------------------------------------------------------------
# Bad input.

def assert_alive(world):
    assert call("GET", f"{world.url}/healthz")[0] == 200
    np.testing.assert_array_equal(npy(f"{world.url}/api/v1/data/repo@v1/raw/small?format=npy"),
                                  world.view(world.ref("v1"))["arrays"]["raw/small"][1])


@pytest.mark.parametrize("bad", ["nope", "v2", "feature-x"])
def test_unknown_ref_is_404_unknown_version(world, bad):
    for target in (f"/zarr/repo@{bad}/zarr.json", f"/zarr/repo@{bad}/ds/temp/c/0/0/0",
                   f"/api/v1/data/repo@{bad}/ds/temp?select=0,0,0&format=json", f"/api/v1/meta/repo@{bad}/ds",
                   f"/api/v1/tree/repo@{bad}", f"/api/v1/preview/repo@{bad}/ds/temp"):
        status, headers, body = call("GET", world.url + target)
        assert status == 404, (target, status, body[:300])
        assert headers["Content-Type"].startswith("application/json"), target
        err = error_of(body)
        assert err["code"] == "unknown_version" and f"'{bad}'" in err["message"], (target, err)
    assert call("HEAD", f"{world.url}/zarr/repo@{bad}/zarr.json")[0] == 404
    assert_alive(world)


def test_snapshot_id_that_does_not_exist(world):
    real = world.built.ids["warmer"]
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    fake = alphabet[(alphabet.index(real[0]) + 1) % 32] + real[1:]
    with pytest.raises(Exception):
        world.repo.readonly_session(snapshot_id=fake)
    for target in (f"/zarr/repo@{fake}/zarr.json", f"/api/v1/data/repo@{fake}/raw/small?format=json"):
        status, _, body = call("GET", world.url + target)
        assert status == 404, (target, status, body[:300])
        err = error_of(body)
        assert err["code"] == "unknown_version" and fake in err["message"], (target, err)
    assert_alive(world)


def test_at_on_a_mount_that_is_not_a_repository(world):
    assert call("GET", f"{world.url}/zarr/plain/a/zarr.json")[0] == 200
    for target in ("/zarr/plain@main/a/zarr.json", "/zarr/plain@main/zarr.json", "/api/v1/data/plain@main/a",
                   "/api/v1/meta/plain@v1/a", "/zarr/absent@main/zarr.json"):
        status, headers, body = call("GET", world.url + target)
        assert status == 404, (target, status, body[:300])
        assert headers["Content-Type"].startswith("application/json"), target
        error_of(body)
    assert_alive(world)


def test_writes_are_refused_read_only(world):
    """Raw keys are never written (that would bypass Icechunk's
    transactions); a `read_only` mount refuses REST writes too. REST writes
    to a writable mount are commits: test_icechunk_writes.py."""
    repo = world.repo
    tips = {b: repo.lookup_branch(b) for b in repo.list_branches()}
    key = "raw/counts/c/0/0"
    _, _, before = call("GET", f"{world.url}/zarr/repo/{key}")
    for method, target, body, ctype in (
        ("PUT", f"/zarr/repo/{key}", b"\0" * 1200, "application/octet-stream"),
        ("PUT", f"/zarr/repo@main/{key}", b"\0" * 1200, "application/octet-stream"),
        ("PUT", "/zarr/repo/new/zarr.json", b'{"zarr_format": 3, "node_type": "group"}', "application/json"),
        ("DELETE", f"/zarr/repo/{key}", None, None),
        ("PUT", "/api/v1/data/ro/raw/counts?select=0,0", np.int32(5).tobytes(), "application/octet-stream"),
        ("PUT", "/api/v1/data/ro@main/raw/counts?select=0,0", np.int32(5).tobytes(), "application/octet-stream"),
        ("PATCH", "/api/v1/meta/ro/raw/counts", b'{"attributes": {"x": 1}}', "application/json"),
        ("DELETE", "/api/v1/meta/ro/raw/counts", None, None),
    ):
        headers = {"Content-Type": ctype} if ctype else {}
        status, h, answer = call(method, world.url + target, headers, body)
        assert status == 403, (method, target, status, answer[:300])
        assert h["Content-Type"].startswith("application/json"), (method, target)
        err = error_of(answer)
        assert err["code"] == "read_only", (method, target, err)
        if target.startswith("/zarr/"):
            assert "transactions" in err["message"], (method, target, err)
    assert call("GET", f"{world.url}/zarr/repo/{key}")[2] == before
    assert call("GET", f"{world.url}/zarr/repo/new/zarr.json")[0] == 404
    assert {b: repo.lookup_branch(b) for b in repo.list_branches()} == tips
    assert_alive(world)


def test_versions_of_a_plain_mount_is_501(world):
    status, headers, body = call("GET", f"{world.url}/api/v1/versions/plain")
    assert status == 501, (status, body)
    assert headers["Content-Type"].startswith("application/json")
    err = error_of(body)
    assert "plain" in err["message"] and "Icechunk" in err["message"], err
    status, _, body = call("GET", f"{world.url}/api/v1/versions/absent")
    assert status == 404, (status, body)
    error_of(body)
    assert_alive(world)


def test_broken_virtual_chunks_are_clear_errors(tmp_path):
    """Virtual chunks whose file is missing or too short, or that lie
    outside every container the repository declares: a JSON error naming
    the key, never other bytes; the server stays up."""
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    (allowed / "good.bin").write_bytes(bytes(range(8)))
    (allowed / "short.bin").write_bytes(b"1234")
    (elsewhere / "secret.bin").write_bytes(b"secret-bytes")
    prefix = f"file://{allowed}/"
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(str(allowed))))
    repo = ic.Repository.create(ic.local_filesystem_storage(str(tmp_path / "repo")), config=config)
    s = repo.writable_session("main")
    g = zarr.create_group(s.store, zarr_format=3)
    for name, location, check in (("good", f"{prefix}good.bin", True), ("gone", f"{prefix}gone.bin", True),
                                  ("short", f"{prefix}short.bin", True),
                                  ("outside", f"file://{elsewhere}/secret.bin", False)):
        g.create_array(name, shape=(8,), chunks=(8,), dtype="u1", compressors=None)
        s.store.set_virtual_ref(f"{name}/c/0", location, offset=0, length=8, validate_container=check)
    s.commit("virtual chunks, some broken")
    conf = tmp_path / "zarrd.toml"
    conf.write_text(f"[mounts]\nrepo = {{ icechunk = {toml_string(tmp_path / 'repo')}, "
                    f"virtual_chunks = [{toml_string(prefix)}] }}\n")
    (tmp_path / "root").mkdir()
    url, proc = start_zarrd("--config", str(conf), str(tmp_path / "root"))
    try:
        assert call("GET", f"{url}/zarr/repo/good/c/0")[2] == bytes(range(8))
        failures = {}
        for name, mention in (("gone", "gone.bin"), ("short", "short.bin"), ("outside", "secret.bin")):
            for target in (f"/zarr/repo/{name}/c/0", f"/api/v1/data/repo/{name}?format=json"):
                status, headers, body = call("GET", url + target)
                assert status in (403, 502), (target, status, body[:300])
                assert b"secret-bytes" not in body and headers["Content-Type"].startswith("application/json")
                err = error_of(body)
                assert f"{name}/c/0" in err["message"], (target, err)
                if mention not in err["message"]:
                    failures[target] = (status, err["message"])
            assert call("GET", f"{url}/healthz")[0] == 200
        assert not failures, ("the error should name the virtual chunk's file", failures)
    finally:
        stop(proc)


def zarrd_refuses(*args):
    """Run `zarrd serve ARGS`, which must exit by itself; its exit code and
    everything it printed."""
    proc = subprocess.Popen([zarrd_binary(), "serve", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        stop(proc)
        pytest.fail(f"zarrd started with a mount that is not an Icechunk repository: {args}")
    return proc.returncode, out + err


def test_mount_that_is_not_a_repository_refuses_to_start(tmp_path, world):
    empty = tmp_path / "empty"
    empty.mkdir()
    zarr.create_group(str(tmp_path / "plain.zarr"), zarr_format=3)
    (tmp_path / "root").mkdir()
    for location in (empty, tmp_path / "plain.zarr", tmp_path / "absent", f"file://{tmp_path}/absent2",
                     "gs://bucket/repo"):
        config = tmp_path / "zarrd.toml"
        config.write_text(f"[mounts]\nrepo = {{ icechunk = {toml_string(location)} }}\n")
        code, output = zarrd_refuses("--config", str(config), str(tmp_path / "root"))
        assert code != 0, (location, output)
        assert "Icechunk" in output, (location, output)
        shown = str(location)
        assert shown in output or shown.replace("file://", "") in output, (location, output)
    assert not (tmp_path / "absent").exists() and not (tmp_path / "absent2").exists()
    # The good repository next to a bad one: still refused.
    config = tmp_path / "zarrd.toml"
    config.write_text(f"[mounts]\nrepo = {{ icechunk = {toml_string(world.built.path)} }}\n"
                      f"bad = {{ icechunk = {toml_string(empty)} }}\n")
    code, output = zarrd_refuses("--config", str(config), str(tmp_path / "root"))
    assert code != 0 and str(empty) in output, output


def test_virtual_chunks_need_their_container_allowed(world):
    """A mount without `virtual_chunks` reads native and inline chunks but
    refuses virtual ones, naming why: whoever can write a repository must
    not be able to make the server read the files its containers name."""
    url = world.url
    status, _, body = call("GET", f"{url}/zarr/nov@v1/virtual/le/c/0")
    assert status in (403, 502), (status, body[:300])
    assert "virtual" in error_of(body)["message"], body[:300]
    assert call("GET", f"{url}/zarr/nov@v1/virtual/le/zarr.json")[0] == 200
    assert call("GET", f"{url}/healthz")[0] == 200
