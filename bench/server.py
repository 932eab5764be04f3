"""Benchmark the running server on the benchmark arrays.

Creates (once, with zarr-python) a float32 array of N x N (default 8192),
chunked 1024 x 1024, in three layouts: v2 Blosc lz4 byte-shuffle, v3
bytes+zstd level 1, and v3 sharded (2048 x 2048 shards of 256 x 256 inner
chunks, zstd 1). Starts a release build of zarrd on loopback, then measures:

- a 1000 x 1000 window and the whole array through /api/v1/data as .npy,
  cold (fresh server) and warm (repeated), in MB/s of array data;
- raw GETs of one chunk key (one shard for the sharded layout) at 1 and 16
  concurrent connections, in requests/s and MB/s.

Medians of several repetitions, with min-max. Results go to stdout and
bench/out/server.json. Usage: python bench/server.py [--size N] [--reps R]
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "interop"))
from conftest import start_zarrd, stop  # noqa: E402


def make_corpus(root, n):
    import numcodecs
    import zarr
    import zarr.codecs as zc

    marker = os.path.join(root, f"done-{n}")
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(0)
    i = np.arange(n, dtype=np.float32)
    data = (np.sin(i[:, None] * 0.01) * np.cos(i[None, :] * 0.013) * 100 + rng.random((n, n), dtype=np.float32)).astype("f4")
    common = dict(shape=(n, n), dtype="f4", overwrite=True)
    a = zarr.create_array(os.path.join(root, "v2_blosc.zarr"), zarr_format=2, chunks=(1024, 1024),
                          compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1), **common)
    a[...] = data
    a = zarr.create_array(os.path.join(root, "v3_zstd.zarr"), zarr_format=3, chunks=(1024, 1024),
                          compressors=[zc.ZstdCodec(level=1)], **common)
    a[...] = data
    a = zarr.create_array(os.path.join(root, "v3_sharded.zarr"), zarr_format=3, chunks=(256, 256), shards=(2048, 2048),
                          compressors=[zc.ZstdCodec(level=1)], **common)
    a[...] = data
    open(marker, "w").close()


def timed_get(host, port, path, headers=None):
    conn = http.client.HTTPConnection(host, port, timeout=300)
    start = time.perf_counter()
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    elapsed = time.perf_counter() - start
    conn.close()
    assert resp.status in (200, 206), (path, resp.status, body[:200])
    return elapsed, len(body)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def load(host, port, path, clients, seconds):
    """Keep-alive GETs from `clients` threads for `seconds`: requests/s and MB/s."""
    counts, sizes = [0] * clients, [0] * clients
    stop_at = time.perf_counter() + seconds

    def worker(k):
        conn = http.client.HTTPConnection(host, port, timeout=60)
        while time.perf_counter() < stop_at:
            conn.request("GET", path)
            resp = conn.getresponse()
            sizes[k] += len(resp.read())
            counts[k] += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return {"requests_per_s": sum(counts) / elapsed, "mb_per_s": sum(sizes) / elapsed / 1e6}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    out_dir = os.path.join(HERE, "out")
    corpus = os.path.join(out_dir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    make_corpus(corpus, args.size)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
    os.environ["ZARRD_BIN"] = os.path.join(REPO, "target", "release", "zarrd")
    n, w = args.size, min(1000, args.size)
    lo = (n - w) // 2
    results = {"size": n, "layouts": {}}
    for layout, chunk_key in [("v2_blosc", "0.0"), ("v3_zstd", "c/0/0"), ("v3_sharded", "c/0/0")]:
        r = {}
        window = f"/api/v1/data/{layout}.zarr?select={lo}:{lo + w},{lo}:{lo + w}"
        whole = f"/api/v1/data/{layout}.zarr"
        for name, path, nbytes in [("window", window, w * w * 4), ("whole", whole, n * n * 4)]:
            cold, warm = [], []
            for _ in range(args.reps):
                url, proc = start_zarrd(corpus, "--cache-size", "2GiB", "--recheck-cached", "never")
                host, port = url.split("//")[1].split(":")
                try:
                    cold.append(nbytes / timed_get(host, int(port), path)[0] / 1e6)
                    warm.append(nbytes / timed_get(host, int(port), path)[0] / 1e6)
                finally:
                    stop(proc)
            r[f"{name}_cold_mb_s"] = summary(cold)
            r[f"{name}_warm_mb_s"] = summary(warm)
        url, proc = start_zarrd(corpus)
        host, port = url.split("//")[1].split(":")
        try:
            for clients in (1, 16):
                r[f"raw_chunk_{clients}c"] = load(host, int(port), f"/zarr/{layout}.zarr/{chunk_key}", clients, args.seconds)
        finally:
            stop(proc)
        results["layouts"][layout] = r
        print(layout, json.dumps(r, indent=1))
    with open(os.path.join(out_dir, "server.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
