"""Reference stores ("virtual Zarr") against real NetCDF4/HDF5 files.

The tests write NetCDF4 files (with xarray and with netCDF4 directly: zlib +
shuffle chunks, contiguous variables, an unlimited dimension, a packed
variable, missing values, a group, attributes, time/lat/lon coordinates) and
an HDF5 file with h5py (nested groups, gzip + shuffle, contiguous and
uncompressed chunked datasets, attributes); build reference sets for them
with kerchunk (SingleHdf5ToZarr, MultiZarrToZarr along time,
refs_to_dataframe) and VirtualiZarr (JSON and Parquet); and serve each set
through zarrd as ROOT, one from S3 (moto) and one as a `[mounts]` entry.
What the clients read through zarrd is compared with what xarray, netCDF4
and h5py read from the original files, and every referenced key's bytes with
the file's bytes at the referenced offset. Broken, disallowed and malformed
references, and writes, are refused with clear errors."""

import io
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import h5py
import httpx
import netCDF4
import numpy as np
import pytest
import tensorstore as ts
import xarray as xr
import zarr

from conftest import create_bucket, s3_env, start_moto, start_zarrd, stop

# zarr-python warns that numcodecs codecs are not in the v3 spec; kerchunk
# and VirtualiZarr make sets with them on purpose.
pytestmark = pytest.mark.filterwarnings("ignore")


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


def data_url(base, var, select):
    query = f"select={select}&format=npy" if select else "format=npy"
    return f"{base}/api/v1/data/{var}?{query}"


def npy(url):
    status, headers, body = call("GET", url)
    assert status == 200, (url, status, body[:500])
    return np.load(io.BytesIO(body), allow_pickle=False)


# --------------------------------------------------------------------------
# The files.

LAT, LON = np.linspace(-42.5, 42.5, 18), np.linspace(0.0, 345.0, 24)


def write_series(path, part):
    """Four time steps of a series (part 0, 1, 2, ...) with xarray: a zlib +
    shuffle chunked variable with missing values, a contiguous one, and
    time/lat/lon coordinates."""
    rng = np.random.default_rng(part)
    temp = (rng.random((4, LAT.size, LON.size)) * 40 + 250).astype("f4")
    temp[0, 2, 3] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "lat", "lon"), temp, {"units": "K", "long_name": "air temperature"}),
            "mask": (("lat", "lon"), (np.arange(LAT.size * LON.size).reshape(LAT.size, LON.size) % 3).astype("i2"),
                     {"flag_values": np.array([0, 1, 2], dtype="i2"), "flag_meanings": "sea land ice"}),
        },
        coords={
            "time": ("time", np.arange(4 * part, 4 * part + 4, dtype="f8"),
                     {"units": "days since 2000-01-01", "calendar": "standard", "standard_name": "time"}),
            "lat": ("lat", LAT, {"units": "degrees_north"}),
            "lon": ("lon", LON, {"units": "degrees_east"}),
        },
        attrs={"title": "series", "institution": "interop tests"},
    )
    encoding = {
        "temp": {"zlib": True, "shuffle": True, "complevel": 4, "chunksizes": (2, 9, 8), "_FillValue": -999.0},
        "mask": {"contiguous": True},
    }
    ds.to_netcdf(path, engine="netcdf4", encoding=encoding)


def write_rich(path):
    """A NetCDF4 file written with netCDF4 directly, with a group."""
    rng = np.random.default_rng(7)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.title = "rich"
        nc.revision = np.int32(3)
        nc.setncattr("weights", np.array([0.25, 0.5, 0.25]))
        nc.createDimension("time", None)
        nc.createDimension("lat", LAT.size)
        nc.createDimension("lon", LON.size)
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "hours since 2020-01-01 00:00:00", "standard"
        t[:] = np.arange(6) * 6.0
        lat = nc.createVariable("lat", "f4", ("lat",), contiguous=True)
        lat.units = "degrees_north"
        lat[:] = LAT
        lon = nc.createVariable("lon", "f4", ("lon",), contiguous=True)
        lon.units = "degrees_east"
        lon[:] = LON
        temp = nc.createVariable("temp", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, complevel=5,
                                 chunksizes=(2, 6, 8), fill_value=np.float32(-9999.0))
        temp.units, temp.long_name = "K", "temperature"
        values = (rng.random((6, LAT.size, LON.size)) * 50 + 240).astype("f4")
        temp[:] = np.ma.masked_where(values > 288, values)
        elevation = nc.createVariable("elevation", "i2", ("lat", "lon"), contiguous=True)
        elevation.units = "m"
        elevation[:] = rng.integers(-400, 4000, (LAT.size, LON.size))
        counts = nc.createVariable("counts", "u4", ("time", "lat", "lon"), chunksizes=(3, 9, 12))
        counts[:] = rng.integers(0, 10**6, (6, LAT.size, LON.size))
        packed = nc.createVariable("precip", "i2", ("time", "lat", "lon"), zlib=True, shuffle=True,
                                   chunksizes=(6, 18, 24))
        packed.scale_factor, packed.add_offset, packed.units = 0.01, 5.0, "mm"
        packed.set_auto_maskandscale(False)
        packed[:] = rng.integers(-500, 500, (6, LAT.size, LON.size)).astype("i2")
        g = nc.createGroup("forecast")
        g.source = "model"
        g.createDimension("step", 5)
        step = g.createVariable("step", "i4", ("step",))
        step.units = "hours"
        step[:] = np.arange(5) * 3
        wind = g.createVariable("wind", "f8", ("step", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(5, 9, 8))
        wind.units = "m s-1"
        wind[:] = rng.normal(5, 3, (5, LAT.size, LON.size))


def write_plain_h5(path):
    """An HDF5 file written with h5py: nested groups, no NetCDF conventions."""
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "plain hdf5"
        f.attrs["answer"] = 42
        g = f.create_group("grid")
        g.attrs["description"] = "a group"
        g.create_dataset("shuffled", data=rng.normal(size=(20, 30)), chunks=(8, 10), compression="gzip",
                         compression_opts=6, shuffle=True)
        g.create_dataset("contiguous", data=rng.integers(-10**6, 10**6, (20, 30), dtype="i4"))
        g["contiguous"].attrs["units"] = "counts"
        sub = g.create_group("sub")
        sub.attrs["level"] = 2
        sub.create_dataset("plain", data=np.arange(40, dtype="u2") * 3, chunks=(16,))
        f.create_dataset("vector", data=np.arange(50, dtype="i8") ** 2, chunks=(10,), compression="gzip")


# --------------------------------------------------------------------------
# The reference sets.

def kerchunk_single(path, **kw):
    from kerchunk.hdf import SingleHdf5ToZarr

    return SingleHdf5ToZarr(path, inline_threshold=0, **kw).translate()


def kerchunk_series(paths):
    from kerchunk.combine import MultiZarrToZarr

    singles = [kerchunk_single(p) for p in paths]
    return MultiZarrToZarr(singles, concat_dims=["time"], identical_dims=["lat", "lon", "mask"],
                           inline_threshold=0).translate()


def virtual(url, registry, **kw):
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    return open_virtual_dataset(url, registry=registry, parser=HDFParser(), **kw)


def local_registry():
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file://": LocalStore()})


def flat(refs):
    """The key -> reference map of a version 0 or 1 set."""
    return refs["refs"] if "refs" in refs else refs


def write_json(path, refs):
    with open(path, "w") as f:
        json.dump(refs, f)


class RefSet:
    """One reference set on disk: where it is, what it references (`refs`,
    the dict its writer was given), the originals to compare with."""

    def __init__(self, name, location, refs, originals, groups=("",)):
        self.name, self.location, self.refs = name, location, refs
        self.originals, self.groups = originals, groups


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    d = tmp_path_factory.mktemp("refsets")
    series = [str(d / f"series_{i}.nc") for i in range(3)]
    for i, p in enumerate(series):
        write_series(p, i)
    rich, plain = str(d / "rich.nc"), str(d / "plain.h5")
    write_rich(rich)
    write_plain_h5(plain)
    out = {}

    refs = kerchunk_single(rich)
    write_json(d / "rich.json", refs)
    out["kerchunk-netcdf4"] = RefSet("kerchunk-netcdf4", str(d / "rich.json"), refs, [rich],
                                     groups=("", "forecast"))

    refs = kerchunk_single(plain)
    write_json(d / "plain.json", refs)
    out["kerchunk-hdf5"] = RefSet("kerchunk-hdf5", str(d / "plain.json"), refs, [plain])

    refs = kerchunk_series(series)
    write_json(d / "series.json", refs)
    out["kerchunk-multi"] = RefSet("kerchunk-multi", str(d / "series.json"), refs, series)

    from kerchunk.df import refs_to_dataframe

    # Small records, so a variable's references span several Parquet files.
    refs_to_dataframe(refs, str(d / "series.parq"), record_size=5)
    out["kerchunk-parquet"] = RefSet("kerchunk-parquet", str(d / "series.parq"), refs, series)

    vds = virtual(f"file://{series[1]}", local_registry(), loadable_variables=[])
    vds.vz.to_kerchunk(str(d / "vz.json"), format="json")
    with open(d / "vz.json") as f:
        refs = json.load(f)
    out["virtualizarr-json"] = RefSet("virtualizarr-json", str(d / "vz.json"), refs, [series[1]])

    vds = virtual(f"file://{rich}", local_registry(), loadable_variables=[])
    vds.vz.to_kerchunk(str(d / "vz_rich.parq"), format="parquet", record_size=4)
    out["virtualizarr-parquet"] = RefSet("virtualizarr-parquet", str(d / "vz_rich.parq"),
                                         vds.vz.to_kerchunk(None, format="dict"), [rich])
    return out


SET_NAMES = ["kerchunk-netcdf4", "kerchunk-hdf5", "kerchunk-multi", "kerchunk-parquet", "virtualizarr-json",
             "virtualizarr-parquet"]


@pytest.fixture(scope="module", params=SET_NAMES)
def served(request, sets):
    """(base URL, set) of zarrd serving one set as its ROOT."""
    s = sets[request.param]
    url, proc = start_zarrd(s.location)
    yield url, s
    stop(proc)


# --------------------------------------------------------------------------
# What the originals hold.

def original_dataset(s, group=""):
    """What xarray reads from the original file(s): concatenated along time
    for a series."""
    opened = [xr.open_dataset(p, engine="netcdf4", group=group or None).load() for p in s.originals]
    if len(opened) == 1:
        return opened[0]
    return xr.concat(opened, dim="time", data_vars="minimal", coords="minimal", compat="override")


def h5_read(s, path, selection=np.s_[...]):
    """h5py's read of `path` (its raw stored values); for a series, the
    files' reads concatenated along time for variables that have it."""
    parts = []
    for p in s.originals:
        with h5py.File(p, "r") as f:
            parts.append(f[path][()])
    whole = parts[0]
    if len(parts) > 1:
        with netCDF4.Dataset(s.originals[0]) as nc:
            if nc[path].dimensions[:1] == ("time",):
                whole = np.concatenate(parts)
    return whole[selection]


def plain(attrs):
    """Attributes as JSON-like values: NetCDF gives numpy arrays and
    scalars where Zarr's JSON gives lists and numbers."""
    return {k: np.asarray(v).tolist() for k, v in attrs.items()}


def zarray(refs, name):
    doc = flat(refs)[f"{name}/.zarray"]
    return json.loads(doc) if isinstance(doc, str) else doc


def assert_same_dataset(got, expected, refs, group=""):
    got = got.load()
    assert set(got.data_vars) == set(expected.data_vars)
    assert set(got.coords) == set(expected.coords)
    assert plain(got.attrs) == plain(expected.attrs)
    for name, var in expected.variables.items():
        g = got[name].variable
        assert g.dims == var.dims, name
        assert plain(g.attrs) == plain(var.attrs), (name, g.attrs, var.attrs)
        if g.dtype != var.dtype:
            # VirtualiZarr gives integer variables without a _FillValue
            # attribute HDF5's fill value (NetCDF's default fill) as Zarr
            # fill_value, so xarray masks them and reads floats: the set says
            # so, not zarrd. The values must still be the file's.
            fill = zarray(refs, f"{group}/{name}".lstrip("/"))["fill_value"]
            assert var.dtype.kind in "iu" and g.dtype.kind == "f", (name, g.dtype, var.dtype)
            assert fill is not None and "_FillValue" not in var.encoding and "_FillValue" not in var.attrs, name
            var = var.astype(g.dtype)
        assert g.dtype == var.dtype, name
        assert g.equals(var), name


def ranged(refs):
    """(key, target, offset, length) of every byte-range reference."""
    return [(k, v[0], v[1], v[2]) for k, v in sorted(flat(refs).items()) if isinstance(v, list) and len(v) == 3]


def target_path(target, s):
    if target.startswith("file://"):
        return target[len("file://"):]
    if target.startswith("/"):
        return target
    return os.path.join(os.path.dirname(s.location.rstrip("/")), target)


def file_bytes(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


# --------------------------------------------------------------------------
# Reading each set as ROOT.

# Plain HDF5 has no NetCDF dimensions: test_zarr_python_reads_plain_hdf5 reads it.
@pytest.mark.parametrize("served", [n for n in SET_NAMES if n != "kerchunk-hdf5"], indirect=True)
def test_xarray_reads_what_the_files_hold(served):
    url, s = served
    for group in s.groups:
        got = xr.open_zarr(f"{url}/zarr/{group}", consolidated=False, chunks=None, zarr_format=2)
        # kerchunk names a group's own dimensions by their HDF5 path
        # ("forecast/step"), NetCDF by their name.
        got = got.swap_dims({d: d.rsplit("/", 1)[1] for d in got.dims if "/" in d})
        assert_same_dataset(got, original_dataset(s, group), s.refs, group)


@pytest.mark.parametrize("served", ["kerchunk-hdf5"], indirect=True)
def test_zarr_python_reads_plain_hdf5(served):
    url, s = served
    root = zarr.open_group(f"{url}/zarr/", mode="r", zarr_format=2)
    with h5py.File(s.originals[0], "r") as f:
        assert dict(root.attrs) == {"title": "plain hdf5", "answer": 42}
        assert root["grid"].attrs["description"] == "a group"
        assert root["grid/sub"].attrs["level"] == 2
        assert root["grid/contiguous"].attrs["units"] == "counts"
        seen = []

        def compare(name, obj):
            if isinstance(obj, h5py.Dataset):
                arr = root[name]
                assert arr.shape == obj.shape and arr.dtype == obj.dtype, name
                np.testing.assert_array_equal(arr[...], obj[()], err_msg=name)
                seen.append(name)

        f.visititems(compare)
        assert sorted(seen) == ["grid/contiguous", "grid/shuffled", "grid/sub/plain", "vector"]


SELECTIONS = {
    # variable path -> (select parameter, numpy selection)
    "temp": [("1:5,2:17:3,::5", np.s_[1:5, 2:17:3, ::5]), ("-1,0:9,7", np.s_[-1, 0:9, 7]), ("", np.s_[...])],
    "mask": [("3:11,-7:", np.s_[3:11, -7:]), ("", np.s_[...])],
    "elevation": [("::2,5:20", np.s_[::2, 5:20])],
    "counts": [("2:5,4:13,10:14", np.s_[2:5, 4:13, 10:14])],
    "precip": [("0:6:5,17,:", np.s_[0:6:5, 17, :])],
    "time": [("", np.s_[...])],
    "lat": [("::4", np.s_[::4])],
    "forecast/wind": [("1:4,3:10,::3", np.s_[1:4, 3:10, ::3])],
    "forecast/step": [("", np.s_[...])],
    "grid/shuffled": [("3:19,::7", np.s_[3:19, ::7])],
    "grid/contiguous": [("5,:", np.s_[5, :])],
    "grid/sub/plain": [("10:35:2", np.s_[10:35:2])],
    "vector": [("-20:", np.s_[-20:])],
}


def variables(s):
    names = {k.rsplit("/", 1)[0] for k in flat(s.refs) if k.endswith("/.zarray")}
    return sorted(n for n in names if n in SELECTIONS)


def test_rest_slices_equal_h5py(served):
    url, s = served
    checked = 0
    for var in variables(s):
        for select, sel in SELECTIONS[var]:
            got = npy(data_url(url, var, select))
            want = h5_read(s, var, sel)
            assert got.shape == np.shape(want), (var, select)
            assert got.dtype == want.dtype, (var, select, got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{var}?select={select}")
            checked += 1
    assert checked >= 4


def test_raw_keys_are_the_files_bytes(served):
    url, s = served
    refs = ranged(s.refs)
    assert len(refs) >= 5
    for key, target, offset, length in refs:
        want = file_bytes(target_path(target, s), offset, length)
        assert len(want) == length
        status, headers, body = call("GET", f"{url}/zarr/{key}")
        assert status == 200, (key, status, body[:300])
        assert body == want, key
        status, headers, _ = call("HEAD", f"{url}/zarr/{key}")
        assert status == 200 and int(headers["Content-Length"]) == length, (key, status, dict(headers))
        lo, hi = min(3, length - 1), min(length - 1, 40)
        status, headers, part = call("GET", f"{url}/zarr/{key}", {"Range": f"bytes={lo}-{hi}"})
        assert status == 206, (key, status)
        assert part == want[lo:hi + 1], key
        assert headers["Content-Range"] == f"bytes {lo}-{hi}/{length}", key
        status, _, part = call("GET", f"{url}/zarr/{key}", {"Range": "bytes=-4"})
        assert status == 206 and part == want[-4:], key
    # Inline values are the set's own text.
    for key in (".zgroup", ".zattrs"):
        if key in flat(s.refs) and isinstance(flat(s.refs)[key], str):
            status, _, body = call("GET", f"{url}/zarr/{key}")
            assert status == 200 and json.loads(body) == json.loads(flat(s.refs)[key]), key


# TensorStore's zarr v2 driver takes no "filters" (it refuses to open such an
# array); kerchunk and VirtualiZarr put HDF5's shuffle and zlib in filters
# (compressor null), so TensorStore reads the variables stored without
# filters: contiguous and uncompressed chunked ones.
TENSORSTORE_VARS = ["counts", "elevation", "mask", "lat", "lon", "grid/contiguous", "grid/sub/plain"]


def tensorstore_open(url, var):
    return ts.open({"driver": "zarr", "kvstore": {"driver": "http", "base_url": f"{url}/zarr/{var}"},
                    "open": True}).result()


def test_tensorstore_reads_a_variable(served):
    url, s = served
    names = [v for v in TENSORSTORE_VARS if v + "/.zarray" in flat(s.refs)]
    assert names
    for var in names[:2]:
        t = tensorstore_open(url, var)
        np.testing.assert_array_equal(np.asarray(t.read().result()), h5_read(s, var), err_msg=var)
        np.testing.assert_array_equal(np.asarray(t[1:3].read().result()), h5_read(s, var, np.s_[1:3]))
    shuffled = next(v for v in ("temp", "grid/shuffled") if v + "/.zarray" in flat(s.refs))
    try:
        t = tensorstore_open(url, shuffled)
    except ValueError as e:
        assert "filters" in str(e), e
    else:
        np.testing.assert_array_equal(np.asarray(t.read().result()), h5_read(s, shuffled))


# --------------------------------------------------------------------------
# A set on S3, and a set mounted from the config file.

def test_references_on_s3(tmp_path):
    """NetCDF files and the set in a bucket; VirtualiZarr reads the files
    from S3 itself (obstore) and the set names them by s3:// URL."""
    import boto3
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import S3Store

    series = [str(tmp_path / f"series_{i}.nc") for i in range(3)]
    for i, p in enumerate(series):
        write_series(p, i + 5)
    endpoint, moto = start_moto()
    proc = None
    try:
        create_bucket(endpoint, "virtual-zarr")
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                              region_name="us-east-1")
        for p in series:
            client.upload_file(p, "virtual-zarr", f"nc/{os.path.basename(p)}")
        store = S3Store("virtual-zarr", endpoint=endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})
        registry = ObjectStoreRegistry({"s3://virtual-zarr": store})
        parts = [virtual(f"s3://virtual-zarr/nc/{os.path.basename(p)}", registry,
                         loadable_variables=["time", "lat", "lon"], decode_times=False) for p in series]
        combined = xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override")
        refs = combined.vz.to_kerchunk(None, format="dict")
        targets = {v[0] for _, v in flat(refs).items() if isinstance(v, list)}
        assert targets == {f"s3://virtual-zarr/nc/series_{i}.nc" for i in range(3)}, targets
        client.put_object(Bucket="virtual-zarr", Key="refs.json", Body=json.dumps(refs).encode())

        url, proc = start_zarrd("s3://virtual-zarr/refs.json", env=s3_env(endpoint))
        s = RefSet("s3", "s3://virtual-zarr/refs.json", refs, series)
        got = xr.open_zarr(f"{url}/zarr/", consolidated=False, chunks=None, zarr_format=2)
        assert_same_dataset(got, original_dataset(s), refs)
        for select, sel in SELECTIONS["temp"]:
            np.testing.assert_array_equal(npy(data_url(url, "temp", select)),
                                          h5_read(s, "temp", sel))
        for key, target, offset, length in ranged(refs):
            want = file_bytes(str(tmp_path / os.path.basename(target)), offset, length)
            status, _, body = call("GET", f"{url}/zarr/{key}")
            assert status == 200 and body == want, (key, status)
            status, headers, _ = call("HEAD", f"{url}/zarr/{key}")
            assert int(headers["Content-Length"]) == length, key
            status, _, part = call("GET", f"{url}/zarr/{key}", {"Range": "bytes=1-8"})
            assert status == 206 and part == want[1:9], key
        t = ts.open({"driver": "zarr", "kvstore": {"driver": "http", "base_url": f"{url}/zarr/mask"}}).result()
        np.testing.assert_array_equal(np.asarray(t.read().result()), h5_read(s, "mask"))
    finally:
        if proc:
            stop(proc)
        stop(moto)


def toml_string(s):
    return json.dumps(str(s))


def test_mounted_set_with_targets(tmp_path):
    """A set in one folder, its files in another: the mount's `targets`
    allows them; the same set mounted without targets is refused them."""
    data, refs_dir, root = tmp_path / "archive", tmp_path / "refs", tmp_path / "plain"
    for p in (data, refs_dir, root):
        p.mkdir()
    series = [str(data / f"series_{i}.nc") for i in range(3)]
    for i, p in enumerate(series):
        write_series(p, i + 10)
    refs = kerchunk_series(series)
    write_json(refs_dir / "series.json", refs)
    config = tmp_path / "zarrd.toml"
    config.write_text(
        f"root = {toml_string(root)}\n"
        "[mounts]\n"
        f"era = {{ references = {toml_string(refs_dir / 'series.json')}, targets = [{toml_string(data)}] }}\n"
        f"strict = {{ references = {toml_string(refs_dir / 'series.json')} }}\n"
    )
    url, proc = start_zarrd("--config", str(config))
    try:
        s = RefSet("mount", str(refs_dir / "series.json"), refs, series)
        got = xr.open_zarr(f"{url}/zarr/era", consolidated=False, chunks=None, zarr_format=2)
        assert_same_dataset(got, original_dataset(s), refs)
        for var in ("temp", "mask", "time"):
            for select, sel in SELECTIONS[var]:
                np.testing.assert_array_equal(npy(data_url(url, f"era/{var}", select)),
                                              h5_read(s, var, sel))
        key, target, offset, length = ranged(refs)[0]
        status, headers, body = call("GET", f"{url}/zarr/era/{key}")
        assert status == 200 and body == file_bytes(target, offset, length)
        t = ts.open({"driver": "zarr", "kvstore": {"driver": "http", "base_url": f"{url}/zarr/era/mask"}}).result()
        np.testing.assert_array_equal(np.asarray(t.read().result()), h5_read(s, "mask"))

        # Without targets only the set's own folder is allowed.
        status, headers, body = call("GET", f"{url}/zarr/strict/{key}")
        assert status == 403, (status, body)
        err = error_of(body)
        assert "targets" in err["message"] and os.path.basename(target) in err["message"], err
        assert call("GET", f"{url}/zarr/strict/.zgroup")[0] == 200
        status, _, body = call("GET", f"{url}/api/v1/data/strict/temp?select=0,0,0&format=json")
        assert status == 403, (status, body)
        assert call("GET", f"{url}/healthz")[0] == 200
    finally:
        stop(proc)


# --------------------------------------------------------------------------
# Rewritten targets.

def test_etag_follows_the_target(tmp_path):
    """Rewriting a target file changes its keys' ETags, and what is served
    (raw keys and decoded slices) is the new file's."""
    path = str(tmp_path / "one.nc")
    write_series(path, 1)
    refs = kerchunk_single(path)
    write_json(tmp_path / "one.json", refs)
    url, proc = start_zarrd(str(tmp_path / "one.json"))
    try:
        _, offset, length = flat(refs)["mask/0.0"]
        status, headers, before = call("GET", f"{url}/zarr/mask/0.0")
        assert status == 200 and before == file_bytes(path, offset, length)
        etag = headers["ETag"]
        assert call("GET", f"{url}/zarr/mask/0.0", {"If-None-Match": etag})[0] == 304
        with h5py.File(path, "r") as f:
            old = f["mask"][()]
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/mask?format=npy"), old)

        # The same layout with other values, written beside and moved over.
        ds = xr.open_dataset(path).load()
        ds["mask"] = ds["mask"] + 7
        ds.to_netcdf(str(tmp_path / "new.nc"), engine="netcdf4",
                     encoding={"temp": {"zlib": True, "shuffle": True, "complevel": 4, "chunksizes": (2, 9, 8)},
                               "mask": {"contiguous": True}})
        time.sleep(0.01)
        os.replace(tmp_path / "new.nc", path)
        assert flat(kerchunk_single(path))["mask/0.0"][1:] == [offset, length], "the layout must not move"
        with h5py.File(path, "r") as f:
            new = f["mask"][()]
        assert (new == old + 7).all()

        status, headers, after = call("GET", f"{url}/zarr/mask/0.0")
        assert status == 200 and after == file_bytes(path, offset, length) and after != before
        assert headers["ETag"] != etag
        assert call("GET", f"{url}/zarr/mask/0.0", {"If-None-Match": etag})[0] == 200
        assert call("HEAD", f"{url}/zarr/mask/0.0")[1]["ETag"] == headers["ETag"]
        np.testing.assert_array_equal(npy(f"{url}/api/v1/data/mask?format=npy"), new)
    finally:
        stop(proc)


# --------------------------------------------------------------------------
# Bad input.

@pytest.fixture(scope="module")
def broken_set(tmp_path_factory):
    """A real file's references, plus variables whose chunks point at a
    missing file, past the end of the file, and outside the set's folder."""
    base = tmp_path_factory.mktemp("broken")
    here, elsewhere = base / "set", base / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    path = str(here / "data.nc")
    write_series(path, 2)
    shutil.copy(path, elsewhere / "other.nc")
    size = os.path.getsize(path)
    refs = kerchunk_single(path)
    r = flat(refs)
    _, offset, length = r["mask/0.0"]
    for name in ("missing", "short", "beyond", "outside", "escape"):
        r[f"{name}/.zarray"], r[f"{name}/.zattrs"] = r["mask/.zarray"], r["mask/.zattrs"]
    r["missing/0.0"] = [str(here / "gone.nc"), offset, length]
    r["short/0.0"] = [path, size - 100, length]
    r["beyond/0.0"] = [path, size + 1000, length]
    r["outside/0.0"] = [str(elsewhere / "other.nc"), offset, length]
    r["escape/0.0"] = ["../elsewhere/other.nc", offset, length]
    write_json(here / "refs.json", refs)
    return here / "refs.json", path, elsewhere, (offset, length)


@pytest.fixture(scope="module")
def broken_server(broken_set):
    url, proc = start_zarrd(str(broken_set[0]))
    yield url
    stop(proc)


def assert_alive(url, broken_set):
    """The server still answers, and the good references still read."""
    _, path, _, (offset, length) = broken_set
    assert call("GET", f"{url}/healthz")[0] == 200
    status, _, body = call("GET", f"{url}/zarr/mask/0.0")
    assert status == 200 and body == file_bytes(path, offset, length)
    status, _, body = call("GET", f"{url}/api/v1/data/mask?select=0,0:3&format=json")
    assert status == 200, body


@pytest.mark.parametrize("key, mention", [
    ("missing/0.0", "gone.nc"),     # the target does not exist
    ("short/0.0", "data.nc"),       # the range starts inside the file and ends past its end
    ("beyond/0.0", "data.nc"),      # the range starts past the file's end
])
def test_broken_reference_is_502_bad_reference(broken_server, broken_set, key, mention):
    url = broken_server
    for method, headers in (("GET", {}), ("GET", {"Range": "bytes=0-3"})):
        status, h, body = call(method, f"{url}/zarr/{key}", headers)
        assert status == 502, (method, key, headers, status, body)
        assert h["Content-Type"].startswith("application/json"), key
        err = error_of(body)
        assert err["code"] == "bad_reference", (key, headers, err)
        assert mention in err["message"] and key in err["message"], (key, err)
    assert call("HEAD", f"{url}/zarr/{key}")[0] == 502, key
    var = key.split("/")[0]
    status, _, body = call("GET", f"{url}/api/v1/data/{var}?select=0,0&format=json")
    assert status == 502, (var, status, body)
    err = error_of(body)
    assert err["code"] == "bad_reference" and mention in err["message"], (var, err)
    assert_alive(url, broken_set)


@pytest.mark.parametrize("key", ["outside/0.0", "escape/0.0"])
def test_target_outside_allowed_locations_is_403(broken_server, broken_set, key):
    url = broken_server
    status, h, body = call("GET", f"{url}/zarr/{key}")
    assert status == 403, (key, status, body)
    assert h["Content-Type"].startswith("application/json"), key
    err = error_of(body)
    assert "targets" in err["message"] and "other.nc" in err["message"], (key, err)
    assert call("HEAD", f"{url}/zarr/{key}")[0] == 403, key
    var = key.split("/")[0]
    status, _, body = call("GET", f"{url}/api/v1/data/{var}?select=0,0&format=json")
    assert status == 403 and "targets" in error_of(body)["message"], (var, status, body)
    assert_alive(url, broken_set)


def test_reference_targets_allow_another_folder(broken_set):
    location, path, elsewhere, (offset, length) = broken_set
    url, proc = start_zarrd(str(location), "--reference-targets", f"{location.parent},{elsewhere}")
    try:
        for key in ("outside/0.0", "escape/0.0"):
            status, _, body = call("GET", f"{url}/zarr/{key}")
            assert status == 200 and body == file_bytes(str(elsewhere / "other.nc"), offset, length), key
        assert call("GET", f"{url}/zarr/mask/0.0")[0] == 200
        assert call("GET", f"{url}/zarr/missing/0.0")[0] == 502
    finally:
        stop(proc)
    # Targets replace the default: the set's own folder is then not allowed.
    url, proc = start_zarrd(str(location), "--reference-targets", str(elsewhere))
    try:
        assert call("GET", f"{url}/zarr/outside/0.0")[0] == 200
        status, _, body = call("GET", f"{url}/zarr/mask/0.0")
        assert status == 403 and "targets" in error_of(body)["message"], (status, body)
    finally:
        stop(proc)


def test_writes_are_refused(broken_set):
    location, path, _, _ = broken_set
    url, proc = start_zarrd(str(location), "--allow-anonymous-writes")
    try:
        _, _, before = call("GET", f"{url}/zarr/mask/0.0")
        for method, target, body in (
            ("PUT", "/zarr/mask/0.0", b"\0" * 16),
            ("PUT", "/zarr/new/.zgroup", b'{"zarr_format": 2}'),
            ("DELETE", "/zarr/mask/0.0", None),
            ("PUT", "/api/v1/data/mask?select=0,0", np.int16(5).tobytes()),
        ):
            headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
            status, _, answer = call(method, f"{url}{target}", headers, body)
            assert status == 403, (method, target, status, answer)
            assert error_of(answer)["code"] == "read_only", (method, target, answer)
        assert call("GET", f"{url}/zarr/mask/0.0")[2] == before
        assert call("GET", f"{url}/zarr/new/.zgroup")[0] == 404
        assert call("GET", f"{url}/healthz")[0] == 200
    finally:
        stop(proc)


def zarrd_refuses(*args):
    """Run `zarrd serve ARGS`, which must exit by itself; its exit code and
    everything it printed."""
    binary = os.environ.get("ZARRD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug",
                                                      "zarrd"))
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        stop(proc)
        pytest.fail(f"zarrd started on a malformed reference set: {args}")
    return proc.returncode, out + err


MALFORMED = {
    "not-json.json": ('{"version": 1, "refs": {', "not JSON"),
    "version.json": ('{"version": 2, "refs": {}}', "version 2"),
    "list.json": ('{".zgroup": "{}", "a/0": ["x.nc", 1]}', "a/0"),
    "base64.json": ('{".zgroup": "{}", "a/0": "base64:!!not base64!!"}', "base64"),
    "refs.json": ('{"version": 1, "refs": ["a", "b"]}', "refs"),
    "array.json": ('[1, 2, 3]', "JSON object"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_set_refuses_to_start(tmp_path, name):
    text, mention = MALFORMED[name]
    (tmp_path / name).write_text(text)
    code, output = zarrd_refuses(str(tmp_path / name))
    assert code != 0, output
    assert mention in output and name in output, output


def test_malformed_parquet_set_and_mount_refuse_to_start(tmp_path):
    folder = tmp_path / "broken.parq"
    folder.mkdir()
    (folder / ".zmetadata").write_text("{not json")
    code, output = zarrd_refuses(str(folder))
    assert code != 0 and "broken.parq" in output, output
    empty = tmp_path / "empty.parq"
    empty.mkdir()
    code, output = zarrd_refuses(str(empty))
    assert code != 0 and "empty.parq" in output, output
    code, output = zarrd_refuses(str(tmp_path / "absent.json"))
    assert code != 0 and "absent.json" in output, output
    (tmp_path / "bad.json").write_text('{"version": 1, "refs": {"a/0": 5}}')
    config = tmp_path / "zarrd.toml"
    config.write_text(f"root = {toml_string(tmp_path)}\n[mounts]\nnc = {{ references = "
                      f"{toml_string(tmp_path / 'bad.json')}, targets = [{toml_string(tmp_path)}] }}\n")
    code, output = zarrd_refuses("--config", str(config))
    assert code != 0 and "bad.json" in output and "a/0" in output, output


def sparse_parquet_set(folder, shape, rows=10):
    """A Parquet set whose array `big` (chunks of one byte) has references
    for its first `rows` chunks only, in the one file written."""
    import fastparquet
    import pandas as pd
    (folder / "big").mkdir(parents=True)
    (folder.parent / "data.bin").write_bytes(bytes(range(256)))
    zarray = {"zarr_format": 2, "shape": shape, "chunks": [1] * len(shape), "dtype": "|u1",
              "compressor": None, "filters": None, "fill_value": 0, "order": "C"}
    meta = {"record_size": rows, "metadata": {".zgroup": json.dumps({"zarr_format": 2}),
                                              "big/.zarray": json.dumps(zarray)}}
    (folder / ".zmetadata").write_text(json.dumps(meta))
    frame = pd.DataFrame({"path": [str(folder.parent / "data.bin")] * rows, "offset": list(range(rows)),
                          "size": [1] * rows, "raw": [None] * rows})
    frame["raw"] = frame["raw"].astype(object)
    fastparquet.write(str(folder / "big" / "refs.0.parq"), frame,
                      object_encoding={"path": "utf8", "raw": "bytes"}, stats=False)


def test_a_sparse_parquet_set_lists_the_chunks_it_has(tmp_path):
    # A million by a million chunks, ten of them referenced: listing reads
    # the one file written, not the 10^11 the grid could have.
    sparse_parquet_set(tmp_path / "set.parq", [1_000_000, 1_000_000])
    url, proc = start_zarrd(str(tmp_path / "set.parq"), "--reference-targets", str(tmp_path))
    try:
        listed = httpx.get(f"{url}/zarr/big/", headers={"accept": "application/json"}, timeout=60)
        assert listed.status_code == 200, listed.text
        assert listed.json()["keys"] == sorted([".zarray"] + [f"0.{i}" for i in range(10)])
        assert httpx.get(f"{url}/zarr/big/0.7").content == bytes([7])
        # One spelling per chunk: `0.07` is not chunk 0.7.
        assert httpx.get(f"{url}/zarr/big/0.07").status_code == 404
        assert httpx.get(f"{url}/zarr/big/00.7").status_code == 404
    finally:
        stop(proc)


def test_a_parquet_grid_too_large_to_number_is_refused_at_start(tmp_path):
    sparse_parquet_set(tmp_path / "set.parq", [2**33, 2**33])
    code, output = zarrd_refuses(str(tmp_path / "set.parq"))
    assert code != 0 and "more chunks than can be numbered" in output, output
