"""Maps: tiles (XYZ / OGC API - Tiles) and WMS 1.3.0 of georeferenced
arrays written by xarray, compared pixel by pixel with the same area
computed here from the arrays with numpy and pyproj (nearest neighbour),
for a regular lat/lon grid, descending latitudes, a 0-360 longitude grid,
a projected grid with a CF grid_mapping, and a multiscale pyramid (whose
level chosen is the documented one: the coarsest whose cells are no larger
than the tile's pixels, measured at the tile's centre). Real clients open
the same endpoints unchanged: GDAL (the WMS and the XYZ template), OWSLib
(GetCapabilities, GetMap, GetFeatureInfo)."""

import io
import json
import math
import shutil
import subprocess
import urllib.error
import urllib.request

import numpy as np
import pytest
import xarray as xr
from PIL import Image
from pyproj import CRS, Transformer

from conftest import start_zarrd, stop

HALF = math.pi * 6378137.0
LEVELS = 16


def pattern(ny, nx, offset=0):
    """16 values that change from each cell to the next, so a cell off by
    one shows."""
    i, j = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    return ((i * 7 + j * 3) % LEVELS + offset).astype("float32")


def latlon(lat, lon, offset=0):
    data = np.stack([pattern(len(lat), len(lon), offset + k) % LEVELS for k in range(2)])
    data[0, 3, 4] = np.nan
    return xr.Dataset(
        {"t": (("time", "lat", "lon"), data, {"units": "K", "long_name": "temperature"})},
        coords={
            "time": np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[ns]"),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
    )


UTM = CRS.from_epsg(32633)


def projected():
    x = np.arange(300_500.0, 700_000.0, 1000.0)  # 400 columns, 1 km
    y = np.arange(5_199_500.0, 4_800_000.0, -1000.0)  # 400 rows, north first
    ds = xr.Dataset(
        {"t": (("y", "x"), pattern(len(y), len(x)), {"grid_mapping": "spatial_ref", "units": "K"})},
        coords={
            "x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "m"}),
            "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m"}),
        },
    )
    ds["spatial_ref"] = xr.DataArray(0, attrs=UTM.to_cf())
    return ds


PYRAMID = [0.25, 0.5, 1.0]


def pyramid(root):
    """ndpyramid's layout: a group per level, each a dataset of its own
    resolution, declared in the top group's `multiscales`."""
    import zarr

    for level, res in enumerate(PYRAMID):
        lat = np.arange(-90 + res / 2, 90, res)
        lon = np.arange(-180 + res / 2, 180, res)
        ds = latlon(lat, lon)
        ds["t"] = ds.t + 0  # keep NaN
        ds["t"].values[:] = np.stack([pattern(len(lat), len(lon)) + LEVELS * level] * 2)
        ds.to_zarr(root / "pyramid" / str(level), zarr_format=3, consolidated=False, mode="w")
    group = zarr.open_group(root / "pyramid", mode="a", zarr_format=3)
    group.attrs["multiscales"] = [
        {"datasets": [{"path": str(i)} for i in range(len(PYRAMID))], "type": "reduce"}
    ]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("maps")
    grids = {
        "regular": latlon(np.arange(-89.5, 90, 1.0), np.arange(-179.5, 180, 1.0)),
        "descending": latlon(np.arange(89.0, -90, -2.0), np.arange(-179.0, 180, 2.0)),
        "lon360": latlon(np.arange(-88.5, 90, 3.0), np.arange(0.0, 360, 2.5)),
    }
    for name, ds in grids.items():
        ds.to_zarr(root / f"{name}.zarr", zarr_format=3, consolidated=False, mode="w")
    projected().to_zarr(root / "utm.zarr", zarr_format=2, consolidated=False, mode="w")
    pyramid(root)
    # Depths as WMS's elevation (CF `positive`).
    depth = np.array([0.0, 5.0, 10.0, 50.0])
    ocean = np.stack([pattern(36, 72, k) % LEVELS for k in range(len(depth))])
    xr.Dataset(
        {"temp": (("depth", "lat", "lon"), ocean, {"units": "degC"})},
        coords={
            "depth": ("depth", depth, {"units": "m", "positive": "down"}),
            "lat": ("lat", np.arange(-87.5, 90, 5.0), {"units": "degrees_north"}),
            "lon": ("lon", np.arange(-177.5, 180, 5.0), {"units": "degrees_east"}),
        },
    ).to_zarr(root / "ocean.zarr", zarr_format=3, consolidated=False, mode="w")
    # Not a map: no coordinates.
    xr.Dataset({"plain": (("a", "b"), np.zeros((4, 4), "float32"))}).to_zarr(
        root / "plain.zarr", zarr_format=3, consolidated=False, mode="w"
    )
    url, proc = start_zarrd(str(root))
    try:
        yield url, root
    finally:
        stop(proc)


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read(), r.headers


def rgba(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def error(url):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=60)
    return e.value.code, e.value.read(), e.value.headers


# The expected pictures, computed here.

def pixel_centres(bounds, width, height):
    x0, y0, x1, y1 = bounds
    xs = x0 + (np.arange(width) + 0.5) * (x1 - x0) / width
    ys = y1 - (np.arange(height) + 0.5) * (y1 - y0) / height
    return np.meshgrid(xs, ys)


def nearest(coord, v, wrap=False):
    """The nearest index of each of `v` on a regular axis, -1 outside."""
    first, step, n = coord[0], coord[1] - coord[0], len(coord)
    if wrap:
        west = min(coord[0] - step / 2, coord[-1] + step / 2)
        v = west + np.mod(v - west, 360.0)
    f = (v - first) / step
    idx = np.floor(f + 0.5).astype(int)
    return np.where((f >= -0.5) & (f < n - 0.5), np.clip(idx, 0, n - 1), -1)


def expected(ds, var, crs_from, bounds, width, height, data_crs, index=0):
    xs, ys = pixel_centres(bounds, width, height)
    t = Transformer.from_crs(crs_from, data_crs, always_xy=True)
    dx, dy = t.transform(xs, ys)
    xname, yname = ("lon", "lat") if "lon" in ds.coords else ("x", "y")
    xc, yc = ds[xname].values, ds[yname].values
    col = nearest(xc, dx, wrap=xname == "lon")
    row = nearest(yc, dy)
    values = ds[var].values
    if values.ndim == 3:
        values = values[index]
    out = np.full(xs.shape, np.nan)
    inside = (col >= 0) & (row >= 0)
    out[inside] = values[row[inside], col[inside]]
    return out


def agree(picture, want, levels=LEVELS):
    """The picture shows `want`: one colour per value (learned from the
    picture, and all different), transparent where nothing is."""
    missing = np.isnan(want)
    palette = {}
    for k in np.unique(want[~missing]):
        colours, counts = np.unique(picture[want == k][:, :3], axis=0, return_counts=True)
        palette[k] = tuple(colours[counts.argmax()])
    assert len(set(palette.values())) == len(palette), "values drawn alike"
    shown = np.zeros(want.shape, bool)
    for k, colour in palette.items():
        at = want == k
        shown[at] = (picture[at][:, :3] == colour).all(axis=1) & (picture[at][:, 3] == 255)
    shown[missing] = picture[missing][:, 3] == 0
    assert shown.mean() > 0.995, f"{(~shown).sum()} pixels of {shown.size} differ"
    return palette


def tile_bounds(tms, z, x, y):
    if tms == "WebMercatorQuad":
        span = 2 * HALF / 2**z
        return [-HALF + x * span, HALF - (y + 1) * span, -HALF + (x + 1) * span, HALF - y * span]
    span = 180.0 / 2**z
    return [-180 + x * span, 90 - (y + 1) * span, -180 + (x + 1) * span, 90 - y * span]


TMS_CRS = {"WebMercatorQuad": "EPSG:3857", "WorldCRS84Quad": "OGC:CRS84"}


@pytest.mark.parametrize("name", ["regular", "descending", "lon360"])
@pytest.mark.parametrize(
    "tms,z,x,y",
    [
        ("WebMercatorQuad", 0, 0, 0),
        ("WebMercatorQuad", 2, 1, 1),
        ("WebMercatorQuad", 3, 7, 2),
        ("WorldCRS84Quad", 0, 0, 0),
        ("WorldCRS84Quad", 0, 1, 0),
        ("WorldCRS84Quad", 2, 5, 1),
    ],
)
def test_tiles_of_lat_lon_grids_match_numpy(served, name, tms, z, x, y):
    url, root = served
    ds = xr.open_zarr(root / f"{name}.zarr", consolidated=False)
    body, headers = get(f"{url}/tiles/{name}.zarr/t/{tms}/{z}/{x}/{y}.png?vmin=0&vmax=15")
    assert headers["Content-Type"] == "image/png"
    assert headers["ETag"].startswith('"')
    want = expected(ds, "t", TMS_CRS[tms], tile_bounds(tms, z, x, y), 256, 256, "EPSG:4326")
    agree(rgba(body), want)


def test_other_dimensions_are_selected_by_label_and_index(served):
    url, root = served
    ds = xr.open_zarr(root / "regular.zarr", consolidated=False)
    bounds = tile_bounds("WorldCRS84Quad", 1, 1, 0)
    want = expected(ds, "t", "OGC:CRS84", bounds, 256, 256, "EPSG:4326", index=1)
    for q in ["sel.time=2020-01-02", "isel.time=1"]:
        body, _ = get(f"{url}/tiles/regular.zarr/t/WorldCRS84Quad/1/1/0.png?vmin=0&vmax=15&{q}")
        agree(rgba(body), want)
    code, body, _ = error(f"{url}/tiles/regular.zarr/t/WorldCRS84Quad/1/1/0.png?sel.time=1999-01-01")
    assert code == 400 and json.loads(body)["error"]["code"] == "bad_label"
    code, body, _ = error(f"{url}/tiles/regular.zarr/t/WorldCRS84Quad/1/1/0.png?isel.time=0:2")
    assert code == 400 and "one time" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize("tms,z,x,y", [("WebMercatorQuad", 5, 17, 11), ("WebMercatorQuad", 6, 34, 22), ("WorldCRS84Quad", 5, 34, 8)])
def test_tiles_of_a_projected_grid_match_pyproj(served, tms, z, x, y):
    url, root = served
    ds = xr.open_zarr(root / "utm.zarr", consolidated=False)
    body, _ = get(f"{url}/tiles/utm.zarr/t/{tms}/{z}/{x}/{y}.png?rescale=0,15")
    want = expected(ds, "t", TMS_CRS[tms], tile_bounds(tms, z, x, y), 256, 256, UTM)
    assert np.isfinite(want).mean() > 0.2, "the tile shows the grid"
    agree(rgba(body), want)


def level_for(tms, z, x, y):
    """The coarsest level whose cells are no larger than the tile's pixels,
    measured at pixel (128, 128) and its neighbours right and below."""
    bounds = tile_bounds(tms, z, x, y)
    xs, ys = pixel_centres(bounds, 256, 256)
    t = Transformer.from_crs(TMS_CRS[tms], "EPSG:4326", always_xy=True)
    lon, lat = t.transform(xs[128, 128:130].tolist() + [xs[129, 128]], ys[128, 128:130].tolist() + [ys[129, 128]])
    chosen = 0
    for level, res in enumerate(PYRAMID):
        across = math.hypot(lon[1] - lon[0], lat[1] - lat[0]) / res
        down = math.hypot(lon[2] - lon[0], lat[2] - lat[0]) / res
        if min(across, down) >= 1 - 1e-9:
            chosen = level
    return chosen


@pytest.mark.parametrize(
    "tms,z,x,y",
    [("WebMercatorQuad", 0, 0, 0), ("WebMercatorQuad", 1, 1, 0), ("WebMercatorQuad", 2, 2, 1), ("WebMercatorQuad", 3, 4, 3), ("WorldCRS84Quad", 0, 0, 0), ("WorldCRS84Quad", 1, 2, 1), ("WorldCRS84Quad", 2, 3, 1)],
)
def test_a_pyramid_draws_from_the_documented_level(served, tms, z, x, y):
    url, root = served
    level = level_for(tms, z, x, y)
    ds = xr.open_zarr(root / "pyramid" / str(level), consolidated=False)
    body, _ = get(f"{url}/tiles/pyramid/0/t/{tms}/{z}/{x}/{y}.png?vmin=0&vmax={LEVELS * 3 - 1}")
    want = expected(ds, "t", TMS_CRS[tms], tile_bounds(tms, z, x, y), 256, 256, "EPSG:4326")
    agree(rgba(body), want)


def test_the_pyramid_levels_chosen_cover_every_level(served):
    chosen = {level_for(tms, z, 2**z // 2, 2**z // 2) for tms in TMS_CRS for z in range(6)}
    assert chosen == {0, 1, 2}


def test_bilinear_resampling_blends_neighbours(served):
    url, _ = served
    near, _ = get(f"{url}/tiles/regular.zarr/t/WebMercatorQuad/6/31/31.png?vmin=0&vmax=15")
    blend, _ = get(f"{url}/tiles/regular.zarr/t/WebMercatorQuad/6/31/31.png?vmin=0&vmax=15&resampling=bilinear")
    a, b = rgba(near), rgba(blend)
    assert len(np.unique(b.reshape(-1, 4), axis=0)) > len(np.unique(a.reshape(-1, 4), axis=0))


def test_tile_encodings_etags_and_cache_headers(served):
    url, _ = served
    tile = f"{url}/tiles/regular.zarr/t/WebMercatorQuad/1/0/0"
    png, headers = get(tile + ".png")
    for ext, kind in [("webp", "WEBP"), ("jpg", "JPEG")]:
        body, h = get(f"{tile}.{ext}")
        assert Image.open(io.BytesIO(body)).format == kind
        assert Image.open(io.BytesIO(body)).size == (256, 256)
    assert "Content-Encoding" not in headers
    request = urllib.request.Request(tile + ".png", headers={"If-None-Match": headers["ETag"]})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=30)
    assert e.value.code == 304
    assert headers["Cache-Control"] == "no-cache"


def test_tilejson_tileset_and_matrix_sets(served):
    url, _ = served
    tj = json.loads(get(f"{url}/tiles/regular.zarr/t/WebMercatorQuad/tilejson.json?vmin=0&vmax=15")[0])
    assert tj["tilejson"] == "3.0.0"
    assert tj["tiles"][0] == f"{url}/tiles/regular.zarr/t/WebMercatorQuad/{{z}}/{{x}}/{{y}}.png?vmin=0&vmax=15"
    assert tj["bounds"] == [-180, -90, 180, 90]
    assert tj["maxzoom"] == 1  # 1-degree cells: 111 km; zoom 1's pixels are 78 km
    lon360 = json.loads(get(f"{url}/tiles/lon360.zarr/t/WebMercatorQuad/tilejson.json")[0])
    assert lon360["bounds"][0] == -180 and lon360["bounds"][2] == 180
    tileset = json.loads(get(f"{url}/tiles/utm.zarr/t/WorldCRS84Quad")[0])
    assert tileset["crs"].endswith("CRS84")
    west, south = tileset["boundingBox"]["lowerLeft"]
    assert 12 < west < 13 and 43 < south < 44
    sets = json.loads(get(f"{url}/tiles/tileMatrixSets")[0])
    assert {s["id"] for s in sets["tileMatrixSets"]} == {"WebMercatorQuad", "WorldCRS84Quad"}
    wmq = json.loads(get(f"{url}/tiles/tileMatrixSets/WebMercatorQuad")[0])
    assert wmq["tileMatrices"][0]["scaleDenominator"] == pytest.approx(559082264.0287178)
    assert wmq["tileMatrices"][3]["matrixWidth"] == 8
    listing = json.loads(get(f"{url}/tiles/regular.zarr/t")[0])
    assert len(listing["tilesets"]) == 2


def test_the_legend_is_a_colour_bar_with_units(served):
    url, _ = served
    body, _ = get(f"{url}/tiles/regular.zarr/t/legend.png?vmin=0&vmax=15&cmap=magma")
    image = rgba(body)
    assert image.shape == (48, 256, 4)
    bar = image[24, 10:246, :3]
    assert len(np.unique(bar, axis=0)) > 100, "a gradient"
    assert (image[:14] == [0, 0, 0, 255]).all(axis=2).any(), "a title in ink"


@pytest.mark.parametrize(
    "path,code,status",
    [
        ("regular.zarr/t/Nope/0/0/0.png", "unknown_tile_matrix_set", 404),
        ("regular.zarr/t/WebMercatorQuad/1/2/0.png", "no_such_tile", 404),
        ("regular.zarr/t/WebMercatorQuad/31/0/0.png", "bad_tile", 400),
        ("regular.zarr/t/WebMercatorQuad/1/0/0.gif", "bad_tile", 400),
        ("regular.zarr/t/WebMercatorQuad/99999999999999999999/0/0.png", "bad_tile", 400),
        ("plain.zarr/plain/WebMercatorQuad/0/0/0.png", "not_georeferenced", 404),
        ("missing.zarr/t/WebMercatorQuad/0/0/0.png", "not_found", 404),
        ("regular.zarr/time/WebMercatorQuad/0/0/0.png", "not_georeferenced", 404),
        ("regular.zarr/t/WebMercatorQuad/0/0/0.png?cmap=nope", "bad_cmap", 400),
        ("regular.zarr/t/WebMercatorQuad/0/0/0.png?vmin=x", "bad_query", 400),
        ("regular.zarr/t/WebMercatorQuad/0/0/0.png?sel.lat=10", "bad_selection", 400),
        ("regular.zarr/t/WebMercatorQuad/0/0/0.png?bogus=1", "bad_query", 400),
        ("regular.zarr/t/legend.png?width=100000", "bad_size", 400),
    ],
)
def test_bad_tiles_get_clear_errors(served, path, code, status):
    url, _ = served
    got, body, headers = error(f"{url}/tiles/{path}")
    assert got == status
    assert json.loads(body)["error"]["code"] == code
    assert headers["Access-Control-Allow-Origin"] == "*"


# WMS

def wms(url, **params):
    query = "&".join(f"{k}={urllib.parse.quote(str(v), safe=':,/')}" for k, v in params.items())
    return f"{url}/wms?SERVICE=WMS&VERSION=1.3.0&{query}"


import urllib.parse  # noqa: E402


@pytest.mark.parametrize(
    "crs,bbox,data_from",
    [
        ("EPSG:4326", (-30, -60, 60, 90), ("EPSG:4326", [-60, -30, 90, 60])),
        ("CRS:84", (-60, -30, 90, 60), ("EPSG:4326", [-60, -30, 90, 60])),
        ("EPSG:3857", (-5e6, -3e6, 9e6, 8e6), ("EPSG:3857", [-5e6, -3e6, 9e6, 8e6])),
    ],
)
@pytest.mark.parametrize("name", ["regular", "lon360", "descending"])
def test_getmap_matches_numpy_in_each_crs(served, name, crs, bbox, data_from):
    url, root = served
    ds = xr.open_zarr(root / f"{name}.zarr", consolidated=False)
    body, headers = get(
        wms(url, REQUEST="GetMap", LAYERS=f"{name}.zarr/t", STYLES="", CRS=crs, BBOX=",".join(map(str, bbox)),
            WIDTH=300, HEIGHT=200, FORMAT="image/png", TRANSPARENT="TRUE", COLORSCALERANGE="0,15")
    )
    assert headers["Content-Type"] == "image/png"
    frm, bounds = data_from
    agree(rgba(body), expected(ds, "t", frm, bounds, 300, 200, "EPSG:4326"))


def test_getmap_of_the_projected_grid_and_time(served):
    url, root = served
    ds = xr.open_zarr(root / "utm.zarr", consolidated=False)
    bounds = [11.0, 42.5, 17.5, 47.5]
    body, _ = get(wms(url, REQUEST="GetMap", LAYERS="utm.zarr/t", STYLES="viridis", CRS="CRS:84",
                      BBOX=",".join(map(str, bounds)), WIDTH=256, HEIGHT=256, FORMAT="image/png",
                      TRANSPARENT="TRUE", VMIN=0, VMAX=15))
    agree(rgba(body), expected(ds, "t", "EPSG:4326", bounds, 256, 256, UTM))
    reg = xr.open_zarr(root / "regular.zarr", consolidated=False)
    body, _ = get(wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", STYLES="", CRS="CRS:84",
                      BBOX="-180,-90,180,90", WIDTH=360, HEIGHT=180, FORMAT="image/png",
                      TRANSPARENT="TRUE", COLORSCALERANGE="0,15", TIME="2020-01-02T00:00:00"))
    agree(rgba(body), expected(reg, "t", "EPSG:4326", [-180, -90, 180, 90], 360, 180, "EPSG:4326", index=1))


def test_opaque_maps_fill_the_background(served):
    url, _ = served
    body, _ = get(wms(url, REQUEST="GetMap", LAYERS="utm.zarr/t", STYLES="", CRS="CRS:84",
                      BBOX="0,0,40,60", WIDTH=64, HEIGHT=64, FORMAT="image/png", BGCOLOR="0xFF0000"))
    image = rgba(body)
    assert (image[0, 0] == [255, 0, 0, 255]).all()
    assert (image[:, :, 3] == 255).all()


def test_wms_errors_are_exception_reports(served):
    url, _ = served
    cases = [
        (wms(url, REQUEST="GetMap", LAYERS="nope/t", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=1, HEIGHT=1, FORMAT="image/png"), "LayerNotDefined"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", CRS="EPSG:0", BBOX="0,0,1,1", WIDTH=1, HEIGHT=1, FORMAT="image/png"), "InvalidCRS"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=1, HEIGHT=1, FORMAT="image/gif"), "InvalidFormat"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=100000, HEIGHT=1, FORMAT="image/png"), "InvalidParameterValue"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", CRS="CRS:84", BBOX="1,1,0,0", WIDTH=1, HEIGHT=1, FORMAT="image/png"), "InvalidParameterValue"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=1, HEIGHT=1, FORMAT="image/png", TIME="1999-01-01"), "InvalidDimensionValue"),
        (wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", STYLES="nope", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=1, HEIGHT=1, FORMAT="image/png"), "StyleNotDefined"),
        (wms(url, REQUEST="GetFeatureInfo", QUERY_LAYERS="regular.zarr/t", LAYERS="regular.zarr/t", CRS="CRS:84", BBOX="0,0,1,1", WIDTH=10, HEIGHT=10, I=10, J=0), "InvalidPoint"),
        (wms(url, REQUEST="GetMap"), "MissingParameterValue"),
        (wms(url, REQUEST="Transmogrify"), "OperationNotSupported"),
    ]
    for request, code in cases:
        status, body, headers = error(request)
        assert status in (400, 404), request
        assert headers["Content-Type"].startswith("text/xml")
        assert b"<ServiceExceptionReport" in body and f'code="{code}"'.encode() in body, (request, body)


def test_owslib_reads_capabilities_maps_and_feature_info(served):
    from owslib.wms import WebMapService

    url, root = served
    service = WebMapService(f"{url}/wms", version="1.3.0")
    names = set(service.contents)
    assert {"regular.zarr/t", "descending.zarr/t", "lon360.zarr/t", "utm.zarr/t", "pyramid/0/t"} <= names
    assert "plain.zarr/plain" not in names and "pyramid/1/t" not in names
    layer = service["regular.zarr/t"]
    assert layer.title == "temperature"
    assert layer.boundingBoxWGS84 == pytest.approx((-180, -90, 180, 90))
    assert "EPSG:3857" in layer.crsOptions
    assert layer.dimensions["time"]["values"] == ["2020-01-01T00:00:00", "2020-01-02T00:00:00"]
    utm = service["utm.zarr/t"].boundingBoxWGS84
    assert 12 < utm[0] < 13 and 46 < utm[3] < 47.5
    assert "viridis" in service["regular.zarr/t"].styles
    # OWSLib takes x, y order and writes EPSG:4326 latitude first itself.
    image = service.getmap(layers=["regular.zarr/t"], srs="EPSG:4326", bbox=(-180, -90, 180, 90),
                           size=(360, 180), format="image/png", transparent=True)
    ds = xr.open_zarr(root / "regular.zarr", consolidated=False)
    want = expected(ds, "t", "EPSG:4326", [-180, -90, 180, 90], 360, 180, "EPSG:4326")
    # Without a range the colours span the layer's 2nd to 98th percentile: learned all the same.
    agree(rgba(image.read()), want)
    for i, j in [(10, 20), (200, 100), (359, 179)]:
        info = service.getfeatureinfo(layers=["regular.zarr/t"], srs="CRS:84", bbox=(-180, -90, 180, 90),
                                      size=(360, 180), format="image/png", query_layers=["regular.zarr/t"],
                                      info_format="application/json", xy=(i, j))
        feature = json.loads(info.read())["features"][0]
        row, col = 179 - j, i
        value = ds.t.values[0, row, col]
        got = feature["properties"]["value"]
        # float32 values as their shortest decimal, as format=json writes them.
        assert (got is None) if np.isnan(value) else np.float32(got) == value
        assert feature["properties"]["index"] == {"time": 0, "lat": row, "lon": col}
        assert feature["properties"]["units"] == "K"
    text = service.getfeatureinfo(layers=["utm.zarr/t"], srs="EPSG:3857", bbox=(1.3e6, 5.2e6, 1.8e6, 5.8e6),
                                  size=(100, 100), format="image/png", query_layers=["utm.zarr/t"],
                                  info_format="text/plain", xy=(50, 50)).read().decode()
    x, y = Transformer.from_crs("EPSG:3857", UTM, always_xy=True).transform(1.3e6 + 50.5 * 5e3, 5.8e6 - 50.5 * 6e3)
    uds = xr.open_zarr(root / "utm.zarr", consolidated=False)
    value = uds.t.sel(x=x, y=y, method="nearest").values
    name, shown = text.strip().removesuffix(" K").split(" = ")
    assert name == "utm.zarr/t" and np.float32(shown) == value
    legend, headers = get(wms(url, REQUEST="GetLegendGraphic", LAYER="regular.zarr/t", FORMAT="image/png", STYLE="gray"))
    assert rgba(legend).shape == (48, 256, 4)


GDAL = shutil.which("gdal_translate")


@pytest.mark.skipif(GDAL is None, reason="GDAL (Debian's gdal-bin) is not installed")
def test_gdal_reads_the_wms_and_the_xyz_template(served, tmp_path):
    url, _ = served
    caps = subprocess.run(["gdalinfo", f"WMS:{url}/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"],
                          capture_output=True, text=True, timeout=120)
    assert caps.returncode == 0, caps.stderr
    assert "LAYERS=regular.zarr%2Ft" in caps.stdout or "LAYERS=regular.zarr/t" in caps.stdout

    # The WMS, one block of 512 x 256 over the world in EPSG:4326.
    xml = tmp_path / "wms.xml"
    xml.write_text(f"""<GDAL_WMS><Service name="WMS"><Version>1.3.0</Version>
<ServerUrl>{url}/wms?COLORSCALERANGE=0,15&amp;</ServerUrl><CRS>EPSG:4326</CRS><ImageFormat>image/png</ImageFormat>
<Layers>regular.zarr/t</Layers><Transparent>TRUE</Transparent><BBoxOrder>yxYX</BBoxOrder></Service>
<DataWindow><UpperLeftX>-180</UpperLeftX><UpperLeftY>90</UpperLeftY><LowerRightX>180</LowerRightX><LowerRightY>-90</LowerRightY>
<SizeX>512</SizeX><SizeY>256</SizeY></DataWindow><BlockSizeX>512</BlockSizeX><BlockSizeY>256</BlockSizeY>
<BandsCount>4</BandsCount><Cache/></GDAL_WMS>""".replace("<Cache/>", ""))
    out = tmp_path / "wms.png"
    run = subprocess.run([GDAL, "-q", "-of", "PNG", str(xml), str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    direct, _ = get(wms(url, REQUEST="GetMap", LAYERS="regular.zarr/t", STYLES="", CRS="EPSG:4326", BBOX="-90,-180,90,180",
                        WIDTH=512, HEIGHT=256, FORMAT="image/png", TRANSPARENT="TRUE", COLORSCALERANGE="0,15"))
    assert (rgba(out.read_bytes()) == rgba(direct)).all()

    # The XYZ template, zoom 2's four middle tiles.
    tms = tmp_path / "xyz.xml"
    tms.write_text(f"""<GDAL_WMS><Service name="TMS">
<ServerUrl>{url}/tiles/regular.zarr/t/WebMercatorQuad/${{z}}/${{x}}/${{y}}.png?vmin=0&amp;vmax=15</ServerUrl></Service>
<DataWindow><UpperLeftX>-20037508.34</UpperLeftX><UpperLeftY>20037508.34</UpperLeftY>
<LowerRightX>20037508.34</LowerRightX><LowerRightY>-20037508.34</LowerRightY><TileLevel>2</TileLevel>
<TileCountX>1</TileCountX><TileCountY>1</TileCountY><YOrigin>top</YOrigin></DataWindow>
<Projection>EPSG:3857</Projection><BlockSizeX>256</BlockSizeX><BlockSizeY>256</BlockSizeY><BandsCount>4</BandsCount></GDAL_WMS>""")
    out = tmp_path / "xyz.png"
    run = subprocess.run([GDAL, "-q", "-of", "PNG", "-srcwin", "256", "256", "512", "512", str(tms), str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    tiles = [[rgba(get(f"{url}/tiles/regular.zarr/t/WebMercatorQuad/2/{x}/{y}.png?vmin=0&vmax=15")[0]) for x in (1, 2)] for y in (1, 2)]
    stitched = np.vstack([np.hstack(row) for row in tiles])
    assert (rgba(out.read_bytes()) == stitched).all()


def test_feature_info_of_any_pyramid_level_reads_the_finest(served):
    url, root = served
    fine = xr.open_zarr(root / "pyramid" / "0", consolidated=False)
    for layer in ["pyramid/0/t", "pyramid/2/t"]:
        # Pixels of 0.36 degrees: no centre halfway between two cells.
        for i, j in [(7, 483), (10, 10), (555, 250)]:
            body, _ = get(wms(url, REQUEST="GetFeatureInfo", QUERY_LAYERS=layer, LAYERS=layer, CRS="CRS:84",
                              BBOX="-180,-90,180,90", WIDTH=1000, HEIGHT=500, I=i, J=j, INFO_FORMAT="application/json"))
            props = json.loads(body)["features"][0]["properties"]
            lon, lat = -180 + (i + 0.5) * 0.36, 90 - (j + 0.5) * 0.36
            want = fine.t.isel(time=0).sel(lon=lon, lat=lat, method="nearest")
            assert np.float32(props["value"]) == want.values, (layer, i, j)
            assert props["index"]["lat"] == int(np.abs(fine.lat.values - lat).argmin())


def test_a_log_scale_spans_the_positive_values(served):
    url, _ = served
    body, _ = get(f"{url}/tiles/regular.zarr/t/WorldCRS84Quad/0/0/0.png?scale=log")
    assert (rgba(body)[:, :, 3] == 255).mean() > 0.8, "zeros are transparent, the rest drawn"


def test_depths_are_wms_elevations(served):
    url, root = served
    ds = xr.open_zarr(root / "ocean.zarr", consolidated=False)
    caps = get(f"{url}/wms?SERVICE=WMS&REQUEST=GetCapabilities")[0].decode()
    assert '<Dimension name="elevation" units="m" default="0.0">0.0,5.0,10.0,50.0</Dimension>' in caps
    body, _ = get(wms(url, REQUEST="GetMap", LAYERS="ocean.zarr/temp", STYLES="", CRS="CRS:84", BBOX="-180,-90,180,90",
                      WIDTH=360, HEIGHT=180, FORMAT="image/png", TRANSPARENT="TRUE", COLORSCALERANGE="0,15",
                      ELEVATION="10"))
    agree(rgba(body), expected(ds, "temp", "EPSG:4326", [-180, -90, 180, 90], 360, 180, "EPSG:4326", index=2))
    status, body, _ = error(wms(url, REQUEST="GetMap", LAYERS="ocean.zarr/temp", STYLES="", CRS="CRS:84",
                                BBOX="-180,-90,180,90", WIDTH=36, HEIGHT=18, FORMAT="image/png", ELEVATION="7"))
    assert status == 400 and b'code="InvalidDimensionValue"' in body


def test_tiles_of_an_icechunk_snapshot_are_immutable(tmp_path):
    import icechunk as ic

    storage = ic.local_filesystem_storage(str(tmp_path / "repo"))
    repo = ic.Repository.create(storage)
    session = repo.writable_session("main")
    latlon(np.arange(-89.5, 90, 1.0), np.arange(-179.5, 180, 1.0)).to_zarr(
        session.store, zarr_format=3, consolidated=False)
    snapshot = session.commit("a map")
    config = tmp_path / "zarrd.toml"
    config.write_text(f"[mounts]\nrepo = {{ icechunk = {json.dumps(str(tmp_path / 'repo'))} }}\n")
    (tmp_path / "root").mkdir()
    url, proc = start_zarrd("--config", str(config), str(tmp_path / "root"))
    try:
        pinned, headers = get(f"{url}/tiles/repo@{snapshot}/t/WebMercatorQuad/1/0/0.png?vmin=0&vmax=15")
        assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
        branch, headers = get(f"{url}/tiles/repo/t/WebMercatorQuad/1/0/0.png?vmin=0&vmax=15")
        assert "immutable" not in headers["Cache-Control"]
        assert rgba(pinned).tolist() == rgba(branch).tolist()
    finally:
        stop(proc)
