"""Section viewport: a browser-style viewer showing one view of the array
as 8 x 8 tiles (2048 x 2048 in 256 x 256 tiles; min(2048, N) in tiles of an
eighth of it on a smaller corpus), 16 requests in flight, each worker with
its own keep-alive connection. The figure is the time to the full view.

Two ways to get the tiles of the sharded layout (v3_sharded: 2048 x 2048
shards of 256 x 256 inner chunks, bytes + zstd, index at the end as bytes +
crc32c):

- raw: per shard under the view, one suffix Range request for its index
  (16 bytes per inner chunk + 4 bytes of crc32c), then one Range request per
  inner chunk, decoded in the client with numcodecs' Zstd; zarrd's /zarr/
  against nginx serving the same files;
- REST slices: one GET /api/v1/data/v3_sharded.zarr?select=...&format=npy
  per tile, against Tiled's /api/v1/array/full (raw bytes) when Tiled is
  installed.

zarrd cold runs with --cache-size 0; zarrd warm has shown the view once.
The OS page cache is warm for every contender; each contender shows the
view once before it is timed."""

import json
import math
import os
import time

import numpy as np

import measure
import report
from common import Pool, npy_values
from procs import Tiled, Zarrd, available

LAYOUT = "v3_sharded"
TILES = 8          # tiles per side of a view
IN_FLIGHT = 16     # a browser's connections per host, roughly
EMPTY = 2**64 - 1  # offset and length of an inner chunk that was never written


def geometry(n):
    """(view side, tile side) for an N x N array."""
    view = min(2048, n)
    return view, view // TILES


def view_origins(n):
    """Every view on the grid of views, row by row."""
    view, _ = geometry(n)
    return [(r, c) for r in range(0, n - view + 1, view) for c in range(0, n - view + 1, view)]


def main_view(n):
    """The view this section times: the one nearest the middle of the array."""
    view, _ = geometry(n)
    k = (n // view) // 2
    return k * view, k * view


class ShardedLayout:
    """What a client needs to read a sharded array's inner chunks itself, from
    its zarr.json (read once, as a viewer would when it opens the array)."""

    def __init__(self, root, layout=LAYOUT):
        import numcodecs
        with open(os.path.join(root, f"{layout}.zarr", "zarr.json")) as f:
            meta = json.load(f)
        (codec,) = meta["codecs"]
        cfg = codec["configuration"]
        names = [c["name"] for c in cfg["codecs"]]
        index_names = [c["name"] for c in cfg["index_codecs"]]
        if codec["name"] != "sharding_indexed" or names != ["bytes", "zstd"] or index_names != ["bytes", "crc32c"] \
                or cfg.get("index_location", "end") != "end" or meta["data_type"] != "float32":
            raise ValueError(f"{layout} is not float32 sharded bytes + zstd with a crc32c index at the end: {codec}")
        sep = meta["chunk_key_encoding"]["configuration"].get("separator", "/")
        self.layout, self.sep = layout, sep
        self.shape = meta["shape"]
        self.shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
        self.inner = cfg["chunk_shape"]
        self.per_shard = [s // i for s, i in zip(self.shard, self.inner)]
        self.index_bytes = math.prod(self.per_shard) * 16 + 4
        self.fill = np.float32(meta.get("fill_value") or 0)
        self.zstd = numcodecs.Zstd()

    def shard_key(self, si, sj):
        return f"c{self.sep}{si}{self.sep}{sj}"

    def shards_under(self, r0, r1, c0, c1):
        s0, s1 = self.shard
        return [(si, sj) for si in range(r0 // s0, (r1 - 1) // s0 + 1) for sj in range(c0 // s1, (c1 - 1) // s1 + 1)]

    def parse_index(self, body):
        import google_crc32c
        body = bytes(body)
        if len(body) != self.index_bytes:
            raise AssertionError(f"shard index of {len(body)} bytes, expected {self.index_bytes}")
        entries, crc = body[:-4], int.from_bytes(body[-4:], "little")
        if google_crc32c.value(entries) != crc:
            raise AssertionError("shard index fails its crc32c")
        return np.frombuffer(entries, dtype="<u8").reshape(*self.per_shard, 2)

    def decode(self, body):
        return np.frombuffer(self.zstd.decode(bytes(body)), dtype="<f4").reshape(self.inner)


def raw_view(ctx, pool, base, layout, origin):
    """The view from the raw shards: the index of each shard under it (suffix
    Range), then one Range request per inner chunk, decoded in the pool's
    threads; checked whole. Returns seconds and the requests it took."""
    view, _ = geometry(ctx.n)
    r0, c0 = origin
    r1, c1 = min(r0 + view, ctx.n), min(c0 + view, ctx.n)
    out = np.empty((r1 - r0, c1 - c0), dtype="<f4")
    url = f"{base}/zarr/{layout.layout}.zarr/"
    start = time.perf_counter()
    shards = layout.shards_under(r0, r1, c0, c1)
    indexes = pool.map(lambda s: layout.parse_index(
        pool.get(url + layout.shard_key(*s), {"Range": f"bytes=-{layout.index_bytes}"})), shards)
    jobs = []
    (s0, s1), (i0, i1) = layout.shard, layout.inner
    for (si, sj), index in zip(shards, indexes):
        for a in range(layout.per_shard[0]):
            for b in range(layout.per_shard[1]):
                g0, g1 = si * s0 + a * i0, sj * s1 + b * i1     # the inner chunk's origin in the array
                lo0, hi0, lo1, hi1 = max(g0, r0), min(g0 + i0, r1), max(g1, c0), min(g1 + i1, c1)
                if lo0 < hi0 and lo1 < hi1:
                    jobs.append(((si, sj), index[a, b], (g0, g1), (lo0, hi0, lo1, hi1)))

    def fetch_chunk(job):
        shard, entry, (g0, g1), (lo0, hi0, lo1, hi1) = job
        offset, nbytes = int(entry[0]), int(entry[1])
        if offset == EMPTY and nbytes == EMPTY:
            block = np.full(layout.inner, layout.fill, dtype="<f4")
        else:
            block = layout.decode(pool.get(url + layout.shard_key(*shard),
                                           {"Range": f"bytes={offset}-{offset + nbytes - 1}"}))
        out[lo0 - r0:hi0 - r0, lo1 - c0:hi1 - c0] = block[lo0 - g0:hi0 - g0, lo1 - g1:hi1 - g1]

    pool.map(fetch_chunk, jobs)
    seconds = time.perf_counter() - start
    ctx.check(out, (slice(r0, r1), slice(c0, c1)), f"raw view from {base}")
    return {"seconds": seconds, "requests": len(shards) + sum(1 for j in jobs if int(j[1][0]) != EMPTY)}


def tile_selections(ctx, origin):
    view, tile = geometry(ctx.n)
    r0, c0 = origin
    return [(slice(r, min(r + tile, ctx.n)), slice(c, min(c + tile, ctx.n)))
            for r in range(r0, r0 + view, tile) for c in range(c0, c0 + view, tile)]


def zarrd_tile_url(base, array, sel):
    return f"{base}/api/v1/data/{array}?select={sel[0].start}:{sel[0].stop},{sel[1].start}:{sel[1].stop}&format=npy"


def tiled_tile_url(base, array, sel):
    # As the peers section spells Tiled's slices (raw little-endian bytes).
    return f"{base}/api/v1/array/full/{array}?slice={sel[0].start}:{sel[0].stop},{sel[1].start}:{sel[1].stop}"


def rest_view(ctx, pool, base, origin, array=f"{LAYOUT}.zarr", tiled=False):
    """The view as one REST slice per tile, 16 in flight, placed and checked whole."""
    view, _ = geometry(ctx.n)
    r0, c0 = origin
    r1, c1 = min(r0 + view, ctx.n), min(c0 + view, ctx.n)
    out = np.empty((r1 - r0, c1 - c0), dtype="<f4")
    tiles = tile_selections(ctx, origin)

    def fetch_tile(sel):
        shape = (sel[0].stop - sel[0].start, sel[1].stop - sel[1].start)
        if tiled:
            body = pool.get(tiled_tile_url(base, array.removesuffix(".zarr"), sel), {"Accept": "application/octet-stream"})
            values = np.frombuffer(body, dtype="<f4").reshape(shape)
        else:
            values = npy_values(pool.get(zarrd_tile_url(base, array, sel)))
        out[sel[0].start - r0:sel[0].stop - r0, sel[1].start - c0:sel[1].stop - c0] = values

    start = time.perf_counter()
    pool.map(fetch_tile, tiles)
    seconds = time.perf_counter() - start
    ctx.check(out, (slice(r0, r1), slice(c0, c1)), f"REST view from {base}")
    return {"seconds": seconds, "requests": len(tiles)}


def start_tiled(ctx, errors):
    if not available("tiled"):
        return None
    tiled = Tiled(ctx.root)
    try:
        tiled.start()
        # Tiled indexes the directory in the background after it answers (404 until then):
        # wait for the array, and so for the indexing, so that it does not run while others are timed.
        deadline = time.monotonic() + 300
        while True:
            try:
                measure.fetch(f"{tiled.url}/api/v1/metadata/{LAYOUT}")
                return tiled
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    except Exception as e:  # a peer that fails to start is reported, not fatal
        errors["tiled"] = f"did not start: {e}"
        tiled.stop()
        return None


def section(ctx):
    view, tile = geometry(ctx.n)
    origin = main_view(ctx.n)
    layout = ShardedLayout(ctx.root)
    errors, rows = {}, []
    tiled = None
    with ctx.zarrd() as warm, Zarrd(ctx.root, "--cache-size", "0") as cold, ctx.nginx() as ng, \
            Pool(IN_FLIGHT) as pool:
        try:
            tiled = start_tiled(ctx, errors)
            forms = {
                "raw": {"zarrd cold": lambda: raw_view(ctx, pool, cold.url, layout, origin),
                        "zarrd warm": lambda: raw_view(ctx, pool, warm.url, layout, origin)},
                "REST slices": {"zarrd cold": lambda: rest_view(ctx, pool, cold.url, origin),
                                "zarrd warm": lambda: rest_view(ctx, pool, warm.url, origin)},
            }
            if ng:
                forms["raw"]["nginx"] = lambda: raw_view(ctx, pool, ng.url, layout, origin)
            if tiled:
                forms["REST slices"]["tiled"] = lambda: rest_view(ctx, pool, tiled.url, origin, tiled=True)
            for form, contenders in forms.items():
                # One untimed view each: zarrd warm's cache holds the view, nginx has its files open.
                contenders = measure.working(contenders, errors, f"viewport {form}")
                res = measure.alternate(contenders, ctx.args.reps)
                rows.append({"form": form, "layout": LAYOUT, "origin": list(origin), "view": view, "tile": tile,
                             "tiles": TILES * TILES, **res})
                print("viewport", form, report.brief(res, "seconds"))
            rss = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
            if tiled:
                rss["tiled"] = tiled.peak_rss()
        finally:
            if tiled:
                tiled.stop()
    return {"rows": rows, "errors": errors, "in_flight": IN_FLIGHT, "peak_rss": rss}
