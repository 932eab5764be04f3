"""OPeNDAP: datasets written by xarray (Zarr v2 and v3; CF times, packed
int16 with scale/offset and _FillValue, NaNs, descending latitude, 64-bit
times, unsigned bytes, strings) served under /opendap/ and read by the
reference clients: netCDF-C's ncdump (DAP2 and DAP4), xarray through
netCDF4 (netCDF-C's DAP2), and pydap (DAP2 and DAP4). Every read equals
what xarray reads from the Zarr store itself, hyperslabs with strides
included."""

import os
import subprocess
import urllib.error
import urllib.request

import numpy as np
import pytest
import xarray as xr

from conftest import start_zarrd, stop
from test_labels import climate

FORMATS = {"v2.zarr": 2, "v3.zarr": 3}


def dataset():
    ds = climate().isel(time=slice(0, 60))
    ds["station"] = ("band", np.array(["alpha", "bé", "c"], dtype=object))
    # Unsigned bytes past 127, which netCDF-C reads signed unless told.
    ds["bands"] = (("time", "band"), (np.arange(60 * 3) * 7 % 256).astype("uint8").reshape(60, 3))
    # A name a DDS escapes (netCDF-C escapes it once more in its requests).
    ds["air temp"] = ds.temp * 2
    ds.attrs.update({"title": "a test dataset", "Conventions": "CF-1.8", "version": 3})
    return ds


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("opendap")
    for name, fmt in FORMATS.items():
        dataset().to_zarr(root / name, zarr_format=fmt, consolidated=False, mode="w")
    url, proc = start_zarrd(str(root))
    try:
        yield url, root
    finally:
        stop(proc)


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.headers, r.read()


def failing(url):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=60)
    return e.value.code, e.value.headers, e.value.read().decode()


def zarr_ds(root, name):
    return xr.open_zarr(root / name, consolidated=False)


def assert_same(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def ncdump(*args):
    out = subprocess.run(["ncdump", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", list(FORMATS))
def test_ncdump_reads_dap2(served, name):
    base, root = served
    out = ncdump("-v", "lat,time", f"{base}/opendap/{name}")
    assert "float temp(time, lat, lon)" in out
    assert 'temp:units = "degC"' in out
    assert "short packed(time, lat, lon)" in out
    assert "packed:scale_factor = 0.01" in out
    assert ':title = "a test dataset"' in out
    # 64-bit integers are not DAP2's: left out, and said so.
    assert "int64 t4" not in out and "t4(t4)" not in out
    lat = " ".join(out.split("lat =")[-1].split(";")[0].split()).replace(",", "")
    assert [float(x) for x in lat.split()] == list(zarr_ds(root, name).lat.values)
    _, _, das = get(f"{base}/opendap/{name}.das")
    assert "DODS_EXTRA" in das.decode() and "t4: int64 is 64-bit" in das.decode()


@pytest.mark.parametrize("name", list(FORMATS))
def test_ncdump_reads_dap4(served, name):
    base, root = served
    out = ncdump("-v", "lat,t4,bands", f"{base}/opendap/{name}#dap4")
    assert "float temp(time, lat, lon)" in out
    assert "int64 t4(t4)" in out
    assert "ubyte bands(time, band)" in out
    assert 'string station(band)' in out
    t4 = out.split("t4 =")[-1].split(";")[0].replace(",", " ").split()
    assert [int(x) for x in t4] == list(xr.open_zarr(root / name, decode_times=False, consolidated=False).t4.values)


@pytest.mark.parametrize("name", list(FORMATS))
def test_xarray_through_netcdf_c_reads_like_zarr(served, name):
    base, root = served
    expected = zarr_ds(root, name)
    with xr.open_dataset(f"{base}/opendap/{name}", engine="netcdf4") as ds:
        for var in ["temp", "packed", "lat", "lon", "time", "depth", "ocean", "bands"]:
            assert_same(ds[var].values, expected[var].values)
        # netCDF-C names a variable as the DDS escapes it, and asks for it so.
        assert_same(ds["air%20temp"][2:9:3].values, expected["air temp"][2:9:3].values)
        assert ds.temp.attrs["units"] == "degC"
        assert ds.attrs["title"] == "a test dataset"
        # A hyperslab with a stride: netCDF-C sends it as a constraint.
        assert_same(ds.temp[1:50:7, ::3, 5].values, expected.temp[1:50:7, ::3, 5].values)
        assert_same(ds.packed[::5, 2, 1:20:4].values, expected.packed[::5, 2, 1:20:4].values)


@pytest.mark.parametrize("name", list(FORMATS))
def test_xarray_through_netcdf_c_reads_dap4_like_zarr(served, name):
    base, root = served
    expected = zarr_ds(root, name)
    with xr.open_dataset(f"{base}/opendap/{name}#dap4", engine="netcdf4") as ds:
        for var in ["temp", "packed", "lat", "time", "t4", "ocean", "bands", "station"]:
            assert_same(ds[var].values, expected[var].values)
        assert_same(ds.ocean[3:30:9, 1:, ::2, 0].values, expected.ocean[3:30:9, 1:, ::2, 0].values)


@pytest.mark.parametrize("name", list(FORMATS))
def test_pydap_reads_dap2_grids_and_hyperslabs(served, name):
    from pydap.client import open_url

    base, root = served
    expected = xr.open_zarr(root / name, decode_cf=False, consolidated=False)
    ds = open_url(f"{base}/opendap/{name}", protocol="dap2")
    assert set(ds.keys()) >= {"temp", "packed", "lat", "lon", "time", "ocean", "station"}
    assert "t4" not in ds.keys()
    grid = ds["temp"]
    assert list(grid.maps) == ["time", "lat", "lon"]
    assert_same(grid.array[2:40:5, ::4, 3:9].data, expected.temp[2:40:5, ::4, 3:9].values)
    assert_same(ds["lat"][::2].data, expected.lat[::2].values)
    assert ds["packed"].attributes["scale_factor"] == 0.01
    # pydap reads strings as ASCII only: the UTF-8 ones are read by netCDF-C.
    assert ds["station"].shape == (3,)


@pytest.mark.parametrize("name", list(FORMATS))
def test_pydap_reads_dap4_with_checksums(served, name):
    from pydap.client import open_url

    base, root = served
    expected = xr.open_zarr(root / name, decode_cf=False, consolidated=False)
    ds = open_url(f"{base}/opendap/{name}", protocol="dap4")
    assert_same(ds["temp"][2:40:5, ::4, 3:9].data, expected.temp[2:40:5, ::4, 3:9].values)
    assert_same(ds["t4"][:].data, expected.t4.values)
    assert_same(ds["bands"][5:9].data, expected.bands[5:9].values)
    # pydap holds strings as numpy bytes (ASCII): the UTF-8 ones are read
    # by netCDF-C above.
    assert ds["station"].shape == (3,)
    # The checksum the server sent is the CRC-32 of the values.
    import zlib

    _, _, body = get(f"{base}/opendap/{name}.dap?dap4.ce=/lat")
    dmr_len = int.from_bytes(body[1:4], "big")
    chunk = body[4 + dmr_len:]
    size = int.from_bytes(chunk[1:4], "big")
    values, crc = chunk[4:4 + size - 4], chunk[4 + size - 4:4 + size]
    assert np.frombuffer(values, "<f8").tolist() == list(expected.lat.values)
    assert int.from_bytes(crc, "little") == zlib.crc32(values)
    _, _, plain = get(f"{base}/opendap/{name}.dap?dap4.ce=/lat&dap4.checksum=false")
    assert len(plain) == len(body) - 4


def test_an_array_is_a_dataset_with_its_coordinates(served):
    base, root = served
    _, headers, dds = get(f"{base}/opendap/v3.zarr/temp.dds")
    dds = dds.decode()
    assert headers["Content-Description"] == "dods-dds"
    assert "Grid {" in dds and "MAPS:" in dds and "} temp;" in dds
    with xr.open_dataset(f"{base}/opendap/v3.zarr/temp", engine="netcdf4") as ds:
        assert_same(ds.temp.values, zarr_ds(root, "v3.zarr").temp.values)
        assert_same(ds.lat.values, zarr_ds(root, "v3.zarr").lat.values)


def test_ascii_and_the_form_page(served):
    base, root = served
    _, _, text = get(f"{base}/opendap/v2.zarr.ascii?lat%5B0:3:9%5D,temp.temp%5B0%5D%5B0:1%5D%5B0:2%5D")
    lines = text.decode().splitlines()
    assert lines[0] == "Dataset: v2.zarr"
    assert lines[1] == "lat, 85, 55, 25, -5"
    t = zarr_ds(root, "v2.zarr").temp
    row = [float(x) for x in lines[3].split(", ")[1:]]
    assert lines[3].startswith("temp.temp[0][1], ")
    assert_same(row, t[0, 1, 0:3].values)
    _, headers, page = get(f"{base}/opendap/v2.zarr.html")
    assert headers["Content-Type"].startswith("text/html")
    assert b"v2.zarr.dds" in page and b"packed" in page


def test_errors_are_dap_errors(served):
    base, _ = served
    code, headers, body = failing(f"{base}/opendap/v2.zarr.dods?nope")
    assert code == 400 and headers["Content-Description"] == "dods-error"
    assert body.startswith("Error {") and "no variable 'nope'" in body
    code, _, body = failing(f"{base}/opendap/v2.zarr.dods?lat%5B0:1:99%5D")
    assert code == 400 and "past the last index 17" in body
    code, _, body = failing(f"{base}/opendap/v2.zarr.dods?lat&lat%3E3")
    assert code == 400 and "selection clauses" in body
    code, _, body = failing(f"{base}/opendap/nothing.dds")
    assert code == 404 and "Error {" in body
    code, headers, body = failing(f"{base}/opendap/v3.zarr.dap?dap4.ce=/temp%5B1:0%5D")
    assert code == 400 and headers["Content-Type"] == "application/vnd.opendap.dap4.error+xml"
    assert "<Error httpcode=\"400\">" in body and "stops before it starts" in body
