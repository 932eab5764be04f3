"""Render bench/results.json as bench/results.md: one table per section,
every figure a median with its min-max, every comparison a ratio from the
same run, and each target marked met or missed. The profiling notes in
bench/profile.md are appended as they are."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def brief(res, key):
    """One line for the console: each contender's median of `key`."""
    return {name: round(float(stats[key]["median"]), 4) for name, stats in res.items() if key in stats}


def fmt(stats, scale=1.0, digits=1):
    m, lo, hi = stats["median"] * scale, stats["min"] * scale, stats["max"] * scale
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def ratio(ours, theirs, higher_is_better=True):
    """zarrd's speed over the peer's: above 1 means zarrd is faster."""
    a, b = ours["median"], theirs["median"]
    return a / b if higher_is_better else b / a


def verdict(value, target):
    return f"{value:.2f}x " + ("met" if value >= target else f"**missed** (target {target}x)")


def mib(n):
    return f"{n / 2**20:.0f} MiB"


def raw_table(sec):
    lines = ["| key | bytes | conns | zarrd req/s | nginx req/s | zarrd MB/s | zarrd p50 / p99 ms | nginx p50 / p99 ms | zarrd / nginx |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        z, n = row["zarrd"], row["nginx"]
        target = 1.0 if row["target"] == "range_64k" else 0.8
        lines.append(
            f"| {row['target']} | {row['bytes']} | {row['connections']} | {fmt(z['requests_per_s'], digits=0)} | "
            f"{fmt(n['requests_per_s'], digits=0)} | {z['mb_per_s']['median']:.0f} | "
            f"{z['p50_ms']['median']:.2f} / {z['p99_ms']['median']:.2f} | {n['p50_ms']['median']:.2f} / "
            f"{n['p99_ms']['median']:.2f} | {verdict(ratio(z['requests_per_s'], n['requests_per_s']), target)} |")
    return lines


def clients_table(sec):
    lines = ["| layout | selection | client | through zarrd MB/s | through nginx MB/s | zarrd / nginx |",
             "|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        z, n = row["zarrd"]["mb_per_s"], row["nginx"]["mb_per_s"]
        lines.append(f"| {row['layout']} | {row['selection']} | {row['client']} | {fmt(z)} | {fmt(n)} | "
                     f"{verdict(ratio(z, n), 1.0)} |")
    return lines


def slicing_table(sec):
    lines = ["| layout | selection | zarrd cold s | zarrd warm s | TensorStore in-process s | zarr-python in-process s | "
             "cold vs TensorStore | cold vs zarr-python | warm vs cold |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        cold, warm = row["zarrd cold"]["seconds"], row["zarrd warm"]["seconds"]
        ts, zp = row["tensorstore"]["seconds"], row["zarr-python"]["seconds"]
        lines.append(
            f"| {row['layout']} | {row['selection']} | {fmt(cold, digits=3)} | {fmt(warm, digits=3)} | "
            f"{fmt(ts, digits=3)} | {fmt(zp, digits=3)} | {verdict(ratio(cold, ts, False), 1.0)} | "
            f"{ratio(cold, zp, False):.2f}x | {verdict(ratio(warm, cold, False), 5.0)} |")
    return lines


UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def size_bytes(text):
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def rss_bound_line(results, peak):
    """zarrd's peak RSS against cache + 2 x the largest response + 100 MiB."""
    largest = results["size"] ** 2 * 4
    bound = size_bytes(results["cache_size"]) + 2 * largest + 100 * 2**20
    return (f"zarrd peak RSS in this section: {mib(peak)}; bound (cache + 2 x largest response + 100 MiB) "
            f"{mib(bound)}: " + ("met." if peak <= bound else "**missed**."))


def rss_line(sec):
    return ["Peak RSS: " + ", ".join(f"{n} {mib(v)}" for n, v in sec["peak_rss"].items()), ""]


def peers_tables(sec):
    lines = []
    for row in sec["rows"]:
        names = [n for n in row if n not in ("kind", "selection")]
        lines += [f"**{row['kind']}, {row['selection']}** (MB/s of array data)", "",
                  "| " + " | ".join(names) + " |", "|" + "---|" * len(names),
                  "| " + " | ".join(fmt(row[n]["mb_per_s"]) for n in names) + " |", ""]
        others = [n for n in names if n != "zarrd"]
        if others:
            lines += ["zarrd / peer: " + ", ".join(
                f"{n} {ratio(row['zarrd']['mb_per_s'], row[n]['mb_per_s']):.2f}x" for n in others), ""]
    if sec.get("wrk"):
        lines += ["**10 connections under wrk** (requests/s; p50 / p99 ms)", "",
                  "| target | server | requests/s | MB/s | p50 / p99 ms | zarrd / server |", "|---|---|---|---|---|---|"]
        for row in sec["wrk"]:
            for name in [n for n in row if n not in ("target", "connections")]:
                s = row[name]
                rel = ratio(row["zarrd"]["requests_per_s"], s["requests_per_s"]) if "zarrd" in row else float("nan")
                lines.append(f"| {row['target']} | {name} | {fmt(s['requests_per_s'], digits=0)} | "
                             f"{s['mb_per_s']['median']:.1f} | {s['p50_ms']['median']:.2f} / {s['p99_ms']['median']:.2f} | "
                             f"{rel:.2f}x |")
        lines.append("")
    for name, err in sec.get("errors", {}).items():
        lines.append(f"- {name}: {err}")
    return lines


def memory_lines(sec):
    ok = sec["peak_rss"] <= sec["bound"]
    return [f"Whole-array reads of every layout, twice, with `--cache-size 256MiB`: peak RSS "
            f"{mib(sec['peak_rss'])}; bound (cache + 2 x largest response + 100 MiB) {mib(sec['bound'])}: "
            + ("met" if ok else "**missed**") + "."]


def writes_table(sec):
    lines = [f"{sec['regions_per_run']} regions per run, float32 4096 x 4096, 512 x 512 chunks, zstd 1. "
             "zarr-python writes the same regions to local files from the same number of threads, "
             "without any synchronization (overlapping unaligned writes can lose updates there).", "",
             "| regions | writers | zarrd MB/s | zarr-python MB/s | zarrd / zarr-python |", "|---|---|---|---|---|"]
    for row in sec["rows"]:
        z, p = row["zarrd"]["mb_per_s"], row["zarr-python"]["mb_per_s"]
        lines.append(f"| {row['regions']} | {row['writers']} | {fmt(z)} | {fmt(p)} | {ratio(z, p):.2f}x |")
    return lines


TITLES = {
    "raw": ("1. Raw keys: zarrd vs nginx (wrk)", raw_table),
    "clients": ("2. Clients through zarrd's /zarr/ vs through nginx (client-side decoding)", clients_table),
    "slicing": ("3. Server-side slices (/api/v1/data, .npy) vs in-process reads of the same files", slicing_table),
    "peers": ("4. Other data servers", peers_tables),
    "memory": ("5. Memory", memory_lines),
    "writes": ("6. Region writes", writes_table),
}


def write(results, path):
    m = results["machine"]
    lines = ["# Benchmark results", "",
             f"Generated by `bench/run` on {results['started']}: {m['cpus']} CPUs, {m['platform']}. "
             f"float32 {results['size']} x {results['size']}; every figure is the median of "
             f"{results['reps']} alternated runs (min-max in brackets); ratios are zarrd's speed over the "
             f"peer's from the same run (above 1: zarrd faster). zarrd ran with `--cache-size {results['cache_size']}`.",
             ""]
    for key, (title, render) in TITLES.items():
        sec = results["sections"].get(key)
        if sec is None:
            continue
        lines += [f"## {title}", ""] + render(sec) + [""]
        if isinstance(sec.get("peak_rss"), dict):
            lines += rss_line(sec)
        if "zarrd_peak_rss" in sec:
            lines += [rss_bound_line(results, sec["zarrd_peak_rss"]), ""]
        elif isinstance(sec.get("peak_rss"), dict):
            zarrd_peaks = [v for n, v in sec["peak_rss"].items() if n.startswith("zarrd")]
            lines += [rss_bound_line(results, max(zarrd_peaks)), ""]
    notes = os.path.join(HERE, "profile.md")
    if os.path.exists(notes):
        with open(notes) as f:
            lines += [f.read()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
