"""Standard protocols: zarrd's OPeNDAP (DAP2 `.dods` with a hyperslab)
and OGC API - EDR `position` queries against xpublish-opendap and
xpublish-edr serving the same dataset on the same machine: a year of
hourly 2 m temperature on a 4-degree grid, chunked by month (a point's
year is twelve chunks). Each request asks for one place's whole year;
64 places round-robin, asked by wrk at 10 connections after each was
asked once. Requests/s and p99, each contender's series checked against
the other's."""

import json
import os
import shutil
import struct

import measure
from procs import OUT, PeerApp, Zarrd, available

HOURS = 8760
RES = 4.0
MONTH = 744
CONNECTIONS = 10
PLACES = 64
GOAL = 5.0
P99_GOAL_MS = 50.0


def XpublishStd(path):
    return PeerApp("xpublish", "xpublish-std", "xpublish_std_app.py", path, "/datasets")


def make(root):
    """The dataset, written once by xarray (zarr v3, zstd, 744 x 45 x 90 chunks)."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    path = os.path.join(root, "year.zarr")
    if os.path.exists(os.path.join(path, "zarr.json")):
        return path
    lat = np.arange(88.0, -90.0, -RES)
    lon = np.arange(-178.0, 180.0, RES)
    rng = np.random.default_rng(5)
    hours = np.arange(HOURS)
    base = 250 + 40 * np.cos(np.deg2rad(lat))[None, :, None] + 10 * np.sin(2 * np.pi * hours / HOURS)[:, None, None]
    data = (base + rng.normal(0, 1, (HOURS, len(lat), len(lon)))).astype("float32")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), data, {"units": "K", "long_name": "2 m temperature"})},
        coords={
            "time": pd.date_range("2024-01-01", periods=HOURS, freq="h"),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude", "axis": "X"}),
        },
    )
    ds.to_zarr(path, zarr_format=3, consolidated=False, mode="w",
               encoding={"t2m": {"chunks": (MONTH, len(lat), len(lon))}})
    return path


def places():
    import random

    rng = random.Random(20261128)
    nlat, nlon = int(180 / RES), int(360 / RES)
    return [(rng.randrange(nlat), rng.randrange(nlon)) for _ in range(PLACES)]


def lonlat(i, j):
    # A little off the cell's centre, so nearest is never a tie.
    return (-178.0 + RES * j + 0.3, 88.0 - RES * i - 0.3)


def dap(prefix):
    # [start:stop]: opendap-protocol (under xpublish-opendap) reads a
    # stride's [start:stride:stop] as Python's start:stop:step.
    return lambda i, j: f"{prefix}.dods?t2m%5B0:{HOURS - 1}%5D%5B{i}%5D%5B{j}%5D"


def edr(prefix):
    return lambda i, j: "{}/position?coords=POINT({:.1f}%20{:.1f})&parameter-name=t2m".format(prefix, *lonlat(i, j))


ROUTES = {
    "dap2": {"zarrd": dap("/opendap/year.zarr"), "xpublish": dap("/datasets/bench/opendap")},
    "edr": {"zarrd": edr("/edr/collections/year.zarr"), "xpublish": edr("/datasets/bench/edr")},
}

LUA = """
local paths = {{{paths}}}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def series_dods(body):
    """The float32 values after a DDS's `Data:` line (XDR: two counts, then big-endian)."""
    at = body.index(b"\nData:") + 6
    at = body.index(b"\n", at) + 1
    n = struct.unpack(">I", body[at:at + 4])[0]
    return list(struct.unpack(f">{n}f", body[at + 8:at + 8 + 4 * n]))


def series_covjson(body):
    doc = json.loads(body)
    ranges = doc["ranges"] if doc.get("type") == "Coverage" else doc["coverages"][0]["ranges"]
    return [float("nan") if v is None else float(v) for v in ranges["t2m"]["values"]]


def cpu_seconds(server):
    """CPU time a server's processes have used so far."""
    from procs import group_pids

    ticks = 0
    for pid in group_pids(server.pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def quiet(servers, timeout=60):
    """Wait until no server uses CPU: a slow server still works through the
    requests queued when the previous measurement's wrk stopped."""
    import time

    deadline = time.monotonic() + timeout
    last = [cpu_seconds(s) for s in servers]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = [cpu_seconds(s) for s in servers]
        if all(b - a < 0.05 for a, b in zip(last, now)):
            return
        last = now


def load(server, route, kind, everyone, seconds):
    quiet(everyone)
    paths = [route(i, j) for i, j in places()]
    for p in paths:
        measure.fetch(server.url + p)
    script = os.path.join(OUT, f"standards-{kind}-{server.name}.lua")
    with open(script, "w") as f:
        f.write(LUA.format(paths=", ".join(f'"{p}"' for p in paths)))
    res = measure.wrk(server.url + paths[0], CONNECTIONS, seconds, script=script)
    return {"requests_per_s": res["requests_per_s"], "p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"]}


def section(ctx):
    if not available("xpublish-std"):
        return {"skipped": "xpublish-opendap and xpublish-edr are not installed (bench/run installs them in bench/out/venvs)"}
    if not shutil.which("wrk"):
        return {"skipped": "wrk is not installed"}
    root = os.path.join(OUT, "standards")
    os.makedirs(root, exist_ok=True)
    path = make(root)
    rows, alike = {}, {}
    with Zarrd(root, "--cache-size", ctx.args.cache_size) as z, XpublishStd(path) as xp:
        i, j = places()[0]
        for kind, read in [("dap2", series_dods), ("edr", series_covjson)]:
            _, a = measure.fetch(z.url + ROUTES[kind]["zarrd"](i, j))
            _, b = measure.fetch(xp.url + ROUTES[kind]["xpublish"](i, j))
            sa, sb = read(a), read(b)
            alike[kind] = len(sa) == len(sb) == HOURS and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(sa, sb))
        # At least 5 s: xpublish answers a few requests a second.
        seconds = max(5.0, ctx.args.seconds)
        for kind in ROUTES:
            rows[kind] = measure.alternate({
                "zarrd": lambda: load(z, ROUTES[kind]["zarrd"], kind, (z, xp), seconds),
                "xpublish": lambda: load(xp, ROUTES[kind]["xpublish"], kind, (z, xp), seconds),
            }, ctx.args.reps)
        rss = {"zarrd": z.peak_rss(), "xpublish": xp.peak_rss()}
    out = {"rows": rows, "peak_rss": rss, "connections": CONNECTIONS, "places": PLACES,
           "grid": f"{HOURS} x {int(180 / RES)} x {int(360 / RES)} float32, chunks of {MONTH} hours",
           "series_alike": alike, "goal": GOAL, "p99_goal_ms": P99_GOAL_MS}
    for kind in rows:
        zr, xr_ = rows[kind]["zarrd"], rows[kind]["xpublish"]
        ratio = zr["requests_per_s"]["median"] / xr_["requests_per_s"]["median"]
        out[f"{kind}_ratio"] = ratio
        out[f"{kind}_goal_met"] = ratio >= GOAL and zr["p99_ms"]["median"] < P99_GOAL_MS
        print("standards", kind, f"zarrd {zr['requests_per_s']['median']:.1f}/s p99 {zr['p99_ms']['median']:.1f} ms,",
              f"xpublish {xr_['requests_per_s']['median']:.1f}/s p99 {xr_['p99_ms']['median']:.1f} ms,",
              f"{ratio:.1f}x (goal {GOAL}x, p99 < {P99_GOAL_MS} ms)")
    return out
