"""The notebook client (python/zarrd), installed with pip from this
repository: browsing, and label selections and reductions that run on the
server and come back as xarray.DataArrays equal to what xarray computes
in-process on the same store."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarrd
from conftest import start_zarrd, stop
from test_labels import calendar_ds, climate


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("client")
    climate().to_zarr(root / "clim.zarr", zarr_format=3, consolidated=False)
    calendar_ds("360_day").to_zarr(root / "model.zarr", zarr_format=2, consolidated=False)
    url, proc = start_zarrd(str(root))
    try:
        yield zarrd.Client(url), root
    finally:
        stop(proc)


def test_browsing(server):
    client, _ = server
    group = client["clim.zarr"]
    assert isinstance(group, zarrd.Group)
    assert "temp" in group.members
    assert group.dataset["coordinates"]["time"]["first"] == "2001-01-01T00:00:00"
    temp = group["temp"]
    assert isinstance(temp, zarrd.Variable)
    assert temp.dims == ("time", "lat", "lon") and temp.shape == (400, 18, 24)
    assert temp.coords["lat"]["first"] == 85
    assert "clim.zarr" in str(client.tree())


CASES = [
    (lambda v: v.sel(time="2001-02-03"), lambda a: a.sel(time="2001-02-03")),
    (lambda v: v.sel(time=slice("2001-03", "2001-04"), lat=slice(50, -20)),
     lambda a: a.sel(time=slice("2001-03", "2001-04"), lat=slice(50, -20))),
    (lambda v: v.sel(lat=52.1, lon=101, method="nearest"), lambda a: a.sel(lat=52.1, lon=101, method="nearest")),
    (lambda v: v.sel(time=pd.Timestamp("2001-05-05T13:00"), method="nearest", tolerance=pd.Timedelta("1D")),
     lambda a: a.sel(time=pd.Timestamp("2001-05-05T13:00"), method="nearest", tolerance=pd.Timedelta("1D"))),
    (lambda v: v.isel(time=slice(10, 2, -3), lon=[3, 1, 2]), lambda a: a.isel(time=slice(10, 2, -3), lon=[3, 1, 2])),
    (lambda v: v.sel(time="2001-01").mean("time"), lambda a: a.sel(time="2001-01").mean("time")),
    (lambda v: v.sel(lat=slice(60, -60)).std(["lat", "lon"], ddof=1), lambda a: a.sel(lat=slice(60, -60)).std(["lat", "lon"], ddof=1)),
    (lambda v: v.coarsen(lat=3, lon=4).max(), lambda a: a.coarsen(lat=3, lon=4).max()),
    (lambda v: v.sel(lat=52.1, lon=4.3, method="nearest").resample(time="1MS").mean(),
     lambda a: a.sel(lat=52.1, lon=4.3, method="nearest").resample(time="1MS").mean()),
    (lambda v: v.sel(time="2001-01").quantile([0.25, 0.75], "time"), lambda a: a.sel(time="2001-01").quantile([0.25, 0.75], "time")),
]


@pytest.mark.parametrize("var", ["temp", "packed"])
@pytest.mark.parametrize("remote,local", CASES)
def test_requests_run_on_the_server_and_equal_xarray(server, var, remote, local):
    client, root = server
    got = remote(client[f"clim.zarr/{var}"]).load()
    expected = local(xr.open_zarr(root / "clim.zarr", consolidated=False)[var])
    assert isinstance(got, xr.DataArray)
    assert got.dims == expected.dims
    np.testing.assert_allclose(got.values, expected.values, rtol=2e-5, equal_nan=True)
    for dim in expected.dims:
        if dim in expected.coords:
            np.testing.assert_array_equal(got[dim].values, expected[dim].values)


def test_other_calendars_come_back_as_cftime(server):
    client, root = server
    got = client["model.zarr/v"].sel(time=slice("2000-02-25", "2000-03-02")).load()
    expected = xr.open_zarr(root / "model.zarr", consolidated=False, use_cftime=True).v.sel(time=slice("2000-02-25", "2000-03-02"))
    assert list(got.time.values) == list(expected.time.values)
    np.testing.assert_array_equal(got.values, expected.values)


def test_statistics_and_errors(server):
    client, root = server
    stats = client.statistics("clim.zarr/temp", time="2001-02")
    values = xr.open_zarr(root / "clim.zarr", consolidated=False).temp.sel(time="2001-02").values
    assert stats["count"] == np.isfinite(values).sum()
    assert stats["mean"] == pytest.approx(float(np.nanmean(values)), rel=1e-6)
    hist = client.statistics("clim.zarr/temp", bins=5, time="2001-02")
    assert sum(hist["counts"]) == stats["count"]
    with pytest.raises(zarrd.ZarrdError) as e:
        client["clim.zarr/temp"].sel(depthh=1).load()
    assert e.value.status == 400 and e.value.code == "bad_label"
    with pytest.raises(NotImplementedError):
        client["clim.zarr/temp"].mean("time").sel(lat=5)
