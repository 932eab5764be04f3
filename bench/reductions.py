"""Section reductions: answers computed on the server against the same
computation in a notebook.

The dataset, written once by xarray into OUT/reductions-T/: float32
t2m(time, lat, lon) of T hourly steps on a 180 x 360 grid (T = 8760, a
year, for the full corpus; N / 8 on a smaller one), in chunks of one day
(24 x 180 x 360, zstd), with CF time units and lat/lon coordinates. Two
questions:

- the time-mean map: `t2m.mean("time")` (180 x 360 out of T x 180 x 360);
- the area-mean series: `t2m.mean(["lat", "lon"])` (T values).

Contenders, each answer checked against xarray's: zarrd computing it
(`/api/v1/data/.../t2m?reduce=mean:time&format=npy`), cold (`--cache-size
0`) and warm (the cache holding the dataset); xarray in-process on the same
files with numpy (`open_zarr(chunks=None)`: everything read, then reduced)
and with dask (`open_zarr()`, the threaded scheduler on every core); and a
notebook reading the chunks through zarrd's `/zarr/` with xarray (dask,
fsspec over HTTP) and reducing them itself. Ratios are each contender's
seconds over zarrd's in the same run (above 1: zarrd faster); the goal is
at least 1x in-process xarray and 3x the download path. zarrd's peak RSS is
reported beside the dataset's size: it stays the output's and the blocks in
flight, whatever T is."""

import io
import os

import numpy as np

import measure
import report
from procs import OUT, Zarrd

GRID = (180, 360)
DAY = 24


def steps(n):
    return 8760 if n >= 8192 else max(2 * DAY, (n // 8) // DAY * DAY)


def make(n):
    """The dataset's folder (written once) and its path under it."""
    import pandas as pd
    import xarray as xr

    t = steps(n)
    root = os.path.join(OUT, f"reductions-{t}")
    path = os.path.join(root, "era.zarr")
    if os.path.exists(os.path.join(path, "zarr.json")):
        return root, t
    os.makedirs(root, exist_ok=True)
    lat = np.linspace(89.5, -89.5, GRID[0])
    lon = np.arange(GRID[1], dtype="float64")
    time = pd.date_range("2023-01-01", periods=t, freq="h")
    coords = {"lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon, {"units": "degrees_east"})}
    rng = np.random.default_rng(1)
    base = (30 * np.cos(np.radians(lat))[:, None] - 10 + 0 * lon[None, :]).astype("float32")
    first = True
    for d0 in range(0, t, DAY):
        hours = np.arange(d0, min(t, d0 + DAY))
        block = base[None] + 5 * np.sin(hours / 24 * 2 * np.pi)[:, None, None].astype("float32") \
            + rng.standard_normal((len(hours), *GRID)).astype("float32")
        part = xr.Dataset({"t2m": (("time", "lat", "lon"), block.astype("float32"), {"units": "K"})},
                          coords={"time": time[hours], **coords})
        if first:
            part.t2m.encoding.update({"chunks": (DAY, *GRID)})
            part.time.encoding.update({"units": "hours since 2023-01-01", "dtype": "int64"})
            part.to_zarr(path, zarr_format=3, consolidated=False, mode="w")
            first = False
        else:
            part.to_zarr(path, zarr_format=3, consolidated=False, append_dim="time")
    return root, t


QUESTIONS = {
    "time-mean map": ("mean:time", lambda a: a.mean("time")),
    "area-mean series": ("mean:lat,lon", lambda a: a.mean(["lat", "lon"])),
}


def section(ctx):
    import xarray as xr

    root, t = make(ctx.n)
    path = os.path.join(root, "era.zarr")
    rows = []
    with Zarrd(root, "--cache-size", "0") as cold, Zarrd(root, "--cache-size", "4GiB") as warm:
        for question, (reduce, local) in QUESTIONS.items():
            expected = local(xr.open_zarr(path, consolidated=False, chunks=None).t2m).values

            def check(values, who):
                if values.shape != expected.shape or not np.allclose(values, expected, rtol=1e-4, atol=1e-4):
                    raise AssertionError(f"{who}: the answer differs from xarray's")

            def server(z, who):
                def run():
                    seconds, body = measure.fetch(f"{z.url}/api/v1/data/era.zarr/t2m?reduce={reduce}&format=npy")
                    check(np.load(io.BytesIO(bytes(body))), who)
                    return {"seconds": seconds}
                return run

            def in_process(chunks, who, url=None):
                def run():
                    def go():
                        opened = xr.open_zarr(url or path, consolidated=False, chunks=chunks)
                        return local(opened.t2m).values
                    seconds, values = measure.timed(go)
                    check(values, who)
                    return {"seconds": seconds}
                return run

            contenders = {
                "zarrd cold": server(cold, "zarrd cold"),
                "zarrd warm": server(warm, "zarrd warm"),
                "xarray numpy": in_process(None, "xarray numpy"),
                "xarray dask": in_process({}, "xarray dask"),
                "download through /zarr/": in_process({}, "download", f"{cold.url}/zarr/era.zarr"),
            }
            for run in contenders.values():
                run()
            res = measure.alternate(contenders, ctx.args.reps)
            rows.append({"question": question, "reduce": reduce, **res})
            print("reductions", question, report.brief(res, "seconds"))
        rss = {"zarrd cold": cold.peak_rss(), "zarrd warm": warm.peak_rss()}
    return {"rows": rows, "steps": t, "grid": list(GRID), "dataset_bytes": t * GRID[0] * GRID[1] * 4,
            "peak_rss": rss}
