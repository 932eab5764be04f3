"""zarrd against the tools users would pick instead, in one run.

Run through bench/run (which installs the peers). Each section starts the
servers it needs on loopback, alternates the contenders (A B A B, --reps
times), checks every answer against the array itself, stops what it
started, and adds its figures to bench/results.json; bench/results.md is
rendered from that file at the end.

Sections: raw (zarrd vs nginx under wrk), clients (zarr-python and
TensorStore through zarrd vs nginx), slicing (server-side slices vs
in-process reads and vs the same selection as a static .npy file from
nginx), peers (Tiled, xpublish, HSDS), memory (peak RSS against
--cache-size; whole-array streams of two array sizes), writes (region
writes vs zarr-python on local files), viewport (a browser viewer's 64
tiles, raw from shards vs nginx and as REST slices vs Tiled), growth (time
against selection size, requests/s against connections, plotted), scaleout
(1-3 replicas behind HAProxy, round robin vs hashing by array), virtual
(a NetCDF file's kerchunk and VirtualiZarr references and Icechunk
repositories vs the same array as plain Zarr, and vs xarray in-process),
protocols (HTTP/2 vs HTTP/1.1 over TLS), reductions (server-side means vs
xarray), scaling (speed against the cores the servers are pinned to), maps
(tiles vs xpublish-tiles, warm and cold), standards (OPeNDAP and EDR point
series vs xpublish-opendap and xpublish-edr).
"""

import argparse
import contextlib
import json
import os
import platform
import random
import sys
import threading
import time
import traceback

import numpy as np

import corpus
import growth
import maps
import standards
import measure
import report
import scaleout
import protocols
import reductions
import scaling
import viewport
import virtual
from common import (mb, read_tensorstore, read_zarr_python, select_param, static_slice,
                    timed_checked, zarrd_slice)
from procs import OUT, HSDS_USER, Hsds, Nginx, Tiled, Xpublish, Zarrd, available

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOW = 1000


class Context:
    def __init__(self, args):
        self.args = args
        self.n = args.size
        self.root, npy = corpus.make(OUT, self.n)
        self.npy = npy
        self.expected = np.load(npy, mmap_mode="r")
        lo = (self.n - min(WINDOW, self.n)) // 2
        self.window = (slice(lo, lo + min(WINDOW, self.n)),) * 2
        self.whole = (slice(0, self.n),) * 2
        # Ready-made .npy files of selections, served by nginx under /static/.
        self.static_dir = os.path.join(OUT, f"static-{self.n}")

    def selections(self):
        return {"window": self.window, "whole": self.whole}

    def check(self, got, sel, who):
        want = self.expected[sel]
        got = np.asarray(got).reshape(want.shape)
        if not np.array_equal(got, want):
            raise AssertionError(f"{who} returned wrong values")

    def zarrd(self, *extra):
        # Cached values are trusted for 60 s, as nginx's open_file_cache_valid trusts file metadata.
        return Zarrd(self.root, "--cache-size", self.args.cache_size, "--recheck-cached", "60", *extra)

    def static_npy(self, sel):
        """The URL path under which nginx serves `sel` of the array as a .npy
        file, written once (what a site of pre-rendered selections would hold)."""
        name = "_".join(f"{s.start}-{s.stop}" for s in sel) + ".npy"
        path = os.path.join(self.static_dir, name)
        if not os.path.exists(path):
            os.makedirs(self.static_dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                np.save(f, np.ascontiguousarray(self.expected[sel]))
            os.replace(tmp, path)
        return f"/static/{name}"

    def nginx(self):
        """nginx on the corpus (/zarr/) and the static .npy files (/static/);
        a context giving None where nginx is not installed (CI)."""
        if not available("nginx"):
            return contextlib.nullcontext()
        os.makedirs(self.static_dir, exist_ok=True)
        return Nginx(self.root, static=self.static_dir)


# 1. Raw keys --------------------------------------------------------------

def section_raw(ctx):
    """Each key twice: with metadata trusted for 60 s on both sides (zarrd's
    `--recheck-cached 60`, nginx's `open_file_cache_valid 60s`), and with
    both servers' defaults, where every request opens the file (zarrd's
    `--recheck-cached always`, nginx without `open_file_cache`)."""
    chunk = "/zarr/v2_blosc.zarr/0.0"
    targets = {
        "chunk": (chunk, {}),
        "metadata": ("/zarr/v2_blosc.zarr/.zarray", {}),
        "range_64k": (chunk, {"Range": "bytes=1048576-1114111"}),
    }
    configs = {
        "cached 60 s": (lambda: ctx.zarrd(), lambda: Nginx(ctx.root)),
        "defaults": (lambda: Zarrd(ctx.root, "--cache-size", ctx.args.cache_size),
                     lambda: Nginx(ctx.root, open_file_cache=False)),
    }
    rows, rss = [], 0
    for config, (zarrd, nginx) in configs.items():
        with zarrd() as z, nginx() as ng:
            for target, (path, headers) in targets.items():
                _, ours = measure.fetch(z.url + path, headers)
                _, theirs = measure.fetch(ng.url + path, headers)
                if ours != theirs:
                    raise AssertionError(f"zarrd and nginx disagree on {path} {headers}")
                for conns in (1, 16, 64):
                    res = measure.alternate({
                        "zarrd": lambda: measure.wrk(z.url + path, conns, ctx.args.seconds, headers, len(ours)),
                        "nginx": lambda: measure.wrk(ng.url + path, conns, ctx.args.seconds, headers, len(ours)),
                    }, ctx.args.reps)
                    rows.append({"config": config, "target": target, "bytes": len(ours), "connections": conns,
                                 **res})
                    print("raw", config, target, conns, report.brief(res, "requests_per_s"))
            rss = max(rss, z.peak_rss())
    return {"rows": rows, "zarrd_peak_rss": rss}


# 2. Clients through zarrd vs nginx ---------------------------------------

def client_reader(client, layout, sel):
    fmt = corpus.ZARR_FORMAT[layout]
    if client == "zarr-python":
        return lambda base: read_zarr_python(f"{base}/zarr/{layout}.zarr", sel)
    return lambda base: read_tensorstore(f"{base}/zarr/{layout}.zarr", sel, fmt)


def section_clients(ctx):
    rows = []
    with ctx.zarrd() as z, Nginx(ctx.root) as ng:
        for layout in corpus.LAYOUTS:
            for sel_name, sel in ctx.selections().items():
                for client in ("zarr-python", "tensorstore"):
                    read = client_reader(client, layout, sel)
                    res = measure.alternate({
                        "zarrd": lambda: timed_checked(ctx, "zarrd", sel, lambda: read(z.url)),
                        "nginx": lambda: timed_checked(ctx, "nginx", sel, lambda: read(ng.url)),
                    }, ctx.args.reps)
                    rows.append({"layout": layout, "selection": sel_name, "client": client, **res})
                    print("clients", layout, sel_name, client, report.brief(res, "mb_per_s"))
        rss = z.peak_rss()
    return {"rows": rows, "zarrd_peak_rss": rss}


# 3. Server-side slicing vs in-process reads ------------------------------

def section_slicing(ctx):
    """Cold: a long-running server with its cache off, so every request reads
    and decodes (the OS page cache is warm, as for every contender). Warm: a
    server with the cache on, asked the same selection twice. In-process
    readers open the array afresh for each read. The anchor: nginx serving
    the same selection written beforehand as a .npy file, fetched by the
    same client code as zarrd's slice (when nginx is installed)."""
    rows = []
    with ctx.zarrd() as warm, Zarrd(ctx.root, "--cache-size", "0") as cold, ctx.nginx() as ng:
        for layout in corpus.LAYOUTS:
            local = os.path.join(ctx.root, f"{layout}.zarr")
            fmt = corpus.ZARR_FORMAT[layout]
            for sel_name, sel in ctx.selections().items():
                contenders = {
                    "zarrd cold": lambda: zarrd_slice(ctx, cold, layout, sel, "zarrd cold", False),
                    "zarrd warm": lambda: zarrd_slice(ctx, warm, layout, sel, "zarrd warm", True),
                    "tensorstore": lambda: {"seconds": timed_checked(
                        ctx, "tensorstore", sel, lambda: read_tensorstore(local, sel, fmt, kvstore="file"))["seconds"]},
                    "zarr-python": lambda: {"seconds": timed_checked(
                        ctx, "zarr-python", sel, lambda: read_zarr_python(local, sel))["seconds"]},
                }
                if ng:
                    # The same file for every layout: the answer does not depend on how the array is stored.
                    contenders["static .npy"] = lambda: static_slice(ctx, ng, sel)
                # A window costs milliseconds, where one slow sample moves a
                # median of three: windows take three times the repetitions.
                reps = ctx.args.reps * (3 if sel_name == "window" else 1)
                res = measure.alternate(contenders, reps)
                rows.append({"layout": layout, "selection": sel_name, "mb": mb(sel), **res})
                print("slicing", layout, sel_name, report.brief(res, "seconds"))
        rss = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
    return {"rows": rows, "peak_rss": rss}


# 4. Other data servers ---------------------------------------------------

def peer_slice_urls(ctx, z, tiled, hsds, hsds_id, sel):
    """The same selection of the v2_blosc array as each server spells it."""
    urls = {"zarrd": (f"{z.url}/api/v1/data/v2_blosc.zarr?select={select_param(sel)}&format=raw", {})}
    if tiled:
        urls["tiled"] = (f"{tiled.url}/api/v1/array/full/v2_blosc?slice={select_param(sel)}",
                         {"Accept": "application/octet-stream"})
    if hsds:
        hsel = "[" + ",".join(f"{s.start}:{s.stop}" for s in sel) + "]"
        urls["hsds"] = (f"{hsds.url}/datasets/{hsds_id}/value?select={hsel}&domain=/home/bench.h5&bucket=hsdsbench",
                        {"Accept": "application/octet-stream", "Authorization": hsds_auth()})
    return urls


def hsds_auth():
    import base64
    return "Basic " + base64.b64encode(":".join(HSDS_USER).encode()).decode()


def raw_fetch_checked(ctx, who, url, headers, sel):
    seconds, body = measure.fetch(url, headers)
    ctx.check(np.frombuffer(body, dtype="<f4"), sel, who)
    return {"seconds": seconds, "mb_per_s": mb(sel) / seconds}


def start_optional(server, errors):
    try:
        return server.start()
    except Exception as e:  # a peer that fails to start is reported, not fatal
        errors[server.name] = f"did not start: {e}"
        server.stop()
        return None


def section_peers(ctx):
    errors, rows, wrk_rows = {}, [], []
    peers = []
    z = ctx.zarrd().start()
    peers.append(z)
    try:
        tiled = start_optional(Tiled(ctx.root), errors) if available("tiled") else None
        xpub = start_optional(Xpublish(os.path.join(ctx.root, "v2_blosc.zarr")), errors) if available("xpublish") else None
        hsds = start_optional(Hsds(), errors) if available("hsds") else None
        peers += [p for p in (tiled, xpub, hsds) if p]
        hsds_id = hsds.load(ctx.npy) if hsds else None
        for sel_name, sel in ctx.selections().items():
            urls = peer_slice_urls(ctx, z, tiled, hsds, hsds_id, sel)
            # Servers that refuse a selection (size limits) are recorded and left out.
            slicers = measure.working({name: (lambda u=u, h=h, name=name: raw_fetch_checked(ctx, name, u, h, sel))
                                       for name, (u, h) in urls.items()}, errors, f"server-side slice, {sel_name}")
            res = measure.alternate(slicers, ctx.args.reps)
            rows.append({"kind": "server-side slice (repeated request)", "selection": sel_name, **res})
            print("peers slice", sel_name, report.brief(res, "mb_per_s"))
            # Each server's Zarr facade read by zarr-python (client-side decoding).
            facades = {"zarrd": f"{z.url}/zarr/v2_blosc.zarr"}
            if tiled:
                facades["tiled"] = f"{tiled.url}/zarr/v2/v2_blosc"
            if xpub:
                facades["xpublish"] = f"{xpub.url}/zarr/data"
            readers = measure.working({name: (lambda u=u, name=name: timed_checked(
                ctx, name, sel, lambda: read_zarr_python(u, sel))) for name, u in facades.items()},
                errors, f"zarr-python through its Zarr facade, {sel_name}")
            res = measure.alternate(readers, ctx.args.reps)
            rows.append({"kind": "zarr-python through the Zarr facade", "selection": sel_name, **res})
            print("peers facade", sel_name, report.brief(res, "mb_per_s"))
        wrk_rows = peers_under_wrk(ctx, z, tiled, xpub, hsds, hsds_id, errors)
        rss = {p.name: p.peak_rss() for p in peers}
    finally:
        for p in reversed(peers):
            p.stop()
    return {"rows": rows, "wrk": wrk_rows, "errors": errors, "peak_rss": rss}


def peers_under_wrk(ctx, z, tiled, xpub, hsds, hsds_id, errors):
    """A 40 kB slice, a metadata key and a ~750 kB slice at 10 connections."""
    small, large = (slice(0, 100),) * 2, (slice(0, 433),) * 2
    targets = {}
    for name, sel in (("slice_40kB", small), ("slice_750kB", large)):
        targets[name] = peer_slice_urls(ctx, z, tiled, hsds, hsds_id, sel)
    meta = {"zarrd": (f"{z.url}/zarr/v2_blosc.zarr/.zarray", {})}
    if tiled:
        meta["tiled"] = (f"{tiled.url}/api/v1/metadata/v2_blosc", {})
    if xpub:
        meta["xpublish"] = (f"{xpub.url}/zarr/data/zarr.json", {})
    if hsds:
        meta["hsds"] = (f"{hsds.url}/datasets/{hsds_id}?domain=/home/bench.h5&bucket=hsdsbench", {"Authorization": hsds_auth()})
    targets["metadata"] = meta
    rows = []
    for target, urls in targets.items():
        contenders = {}
        for name, (url, headers) in urls.items():
            try:
                _, body = measure.fetch(url, headers)
            except RuntimeError as e:
                errors[f"{name} {target}"] = str(e)[:300]
                continue
            contenders[name] = (lambda u=url, h=headers, n=len(body): measure.wrk(u, 10, ctx.args.seconds, h, n))
        res = measure.alternate(contenders, ctx.args.reps)
        rows.append({"target": target, "connections": 10, **res})
        print("peers wrk", target, report.brief(res, "requests_per_s"))
    return rows


# 5. Memory ---------------------------------------------------------------

def section_memory(ctx):
    """Whole-array reads of every layout, twice, with a small cache: the cache
    must stay bounded. Then whole-array streams of two sizes: the memory a
    stream holds must not grow with the array."""
    cache = 256 * 2**20
    largest = ctx.n * ctx.n * 4
    with Zarrd(ctx.root, "--cache-size", "256MiB", "--recheck-cached", "60") as z:
        for _ in range(2):
            for layout in corpus.LAYOUTS:
                _, body = measure.fetch(f"{z.url}/api/v1/data/{layout}.zarr?format=raw")
                if len(body) != largest:
                    raise AssertionError(f"whole {layout}: {len(body)} bytes")
                del body
        peak = z.peak_rss()
    bound = cache + 2 * largest + 100 * 2**20
    return {"cache_size": cache, "largest_response": largest, "peak_rss": peak, "bound": bound,
            "stream": memory_streams(ctx)}


class NpyStreamCheck:
    """Checks a .npy body as it arrives, whole rows at a time, against
    `rows(r0, r1)`, keeping at most one partial row."""

    def __init__(self, shape, rows):
        self.shape, self.rows = shape, rows
        self.buf, self.header_done, self.row, self.bytes = bytearray(), False, 0, 0

    def feed(self, data):
        import ast
        self.bytes += len(data)
        self.buf += data
        if not self.header_done:
            if len(self.buf) < 12:
                return
            if bytes(self.buf[:6]) != b"\x93NUMPY":
                raise AssertionError("the stream is not .npy")
            major = self.buf[6]
            size, start = (int.from_bytes(self.buf[8:10], "little"), 10) if major == 1 else (
                int.from_bytes(self.buf[8:12], "little"), 12)
            if len(self.buf) < start + size:
                return
            header = ast.literal_eval(bytes(self.buf[start:start + size]).decode("latin1"))
            want = {"descr": "<f4", "fortran_order": False, "shape": self.shape}
            if header != want:
                raise AssertionError(f".npy header {header}, expected {want}")
            del self.buf[:start + size]
            self.header_done = True
        row_bytes = self.shape[1] * 4
        k = min(len(self.buf) // row_bytes, self.shape[0] - self.row)
        if k:
            got = np.frombuffer(self.buf, dtype="<f4", count=k * self.shape[1]).reshape(k, self.shape[1])
            if not np.array_equal(got, self.rows(self.row, self.row + k)):
                raise AssertionError(f"stream rows {self.row}..{self.row + k} hold wrong values")
            del got
            del self.buf[:k * row_bytes]
            self.row += k

    def finish(self):
        if self.row != self.shape[0] or self.buf:
            raise AssertionError(f"stream ended after {self.row} of {self.shape[0]} rows (+{len(self.buf)} bytes)")


def stream_whole(url, shape, rows):
    """GET the whole array as .npy, reading and discarding it 1 MiB at a time
    while checking it: seconds and bytes received."""
    import requests
    check = NpyStreamCheck(shape, rows)
    start = time.perf_counter()
    with requests.get(url, stream=True, timeout=600) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"GET {url}: {resp.status_code} {resp.text[:300]}")
        for piece in resp.iter_content(chunk_size=1 << 20):
            check.feed(piece)
    seconds = time.perf_counter() - start
    check.finish()
    return seconds, check.bytes


def memory_streams(ctx):
    """The corpus array (v3_zstd: 1024 x 1024 chunks, zstd) and one four times
    its size in the same layout, each streamed whole as .npy from a fresh
    zarrd with a cache a quarter of the corpus array (64 MiB at most)."""
    side = 2 * ctx.n
    large = corpus.make_large(OUT, ctx.n, ctx.expected)
    cache = min(64 * 2**20, ctx.n * ctx.n * 4 // 4)
    arrays = [("corpus v3_zstd", ctx.root, "v3_zstd.zarr", ctx.n, lambda r0, r1: ctx.expected[r0:r1]),
              ("4x larger", large, "large.zarr", side, lambda r0, r1: corpus.large_rows(ctx.expected, r0, r1))]
    rows = []
    for name, root, path, n, expected_rows in arrays:
        with Zarrd(root, "--cache-size", str(cache), "--recheck-cached", "60") as z:
            seconds, received = stream_whole(f"{z.url}/api/v1/data/{path}?format=npy", (n, n), expected_rows)
            peak = z.peak_rss()
        rows.append({"array": name, "side": n, "array_bytes": n * n * 4, "received_bytes": received,
                     "seconds": seconds, "mb_per_s": n * n * 4 / 1e6 / seconds, "peak_rss": peak})
        print("memory stream", name, n, f"peak {peak / 2**20:.0f} MiB", f"{seconds:.2f} s")
    return {"cache_size": cache, "rows": rows}


# 6. Writes ---------------------------------------------------------------

WRITE_N, WRITE_CHUNK, WRITES = 4096, 512, 48


def write_regions(aligned, writers):
    """The same region sequence for every contender: WRITES regions split among the writers."""
    rng = random.Random(7)
    regions = []
    for _ in range(WRITES):
        if aligned:
            r, c = rng.randrange(WRITE_N // WRITE_CHUNK) * WRITE_CHUNK, rng.randrange(WRITE_N // WRITE_CHUNK) * WRITE_CHUNK
            h = w = WRITE_CHUNK
        else:
            h, w = rng.randrange(100, 700), rng.randrange(100, 700)
            r, c = rng.randrange(WRITE_N - h), rng.randrange(WRITE_N - w)
        regions.append((r, c, h, w))
    return [regions[k::writers] for k in range(writers)]


def run_writers(per_writer, write_one):
    """Run one thread per writer; seconds and MB written."""
    errors = []

    def worker(regions):
        try:
            for region in regions:
                write_one(region)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(regions,)) for regions in per_writer]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    total = sum(h * w * 4 for regions in per_writer for (_, _, h, w) in regions) / 1e6
    return {"seconds": seconds, "mb_per_s": total / seconds}


WRITE_SPEC = {"node_type": "array", "shape": [WRITE_N, WRITE_N], "chunks": [WRITE_CHUNK, WRITE_CHUNK],
              "dtype": "float32", "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                             {"name": "zstd", "configuration": {"level": 1, "checksum": False}}]}


def block(region):
    r, c, h, w = region
    return (np.arange(h * w, dtype="<f4").reshape(h, w) + r * 7 + c)


def zarrd_writes(url, per_writer):
    import http.client
    import urllib.parse
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port)
    conn.request("PUT", "/api/v1/meta/w?overwrite=true", body=json.dumps(WRITE_SPEC),
                 headers={"Content-Type": "application/json"})
    assert conn.getresponse().read() is not None
    local = threading.local()

    def write_one(region):
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
        r, c, h, w = region
        local.conn.request("PUT", f"/api/v1/data/w?select={r}:{r + h},{c}:{c + w}", body=block(region).tobytes(),
                           headers={"Content-Type": "application/octet-stream"})
        resp = local.conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"write {region}: {resp.status} {body[:200]!r}")

    return run_writers(per_writer, write_one)


def zarr_python_writes(path, per_writer):
    import zarr
    import zarr.codecs as zc
    a = zarr.create_array(path, shape=(WRITE_N, WRITE_N), chunks=(WRITE_CHUNK, WRITE_CHUNK), dtype="f4",
                          compressors=[zc.ZstdCodec(level=1)], overwrite=True)

    def write_one(region):
        r, c, h, w = region
        a[r:r + h, c:c + w] = block(region)

    return run_writers(per_writer, write_one)


def section_writes(ctx):
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        with Zarrd(tmp, "--cache-size", ctx.args.cache_size, "--allow-anonymous-writes") as z:
            for aligned in (True, False):
                for writers in (1, 4, 16):
                    per_writer = write_regions(aligned, writers)
                    res = measure.alternate({
                        "zarrd": lambda: zarrd_writes(z.url, per_writer),
                        "zarr-python": lambda: zarr_python_writes(os.path.join(tmp, "local.zarr"), per_writer),
                    }, ctx.args.reps)
                    rows.append({"regions": "aligned" if aligned else "unaligned", "writers": writers, **res})
                    print("writes", rows[-1]["regions"], writers, report.brief(res, "mb_per_s"))
            rss = z.peak_rss()
    return {"rows": rows, "zarrd_peak_rss": rss, "regions_per_run": WRITES}


SECTIONS = {"raw": section_raw, "clients": section_clients, "slicing": section_slicing,
            "peers": section_peers, "memory": section_memory, "writes": section_writes,
            "viewport": viewport.section, "growth": growth.section, "scaleout": scaleout.section,
            "virtual": virtual.section, "protocols": protocols.section, "reductions": reductions.section,
            "scaling": scaling.section, "maps": maps.section,
            "standards": standards.section}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8192, help="array side (default 8192)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per contender")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each wrk run")
    parser.add_argument("--cache-size", default="1GiB", help="zarrd's --cache-size")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--results", default=HERE, help="directory for results.json, results.md and growth.png")
    parser.add_argument("--replicas", default="1,2,3", help="zarrd replica counts of the scaleout section")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(args.results, exist_ok=True)
    ctx = Context(args)
    path = os.path.join(args.results, "results.json")
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
               "size": args.size, "reps": args.reps, "cache_size": args.cache_size,
               "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sections": {}}
    if os.path.exists(path) and args.only != ",".join(SECTIONS):
        # A partial run keeps the other sections, each with the time it ran
        # (or, from files that did not record it, the time it ran by).
        with open(path) as f:
            earlier = json.load(f)
        results["sections"] = earlier.get("sections", {})
        for sec in results["sections"].values():
            if "ran_at" not in sec:
                sec.setdefault("ran_by", earlier.get("started"))
    failed = []
    for name in args.only.split(","):
        ran_at = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            results["sections"][name] = SECTIONS[name](ctx)
        except Exception as e:  # noqa: BLE001  (a wrong answer or a failed request: reported, the run goes on)
            traceback.print_exc()
            results["sections"][name] = {"failed": f"{type(e).__name__}: {str(e)[:1500]}"}
            failed.append(name)
        results["sections"][name]["ran_at"] = ran_at
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
    report.write(results, os.path.join(args.results, "results.md"))
    if failed:
        sys.exit(f"sections failed: {', '.join(failed)} (see results.md)")


if __name__ == "__main__":
    main()
