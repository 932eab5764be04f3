"""OGC API – EDR over datasets written by xarray (Zarr v2 and v3; CF
times, descending latitude, 0-360 longitudes, a packed int16 with
scale/offset and _FillValue, NaNs, a depth dimension): OWSLib reads the
landing page, collections and queries; every query type's answer equals
the xarray selection of the same data (`.sel(..., method="nearest")`,
`.interp`, boxes, polygon and circle masks computed here with numpy);
every CoverageJSON answer validates against the published CoverageJSON
schema and parses with covjson-pydantic; GeoJSON, CSV and NetCDF carry the
same values; errors are EDR's JSON documents."""

import io
import json
import os
import urllib.error
import urllib.parse
import urllib.request

import jsonschema
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.path import Path

from conftest import start_zarrd, stop
from test_labels import climate
from test_maps import UTM, projected

FORMATS = {"v2.zarr": 2, "v3.zarr": 3}
SCHEMA = json.load(open(os.path.join(os.path.dirname(__file__), "data", "coveragejson.schema.json")))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("edr")
    for name, fmt in FORMATS.items():
        ds = climate().isel(time=slice(0, 90))
        ds.attrs["title"] = "climate test data"
        ds.to_zarr(root / name, zarr_format=fmt, consolidated=False, mode="w")
    # A projected grid: UTM 33N through a CF grid mapping.
    projected().to_zarr(root / "utm.zarr", zarr_format=2, consolidated=False, mode="w")
    url, proc = start_zarrd(str(root))
    try:
        yield url, root
    finally:
        stop(proc)


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.headers, r.read()


def query(base, collection, kind, **params):
    q = urllib.parse.urlencode({k.replace("_", "-"): v for k, v in params.items()})
    return get(f"{base}/edr/collections/{collection}/{kind}?{q}")


def failing(url):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=60)
    return e.value.code, json.loads(e.value.read())


def covjson(body):
    doc = json.loads(body)
    jsonschema.validate(doc, SCHEMA)
    from covjson_pydantic.coverage import Coverage, CoverageCollection

    (Coverage if doc["type"] == "Coverage" else CoverageCollection).model_validate(doc)
    return doc


def values(cov, name):
    r = cov["ranges"][name]
    return np.array([np.nan if v is None else v for v in r["values"]], dtype="float64").reshape(r["shape"])


def decoded(root, name):
    return xr.open_zarr(root / name, consolidated=False)


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, "float64"), np.asarray(expected, "float64"), rtol=1e-6, equal_nan=True)


def test_owslib_reads_the_landing_page_collections_and_a_query(served):
    from owslib.ogcapi.edr import EnvironmentalDataRetrieval

    base, root = served
    edr = EnvironmentalDataRetrieval(f"{base}/edr")
    conformance = edr.conformance()["conformsTo"]
    assert "http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/covjson" in conformance
    ids = [c["id"] for c in edr.collections()["collections"]]
    assert ids == ["utm.zarr", "v2.zarr", "v3.zarr"]
    assert edr.data() == ids
    c = edr.collection("v3.zarr")
    assert c["title"] == "climate test data"
    assert set(c["parameter_names"]) == {"temp", "packed", "ocean"}
    assert c["parameter_names"]["temp"]["unit"]["symbol"] == "degC"
    assert c["extent"]["temporal"]["interval"] == [["2001-01-01T00:00:00Z", "2001-03-31T00:00:00Z"]]
    assert c["extent"]["vertical"]["values"] == ["0", "5", "10", "50", "200"]
    assert c["extent"]["spatial"]["bbox"] == [[-180.0, -90.0, 180.0, 90.0]]
    assert set(c["data_queries"]) == {"position", "area", "cube", "radius", "trajectory"}
    answer = edr.query_data("v3.zarr", "position", coords="POINT(101 22)", datetime_="2001-01-05/2001-01-20", parameter_names=["temp"])
    cov = covjson(json.dumps(answer))
    expected = decoded(root, "v3.zarr").temp.sel(lon=101, lat=22, method="nearest").sel(time=slice("2001-01-05", "2001-01-20"))
    close(values(cov, "temp").ravel(), expected.values)
    assert cov["domain"]["domainType"] == "PointSeries"
    assert cov["domain"]["axes"]["t"]["values"][0] == "2001-01-05T00:00:00Z"


@pytest.mark.parametrize("name", list(FORMATS))
def test_position_nearest_and_linear_equal_xarray(served, name):
    base, root = served
    ds = decoded(root, name)
    # Longitudes round the circle: 359 E is nearest 0 E (xarray's nearest
    # would not wrap), and -70 is 290 E, nearest 285.
    for (x, y), cell in [((101.0, 22.0), (105.0, 25.0)), ((-70.0, -33.0), (285.0, -35.0)), ((359.0, 84.0), (0.0, 85.0))]:
        _, headers, body = query(base, name, "position", coords=f"POINT({x} {y})", parameter_name="temp,packed")
        assert headers["Content-Type"] == "application/prs.coverage+json"
        cov = covjson(body)
        sel = ds.sel(lon=cell[0], lat=cell[1])
        close(values(cov, "temp").ravel(), sel.temp.values)
        close(values(cov, "packed").ravel(), sel.packed.values)
        assert cov["domain"]["axes"]["x"]["values"] == [cell[0]]
    _, _, body = query(base, name, "position", coords="POINT(101 22)", method="linear", parameter_name="temp", datetime="2001-01-10/2001-02-10")
    cov = covjson(body)
    expected = ds.temp.sel(time=slice("2001-01-10", "2001-02-10")).interp(lon=101.0, lat=22.0)
    close(values(cov, "temp").ravel(), expected.values)
    assert cov["domain"]["axes"]["x"]["values"] == [101.0]


@pytest.mark.parametrize("name", list(FORMATS))
def test_cube_is_the_box_of_cells_at_the_nearest_time(served, name):
    base, root = served
    ds = decoded(root, name)
    _, _, body = query(base, name, "cube", bbox="30,-20,90,40", datetime="2001-02-03T07:00:00Z", parameter_name="temp")
    cov = covjson(body)
    expected = ds.temp.sel(time="2001-02-03T07:00", method="nearest").sel(lon=slice(30, 90), lat=slice(40, -20))
    assert cov["domain"]["domainType"] == "Grid"
    assert cov["domain"]["axes"]["t"]["values"] == ["2001-02-03T00:00:00Z"]
    close(values(cov, "temp").reshape(expected.shape), expected.values)
    assert cov["domain"]["axes"]["y"]["values"] == list(expected.lat.values)
    # Across the antimeridian of a 0-360 grid: west of 0 comes first.
    _, _, body = query(base, name, "cube", bbox="-40,0,20,30", datetime="2001-01-01", parameter_name="temp")
    cov = covjson(body)
    lons = cov["domain"]["axes"]["x"]["values"]
    assert lons == [-30.0, -15.0, 0.0, 15.0]
    expected = ds.temp.isel(time=0).sel(lat=slice(30, 0), lon=[330.0, 345.0, 0.0, 15.0])
    close(values(cov, "temp").reshape(expected.shape), expected.values)


@pytest.mark.parametrize("name", list(FORMATS))
def test_area_is_the_cells_whose_centres_are_in_the_polygon(served, name):
    base, root = served
    ds = decoded(root, name)
    ring = [(20.5, -30.5), (120.5, -10.5), (80.5, 50.5), (20.5, -30.5)]
    hole = [(60.5, 0.5), (70.5, 0.5), (70.5, 20.5), (60.5, 0.5)]
    wkt = "POLYGON((" + ", ".join(f"{x} {y}" for x, y in ring) + "),(" + ", ".join(f"{x} {y}" for x, y in hole) + "))"
    _, _, body = query(base, name, "area", coords=wkt, datetime="2001-01-03", parameter_name="temp")
    cov = covjson(body)
    box = ds.temp.sel(time="2001-01-03").sel(lon=slice(20.5, 120.5), lat=slice(50.5, -30.5))
    lon, lat = np.meshgrid(box.lon.values, box.lat.values)
    pts = np.column_stack([lon.ravel(), lat.ravel()])
    inside = Path(ring).contains_points(pts) & ~Path(hole).contains_points(pts)
    expected = np.where(inside.reshape(lon.shape), box.values, np.nan)
    close(values(cov, "temp").reshape(expected.shape), expected)
    assert inside.sum() > 10 and (~inside).sum() > 5


@pytest.mark.parametrize("name", list(FORMATS))
def test_radius_is_the_cells_within_the_distance(served, name):
    base, root = served
    ds = decoded(root, name)
    x, y, km = 100.0, 20.0, 2500.0
    _, _, body = query(base, name, "radius", coords=f"POINT({x} {y})", within=str(km), within_units="km", datetime="2001-01-02", parameter_name="temp")
    cov = covjson(body)
    got_lon = np.array(cov["domain"]["axes"]["x"]["values"])
    got_lat = np.array(cov["domain"]["axes"]["y"]["values"])
    field = ds.temp.sel(time="2001-01-02").sel(lon=got_lon, lat=got_lat)
    lon, lat = np.meshgrid(np.radians(got_lon), np.radians(got_lat))
    p1, l1 = np.radians(y), np.radians(x)
    a = np.sin((lat - p1) / 2) ** 2 + np.cos(p1) * np.cos(lat) * np.sin((lon - l1) / 2) ** 2
    d = 2 * 6371.0088 * np.arcsin(np.sqrt(a))
    assert np.abs(d - km).min() > 1.0, "no cell on the circle itself"
    expected = np.where(d <= km, field.values, np.nan)
    close(values(cov, "temp").reshape(expected.shape), expected)
    # Every cell within the distance is in the answer's box.
    all_lon, all_lat = np.meshgrid(np.radians(ds.lon.values), np.radians(ds.lat.values))
    a = np.sin((all_lat - p1) / 2) ** 2 + np.cos(p1) * np.cos(all_lat) * np.sin((all_lon - l1) / 2) ** 2
    assert (2 * 6371.0088 * np.arcsin(np.sqrt(a)) <= km).sum() == (d <= km).sum()


@pytest.mark.parametrize("name", list(FORMATS))
def test_trajectory_is_the_nearest_cell_of_each_vertex(served, name):
    base, root = served
    ds = decoded(root, name)
    vertices = [(10.0, 11.0), (44.0, 31.0), (200.0, -52.0)]
    wkt = "LINESTRING(" + ", ".join(f"{x} {y}" for x, y in vertices) + ")"
    _, _, body = query(base, name, "trajectory", coords=wkt, datetime="2001-01-07", parameter_name="temp")
    cov = covjson(body)
    assert cov["domain"]["domainType"] == "Trajectory"
    expected = [float(ds.temp.sel(time="2001-01-07").sel(lon=x, lat=y, method="nearest")) for x, y in vertices]
    close(values(cov, "temp"), expected)
    assert cov["domain"]["axes"]["composite"]["values"][0][0] == "2001-01-07T00:00:00Z"


def test_z_selects_the_nearest_level(served):
    base, root = served
    ds = decoded(root, "v3.zarr")
    _, _, body = query(base, "v3.zarr", "position", coords="POINT(30 -5)", z="40", datetime="2001-01-02T00:00:00Z/2001-01-03T00:00:00Z", parameter_name="ocean")
    cov = covjson(body)
    expected = ds.ocean.sel(depth=40, method="nearest").sel(lon=30, lat=-5, method="nearest").sel(t4=slice("2001-01-02", "2001-01-03T00:00"))
    assert cov["domain"]["axes"]["z"]["values"] == [50.0]
    close(values(cov, "ocean").ravel(), expected.values)
    # Different domains in one answer: a collection of coverages.
    _, _, body = query(base, "v3.zarr", "position", coords="POINT(30 -5)")
    doc = covjson(body)
    assert doc["type"] == "CoverageCollection" and len(doc["coverages"]) == 2


@pytest.mark.parametrize("name", list(FORMATS))
def test_geojson_csv_and_netcdf_carry_the_same_values(served, name):
    base, root = served
    ds = decoded(root, name)
    params = dict(bbox="30,-20,60,10", datetime="2001-01-04/2001-01-05", parameter_name="temp,packed")
    expected = ds.sel(time=slice("2001-01-04", "2001-01-05"), lon=slice(30, 60), lat=slice(10, -20))
    _, headers, body = query(base, name, "cube", f="GeoJSON", **params)
    assert headers["Content-Type"] == "application/geo+json"
    features = json.loads(body)["features"]
    assert len(features) == expected.temp.size - int(expected.temp.isnull().sum() & expected.packed.isnull().sum())
    f = features[0]["properties"]
    t0 = expected.isel(time=0)
    x0, y0 = features[0]["geometry"]["coordinates"]
    close([f["temp"], f["packed"]], [float(t0.temp.sel(lon=x0, lat=y0)), float(t0.packed.sel(lon=x0, lat=y0))])
    assert f["datetime"] == "2001-01-04T00:00:00Z"
    _, headers, body = query(base, name, "cube", f="CSV", **params)
    assert headers["Content-Type"].startswith("text/csv")
    table = pd.read_csv(io.BytesIO(body))
    assert list(table.columns) == ["lon", "lat", "datetime", "temp", "packed"]
    frame = expected[["temp", "packed"]].to_dataframe().reset_index()
    close(np.sort(table.temp.dropna().values), np.sort(frame.temp.dropna().values))
    close(np.sort(table.packed.dropna().values), np.sort(frame.packed.dropna().values))
    _, headers, body = query(base, name, "cube", f="NetCDF", **params)
    assert headers["Content-Type"] == "application/x-netcdf"
    with xr.open_dataset(io.BytesIO(body)) as nc:
        close(nc.temp.transpose("time", "lat", "lon").values, expected.temp.values)
        close(nc.packed.transpose("time", "lat", "lon").values, expected.packed.values)
        assert list(nc.time.values) == list(expected.time.values)


def test_errors_are_edr_documents(served):
    base, _ = served
    for kind, params, status, code in [
        ("position", "coords=POINT(1)", 400, "bad_coords"),
        ("position", "coords=POLYGON((0 0,1 0,1 1,0 0))", 400, "bad_coords"),
        ("position", "", 400, "missing_coords"),
        ("position", "coords=POINT(1 2)&parameter-name=nope", 400, "bad_parameter"),
        ("position", "coords=POINT(1 2)&f=xml", 400, "bad_format"),
        ("position", "coords=POINT(1 95)", 404, "no_data"),
        ("cube", "bbox=10,10,0,0", 400, "bad_bbox"),
        ("radius", "coords=POINT(1 2)", 400, "missing_within"),
        ("radius", "coords=POINT(1 2)&within=5&within-units=parsec", 400, "bad_within_units"),
        ("position", "coords=POINT(1 2)&datetime=1999-01-01/1999-02-01", 400, None),
        ("position", "coords=POINT(1 2)&crs=EPSG:999999", 400, "bad_crs"),
    ]:
        got, doc = failing(f"{base}/edr/collections/v3.zarr/{kind}?{params.replace(' ', '%20')}")
        assert got == status, (kind, params, doc)
        assert set(doc) == {"code", "description"}
        if code:
            assert doc["code"] == code, doc
    got, doc = failing(f"{base}/edr/collections/nothing")
    assert got == 404 and "nothing" in doc["description"]


def test_a_projected_grid_answers_in_its_own_crs(served):
    from pyproj import Transformer

    base, root = served
    _, _, body = get(f"{base}/edr/collections/utm.zarr")
    c = json.loads(body)
    assert c["crs"] == ["OGC:CRS84", "EPSG:32633"]
    w, s, e, n = c["extent"]["spatial"]["bbox"][0]
    assert 12 < w < 13 and 16 < e < 18 and 43 < s < 44 and 46 < n < 47
    ds = xr.open_zarr(root / "utm.zarr", consolidated=False)
    to_utm = Transformer.from_crs("OGC:CRS84", UTM, always_xy=True)
    for lon, lat in [(15.0, 45.0), (13.7, 46.2), (16.9, 43.6)]:
        x, y = to_utm.transform(lon, lat)
        cell = ds.t.sel(x=x, y=y, method="nearest")
        _, _, body = query(base, "utm.zarr", "position", coords=f"POINT({lon} {lat})")
        cov = covjson(body)
        assert cov["domain"]["referencing"][0]["system"] == {"type": "ProjectedCRS", "id": "http://www.opengis.net/def/crs/EPSG/0/32633"}
        assert cov["domain"]["axes"]["x"]["values"] == [float(cell.x)]
        assert cov["domain"]["axes"]["y"]["values"] == [float(cell.y)]
        close(values(cov, "t").ravel(), [float(cell)])
        # The same place in the grid's own CRS.
        _, _, body = query(base, "utm.zarr", "position", coords=f"POINT({x} {y})", crs="EPSG:32633")
        close(values(covjson(body), "t").ravel(), [float(cell)])
    # An area in degrees over the projected grid: the cells whose centres,
    # in degrees, are inside.
    ring = [(14.2, 44.6), (15.9, 44.9), (15.1, 46.0), (14.2, 44.6)]
    wkt = "POLYGON((" + ", ".join(f"{x} {y}" for x, y in ring) + "))"
    _, _, body = query(base, "utm.zarr", "area", coords=wkt)
    cov = covjson(body)
    xs, ys = np.array(cov["domain"]["axes"]["x"]["values"]), np.array(cov["domain"]["axes"]["y"]["values"])
    gx, gy = np.meshgrid(xs, ys)
    lon, lat = Transformer.from_crs(UTM, "OGC:CRS84", always_xy=True).transform(gx.ravel(), gy.ravel())
    inside = Path(ring).contains_points(np.column_stack([lon, lat])).reshape(gx.shape)
    expected = np.where(inside, ds.t.sel(x=xs, y=ys).values, np.nan)
    close(values(cov, "t").reshape(expected.shape), expected)
    assert inside.sum() > 100
    # No cell inside is left out of the answer's box.
    ax, ay = np.meshgrid(ds.x.values, ds.y.values)
    alon, alat = Transformer.from_crs(UTM, "OGC:CRS84", always_xy=True).transform(ax.ravel(), ay.ravel())
    assert Path(ring).contains_points(np.column_stack([alon, alat])).sum() == inside.sum()


def test_edges_of_places_and_parameters(served):
    base, root = served
    ds = decoded(root, "v3.zarr")
    # A parameter named twice is answered once.
    _, _, body = query(base, "v3.zarr", "position", coords="POINT(30 45)", datetime="2001-01-05", parameter_name="temp,temp")
    assert body.count(b'"temp":{"type":"NdArray"') == 1
    covjson(body)
    # OGC's box across the antimeridian: west edge east of the east edge.
    _, _, body = query(base, "v3.zarr", "cube", bbox="170,-10,-170,10", datetime="2001-01-05", parameter_name="temp")
    cov = covjson(body)
    assert cov["domain"]["axes"]["x"]["values"] == [180.0]
    close(values(cov, "temp").ravel(), ds.temp.sel(time="2001-01-05", lon=180.0, lat=[5.0, -5.0]).values)
    # Between the last longitude and the edge there is nothing to
    # interpolate between: NaN, as xarray's interp.
    _, _, body = query(base, "v3.zarr", "position", coords="POINT(352 0)", method="linear", datetime="2001-01-05", parameter_name="temp")
    assert np.isnan(values(covjson(body), "temp")).all()
    assert np.isnan(ds.temp.sel(time="2001-01-05").interp(lon=352.0, lat=0.0).values)
    # A circle given in Web Mercator is the same circle.
    _, _, a = query(base, "v3.zarr", "radius", coords="POINT(100 20)", within="1500", datetime="2001-01-05", parameter_name="temp")
    from pyproj import Transformer

    x, y = Transformer.from_crs("OGC:CRS84", "EPSG:3857", always_xy=True).transform(100, 20)
    _, _, b = query(base, "v3.zarr", "radius", coords=f"POINT({x} {y})", crs="EPSG:3857", within="1500", datetime="2001-01-05", parameter_name="temp")
    close(values(covjson(b), "temp"), values(covjson(a), "temp"))
    for params, code in [("parameter-name=,", "bad_parameter")]:
        got, doc = failing(f"{base}/edr/collections/v3.zarr/position?coords=POINT(1%202)&{params}")
        assert (got, doc["code"]) == (400, code)
    got, doc = failing(f"{base}/edr/collections/v3.zarr/corridor?coords=POINT(1%202)")
    assert (got, doc["code"]) == (404, "not_served")
