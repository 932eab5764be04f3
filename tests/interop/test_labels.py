"""Asking in the data's terms: datasets written by xarray (Zarr v2 and v3,
CF times in several calendars, descending latitude, packed int16 with
scale/offset and _FillValue, NaNs, a non-uniform coordinate, 3-D and 4-D)
are selected by label, decoded and reduced through /api/v1/data, and every
answer equals what xarray computes in-process on the same store: bitwise
for selections, within float tolerance for reductions."""

import io
import subprocess
import json
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from conftest import start_zarrd, stop

FORMATS = {"v2.zarr": 2, "v3.zarr": 3}
CALENDARS = ["standard", "proleptic_gregorian", "noleap", "all_leap", "360_day", "julian"]


def climate():
    rng = np.random.default_rng(7)
    time = pd.date_range("2001-01-01", periods=400, freq="D")
    lat = np.arange(85.0, -90.0, -10.0)  # descending, 18
    lon = np.arange(0.0, 360.0, 15.0)  # 24
    depth = np.array([0.0, 5.0, 10.0, 50.0, 200.0])  # non-uniform
    temp = (15 + 10 * rng.standard_normal((len(time), len(lat), len(lon)))).astype("float32")
    temp[3, 4, 5] = np.nan
    temp[:, 0, 0] = np.nan  # an all-missing column
    packed = rng.integers(-3000, 3000, size=temp.shape) * 0.01 + 273.15
    packed[1, 1, 1] = np.nan
    ocean = rng.standard_normal((40, len(depth), len(lat), len(lon))).astype("float64")
    ds = xr.Dataset(
        {
            "temp": (("time", "lat", "lon"), temp, {"units": "degC", "long_name": "air temperature"}),
            "packed": (("time", "lat", "lon"), packed),
            "ocean": (("t4", "depth", "lat", "lon"), ocean),
            "bands": (("time", "band"), np.zeros((len(time), 3), "uint8")),
        },
        coords={
            "time": time,
            "lat": ("lat", lat, {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
            "depth": ("depth", depth, {"units": "m", "positive": "down"}),
            "t4": ("t4", pd.date_range("2001-01-01", periods=40, freq="6h")),
        },
    )
    ds.packed.encoding.update(
        {"scale_factor": 0.01, "add_offset": 273.15, "_FillValue": -32768, "dtype": "int16"}
    )
    ds.time.encoding.update({"units": "days since 2000-01-01", "calendar": "standard", "dtype": "int32"})
    ds.t4.encoding.update({"units": "hours since 2001-01-01 00:00:00", "dtype": "int64"})
    return ds


def calendar_ds(calendar):
    time = xr.date_range("2000-01-01", periods=120, freq="D", calendar=calendar, use_cftime=True)
    values = np.arange(120 * 3, dtype="float64").reshape(120, 3)
    ds = xr.Dataset({"v": (("time", "x"), values)}, coords={"time": time, "x": [1.0, 2.0, 3.0]})
    ds.time.encoding.update({"units": "hours since 1999-12-30 00:00:00", "calendar": calendar})
    return ds


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("labelled")
    for name, fmt in FORMATS.items():
        climate().to_zarr(root / name, zarr_format=fmt, consolidated=False, mode="w")
        for cal in CALENDARS:
            calendar_ds(cal).to_zarr(root / f"cal_{cal}_{name}", zarr_format=fmt, consolidated=False, mode="w")
    url, proc = start_zarrd(str(root))
    try:
        yield url, root
    finally:
        stop(proc)


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def npy(url):
    return np.load(io.BytesIO(get(url)), allow_pickle=False)


def error(url):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=60)
    return e.value.code, json.loads(e.value.read())["error"]


def data_url(base, path, **params):
    return f"{base}/api/v1/data/{path}?" + urllib.parse.urlencode(params)


def open_raw(root, name):
    return xr.open_zarr(root / name, decode_cf=False, consolidated=False)


def open_decoded(root, name):
    return xr.open_zarr(root / name, consolidated=False)


SELECTIONS = [
    ({"sel.time": "2001-02-03"}, {"time": "2001-02-03"}),
    ({"sel.time": "2001-02"}, {"time": "2001-02"}),
    ({"sel.time": "2001-03-01..2001-04-15"}, {"time": slice("2001-03-01", "2001-04-15")}),
    ({"sel.lat": "50..-20"}, {"lat": slice(50, -20)}),
    ({"sel.lat": "55"}, {"lat": 55.0}),
    ({"sel.lon": "..100", "sel.lat": "..0"}, {"lon": slice(None, 100), "lat": slice(None, 0)}),
    ({"sel.lon": "~101"}, {"lon": 101.0, "method": "nearest"}),
    ({"sel.time": "~2001-05-05T13:00", "tolerance.time": "1D"}, {"time": "2001-05-05T13:00", "method": "nearest", "tolerance": pd.Timedelta("1D")}),
]


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("params,sel", SELECTIONS)
def test_label_selections_equal_xarray_sel_bitwise(served, name, params, sel):
    base, root = served
    sel = dict(sel)
    method = sel.pop("method", None)
    tolerance = sel.pop("tolerance", None)
    # xarray applies one method to every label: select the exact ones first.
    ds = open_decoded(root, name)
    exact = {k: v for k, v in sel.items() if not method}
    if method:
        expected_index = ds.temp.sel(sel, method=method, tolerance=tolerance)
    else:
        expected_index = ds.temp.sel(exact)
    raw = open_raw(root, name)
    # The same positions in the stored values.
    positions = {d: ds.indexes[d].get_indexer(np.atleast_1d(expected_index[d].values)) for d in expected_index.coords if d in ds.temp.dims}
    expected = raw.temp.isel({d: (p if expected_index[d].ndim else int(p[0])) for d, p in positions.items()}).values
    got = npy(data_url(base, f"{name}/temp", **params))
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize("name", list(FORMATS))
def test_isel_and_negative_steps_equal_numpy(served, name):
    base, root = served
    raw = open_raw(root, name)
    got = npy(data_url(base, f"{name}/temp", **{"isel.time": "10:2:-3", "isel.lat": "-1", "isel.lon": "[3,1,2]"}))
    expected = raw.temp.values[10:2:-3, -1][:, [3, 1, 2]]
    assert got.tobytes() == expected.tobytes()
    got = npy(data_url(base, f"{name}/temp", select="::-7,3,::-5"))
    assert got.tobytes() == raw.temp.values[::-7, 3, ::-5].tobytes()


@pytest.mark.parametrize("name", list(FORMATS))
def test_decode_cf_equals_open_zarr(served, name):
    base, root = served
    ds = open_decoded(root, name)
    for var in ["packed", "temp"]:
        got = npy(data_url(base, f"{name}/{var}", decode="cf", **{"sel.time": "2001-01"}))
        expected = ds[var].sel(time="2001-01").values
        assert got.dtype == expected.dtype, var
        np.testing.assert_array_equal(got, expected)
    # Raw stays the default.
    raw = npy(data_url(base, f"{name}/packed", **{"isel.time": "1"}))
    assert raw.dtype == np.int16 and raw[1, 1] == -32768


REDUCTIONS = [
    ({"reduce": "mean:time"}, lambda a: a.mean("time")),
    ({"reduce": "sum:lat,lon"}, lambda a: a.sum(["lat", "lon"])),
    ({"reduce": "min:lon"}, lambda a: a.min("lon")),
    ({"reduce": "max:time"}, lambda a: a.max("time")),
    ({"reduce": "std:time"}, lambda a: a.std("time")),
    ({"reduce": "var:time", "ddof": "1"}, lambda a: a.var("time", ddof=1)),
    ({"reduce": "count:time"}, lambda a: a.count("time")),
    ({"reduce": "median:lat"}, lambda a: a.median("lat")),
    ({"reduce": "quantile:lon", "q": "0.1,0.9"}, lambda a: a.quantile([0.1, 0.9], dim="lon")),
    ({"reduce": "argmax:lon"}, lambda a: a.argmax("lon")),
    ({"reduce": "mean"}, lambda a: a.mean()),
    ({"reduce": "mean", "coarsen": "lat:3,lon:4"}, lambda a: a.coarsen(lat=3, lon=4).mean()),
    ({"reduce": "max", "resample": "time:1M"}, lambda a: a.resample(time="1MS").max()),
    ({"reduce": "mean", "resample": "time:1D"}, lambda a: a.resample(time="1D").mean()),
]


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("params,xr_op", REDUCTIONS)
def test_reductions_equal_xarray(served, name, params, xr_op):
    base, root = served
    ds = open_decoded(root, name)
    selection = {"sel.lat": "60..-60", "sel.time": "2001-01..2001-06"}
    var = "packed" if params["reduce"].startswith(("mean", "std")) else "temp"
    if params["reduce"].startswith("argmax"):
        selection["sel.lat"] = "60..10"  # no all-missing column
    source = ds[var].sel(lat=slice(60, -60 if "10" not in selection["sel.lat"] else 10), time=slice("2001-01", "2001-06"))
    expected = xr_op(source)
    got = npy(data_url(base, f"{name}/{var}", decode="cf", **selection, **params))
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_allclose(got, expected.values, rtol=2e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", list(FORMATS))
def test_four_dimensions_and_a_non_uniform_coordinate(served, name):
    base, root = served
    ds = open_decoded(root, name)
    got = npy(data_url(base, f"{name}/ocean", **{"sel.depth": "5..60", "sel.t4": "2001-01-02", "reduce": "mean:depth"}))
    expected = ds.ocean.sel(depth=slice(5, 60), t4="2001-01-02").mean("depth")
    np.testing.assert_allclose(got, expected.values, rtol=1e-12)
    got = npy(data_url(base, f"{name}/ocean", **{"sel.depth": "~40"}))
    assert got.tobytes() == ds.ocean.sel(depth=40, method="nearest").values.tobytes()


@pytest.mark.parametrize("calendar", CALENDARS)
@pytest.mark.parametrize("name", list(FORMATS))
def test_calendars_select_and_resample_as_xarray(served, calendar, name):
    base, root = served
    path = f"cal_{calendar}_{name}"
    ds = xr.open_zarr(root / path, consolidated=False, use_cftime=True)
    got = npy(data_url(base, f"{path}/v", **{"sel.time": "2000-02-20..2000-03-02"}))
    assert got.tobytes() == ds.v.sel(time=slice("2000-02-20", "2000-03-02")).values.tobytes()
    got = npy(data_url(base, f"{path}/v", **{"sel.time": "2000-02"}))
    assert got.tobytes() == ds.v.sel(time="2000-02").values.tobytes()
    got = npy(data_url(base, f"{path}/v", reduce="sum", resample="time:1M"))
    np.testing.assert_allclose(got, ds.v.resample(time="1MS").sum().values)
    meta = json.loads(get(f"{base}/api/v1/data/{path}/time?format=json"))
    stored = xr.open_zarr(root / path, consolidated=False, decode_times=False).time.values
    assert meta["data"][:3] == stored[:3].tolist()
    labelled = json.loads(get(data_url(base, f"{path}/v", format="json", **{"isel.time": "58:61"})))
    expected = [t.isoformat() for t in ds.time.values[58:61]]
    assert labelled["coords"]["time"]["data"] == expected


def test_json_answers_carry_coordinates_as_xarray_writes_them(served):
    base, root = served
    answer = json.loads(get(data_url(base, "v3.zarr/temp", format="json", **{"sel.lat": "55..45", "sel.lon": "30..45", "isel.time": "0"})))
    assert answer["dims"] == ["lat", "lon"]
    assert answer["coords"]["lat"]["data"] == [55.0, 45.0]
    assert answer["coords"]["lat"]["attrs"]["units"] == "degrees_north"
    assert answer["attrs"]["units"] == "degC"
    da = xr.DataArray.from_dict({k: answer[k] for k in ("dims", "coords", "attrs", "data", "name")})
    expected = open_decoded(root, "v3.zarr").temp.sel(lat=slice(55, 45), lon=slice(30, 45)).isel(time=0)
    np.testing.assert_array_equal(da.values.astype(expected.dtype), expected.values)


BAD = [
    ({"sel.depthh": "5"}, 400, "bad_label", "no dimension 'depthh'"),
    ({"sel.lat": "95..91"}, 400, "bad_label", "lat runs from 85 to -85 (18 points)"),
    ({"sel.lat": "-20..50"}, 400, "bad_label", "runs downwards"),
    ({"sel.time": "2030-01-01"}, 400, "bad_label", "time runs from 2001-01-01T00:00:00"),
    ({"sel.time": "yesterday"}, 400, "bad_label", "not an ISO 8601 date"),
    ({"sel.lon": "~101", "tolerance.lon": "1"}, 400, "bad_label", "further than the tolerance"),
    ({"sel.lat": "5", "isel.lat": "1"}, 400, "bad_label", "selected twice"),
    ({"sel.lat": "5", "select": "0"}, 400, "bad_selection", "not both"),
    ({"reduce": "mean:nothing"}, 400, "bad_reduction", "no dimension 'nothing'"),
    ({"reduce": "mean", "coarsen": "lat:7"}, 400, "bad_reduction", "lat has 18 values, not a multiple of 7"),
    ({"reduce": "argmin:time"}, 422, "all_missing", "missing"),
    ({"reduce": "frobnicate:lat"}, 400, "bad_query", "reduce"),
]


@pytest.mark.parametrize("params,status,code,text", BAD)
def test_bad_labels_and_reductions_say_why(served, params, status, code, text):
    base, _ = served
    got_status, err = error(data_url(base, "v3.zarr/temp", **params))
    assert (got_status, err["code"]) == (status, code), err
    assert text in err["message"], err["message"]


def test_labels_need_named_dimensions_and_coordinates(served):
    base, root = served
    status, err = error(data_url(base, "v3.zarr/packed", **{"sel.lat": "7"}))
    assert status == 400 and "no value of lat is 7" in err["message"], err
    status, err = error(data_url(base, "v3.zarr/bands", **{"sel.band": "1"}))
    assert (status, err["code"]) == (400, "bad_label") and "isel.band=" in err["message"], err
    got = npy(data_url(base, "v3.zarr/bands", **{"isel.band": "1", "sel.time": "2001-01-01..2001-01-03"}))
    assert got.shape == (3,)
    zarr = pytest.importorskip("zarr")
    zarr.create_array(str(root / "plain.zarr"), shape=(4,), dtype="int8", fill_value=0)
    status, err = error(data_url(base, "plain.zarr", **{"isel.x": "1"}))
    assert (status, err["code"]) == (400, "no_dimensions"), err


@pytest.mark.parametrize("name", list(FORMATS))
def test_statistics_and_histograms_equal_numpy(served, name):
    base, root = served
    ds = open_decoded(root, name)
    values = ds.packed.sel(time="2001-02").values
    query = urllib.parse.urlencode({"sel.time": "2001-02", "decode": "cf"})
    stats = json.loads(get(f"{base}/api/v1/statistics/{name}/packed?{query}"))
    finite = values[~np.isnan(values)]
    assert stats["count"] == finite.size and stats["total"] == values.size
    assert stats["valid_fraction"] == pytest.approx(finite.size / values.size)
    for key, fn in [("min", np.min), ("max", np.max), ("mean", np.mean), ("std", np.std)]:
        assert stats[key] == pytest.approx(float(fn(finite)), rel=1e-9), key
    hist = json.loads(get(f"{base}/api/v1/histogram/{name}/packed?{query}&bins=12"))
    counts, edges = np.histogram(finite, bins=12)
    assert hist["counts"] == counts.tolist()
    np.testing.assert_allclose(hist["edges"], edges)
    ranged = json.loads(get(f"{base}/api/v1/histogram/{name}/packed?{query}&bins=4&range=250,260"))
    assert ranged["counts"] == np.histogram(finite, bins=4, range=(250, 260))[0].tolist()
    status, err = error(f"{base}/api/v1/histogram/{name}/packed?bins=0")
    assert status == 400 and err["message"].startswith("bins")
    status, err = error(f"{base}/api/v1/statistics/{name}/packed?reduce=mean")
    assert status == 400 and "unknown parameter 'reduce'" in err["message"]


@pytest.mark.parametrize("name", list(FORMATS))
def test_meta_describes_the_dataset(served, name):
    base, root = served
    meta = json.loads(get(f"{base}/api/v1/meta/{name}"))
    ds = meta["dataset"]
    assert ds["dimensions"]["lat"]["size"] == 18
    assert sorted(ds["dimensions"]["lat"]["used_by"]) == ["ocean", "packed", "temp"]
    time = ds["coordinates"]["time"]
    assert (time["first"], time["last"]) == ("2001-01-01T00:00:00", "2002-02-04T00:00:00")
    assert time["calendar"] == "standard" and time["attributes"]["units"] == "days since 2000-01-01"
    assert ds["coordinates"]["lat"]["first"] == 85 and ds["coordinates"]["lat"]["last"] == -85
    assert ds["data_variables"]["temp"]["dimensions"] == ["time", "lat", "lon"]
    assert ds["data_variables"]["temp"]["attributes"]["units"] == "degC"
    array = json.loads(get(f"{base}/api/v1/meta/{name}/temp"))
    assert array["dimensions"] == ["time", "lat", "lon"]
    assert set(array["coordinates"]) == {"time", "lat", "lon"}
    assert "packed" in array["shares_dimensions_with"] and "temp" not in array["shares_dimensions_with"]


def fetch_dataset(url, tmp_path, name="answer.nc"):
    path = tmp_path / name
    path.write_bytes(get(url))
    return path


@pytest.mark.parametrize("name", list(FORMATS))
def test_netcdf_answers_open_in_xarray_and_ncdump(served, name, tmp_path):
    base, root = served
    ds = open_decoded(root, name)
    sel = {"sel.time": "2001-03-01..2001-03-10", "sel.lat": "45..-45"}
    # Raw values with their packing: xarray decodes them as it decodes the store.
    path = fetch_dataset(data_url(base, f"{name}/packed", format="netcdf", **sel), tmp_path)
    got = xr.open_dataset(path, engine="netcdf4")
    expected = ds.packed.sel(time=slice("2001-03-01", "2001-03-10"), lat=slice(45, -45))
    xr.testing.assert_allclose(got.packed, expected, rtol=1e-12)
    assert got.packed.attrs == expected.attrs
    assert list(got.time.values) == list(expected.time.values)
    # A reduction, in CDF-5 because count is int64.
    path = fetch_dataset(data_url(base, f"{name}/temp", format="netcdf", reduce="count:time", **sel), tmp_path, "count.nc")
    got = xr.open_dataset(path, engine="netcdf4")
    np.testing.assert_array_equal(got.temp.values, ds.temp.sel(time=slice("2001-03-01", "2001-03-10"), lat=slice(45, -45)).count("time").values)
    assert open(path, "rb").read(4) == b"CDF\x05"
    dump = subprocess.run(["ncdump", "-h", str(path)], capture_output=True, text=True, check=True).stdout
    assert "int64 temp(lat, lon)" in dump and 'cell_methods = "time: count"' in dump
    # Classic files read with scipy too.
    path = fetch_dataset(data_url(base, f"{name}/temp", format="netcdf", decode="cf", **sel), tmp_path, "temp.nc")
    assert open(path, "rb").read(4) == b"CDF\x02"
    got = xr.open_dataset(path, engine="scipy")
    xr.testing.assert_identical(got.temp.drop_attrs(), expected.copy(data=ds.temp.sel(time=slice("2001-03-01", "2001-03-10"), lat=slice(45, -45)).values).rename("temp").drop_attrs())
    text = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, check=True).stdout
    assert 'time:units = "days since 2000-01-01"' in text


@pytest.mark.parametrize("name", list(FORMATS))
def test_csv_answers_read_by_pandas(served, name):
    base, root = served
    ds = open_decoded(root, name)
    sel = {"sel.time": "2001-03-01..2001-03-03", "sel.lat": "45..25", "sel.lon": "30..60"}
    text = get(data_url(base, f"{name}/temp", format="csv", **sel)).decode()
    got = pd.read_csv(io.StringIO(text), parse_dates=["time"]).set_index(["time", "lat", "lon"])
    expected = ds.temp.sel(time=slice("2001-03-01", "2001-03-03"), lat=slice(45, 25), lon=slice(30, 60)).to_dataframe()[["temp"]]
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_index_type=False)
    wide = pd.read_csv(io.StringIO(get(data_url(base, f"{name}/temp", format="csv", layout="wide", **{"isel.time": "0", "sel.lat": "45..25"})).decode()), index_col=0)
    np.testing.assert_array_equal(wide.values.astype("float32"), ds.temp.isel(time=0).sel(lat=slice(45, 25)).values)
    assert list(wide.columns[:2]) == ["0.0", "15.0"]
    status, err = error(data_url(base, f"{name}/temp", format="csv", layout="wide"))
    assert status == 400 and "2-D" in err["message"]


def gdalinfo(path):
    return json.loads(subprocess.run(["gdalinfo", "-json", str(path)], capture_output=True, text=True, check=True).stdout)


@pytest.mark.parametrize("name", list(FORMATS))
def test_geotiff_answers_are_georeferenced(served, name, tmp_path):
    tifffile = pytest.importorskip("tifffile")
    base, root = served
    ds = open_decoded(root, name)
    path = tmp_path / "map.tif"
    path.write_bytes(get(data_url(base, f"{name}/temp", format="geotiff", reduce="mean:time", **{"sel.lat": "75..-75"})))
    expected = ds.temp.sel(lat=slice(75, -75)).mean("time")
    np.testing.assert_allclose(tifffile.imread(path), expected.values, rtol=1e-5, equal_nan=True)
    info = gdalinfo(path)
    assert info["size"] == [24, 16]
    # Pixel centres on the coordinates: the corner half a step before.
    assert info["geoTransform"] == pytest.approx([-7.5, 15.0, 0.0, 80.0, 0.0, -10.0])
    assert "4326" in json.dumps(info["coordinateSystem"])
    assert info["bands"][0]["noDataValue"] == "NaN"
    status, err = error(data_url(base, f"{name}/temp", format="geotiff"))
    assert status == 400 and "2-D" in err["message"]


def test_projected_grids_name_their_epsg(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    x = np.arange(500000.0, 500000.0 + 10 * 1000, 1000.0)
    y = np.arange(5800000.0, 5800000.0 - 8 * 1000, -1000.0)
    wkt = 'PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",AUTHORITY["EPSG","4326"]],AUTHORITY["EPSG","32633"]]'
    ds = xr.Dataset(
        {
            "elev": (("y", "x"), np.arange(80, dtype="int16").reshape(8, 10), {"grid_mapping": "crs"}),
            "elev_t": (("x", "y"), np.arange(80, dtype="int16").reshape(8, 10).T, {"grid_mapping": "crs"}),
        },
        coords={"x": ("x", x, {"standard_name": "projection_x_coordinate"}), "y": ("y", y, {"standard_name": "projection_y_coordinate"}), "crs": ((), 0, {"crs_wkt": wkt, "grid_mapping_name": "transverse_mercator"})},
    )
    ds.to_zarr(tmp_path / "utm.zarr", zarr_format=3, consolidated=False)
    url, proc = start_zarrd(str(tmp_path))
    try:
        path = tmp_path / "utm.tif"
        path.write_bytes(get(f"{url}/api/v1/data/utm.zarr/elev?format=geotiff"))
        info = gdalinfo(path)
        assert info["geoTransform"] == pytest.approx([499500.0, 1000.0, 0.0, 5800500.0, 0.0, -1000.0])
        assert "32633" in json.dumps(info["coordinateSystem"])
        np.testing.assert_array_equal(tifffile.imread(path), ds.elev.values)
        # (x, y) order is transposed to rows of y.
        path.write_bytes(get(f"{url}/api/v1/data/utm.zarr/elev_t?format=geotiff"))
        assert gdalinfo(path)["geoTransform"] == info["geoTransform"]
        np.testing.assert_array_equal(tifffile.imread(path), ds.elev.values)
        # Ascending y: a full transformation, read the same by GDAL.
        path.write_bytes(get(f"{url}/api/v1/data/utm.zarr/elev?format=geotiff&isel.y=::-1"))
        assert gdalinfo(path)["geoTransform"] == pytest.approx([499500.0, 1000.0, 0.0, 5792500.0, 0.0, 1000.0])
    finally:
        stop(proc)


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_arrow_and_parquet_tables_equal_xarray(served, name, fmt):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc
    import pyarrow.parquet

    base, root = served
    ds = open_decoded(root, name)
    sel = {"sel.time": "2001-03-01..2001-03-03", "sel.lat": "45..25", "sel.lon": "30..60"}
    body = get(data_url(base, f"{name}/packed", format=fmt, **sel))
    table = pa.ipc.open_stream(body).read_all() if fmt == "arrow" else pa.parquet.read_table(io.BytesIO(body))
    assert table.schema.field("time").type == pa.timestamp("ns")
    assert table.schema.field("packed").type == pa.int16()
    got = table.to_pandas().set_index(["time", "lat", "lon"])
    raw = open_raw(root, name).packed.sel(lat=slice(45, 25), lon=slice(30, 60)).isel(time=slice(59, 62))
    expected = raw.to_dataframe()[["packed"]]
    expected.index = expected.index.set_levels(ds.time.values[59:62], level="time")
    pd.testing.assert_frame_equal(got, expected)
    # A reduction, and a calendar with no numpy dates: ISO text.
    body = get(data_url(base, f"cal_noleap_{name}/v", format=fmt, reduce="mean", resample="time:1M"))
    table = pa.ipc.open_stream(body).read_all() if fmt == "arrow" else pa.parquet.read_table(io.BytesIO(body))
    assert table.column("time").to_pylist()[::3][:2] == ["2000-01-01T00:00:00", "2000-02-01T00:00:00"]
    expected = xr.open_zarr(root / f"cal_noleap_{name}", consolidated=False, use_cftime=True).v.resample(time="1MS").mean()
    np.testing.assert_allclose(np.array(table.column("v").to_pylist()).reshape(expected.shape), expected.values)


def test_extreme_values_reduce_as_numpy(tmp_path):
    """int64's minimum is a number (only times have NaT), infinities make
    means infinite or NaN and spreads NaN, and a histogram of one value or
    of values no bins can span says so, as numpy does."""
    ints = np.array([np.iinfo("int64").min, 1, 2, 3], dtype="int64")
    infs = np.array([np.inf, -np.inf, 1.0, 2.0])
    xr.Dataset({"ints": ("k", ints), "infs": ("k", infs), "const": ("k", np.full(4, 3.0))},
               coords={"k": [0.0, 1.0, 2.0, 3.0]}).to_zarr(
        tmp_path / "x.zarr", zarr_format=3, consolidated=False)
    url, proc = start_zarrd(str(tmp_path))
    try:
        def value(path, **params):
            return json.loads(get(data_url(url, path, format="json", **params)))["data"]

        assert value("x.zarr/ints", reduce="count") == 4
        assert value("x.zarr/ints", reduce="argmin:k") == 0
        assert value("x.zarr/ints", reduce="min") == int(ints.min())
        assert value("x.zarr/infs", reduce="mean") == "NaN"
        assert value("x.zarr/infs", reduce="std") == "NaN"
        stats = json.loads(get(f"{url}/api/v1/statistics/x.zarr/ints"))
        assert stats["count"] == 4 and stats["min"] == float(ints.min())
        hist = json.loads(get(f"{url}/api/v1/histogram/x.zarr/const?bins=4"))
        counts, edges = np.histogram(np.full(4, 3.0), bins=4)
        assert hist["counts"] == counts.tolist() and hist["edges"] == edges.tolist()
        status, err = error(f"{url}/api/v1/histogram/x.zarr/infs")
        assert status == 400 and err["message"].startswith("range"), err
        status, err = error(data_url(url, "x.zarr/infs", **{"sel.k": "~nan"}))
        assert status == 400 and "not a finite number" in err["message"], err
    finally:
        stop(proc)


def test_time_variables_decode_to_datetimes(tmp_path):
    when = pd.to_datetime(["2024-01-01T06:00:00", "NaT", "1999-12-31T23:59:59.5", "2024-07-04T00:00:00"], format="ISO8601")
    model = xr.date_range("2000-01-01", periods=4, freq="D", calendar="noleap", use_cftime=True)
    ds = xr.Dataset({"when": ("k", when), "model": ("k", model)}, coords={"k": [0.0, 1.0, 2.0, 3.0]})
    ds.to_zarr(tmp_path / "t.zarr", zarr_format=3, consolidated=False)
    url, proc = start_zarrd(str(tmp_path))
    try:
        got = npy(data_url(url, "t.zarr/when", decode="cf"))
        expected = xr.open_zarr(tmp_path / "t.zarr", consolidated=False).when.values
        assert got.dtype == np.dtype("<M8[ns]")
        np.testing.assert_array_equal(got, expected)
        raw = npy(data_url(url, "t.zarr/when"))
        assert raw.dtype.kind in "iuf"  # the numbers stored stay the default
        status, err = error(data_url(url, "t.zarr/model", decode="cf"))
        assert (status, err["code"]) == (406, "not_acceptable") and "noleap" in err["message"], err
        status, err = error(data_url(url, "t.zarr/when", decode="cf", reduce="max"))
        assert status == 400 and "holds times" in err["message"], err
    finally:
        stop(proc)
