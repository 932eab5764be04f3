"""The benchmark harness itself runs: a small corpus, the sections that need
no peers installed (server-side slices against TensorStore and zarr-python,
memory, region writes), every answer checked against the array, and a
report with every table. Speed is not asserted (bench/run measures it)."""

import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench.py"))


def test_bench_harness_runs_and_reports(tmp_path):
    env = {**os.environ, "ZARRD_BENCH_OUT": str(tmp_path / "work")}
    result = subprocess.run([sys.executable, BENCH, "--size", "512", "--reps", "1", "--seconds", "1",
                             "--cache-size", "64MiB", "--only", "slicing,memory,writes", "--results", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    slicing = results["sections"]["slicing"]["rows"]
    assert {(r["layout"], r["selection"]) for r in slicing} == {
        (layout, sel) for layout in ("v2_blosc", "v3_zstd", "v3_sharded", "v2_small") for sel in ("window", "whole")}
    for row in slicing:
        for who in ("zarrd cold", "zarrd warm", "tensorstore", "zarr-python"):
            assert row[who]["seconds"]["median"] > 0
    memory = results["sections"]["memory"]
    assert 0 < memory["peak_rss"] and memory["bound"] > memory["cache_size"]
    writes = results["sections"]["writes"]["rows"]
    assert len(writes) == 6 and all(r["zarrd"]["mb_per_s"]["median"] > 0 for r in writes)
    report = (tmp_path / "results.md").read_text()
    for title in ("Server-side slices", "Memory", "Region writes", "Profiles"):
        assert title in report
