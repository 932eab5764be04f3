"""The benchmark harness itself runs: a small corpus, the sections that need
no peers installed (server-side slices against TensorStore and zarr-python,
memory, region writes, the tiled viewer, how cost grows, replicas behind
HAProxy, reference sets and Icechunk repositories against plain Zarr), every
answer checked against the array, and a report with every table and the
growth plot. Contenders that are not installed (nginx, wrk,
Tiled in CI) are left out of their sections. Speed is not asserted
(bench/run measures it)."""

import json
import os
import shutil
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(REPO, "bench", "bench.py")
# The Helm chart's HAProxy lines for routing by array (bench/scaleout.py reads them).
ROUTE_BY_ARRAY = os.path.join(REPO, "helm", "zarrd", "files", "route-by-array.cfg")


def installed(name):
    """As bench/procs.py decides: on PATH, in /usr/sbin, or (HAProxy) at $ZARRD_HAPROXY."""
    env = os.environ.get("ZARRD_HAPROXY") if name == "haproxy" else None
    return bool(env or shutil.which(name) or os.path.exists(f"/usr/sbin/{name}"))


def test_bench_harness_runs_and_reports(tmp_path):
    env = {**os.environ, "ZARRD_BENCH_OUT": str(tmp_path / "work")}
    result = subprocess.run([sys.executable, BENCH, "--size", "512", "--reps", "1", "--seconds", "1",
                             "--cache-size", "64MiB", "--replicas", "1,2",
                             "--only", "slicing,memory,writes,viewport,growth,scaleout,virtual,protocols,reductions,scaling,maps,standards",
                             "--results", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    nginx = installed("nginx")

    slicing = results["sections"]["slicing"]["rows"]
    assert {(r["layout"], r["selection"]) for r in slicing} == {
        (layout, sel) for layout in ("v2_blosc", "v3_zstd", "v3_sharded", "v2_small") for sel in ("window", "whole")}
    for row in slicing:
        for who in ("zarrd cold", "zarrd warm", "tensorstore", "zarr-python") + (("static .npy",) if nginx else ()):
            assert row[who]["seconds"]["median"] > 0
    memory = results["sections"]["memory"]
    assert 0 < memory["peak_rss"] and memory["bound"] > memory["cache_size"]
    stream = memory["stream"]["rows"]
    assert [(r["side"], r["received_bytes"] > r["array_bytes"]) for r in stream] == [(512, True), (1024, True)]
    assert all(r["peak_rss"] > 0 for r in stream)
    writes = results["sections"]["writes"]["rows"]
    assert len(writes) == 6 and all(r["zarrd"]["mb_per_s"]["median"] > 0 for r in writes)

    # The viewer: one 512 x 512 view in 64 x 64 tiles, raw and as REST slices.
    viewport = results["sections"]["viewport"]["rows"]
    assert [r["form"] for r in viewport] == ["raw", "REST slices"]
    for row in viewport:
        assert (row["view"], row["tile"], row["tiles"]) == (512, 64, 64)
        for who in ("zarrd cold", "zarrd warm"):
            assert row[who]["seconds"]["median"] > 0
    assert ("nginx" in viewport[0]) == nginx

    # Reductions on the server against xarray in-process and a notebook downloading the chunks.
    reductions = results["sections"]["reductions"]
    assert [r["question"] for r in reductions["rows"]] == ["time-mean map", "area-mean series"]
    for row in reductions["rows"]:
        for who in ("zarrd cold", "zarrd warm", "xarray numpy", "xarray dask", "download through /zarr/"):
            assert row[who]["seconds"]["median"] > 0
    assert reductions["peak_rss"]["zarrd cold"] > 0

    # The same view over HTTPS, HTTP/2 against HTTP/1.1, each spoken as named.
    protocols = results["sections"]["protocols"]
    assert protocols["versions"] == {"HTTP/1.1": ["HTTP/1.1"], "HTTP/2": ["HTTP/2"],
                                     "HTTP/1.1, 6 connections": ["HTTP/1.1"]}
    assert [r["form"] for r in protocols["rows"]] == ["raw", "REST slices"]
    for row in protocols["rows"]:
        for who in ("zarrd warm, HTTP/1.1", "zarrd warm, HTTP/2", "zarrd cold, HTTP/1.1", "zarrd cold, HTTP/2"):
            assert row[who]["seconds"]["median"] > 0, (who, row)

    # The same view in Chromium, HTTP/2 against HTTP/1.1 (scripts/test installs Chromium).
    if os.path.exists(os.environ.get("ZARRD_CHROMIUM", "/usr/bin/chromium")):
        assert [r["form"] for r in protocols["browser"]] == ["raw", "REST slices"]
        for row in protocols["browser"]:
            for who in ("zarrd warm, HTTP/1.1", "zarrd warm, HTTP/2", "zarrd cold, HTTP/1.1", "zarrd cold, HTTP/2"):
                assert row[who]["seconds"]["median"] > 0, (who, row)

    # Speed against cores: 1 and 2 on a machine of two or more; wrk's half only where wrk is.
    scaling = results["sections"]["scaling"]
    runs = scaling["runs"]
    assert [r["cores"] for r in runs] == [n for n in (1, 2, 4, 8, 16) if n <= len(os.sched_getaffinity(0))]
    for run in runs:
        assert {(r["layout"], r["selection"]) for r in run["cold"]} == {
            ("v2_blosc", "window"), ("v3_zstd", "window"), ("v3_sharded", "window"), ("v3_zstd", "whole")}
        for row in run["cold"]:
            assert row["zarrd cold"]["seconds"]["median"] > 0 and row["tensorstore"]["seconds"]["median"] > 0
        if shutil.which("wrk"):
            assert {(r["target"], r["connections"]) for r in run["requests"]} == {
                (t, c) for t in ("metadata", "range_64k", "chunk", "slice_256") for c in (64, 256)}
            assert [r["layout"] for r in run["random"]] == ["v2_blosc", "v3_zstd", "v3_sharded"]
        else:
            assert run["requests"] == [] and scaling["requests_skipped"]
    assert (tmp_path / scaling["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Map tiles against xpublish-tiles, where bench/run installed it.
    maps = results["sections"]["maps"]
    if "skipped" in maps:
        assert "xpublish-tiles" in maps["skipped"]
    else:
        for who in ("zarrd", "xpublish-tiles"):
            assert maps["rows"]["cold"][who]["tiles_per_s"]["median"] > 0
        assert all(a > 0.5 for a in maps["pictures_alike"]), maps["pictures_alike"]

    # OPeNDAP and EDR against xpublish-opendap and xpublish-edr, where bench/run installed them.
    standards = results["sections"]["standards"]
    if "skipped" in standards:
        assert "xpublish" in standards["skipped"] or "wrk" in standards["skipped"]
    else:
        for kind in ("dap2", "edr"):
            assert standards["rows"][kind]["zarrd"]["requests_per_s"]["median"] > 0
        assert standards["series_alike"] == {"dap2": True, "edr": True}

    # How cost grows: selections capped at the array's side; wrk's half only where wrk is.
    growth = results["sections"]["growth"]
    assert [r["side"] for r in growth["selections"]] == [100, 256, 512]
    assert [r["start"] for r in growth["selections"]] == [37, 37, 0]
    for row in growth["selections"]:
        for who in ("zarrd cold", "zarrd warm", "tensorstore") + (("static .npy",) if nginx else ()):
            assert row[who]["seconds"]["median"] > 0
    if shutil.which("wrk"):
        assert {(r["target"], r["connections"]) for r in growth["connections"]} == {
            (t, c) for t in ("range_64k", "slice_256") for c in (1, 2, 4, 8, 16, 32, 64)}
    else:
        assert growth["connections"] == [] and growth["connections_skipped"]
    png = tmp_path / growth["plot"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Replicas behind HAProxy (scripts/test installs it): three workloads at 1 and 2 replicas.
    scale = results["sections"]["scaleout"]
    if installed("haproxy") or os.environ.get("CI"):
        assert {(r["workload"], r["replicas"]) for r in scale["rows"]} == {
            (w, k) for w in ("viewport, REST slices", "viewport, raw", "slices 256 x 256") for k in (1, 2)}
        modes = ["roundrobin"] + (["hash by array"] if os.path.exists(ROUTE_BY_ARRAY) else [])
        for row in scale["rows"]:
            for mode in modes:
                assert row[mode]["per_s"]["median"] > 0
                assert 0 <= row[mode]["hit_rate"]["median"] <= 1
        assert scale["cache_per_replica"] > 0 and scale["working_set_bytes"] > 0
    else:
        assert scale["skipped"]

    # The same array through references and Icechunk (native and virtual chunks) against plain Zarr,
    # cold and warm, and xarray on the NetCDF file.
    virtual = results["sections"]["virtual"]
    assert virtual["chunk"] == 512
    stores = ["plain Zarr", "references", "references (Parquet)", "Icechunk", "Icechunk virtual"]
    assert list(virtual["stores"]) == stores
    assert [(r["selection"], r["shape"]) for r in virtual["rows"]] == [("window", [512, 512]), ("whole", [512, 512])]
    for row in virtual["rows"]:
        for who in [f"{s} {state}" for s in stores for state in ("cold", "warm")] + [
                "xarray, opened per read", "xarray, opened once"]:
            assert row[who]["seconds"]["median"] > 0, who

    report = (tmp_path / "results.md").read_text()
    for title in ("Server-side slices", "Memory", "Region writes", "A tiled viewer", "How cost grows",
                  "Replicas behind HAProxy", "Reference sets and Icechunk vs plain Zarr", "Profiles"):
        assert title in report
    assert f"]({growth['plot']})" in report
