"""Map tiles: zarrd's /tiles against xpublish-tiles serving the same
dataset (a quarter-degree global grid, as ERA5's, 24 times) on the same
machine. Warm: the 64 tiles of zoom 3 at one time, asked again and again
by wrk at 16 connections, after each was asked once. Cold: 16 clients
asking tiles of times and places never asked before (each (time, tile)
once), so every tile decodes its chunks. Tiles per second and p99, and
each contender's tiles checked against the other's picture of the same
place (the same colours where both draw)."""

import io
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import measure
from procs import OUT, PeerApp, Zarrd, available

RES = 0.25
TIMES = 24
ZOOM = 3
CONNECTIONS = 16
COLD_TILES = 512
RANGE = (200.0, 320.0)
GOALS = {"warm": 10.0, "cold": 3.0}


def XpublishTiles(path):
    return PeerApp("xpublish-tiles", "xpublish-tiles", "xpublish_tiles_app.py", path, "/datasets/bench/tiles/")


def make(root):
    """The dataset, written once by xarray (zarr v3, zstd, 1 x 361 x 720 chunks)."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    path = os.path.join(root, "era.zarr")
    if os.path.exists(os.path.join(path, "zarr.json")):
        return path
    lat = np.arange(90, -90 - RES / 2, -RES)
    lon = np.arange(-180, 180, RES)
    rng = np.random.default_rng(3)
    phi = np.deg2rad(lat)[:, None]
    base = 250 + 40 * np.cos(phi) + 5 * np.sin(np.deg2rad(lon) * 3)[None, :]
    data = np.stack([base + 3 * np.sin(t / 4) + rng.normal(0, 1, base.shape) for t in range(TIMES)]).astype("float32")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), data, {"units": "K", "long_name": "2 m temperature"})},
        coords={
            "time": pd.date_range("2024-01-01", periods=TIMES, freq="6h"),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude", "axis": "X"}),
        },
    )
    ds.to_zarr(path, zarr_format=3, consolidated=False, mode="w",
               encoding={"t2m": {"chunks": (1, 361, 720)}})
    return path


def zarrd_tile(base, t, x, y):
    return (f"{base}/tiles/era.zarr/t2m/WebMercatorQuad/{ZOOM}/{x}/{y}.png"
            f"?isel.time={t}&vmin={RANGE[0]}&vmax={RANGE[1]}")


def xpublish_tile(base, t, x, y):
    import pandas as pd

    when = (pd.Timestamp("2024-01-01") + pd.Timedelta(hours=6 * t)).isoformat()
    # Its route is {tileRow}/{tileCol}: y before x.
    return (f"{base}/datasets/bench/tiles/WebMercatorQuad/{ZOOM}/{y}/{x}?variables=t2m&width=256&height=256"
            f"&colorscalerange={RANGE[0]},{RANGE[1]}&style=raster/viridis&f=png&time={when}")


def tiles():
    n = 2**ZOOM
    return [(x, y) for y in range(n) for x in range(n)]


WARM_LUA = """
local paths = {{{paths}}}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def warm(server, url_of):
    paths = [url_of("", 0, x, y) for x, y in tiles()]
    for p in paths:
        measure.fetch(server.url + p)
    script = os.path.join(OUT, f"tiles-{server.name}.lua")
    with open(script, "w") as f:
        f.write(WARM_LUA.format(paths=", ".join(f'"{p}"' for p in paths)))
    res = measure.wrk(server.url + paths[0], CONNECTIONS, 5, script=script)
    return {"tiles_per_s": res["requests_per_s"], "p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"]}


def cold(server, url_of, pairs):
    """Each (time, tile) once, from 16 clients; tiles/s and p99."""
    import requests

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=CONNECTIONS, pool_maxsize=CONNECTIONS)
    session.mount("http://", adapter)
    seconds = []

    def one(pair):
        t, (x, y) = pair
        start = time.perf_counter()
        r = session.get(url_of(server.url, t, x, y), timeout=300)
        if r.status_code != 200 or not r.content.startswith(b"\x89PNG"):
            raise RuntimeError(f"{server.name}: tile {pair} answered {r.status_code} {r.content[:200]!r}")
        seconds.append(time.perf_counter() - start)

    start = time.perf_counter()
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        list(pool.map(one, pairs))
    wall = time.perf_counter() - start
    seconds.sort()
    return {"tiles_per_s": len(pairs) / wall, "p50_ms": seconds[len(seconds) // 2] * 1e3,
            "p99_ms": seconds[int(len(seconds) * 0.99)] * 1e3, "tiles": len(pairs)}


def same_picture(a, b):
    """The share of pixels two tiles draw alike (within 8 levels), where both draw."""
    import numpy as np
    from PIL import Image

    pa = np.asarray(Image.open(io.BytesIO(a)).convert("RGBA")).astype(int)
    pb = np.asarray(Image.open(io.BytesIO(b)).convert("RGBA")).astype(int)
    both = (pa[:, :, 3] > 0) & (pb[:, :, 3] > 0)
    close = (np.abs(pa[:, :, :3] - pb[:, :, :3]) <= 8).all(axis=2)
    return float(close[both].mean()) if both.any() else 0.0


def section(ctx):
    if not available("xpublish-tiles"):
        return {"skipped": "xpublish-tiles is not installed (bench/run installs it in bench/out/venvs)"}
    root = os.path.join(OUT, "maps")
    os.makedirs(root, exist_ok=True)
    path = make(root)
    import random

    rng = random.Random(20261128)
    pairs = [(t, tile) for t in range(1, TIMES) for tile in tiles()]
    rng.shuffle(pairs)
    pairs = pairs[:COLD_TILES]
    rows = {}
    agreement = []
    # Cold first, on fresh processes: nothing of those times decoded yet.
    with Zarrd(root, "--cache-size", ctx.args.cache_size) as z, XpublishTiles(path) as xp:
        # Each process's first tile (imports, the dataset's metadata) is not measured.
        measure.fetch(zarrd_tile(z.url, 0, 0, 0))
        measure.fetch(xpublish_tile(xp.url, 0, 0, 0))
        for x, y in [(4, 2), (1, 3), (6, 5)]:
            _, a = measure.fetch(zarrd_tile(z.url, 0, x, y))
            _, b = measure.fetch(xpublish_tile(xp.url, 0, x, y))
            agreement.append(same_picture(a, b))
        # Cold: each repetition its own tiles, never asked before by either.
        reps = max(1, ctx.args.reps)
        groups = [pairs[i::reps] for i in range(reps)]
        zi, xi = iter(groups), iter(groups)
        rows["cold"] = measure.alternate({
            "zarrd": lambda: cold(z, zarrd_tile, next(zi)),
            "xpublish-tiles": lambda: cold(xp, xpublish_tile, next(xi)),
        }, reps)
        if shutil.which("wrk"):
            rows["warm"] = measure.alternate({"zarrd": lambda: warm(z, zarrd_tile),
                                              "xpublish-tiles": lambda: warm(xp, xpublish_tile)}, reps)
        rss = {"zarrd": z.peak_rss(), "xpublish-tiles": xp.peak_rss()}
    out = {"rows": rows, "peak_rss": rss, "zoom": ZOOM, "connections": CONNECTIONS,
           "grid": f"{int(180 / RES) + 1} x {int(360 / RES)} x {TIMES} float32", "pictures_alike": agreement,
           "goals": GOALS}
    for kind in rows:
        r = rows[kind]
        z, x = r["zarrd"], r["xpublish-tiles"]
        ratio = z["tiles_per_s"]["median"] / x["tiles_per_s"]["median"]
        out[f"{kind}_ratio"] = ratio
        out[f"{kind}_goal_met"] = ratio >= GOALS[kind]
        print("maps", kind, f"zarrd {z['tiles_per_s']['median']:.1f}/s p99 {z['p99_ms']['median']:.1f} ms,",
              f"xpublish-tiles {x['tiles_per_s']['median']:.1f}/s p99 {x['p99_ms']['median']:.1f} ms,",
              f"{ratio:.1f}x (goal {GOALS[kind]}x)")
    return out
