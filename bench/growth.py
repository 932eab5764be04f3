"""Section growth: how cost grows.

(a) Time against selection size: square selections of side 100 to 8192
(capped at N) of the v3_zstd array (1024 x 1024 chunks, zstd 1), starting at
(37, 37) where they fit so that they are not chunk-aligned: zarrd cold
(--cache-size 0), zarrd warm (the same request twice), TensorStore reading
the files in-process (as the slicing section does) and nginx serving the
same selection as a ready-made .npy file (when nginx is installed).

(b) Requests/s against connections (1 to 64, wrk) for zarrd and nginx on a
64 KiB range of one chunk, and on a 256 x 256 slice (zarrd warm; nginx: the
same selection as a static .npy file). Needs wrk (not installed in CI).

Both are plotted, log-log, into growth.png beside results.md."""

import os
import shutil

import corpus
import measure
import report
from common import mb, npy_values, read_tensorstore, static_slice, timed_checked, zarrd_slice, zarrd_slice_url
from procs import Zarrd

LAYOUT = "v3_zstd"
SIDES = (100, 256, 512, 1024, 2048, 4096, 8192)
CONNECTIONS = (1, 2, 4, 8, 16, 32, 64)
OFFSET = 37
SLICE = 256
PLOT = "growth.png"
LABELS = {("zarrd", "range_64k"): "zarrd, 64 KiB range", ("nginx", "range_64k"): "nginx, 64 KiB range",
          ("zarrd", "slice_256"): "zarrd, 256 x 256 slice (warm)", ("nginx", "slice_256"): "nginx, 256 x 256 static .npy"}


def square(n, side):
    """A side x side selection at (37, 37) if it fits, else as near the origin as it can be."""
    start = OFFSET if OFFSET + side <= n else n - side
    return (slice(start, start + side),) * 2


def selection_times(ctx, warm, cold, ng):
    local = os.path.join(ctx.root, f"{LAYOUT}.zarr")
    fmt = corpus.ZARR_FORMAT[LAYOUT]
    rows = []
    for k, side in enumerate([s for s in SIDES if s <= ctx.n]):
        sel = square(ctx.n, side)
        contenders = {
            "zarrd cold": lambda: zarrd_slice(ctx, cold, LAYOUT, sel, "zarrd cold", False),
            "zarrd warm": lambda: zarrd_slice(ctx, warm, LAYOUT, sel, "zarrd warm", True),
            "tensorstore": lambda: {"seconds": timed_checked(
                ctx, "tensorstore", sel, lambda: read_tensorstore(local, sel, fmt, kvstore="file"))["seconds"]},
        }
        if ng:
            contenders["static .npy"] = lambda: static_slice(ctx, ng, sel)
        if k == 0:
            # Once untimed: TensorStore's first open in the process (and the servers' first request) is not the smallest selection's cost.
            for run in contenders.values():
                run()
        res = measure.alternate(contenders, ctx.args.reps)
        rows.append({"side": side, "start": sel[0].start, "elements": side * side, "mb": mb(sel), **res})
        print("growth selection", side, report.brief(res, "seconds"))
    return rows


def connection_rates(ctx, warm, ng):
    """wrk at 1..64 connections on a 64 KiB range and on a 256 x 256 slice."""
    key = f"/zarr/{LAYOUT}.zarr/{corpus.CHUNK_KEYS[LAYOUT]}"
    size = os.path.getsize(os.path.join(ctx.root, f"{LAYOUT}.zarr", *corpus.CHUNK_KEYS[LAYOUT].split("/")))
    # A start on a 64 KiB boundary, as the raw section's: nginx stalls ~40 ms per
    # response (delayed ACK) when sendfile starts at an offset off a page boundary.
    first = min(1 << 20, (size // 2) // 65536 * 65536)
    last = min(first + 65536, size) - 1
    rng = {"Range": f"bytes={first}-{last}"}
    sel = square(ctx.n, min(SLICE, ctx.n))
    targets = {"range_64k": {"zarrd": (warm.url + key, rng)}, "slice_256": {"zarrd": (zarrd_slice_url(warm.url, LAYOUT, sel), {})}}
    if ng:
        targets["range_64k"]["nginx"] = (ng.url + key, rng)
        targets["slice_256"]["nginx"] = (ng.url + ctx.static_npy(sel), {})
    rows = []
    for target, urls in targets.items():
        sizes = {}
        for name, (url, headers) in urls.items():
            _, body = measure.fetch(url, headers)
            sizes[name] = len(body)
            if target == "range_64k" and len(body) != last - first + 1:
                raise AssertionError(f"{name}: {len(body)} bytes for {headers}")
            if target == "slice_256":
                ctx.check(npy_values(body), sel, name)
        if target == "range_64k" and ng:
            if measure.fetch(urls["zarrd"][0], rng)[1] != measure.fetch(urls["nginx"][0], rng)[1]:
                raise AssertionError("zarrd and nginx disagree on the range")
        for conns in CONNECTIONS:
            res = measure.alternate({name: (lambda u=url, h=headers, n=sizes[name]: measure.wrk(
                u, conns, ctx.args.seconds, h, n)) for name, (url, headers) in urls.items()}, ctx.args.reps)
            rows.append({"target": target, "connections": conns, "bytes": sizes, **res})
            print("growth connections", target, conns, report.brief(res, "requests_per_s"))
    return rows


def plot(sec, path):
    """Two log-log panels: seconds against selection elements, requests/s
    against connections; one line per contender (min-max shaded)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    rows = sec["selections"]
    for name in [k for k in rows[0] if isinstance(rows[0][k], dict)] if rows else []:
        x = [r["elements"] for r in rows if name in r]
        stats = [r[name]["seconds"] for r in rows if name in r]
        line, = left.plot(x, [s["median"] for s in stats], marker="o", label=name)
        left.fill_between(x, [s["min"] for s in stats], [s["max"] for s in stats], color=line.get_color(), alpha=0.2)
    left.set(xscale="log", yscale="log", xlabel="selection elements (float32)", ylabel="seconds",
             title=f"Time against selection size ({LAYOUT}, from (37, 37))")
    left.grid(True, which="both", alpha=0.3)
    left.legend()
    if sec["connections"]:
        series = {}
        for r in sec["connections"]:
            for name in [k for k in r if isinstance(r[k], dict) and "requests_per_s" in r[k]]:
                series.setdefault((name, r["target"]), []).append((r["connections"], r[name]["requests_per_s"]))
        for (name, target), points in series.items():
            color = "tab:blue" if name == "zarrd" else "tab:orange"
            right.plot([c for c, _ in points], [s["median"] for _, s in points], marker="o", color=color,
                       linestyle="-" if target == "range_64k" else "--", label=LABELS[name, target])
            right.fill_between([c for c, _ in points], [s["min"] for _, s in points], [s["max"] for _, s in points],
                               color=color, alpha=0.2)
        right.set(xscale="log", yscale="log")
        right.set_xticks(CONNECTIONS, [str(c) for c in CONNECTIONS])
        right.minorticks_off()
        right.legend()
    else:
        right.text(0.5, 0.5, sec.get("connections_skipped", "not measured"), ha="center", va="center",
                   transform=right.transAxes)
    right.set(xlabel="connections (wrk)", ylabel="requests/s", title="Requests/s against connections")
    right.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def section(ctx):
    sec = {"layout": LAYOUT, "offset": OFFSET, "connections": []}
    with ctx.zarrd() as warm, Zarrd(ctx.root, "--cache-size", "0") as cold, ctx.nginx() as ng:
        sec["selections"] = selection_times(ctx, warm, cold, ng)
        if shutil.which("wrk"):
            sec["connections"] = connection_rates(ctx, warm, ng)
        else:
            sec["connections_skipped"] = "wrk is not installed"
        sec["peak_rss"] = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
    sec["plot"] = PLOT
    plot(sec, os.path.join(ctx.args.results, PLOT))
    return sec
