"""Section scaleout: 1, 2 and 3 zarrd replicas (--replicas) on one
directory behind HAProxy, routed two ways: round robin, and consistent
hashing by array path with the lines the Helm chart ships
(helm/zarrd/files/route-by-array.cfg, placed inside the backend section).
Both balancers run at once in front of the same replicas, so the two modes
alternate (A B A B) like every other contender.

The directory holds the corpus's four arrays three times each under
different names (hard links to the same files): a store of a dozen arrays,
as a deployment would have, so that hashing by array can spread them (four
keys on three servers land too unevenly to say anything). The working set
is one view (as the viewport section's) of each array; each replica's cache
holds half of it (decoded bytes, from the chunk shapes), so one replica
cannot hold it but three together can. zarrd keeps no cache entry larger
than an eighth of its cache, so the cache is at least nine times the
largest decoded chunk (else 1024 x 1024 float32 chunks would never be kept).
Workloads, each for --seconds after one untimed pass over its set:

- viewport, REST slices: those views in rotation, 64 tile slices per view,
  16 in flight (views/s);
- viewport, raw: the views of the sharded arrays in rotation, shard index
  and inner chunks by Range, decoded in the client (views/s);
- slices: 16 clients asking 512 x 512 slices (.npy) drawn from a fixed set
  of positions inside the same views (requests/s).

Every answer is checked. The cache hit rate is the change of each
replica's zarrd_cache_hits_total and zarrd_cache_misses_total over the timed
run, summed across replicas. All replicas, HAProxy and the clients share
the machine's cores."""

import os
import random
import time

import corpus
import measure
import report
import viewport
from common import Pool, metrics, npy_values, zarrd_slice_url
from procs import OUT, REPO, HAProxy, Zarrd, available

# The consistent-hashing lines of the Helm chart, read as they are shipped.
ROUTE_BY_ARRAY = os.path.join(REPO, "helm", "zarrd", "files", "route-by-array.cfg")
CLIENTS = 16
SLICE = 512
SLICES_PER_VIEW = 8
COPIES = 3


def chunk_shape(root, layout):
    """The shape of what zarrd caches per chunk: the chunk, or the inner chunk of a shard."""
    import json
    path = os.path.join(root, f"{layout}.zarr")
    if corpus.ZARR_FORMAT[layout] == 2:
        with open(os.path.join(path, ".zarray")) as f:
            return json.load(f)["chunks"]
    with open(os.path.join(path, "zarr.json")) as f:
        meta = json.load(f)
    for codec in meta["codecs"]:
        if codec["name"] == "sharding_indexed":
            return codec["configuration"]["chunk_shape"]
    return meta["chunk_grid"]["configuration"]["chunk_shape"]


def chunk_bytes(ctx, layout):
    """Decoded float32 bytes of one chunk (what one cache entry weighs, roughly)."""
    total = 4
    for c in chunk_shape(ctx.root, layout):
        total *= c
    return total


def make_root(ctx):
    """OUT/scaleout-N: every corpus array COPIES times as LAYOUT_K.zarr, hard
    links to the corpus's files (copies where links are refused), made once."""
    import shutil
    root = os.path.join(OUT, f"scaleout-{ctx.n}")
    marker = root + ".done"
    if os.path.exists(marker):
        return root
    for layout in corpus.LAYOUTS:
        source = os.path.join(ctx.root, f"{layout}.zarr")
        for k in range(COPIES):
            target = os.path.join(root, f"{layout}_{k}.zarr")
            shutil.rmtree(target, ignore_errors=True)
            for dirpath, _, files in os.walk(source):
                into = os.path.join(target, os.path.relpath(dirpath, source))
                os.makedirs(into, exist_ok=True)
                for name in files:
                    try:
                        os.link(os.path.join(dirpath, name), os.path.join(into, name))
                    except OSError:
                        shutil.copy2(os.path.join(dirpath, name), os.path.join(into, name))
    open(marker, "w").close()
    return root


def views(ctx):
    """The working set: (array, its layout, view origin), one view of each array."""
    origin = viewport.main_view(ctx.n)
    return [(f"{layout}_{k}", layout, origin) for layout in corpus.LAYOUTS for k in range(COPIES)]


def decoded_bytes(ctx, layout, origin):
    """Decoded float32 bytes of the chunks under one view."""
    view, _ = viewport.geometry(ctx.n)
    total = 4
    for lo, chunk in zip(origin, chunk_shape(ctx.root, layout)):
        hi = min(lo + view, ctx.n)
        total *= ((hi - 1) // chunk - lo // chunk + 1) * chunk
    return total


def haproxy_config(replicas, balance):
    servers = "\n".join(f"    server r{i} {r.url.removeprefix('http://')}" for i, r in enumerate(replicas))
    return lambda port: f"""
global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s

frontend balancer
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
{balance}
{servers}
"""


def route_by_array():
    """The chart's lines, indented into the backend section; None if the chart has no such file."""
    if not os.path.exists(ROUTE_BY_ARRAY):
        return None
    with open(ROUTE_BY_ARRAY) as f:
        return "\n".join(f"    {line.strip()}" for line in f if line.strip())


def counters(replicas):
    """Cache hits, misses and requests answered (all routes), per replica, from /metrics."""
    out = []
    for r in replicas:
        values = metrics(r.url)
        requests = sum(v for name, v in values.items() if name.startswith("zarrd_http_requests_total"))
        out.append((values.get("zarrd_cache_hits_total", 0), values.get("zarrd_cache_misses_total", 0), requests))
    return out


class Workloads:
    def __init__(self, ctx, pool, root):
        self.ctx, self.pool = ctx, pool
        self.views = [(array, origin) for array, _, origin in views(ctx)]
        self.raw_views = [(viewport.ShardedLayout(root, array), origin) for array, layout, origin in views(ctx)
                          if layout == viewport.LAYOUT]
        view, _ = viewport.geometry(ctx.n)
        side = min(SLICE, view // 2)
        rng = random.Random(5)
        self.slices = []
        for array, (r0, c0) in self.views:
            for _ in range(SLICES_PER_VIEW):
                r, c = r0 + rng.randrange(view - side + 1), c0 + rng.randrange(view - side + 1)
                self.slices.append((array, (slice(r, r + side), slice(c, c + side))))
        self.slice_side = side

    def rest_view(self, base, item):
        array, origin = item
        viewport.rest_view(self.ctx, self.pool, base, origin, array=f"{array}.zarr")

    def raw_view(self, base, item):
        layout, origin = item
        viewport.raw_view(self.ctx, self.pool, base, layout, origin)

    def one_slice(self, base, item):
        array, sel = item
        self.ctx.check(npy_values(self.pool.get(zarrd_slice_url(base, array, sel))), sel, "slice through HAProxy")

    def table(self):
        """name: (unit, items, one(base, item), concurrent clients or None for one viewer)."""
        return {
            "viewport, REST slices": ("views", self.views, self.rest_view, None),
            "viewport, raw": ("views", self.raw_views, self.raw_view, None),
            f"slices {self.slice_side} x {self.slice_side}": ("requests", self.slices, self.one_slice, CLIENTS),
        }


def timed_run(ctx, pool, replicas, base, items, one, clients):
    """One untimed pass over `items`, then --seconds of load: units per second,
    the cache hit rate over the timed part, and the busiest replica's share."""
    for item in items:
        one(base, item)
    before = counters(replicas)
    seconds = ctx.args.seconds
    if clients is None:
        # One viewer: views in rotation, each with its tiles 16 in flight.
        start, units = time.perf_counter(), 0
        while units == 0 or time.perf_counter() - start < seconds:
            one(base, items[units % len(items)])
            units += 1
        elapsed = time.perf_counter() - start
    else:
        start = time.perf_counter()

        def client(k):
            rng, done, last = random.Random(k), 0, start
            while done == 0 or time.perf_counter() - start < seconds:
                one(base, rng.choice(items))
                done += 1
                last = time.perf_counter()
            return done, last

        results = pool.map(client, range(clients))
        units = sum(d for d, _ in results)
        elapsed = max(t for _, t in results) - start
    after = counters(replicas)
    hits = sum(a[0] - b[0] for a, b in zip(after, before))
    misses = sum(a[1] - b[1] for a, b in zip(after, before))
    served = [a[2] - b[2] for a, b in zip(after, before)]
    return {"per_s": units / elapsed, "cache_lookups": hits + misses,
            "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
            "busiest_share": max(served) / sum(served) if sum(served) else 0.0}


def working_set(ctx):
    return sum(decoded_bytes(ctx, layout, origin) for _, layout, origin in views(ctx))


def section(ctx):
    if not available("haproxy"):
        return {"skipped": "HAProxy is not installed (haproxy on PATH or $ZARRD_HAPROXY)", "rows": []}
    counts = [int(k) for k in ctx.args.replicas.split(",")]
    root = make_root(ctx)
    ws = working_set(ctx)
    cache = max(ws // 2, 9 * max(chunk_bytes(ctx, layout) for layout in corpus.LAYOUTS))
    hashing = route_by_array()
    errors, rows, peaks = {}, [], {}
    if hashing is None:
        errors["hash by array"] = f"{os.path.relpath(ROUTE_BY_ARRAY, REPO)} does not exist: round robin only"
    for k in counts:
        servers = []
        try:
            replicas = []
            for _ in range(k):
                servers.append(Zarrd(root, "--cache-size", str(cache), "--recheck-cached", "60").start())
                replicas.append(servers[-1])
            balancers = {"roundrobin": HAProxy(haproxy_config(replicas, "    balance roundrobin"), "haproxy-rr").start()}
            servers.append(balancers["roundrobin"])
            if hashing:
                try:
                    balancers["hash by array"] = HAProxy(haproxy_config(replicas, hashing), "haproxy-hash").start()
                    servers.append(balancers["hash by array"])
                except RuntimeError as e:
                    errors["hash by array"] = str(e)[:1500]
                    hashing = None
            with Pool(CLIENTS) as pool:
                for name, (unit, items, one, clients) in Workloads(ctx, pool, root).table().items():
                    contenders = {mode: (lambda b=b: timed_run(ctx, pool, replicas, b.url, items, one, clients))
                                  for mode, b in balancers.items()}
                    res = measure.alternate(contenders, ctx.args.reps)
                    rows.append({"workload": name, "unit": unit, "replicas": k, **res})
                    print("scaleout", name, k, report.brief(res, "per_s"), report.brief(res, "hit_rate"))
            peaks[f"{k} replicas"] = max(r.peak_rss() for r in replicas)
        finally:
            for s in reversed(servers):
                s.stop()
    return {"rows": rows, "errors": errors, "working_set_bytes": ws, "cache_per_replica": cache,
            "views": [[array, list(origin)] for array, _, origin in views(ctx)],
            "clients": CLIENTS, "route_file": os.path.relpath(ROUTE_BY_ARRAY, REPO),
            "cpus": os.cpu_count(), "zarrd_peak_rss": max(peaks.values()) if peaks else 0}
