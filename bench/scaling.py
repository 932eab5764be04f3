"""Section scaling: how speed grows with the cores a server is given.

For each core count N of 1, 2, 4, 8 and 16 that the machine has, zarrd and
nginx (N workers) run pinned to the first N cores (taskset) and the load
generator on the others; where there are no others (N = all cores) it shares
them, for both servers alike. TensorStore reads in-process from a child
process pinned the same way, its thread pools limited to N.

Measures at each N:
- requests/s (wrk, 64 and 256 connections): a metadata document (~317 B), a
  64 KiB range of a chunk and a whole ~3 MB chunk from `/zarr/` against
  nginx on the same files; a warm 256 x 256 slice (`.npy`) against nginx
  serving the same bytes as a static file; zarrd with its default logging
  (the access log, written to a file as a container's would be) and with
  it off (`ZARRD_LOG=warn`);
- seconds: one cold 1000 x 1000 window (`--cache-size 0`) of `v2_blosc`,
  `v3_zstd` and `v3_sharded`, and the whole `v3_zstd` array streamed as
  `.npy` into the client's memory, against TensorStore reading the same
  from the files (chunk cache off);
- windows/s: cold random 512 x 512 windows at 32 connections (wrk with a
  Lua script) against TensorStore in-process reading random windows from
  32 threads.

The speed-up from 1 core to the most measured is the figure to compare
between zarrd and nginx: contention on shared state shows as a smaller one.
Plotted into scaling.png beside results.md."""

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import time

import corpus
import measure
import report
from common import mb, npy_values, zarrd_slice_url
from procs import OUT, Nginx, Zarrd, available

CORE_COUNTS = (1, 2, 4, 8, 16)
CONNECTIONS = (64, 256)
WINDOW_LAYOUTS = ("v2_blosc", "v3_zstd", "v3_sharded")
WHOLE_LAYOUT = "v3_zstd"
WINDOW = 1000
RANDOM_SIDE = 512
RANDOM_CONNECTIONS = 32
SLICE = 256
PLOT = "scaling.png"

# wrk picks a random window for each request; the same windows for every
# contender (the seed), all within the array.
RANDOM_LUA = """
math.randomseed(20261128)
local n, side, layout = {n}, {side}, "{layout}"
request = function()
  local r = math.random(0, n - side)
  local c = math.random(0, n - side)
  local path = string.format("/api/v1/data/%s.zarr?select=%d:%d,%d:%d&format=npy", layout, r, r + side, c, c + side)
  return wrk.format("GET", path)
end
"""


def core_counts():
    cores = sorted(os.sched_getaffinity(0))
    return cores, [n for n in CORE_COUNTS if n <= len(cores)]


def split(cores, n):
    """The server's cores and the load generator's."""
    return cores[:n], (cores[n:] or cores)


# --- TensorStore in a pinned child process -------------------------------

def tensorstore_child(request):
    """Run in the child: time what `request` asks, check every answer."""
    import numpy as np
    import tensorstore as ts

    expected = np.load(request["expected"], mmap_mode="r")
    threads = request["threads"]
    spec = {"driver": "zarr3" if request["zarr_format"] == 3 else "zarr",
            "kvstore": {"driver": "file", "path": request["path"]},
            "context": {"cache_pool": {"total_bytes_limit": 0},
                        "data_copy_concurrency": {"limit": threads},
                        "file_io_concurrency": {"limit": max(threads, 4)}}}
    if request["kind"] == "select":
        sel = tuple(slice(a, b) for a, b in request["selection"])
        seconds = []
        for _ in range(request["reps"] + 1):
            start = time.perf_counter()
            got = ts.open(spec, read=True).result()[sel].read().result()
            seconds.append(time.perf_counter() - start)
            if not np.array_equal(got, expected[sel]):
                raise AssertionError("TensorStore returned wrong values")
        # The first read pays the module's and the process's warm-up.
        return {"seconds": seconds[1:]}
    # Random windows from `clients` threads for `duration` seconds.
    from concurrent.futures import ThreadPoolExecutor
    arr = ts.open(spec, read=True).result()
    n, side = arr.shape[0], request["side"]
    deadline = time.perf_counter() + request["duration"]

    def client(seed):
        rng, done = random.Random(seed), 0
        while time.perf_counter() < deadline:
            r, c = rng.randint(0, n - side), rng.randint(0, n - side)
            got = arr[r:r + side, c:c + side].read().result()
            if done == 0 and not np.array_equal(got, expected[r:r + side, c:c + side]):
                raise AssertionError("TensorStore returned wrong values")
            done += 1
        return done

    start = time.perf_counter()
    with ThreadPoolExecutor(request["clients"]) as pool:
        done = sum(pool.map(client, range(request["clients"])))
    return {"windows_per_s": [done / (time.perf_counter() - start)]}


def tensorstore(cpus, request):
    """`request` done by TensorStore in a child process pinned to `cpus`."""
    argv = ["taskset", "-c", ",".join(map(str, cpus)), sys.executable, os.path.abspath(__file__), "--child"]
    out = subprocess.run(argv, input=json.dumps(request), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"TensorStore child failed: {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the measures ----------------------------------------------------------

def targets(ctx, z, ng):
    """(name, zarrd URL, nginx URL, headers, bytes) of the wrk targets."""
    layout = "v2_blosc"
    base = os.path.join(ctx.root, f"{layout}.zarr")
    meta = f"/zarr/{layout}.zarr/{corpus.METADATA_KEYS[layout]}"
    chunk = f"/zarr/{layout}.zarr/{corpus.CHUNK_KEYS[layout]}"
    size = os.path.getsize(os.path.join(base, *corpus.CHUNK_KEYS[layout].split("/")))
    first = min(1 << 20, (size // 2) // 65536 * 65536)
    last = min(first + 65536, size) - 1
    side = min(SLICE, ctx.n)
    sel = (slice(37, 37 + side) if ctx.n >= 37 + side else slice(0, side),) * 2
    slice_url = zarrd_slice_url("", "v3_zstd", sel)
    out = [("metadata", meta, meta, {}, os.path.getsize(os.path.join(base, corpus.METADATA_KEYS[layout]))),
           ("range_64k", chunk, chunk, {"Range": f"bytes={first}-{last}"}, last - first + 1),
           ("chunk", chunk, chunk, {}, size),
           ("slice_256", slice_url, ctx.static_npy(sel) if ng else None, {}, None)]
    # Every answer checked once before it is measured.
    for name, zpath, npath, headers, n in out:
        _, body = measure.fetch(z.url + zpath, headers)
        if name == "slice_256":
            ctx.check(npy_values(body), sel, "zarrd")
        elif n != len(body):
            raise AssertionError(f"zarrd: {len(body)} bytes for {name}")
        if ng and npath:
            _, theirs = measure.fetch(ng.url + npath, headers)
            if name == "slice_256":
                ctx.check(npy_values(theirs), sel, "nginx")
            elif bytes(theirs) != bytes(body):
                raise AssertionError(f"zarrd and nginx disagree on {name}")
    return out


def request_rates(ctx, server_cpus, load_cpus):
    """wrk on each target: zarrd logging, zarrd not logging, nginx."""
    log = os.path.join(OUT, "scaling-access.log")
    threads = max(2, min(8, len(load_cpus)))
    rows = []
    with Zarrd(ctx.root, "--cache-size", ctx.args.cache_size, "--recheck-cached", "60", cpus=server_cpus,
               log=log) as logged, \
            Zarrd(ctx.root, "--cache-size", ctx.args.cache_size, "--recheck-cached", "60",
                  cpus=server_cpus) as quiet, \
            (Nginx(ctx.root, static=ctx.static_dir, cpus=server_cpus) if available("nginx")
             else contextlib.nullcontext()) as ng:
        servers = {"zarrd": quiet, "zarrd, access log": logged}
        if ng:
            servers["nginx"] = ng
        for name, zpath, npath, headers, _ in targets(ctx, quiet, ng):
            for conns in CONNECTIONS:
                urls = {who: s.url + (npath if who == "nginx" else zpath) for who, s in servers.items()}
                if npath is None:
                    urls.pop("nginx", None)
                res = measure.alternate({who: (lambda u=u: measure.wrk(u, conns, ctx.args.seconds, headers,
                                                                      cpus=load_cpus, threads=threads))
                                         for who, u in urls.items()}, ctx.args.reps)
                rows.append({"target": name, "connections": conns, **res})
                print("scaling", len(server_cpus), name, conns, report.brief(res, "requests_per_s"))
        if os.path.getsize(log) == 0:
            raise AssertionError("zarrd's default logging wrote no access log")
    os.remove(log)
    return rows


def fetch_checked(ctx, url, sel):
    seconds, body = measure.fetch(url)
    ctx.check(npy_values(body), sel, "zarrd")
    return {"seconds": seconds}


def cold_reads(ctx, server_cpus, client_cpus):
    """One cold window per layout and the whole array, zarrd vs TensorStore."""
    lo = (ctx.n - min(WINDOW, ctx.n)) // 2
    window = (slice(lo, lo + min(WINDOW, ctx.n)),) * 2
    whole = (slice(0, ctx.n),) * 2
    cases = [(layout, "window", window) for layout in WINDOW_LAYOUTS] + [(WHOLE_LAYOUT, "whole", whole)]
    rows = []
    # The client (this process) on the load generator's cores.
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, client_cpus)
    try:
        with Zarrd(ctx.root, "--cache-size", "0", cpus=server_cpus) as cold:
            for layout, what, sel in cases:
                url = zarrd_slice_url(cold.url, layout, sel)
                fetch_checked(ctx, url, sel)
                reps = ctx.args.reps * (3 if what == "window" else 1)
                zarrd = [fetch_checked(ctx, url, sel)["seconds"] for _ in range(reps)]
                ts = tensorstore(server_cpus, {"kind": "select", "path": os.path.join(ctx.root, f"{layout}.zarr"),
                                               "zarr_format": corpus.ZARR_FORMAT[layout], "expected": ctx.npy,
                                               "threads": len(server_cpus), "reps": reps,
                                               "selection": [(s.start, s.stop) for s in sel]})["seconds"]
                rows.append({"layout": layout, "selection": what, "mb": mb(sel),
                             "zarrd cold": {"seconds": measure.summary(zarrd)},
                             "tensorstore": {"seconds": measure.summary(ts)}})
                print("scaling", len(server_cpus), layout, what, {who: round(rows[-1][who]["seconds"]["median"], 4)
                                                                  for who in ("zarrd cold", "tensorstore")})
    finally:
        os.sched_setaffinity(0, before)
    return rows


def random_windows(ctx, server_cpus, load_cpus):
    """Cold random windows at 32 connections, per layout."""
    side = min(RANDOM_SIDE, ctx.n)
    rows = []
    with Zarrd(ctx.root, "--cache-size", "0", cpus=server_cpus) as cold:
        for layout in WINDOW_LAYOUTS:
            script = os.path.join(OUT, f"random-{layout}.lua")
            with open(script, "w") as f:
                f.write(RANDOM_LUA.format(n=ctx.n, side=side, layout=layout))
            zarrd = []
            for _ in range(ctx.args.reps):
                zarrd.append(measure.wrk(cold.url + "/", RANDOM_CONNECTIONS, ctx.args.seconds, script=script,
                                         cpus=load_cpus, threads=max(2, min(8, len(load_cpus))))["requests_per_s"])
            ts = tensorstore(server_cpus, {"kind": "random", "path": os.path.join(ctx.root, f"{layout}.zarr"),
                                           "zarr_format": corpus.ZARR_FORMAT[layout], "expected": ctx.npy,
                                           "threads": len(server_cpus), "side": side,
                                           "clients": RANDOM_CONNECTIONS, "duration": ctx.args.seconds})
            rows.append({"layout": layout, "side": side,
                         "zarrd cold": {"windows_per_s": measure.summary(zarrd)},
                         "tensorstore": {"windows_per_s": measure.summary(ts["windows_per_s"])}})
            print("scaling", len(server_cpus), "random", layout, {who: round(rows[-1][who]["windows_per_s"]["median"])
                                                                   for who in ("zarrd cold", "tensorstore")})
    return rows


def axes(ax, counts, xlabel, ylabel, title):
    """Log-log, ticked at the core counts measured."""
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.minorticks_off()
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def plot(sec, path):
    """Requests/s against cores (zarrd, zarrd with its access log, nginx)
    per target at 256 connections; cold window seconds against cores."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    counts = [r["cores"] for r in sec["runs"]]
    styles = {"zarrd": "-", "zarrd, access log": ":", "nginx": "--"}
    for target, color in (("metadata", "tab:blue"), ("range_64k", "tab:green"), ("slice_256", "tab:red")):
        for who, style in styles.items():
            ys = [next((row[who]["requests_per_s"]["median"] for row in r["requests"]
                        if row["target"] == target and row["connections"] == CONNECTIONS[-1] and who in row), None)
                  for r in sec["runs"]]
            if all(y is not None for y in ys):
                left.plot(counts, ys, marker="o", linestyle=style, color=color, label=f"{who}, {target}")
    axes(left, counts, "server cores", "requests/s", f"Requests/s at {CONNECTIONS[-1]} connections")
    for layout, color in zip(WINDOW_LAYOUTS, ("tab:blue", "tab:green", "tab:red")):
        for who, style in (("zarrd cold", "-"), ("tensorstore", "--")):
            ys = [next(row[who]["seconds"]["median"] for row in r["cold"]
                       if row["layout"] == layout and row["selection"] == "window") for r in sec["runs"]]
            right.plot(counts, ys, marker="o", linestyle=style, color=color, label=f"{who}, {layout}")
    axes(right, counts, "cores", "seconds", f"One cold {WINDOW} x {WINDOW} window")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def section(ctx):
    if not shutil.which("taskset"):
        raise RuntimeError("taskset (util-linux) is not installed")
    cores, counts = core_counts()
    runs = []
    for n in counts:
        server_cpus, load_cpus = split(cores, n)
        run = {"cores": n, "server_cpus": server_cpus, "load_cpus": load_cpus, "requests": [], "random": []}
        if shutil.which("wrk"):
            run["requests"] = request_rates(ctx, server_cpus, load_cpus)
            run["random"] = random_windows(ctx, server_cpus, load_cpus)
        run["cold"] = cold_reads(ctx, server_cpus, load_cpus)
        runs.append(run)
    sec = {"machine_cores": len(cores), "runs": runs, "plot": PLOT}
    if not shutil.which("wrk"):
        sec["requests_skipped"] = "wrk is not installed"
    plot(sec, os.path.join(ctx.args.results, PLOT))
    return sec


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    print(json.dumps(tensorstore_child(json.loads(sys.stdin.read()))))
