"""Write throughput through /api/v1/data: chunk-aligned and unaligned
windows, 1, 4 and 16 concurrent writers, against a release build of zarrd
serving a temporary directory. Reports medians of writes/s and MB/s.

Usage: python bench/writes.py [--seconds S] [--reps R]
"""

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "interop"))
from conftest import start_zarrd, stop  # noqa: E402

N, CHUNK = 4096, 512


def run(host, port, writers, aligned, seconds):
    counts, sizes = [0] * writers, [0] * writers
    stop_at = time.perf_counter() + seconds

    def worker(k):
        rng = random.Random(k)
        conn = http.client.HTTPConnection(host, port, timeout=120)
        while time.perf_counter() < stop_at:
            if aligned:
                r, c = rng.randrange(N // CHUNK) * CHUNK, rng.randrange(N // CHUNK) * CHUNK
                h = w = CHUNK
            else:
                h, w = rng.randrange(100, 700), rng.randrange(100, 700)
                r, c = rng.randrange(N - h), rng.randrange(N - w)
            body = os.urandom(h * w * 4)
            conn.request("PUT", f"/api/v1/data/a?select={r}:{r + h},{c}:{c + w}", body=body,
                         headers={"Content-Type": "application/octet-stream"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status
            counts[k] += 1
            sizes[k] += len(body)
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(writers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return sum(counts) / elapsed, sum(sizes) / elapsed / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
    os.environ["ZARRD_BIN"] = os.path.join(REPO, "target", "release", "zarrd")
    results = {}
    with tempfile.TemporaryDirectory() as root:
        url, proc = start_zarrd(root, "--allow-anonymous-writes")
        host, port = url.split("//")[1].split(":")
        try:
            spec = {"node_type": "array", "shape": [N, N], "chunks": [CHUNK, CHUNK], "dtype": "float32",
                    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                               {"name": "zstd", "configuration": {"level": 1, "checksum": False}}]}
            conn = http.client.HTTPConnection(host, int(port))
            conn.request("PUT", "/api/v1/meta/a", body=json.dumps(spec), headers={"Content-Type": "application/json"})
            assert conn.getresponse().status == 201
            for aligned in (True, False):
                for writers in (1, 4, 16):
                    reps = [run(host, int(port), writers, aligned, args.seconds) for _ in range(args.reps)]
                    key = f"{'aligned' if aligned else 'unaligned'}_{writers}w"
                    results[key] = {
                        "writes_per_s": statistics.median(r[0] for r in reps),
                        "mb_per_s": statistics.median(r[1] for r in reps),
                        "mb_per_s_min_max": [min(r[1] for r in reps), max(r[1] for r in reps)],
                    }
                    print(key, json.dumps(results[key]))
        finally:
            stop(proc)
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    with open(os.path.join(HERE, "out", "writes.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
