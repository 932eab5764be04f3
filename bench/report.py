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
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 or n == 0 else f"{n / 2**10:.0f} KiB"


def raw_table(sec):
    lines = ["Cached 60 s: zarrd with `--recheck-cached 60`, nginx with `open_file_cache_valid 60s` (file "
             "metadata trusted for a minute on both sides). Defaults: zarrd with `--recheck-cached always`, "
             "nginx without `open_file_cache` (every request opens and stats the file on both sides).", "",
             "| servers | key | bytes | conns | zarrd req/s | nginx req/s | zarrd MB/s | zarrd p50 / p99 ms | "
             "nginx p50 / p99 ms | zarrd / nginx |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        z, n = row["zarrd"], row["nginx"]
        target = 1.0  # chunk, metadata and range_64k alike, at every connection count
        lines.append(
            f"| {row.get('config', 'cached 60 s')} | {row['target']} | {row['bytes']} | {row['connections']} | "
            f"{fmt(z['requests_per_s'], digits=0)} | "
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
    lines = ["Static .npy: nginx serving the same selection written beforehand as a .npy file, fetched by the "
             "same client code (the floor for any server that has to produce the bytes). Warm vs cold is a "
             "target for windows only; for whole arrays, where copying the answer dominates, it is informational.",
             "",
             "| layout | selection | zarrd cold s | zarrd warm s | static .npy (nginx) s | TensorStore in-process s | "
             "zarr-python in-process s | cold vs TensorStore | cold vs zarr-python | warm vs static .npy | warm vs cold |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        cold, warm = row["zarrd cold"]["seconds"], row["zarrd warm"]["seconds"]
        ts, zp = row["tensorstore"]["seconds"], row["zarr-python"]["seconds"]
        static = row.get("static .npy", {}).get("seconds")
        warm_cold = ratio(warm, cold, False)
        lines.append(
            f"| {row['layout']} | {row['selection']} | {fmt(cold, digits=3)} | {fmt(warm, digits=3)} | "
            f"{fmt(static, digits=3) if static else '-'} | "
            f"{fmt(ts, digits=3)} | {fmt(zp, digits=3)} | {verdict(ratio(cold, ts, False), 1.0)} | "
            f"{ratio(cold, zp, False):.2f}x | {verdict(ratio(warm, static, False), 0.9) if static else '-'} | "
            + (verdict(warm_cold, 5.0) if row["selection"] == "window" else f"{warm_cold:.2f}x (informational)")
            + " |")
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
    lines = [f"Whole-array reads of every layout, twice, with `--cache-size 256MiB`: peak RSS "
             f"{mib(sec['peak_rss'])}; bound (cache + 2 x largest response + 100 MiB) {mib(sec['bound'])}: "
             + ("met" if ok else "**missed**") + "."]
    stream = sec.get("stream")
    if stream:
        lines += ["", f"Whole arrays streamed as .npy (`/api/v1/data/...?format=npy`) to a client that checks and "
                  f"discards the body as it arrives, each from a fresh zarrd with `--cache-size "
                  f"{mib(stream['cache_size'])}`: the peak must not grow with the array.", "",
                  "| array | side | array bytes | zarrd peak RSS | peak / array | MB/s |", "|---|---|---|---|---|---|"]
        for row in stream["rows"]:
            lines.append(f"| {row['array']} | {row['side']} | {mib(row['array_bytes'])} | {mib(row['peak_rss'])} | "
                         f"{row['peak_rss'] / row['array_bytes']:.2f} | {row['mb_per_s']:.0f} |")
        small, large = stream["rows"][0], stream["rows"][-1]
        grows = large["peak_rss"] / small["peak_rss"]
        under = large["peak_rss"] / large["array_bytes"]
        lines += ["", f"Peak for the 4x larger array / peak for the corpus array: {grows:.2f} "
                  + ("(constant: met, within 1.25)." if grows <= 1.25 else "(**missed**: more than 1.25).")
                  + f" Its peak / its size: {under:.2f} "
                  + ("(informational: an array under 256 MiB is smaller than the process itself)."
                     if large["array_bytes"] < 256 * 2**20
                     else "(far under it: met, below 0.5)." if under <= 0.5 else "(**missed**: not below 0.5).")]
    return lines


def speed(ours, theirs):
    """zarrd's speed over a peer's, from seconds, as text."""
    return f"{ratio(ours, theirs, False):.2f}x"


def viewport_tables(sec):
    first = sec["rows"][0] if sec["rows"] else {"view": "?", "tiles": "?"}
    lines = [f"One {first['view']} x {first['view']} view in {first['tiles']} "
             f"tiles, {sec['in_flight']} requests in flight (one keep-alive connection per worker); seconds to the "
             "full view, every value checked. raw: shard index by suffix Range, then one Range per inner chunk, "
             "decoded in the client (zarrd `/zarr/` vs nginx on the same files). REST slices: one "
             "`/api/v1/data?select=...&format=npy` per tile (vs Tiled's `/api/v1/array/full`). zarrd cold runs with "
             "`--cache-size 0`; the page cache is warm for everyone. Ratios are zarrd's speed over the peer's.", "",
             "| form | layout | view origin | tile | zarrd cold s | zarrd warm s | peer | peer s | cold vs peer | warm vs peer |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        cold, warm = row["zarrd cold"]["seconds"], row["zarrd warm"]["seconds"]
        peer = next((n for n in ("nginx", "tiled") if n in row), None)
        p = row[peer]["seconds"] if peer else None
        lines.append(f"| {row['form']} | {row['layout']} | {tuple(row['origin'])} | {row['tile']} | "
                     f"{fmt(cold, digits=3)} | {fmt(warm, digits=3)} | {peer or '-'} | "
                     f"{fmt(p, digits=3) if p else '-'} | {speed(cold, p) if p else '-'} | "
                     f"{speed(warm, p) if p else '-'} |")
    for name, err in sec.get("errors", {}).items():
        lines.append(f"- {name}: {err}")
    return lines


def growth_lines(sec):
    rows = sec["selections"]
    names = [n for n in ("zarrd cold", "zarrd warm", "tensorstore", "static .npy") if rows and n in rows[0]]
    lines = [f"(a) Square selections of `{sec['layout']}` (1024 x 1024 chunks) starting at ({sec['offset']}, "
             f"{sec['offset']}) where they fit: seconds (static .npy: nginx serving the selection as a ready-made "
             "file; TensorStore reads the files in-process).", "",
             "| side | start | elements | " + " | ".join(f"{n} s" for n in names) + " | warm vs static .npy |",
             "|---|---|---|" + "---|" * (len(names) + 1)]
    for row in rows:
        static = row.get("static .npy")
        lines.append(f"| {row['side']} | {row['start']} | {row['elements']} | "
                     + " | ".join(fmt(row[n]["seconds"], digits=4) for n in names) + " | "
                     + (f"{ratio(row['zarrd warm']['seconds'], static['seconds'], False):.2f}x" if static else "-")
                     + " |")
    lines += [""]
    if sec["connections"]:
        lines += ["(b) Requests/s against connections (wrk): a 64 KiB range of one chunk, and a 256 x 256 slice "
                  "(zarrd warm; nginx: the same selection as a static .npy).", "",
                  "| target | conns | zarrd req/s | nginx req/s | zarrd p99 ms | zarrd / nginx |", "|---|---|---|---|---|---|"]
        for row in sec["connections"]:
            z, n = row["zarrd"], row.get("nginx")
            lines.append(f"| {row['target']} | {row['connections']} | {fmt(z['requests_per_s'], digits=0)} | "
                         f"{fmt(n['requests_per_s'], digits=0) if n else '-'} | {z['p99_ms']['median']:.2f} | "
                         + (f"{ratio(z['requests_per_s'], n['requests_per_s']):.2f}x" if n else "-") + " |")
    else:
        lines.append(f"(b) Requests/s against connections: not measured ({sec.get('connections_skipped', '')}).")
    lines += ["", f"![Time against selection size; requests/s against connections]({sec['plot']})"]
    return lines


def scaleout_tables(sec):
    if sec.get("skipped"):
        return [f"Skipped: {sec['skipped']}."]
    lines = [f"zarrd replicas on one directory behind HAProxy: round robin, and consistent hashing by "
             f"array path (the lines of `{sec['route_file']}`). The directory holds the corpus's four arrays three "
             f"times each under different names (hard links), {len(sec.get('views', []))} arrays. Working set: one "
             f"view of each, {mib(sec['working_set_bytes'])} decoded; each replica caches "
             f"{mib(sec['cache_per_replica'])} (half the working set, and at least 9 decoded chunks: zarrd keeps no "
             f"entry over an eighth of its cache). "
             f"Hit rate: zarrd_cache_hits_total / (hits + misses) over the timed run, summed across replicas; "
             f"busiest: the share of requests the busiest replica answered; `-`: no cache lookups (raw reads of values over 64 KiB bypass zarrd's cache). **All replicas, HAProxy and the "
             f"clients share this machine's {sec['cpus']} cores**, so more replicas add cache, not CPU.", "",
             "| workload | replicas | roundrobin /s | hash by array /s | hash / roundrobin | hit rate rr / hash | "
             "busiest rr / hash | rr vs 1 replica | hash vs 1 replica |",
             "|---|---|---|---|---|---|---|---|---|"]
    one = {row["workload"]: row for row in sec["rows"] if row["replicas"] == 1}
    for row in sec["rows"]:
        rr, h = row.get("roundrobin"), row.get("hash by array")
        base = one.get(row["workload"], {})

        def scale(mode):
            return (f"{row[mode]['per_s']['median'] / base[mode]['per_s']['median']:.2f}x"
                    if mode in row and mode in base else "-")

        def cell(res, key):
            if not res or (key == "hit_rate" and res.get("cache_lookups", {"max": 1})["max"] == 0):
                return "-"  # no cache lookups (raw reads of large values bypass the cache)
            return f"{res[key]['median']:.2f}"

        lines.append(f"| {row['workload']} ({row['unit']}/s) | {row['replicas']} | {fmt(rr['per_s'], digits=1) if rr else '-'} | "
                     f"{fmt(h['per_s'], digits=1) if h else '-'} | "
                     + (f"{ratio(h['per_s'], rr['per_s']):.2f}x" if rr and h else "-")
                     + f" | {cell(rr, 'hit_rate')} / {cell(h, 'hit_rate')} | {cell(rr, 'busiest_share')} / "
                     f"{cell(h, 'busiest_share')} | {scale('roundrobin')} | {scale('hash by array')} |")
    for name, err in sec.get("errors", {}).items():
        lines.append(f"- {name}: {err}")
    return lines


def virtual_tables(sec):
    c = sec["chunk"]
    lines = [f"The same array in {c} x {c} chunks, 4-byte shuffle + zlib 1 in every form: plain Zarr v2 (the anchor), "
             "a NetCDF4 file, kerchunk JSON and VirtualiZarr Parquet references to it (`references` mounts), an "
             "Icechunk repository of native chunks and one whose chunks are the NetCDF file's (`icechunk` mounts). "
             "zarrd: one `/api/v1/data/{store}/t?select=...&format=npy`, cold (`--cache-size 0`) and warm (the same "
             "request just before). xarray reads the NetCDF file in-process (netcdf4 engine): opened inside each "
             "read (cold column) or once beforehand (warm column). vs plain Zarr: the anchor's seconds over the "
             "contender's in the same column; below 1, slower than plain Zarr through zarrd.", "",
             "| selection | MB | store | cold s | warm s | cold vs plain Zarr | warm vs plain Zarr |",
             "|---|---|---|---|---|---|---|"]
    forms = [(store, f"{store} cold", f"{store} warm") for store in sec["stores"]]
    forms.append(("xarray in-process", "xarray, opened per read", "xarray, opened once"))
    for row in sec["rows"]:
        anchor = {"cold": row.get("plain Zarr cold"), "warm": row.get("plain Zarr warm")}
        for label, *names in forms:
            cells, rel = [], []
            for state, name in zip(("cold", "warm"), names):
                res = row.get(name)
                cells.append(fmt(res["seconds"], digits=4) if res else "-")
                rel.append(speed(res["seconds"], anchor[state]["seconds"]) if res and anchor[state] else "-")
            lines.append(f"| {row['selection']} | {row['mb']:.1f} | {label} | " + " | ".join(cells + rel) + " |")
    return lines


def protocols_table(sec):
    lines = [f"Section 7's view over HTTPS, {sec['in_flight']} requests in flight through one httpx client: "
             "HTTP/1.1 on up to that many connections (the anchor), HTTP/2 multiplexed on one, and HTTP/1.1 on the six "
             "connections per host a browser allows. httpx's HTTP/2 advertises 64 KiB stream windows and runs in "
             "Python, so these bound such a client, not a browser's native stack. Seconds to the "
             "full view, every value checked; HTTP/2 vs HTTP/1.1 is the HTTP/1.1 time over the HTTP/2 time "
             "(above 1: HTTP/2 faster).", "",
             "| form | zarrd | HTTP/1.1 s | HTTP/2 s | HTTP/2 vs HTTP/1.1 | HTTP/1.1 on 6 connections s | HTTP/2 vs that |",
             "|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        for state in ("warm", "cold"):
            h1, h2 = row.get(f"zarrd {state}, HTTP/1.1"), row.get(f"zarrd {state}, HTTP/2")
            six = row.get(f"zarrd {state}, HTTP/1.1, 6 connections")
            if not (h1 and h2):
                continue
            lines.append(f"| {row['form']} | {state} | {fmt(h1['seconds'], digits=3)} | {fmt(h2['seconds'], digits=3)} | "
                         f"{speed(h2['seconds'], h1['seconds'])} | {fmt(six['seconds'], digits=3) if six else '-'} | "
                         f"{speed(h2['seconds'], six['seconds']) if six else '-'} |")
    for name, err in sec.get("errors", {}).items():
        lines.append(f"- {name}: {err}")
    lines += ["", f"The same view in Chromium (Playwright), fetched by a page of zarrd's origin with {sec['in_flight']} "
              "requests in flight (the page fetches the tiles' bytes; it does not decode or draw them): HTTP/2 "
              "against HTTP/1.1 on the browser's six connections per host (`--disable-http2`). Target: HTTP/2 at "
              "least 1.0x.", ""]
    if sec.get("browser"):
        lines += ["| form | zarrd | HTTP/1.1 s | HTTP/2 s | HTTP/2 vs HTTP/1.1 |", "|---|---|---|---|---|"]
        for row in sec["browser"]:
            for state in ("warm", "cold"):
                h1, h2 = row[f"zarrd {state}, HTTP/1.1"], row[f"zarrd {state}, HTTP/2"]
                lines.append(f"| {row['form']} | {state} | {fmt(h1['seconds'], digits=3)} | "
                             f"{fmt(h2['seconds'], digits=3)} | "
                             f"{verdict(ratio(h1['seconds'], h2['seconds']), 1.0)} |")
    else:
        lines.append(f"Not measured: {sec.get('browser_skipped', 'not run')}.")
    return lines


def writes_table(sec):
    lines = [f"{sec['regions_per_run']} regions per run, float32 4096 x 4096, 512 x 512 chunks, zstd 1. "
             "zarr-python writes the same regions to local files from the same number of threads, "
             "without any synchronization (overlapping unaligned writes can lose updates there).", "",
             "| regions | writers | zarrd MB/s | zarr-python MB/s | zarrd / zarr-python |", "|---|---|---|---|---|"]
    for row in sec["rows"]:
        z, p = row["zarrd"]["mb_per_s"], row["zarr-python"]["mb_per_s"]
        lines.append(f"| {row['regions']} | {row['writers']} | {fmt(z)} | {fmt(p)} | {ratio(z, p):.2f}x |")
    return lines


def reductions_table(sec):
    t, (ny, nx) = sec["steps"], sec["grid"]
    lines = [f"float32 t2m({t}, {ny}, {nx}), {sec['dataset_bytes'] / 1e6:.0f} MB in day chunks (zstd). zarrd computes "
             "`reduce=mean:...` and answers `.npy`; xarray computes the same in-process on the same files (numpy: "
             "everything read, then reduced; dask: the threaded scheduler) or in a notebook reading the chunks "
             "through zarrd's `/zarr/`. vs: the contender's seconds over zarrd cold's (above 1: zarrd faster).", "",
             "| question | zarrd cold s | zarrd warm s | xarray numpy s | xarray dask s | download s | vs numpy | vs dask | vs download |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in sec["rows"]:
        z = row["zarrd cold"]["seconds"]
        cells = [fmt(row[w]["seconds"], digits=3) for w in
                 ("zarrd cold", "zarrd warm", "xarray numpy", "xarray dask", "download through /zarr/")]
        rel = [speed(z, row[w]["seconds"]) for w in ("xarray numpy", "xarray dask", "download through /zarr/")]
        lines.append(f"| {row['question']} | " + " | ".join(cells + rel) + " |")
    rss = sec["peak_rss"]
    lines += ["", f"zarrd's peak RSS: cold {rss['zarrd cold'] / 1e6:.0f} MB, warm {rss['zarrd warm'] / 1e6:.0f} MB "
              f"(the warm one caches the {sec['dataset_bytes'] / 1e6:.0f} MB dataset)."]
    return lines


# The targets of the scaling section (ratios at 16 cores; at fewer cores
# they are shown for comparison).
SCALING_TARGETS = {"metadata": 0.9, "range_64k": 1.0, "chunk": 1.2, "slice_256": 0.9}


def scaling_tables(sec):
    runs = sec["runs"]
    lines = [f"{sec['machine_cores']} cores. zarrd and nginx pinned to the first N cores, wrk (and the client of the "
             "cold reads) on the others, sharing them where there are none; TensorStore in-process pinned to the same "
             "N cores with its thread pools limited to N. Requests/s: zarrd with logging off, zarrd with its default "
             "access log written to a file, nginx (access log off). The targets are the issue's for 16 cores.", ""]
    if any(r["requests"] for r in runs):
        lines += ["| cores | target | conns | zarrd req/s | zarrd, access log req/s | nginx req/s | zarrd / nginx | "
                  "access log's cost |", "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            for row in r["requests"]:
                z, logged = row["zarrd"]["requests_per_s"], row["zarrd, access log"]["requests_per_s"]
                ng = row.get("nginx", {}).get("requests_per_s")
                cost = 1 - logged["median"] / z["median"]
                versus = verdict(ratio(z, ng), SCALING_TARGETS[row["target"]]) if ng else "-"
                lines.append(f"| {r['cores']} | {row['target']} | {row['connections']} | {fmt(z, digits=0)} | "
                             f"{fmt(logged, digits=0)} | {fmt(ng, digits=0) if ng else '-'} | {versus} | "
                             f"{cost * 100:.1f}% {'met' if cost <= 0.05 else '**missed** (target 5%)'} |")
        first, last = runs[0], runs[-1]
        if last["cores"] > first["cores"]:
            lines += ["", f"Speed-up from {first['cores']} to {last['cores']} cores (requests/s at {last['cores']} over "
                      f"at {first['cores']}; contention on shared state shows as zarrd's falling behind nginx's):", "",
                      "| target | conns | zarrd | zarrd, access log | nginx |", "|---|---|---|---|---|"]
            for a, b in zip(first["requests"], last["requests"]):
                cells = [f"{b[w]['requests_per_s']['median'] / a[w]['requests_per_s']['median']:.2f}x"
                         if w in a and w in b else "-" for w in ("zarrd", "zarrd, access log", "nginx")]
                lines.append(f"| {a['target']} | {a['connections']} | " + " | ".join(cells) + " |")
    else:
        lines.append(f"Requests/s not measured: {sec.get('requests_skipped', 'wrk missing')}.")
    lines += ["", "Cold reads (`--cache-size 0`, `.npy` into the client's memory) vs TensorStore in-process "
              "(chunk cache off); ratio: TensorStore's seconds over zarrd's (target 1.0x for a window, 0.8x whole).", "",
              "| cores | layout | selection | zarrd s | TensorStore s | zarrd vs TensorStore |", "|---|---|---|---|---|---|"]
    for r in runs:
        for row in r["cold"]:
            z, t = row["zarrd cold"]["seconds"], row["tensorstore"]["seconds"]
            target = 1.0 if row["selection"] == "window" else 0.8
            lines.append(f"| {r['cores']} | {row['layout']} | {row['selection']} | {fmt(z, digits=4)} | "
                         f"{fmt(t, digits=4)} | {verdict(ratio(z, t, higher_is_better=False), target)} |")
    if any(r["random"] for r in runs):
        lines += ["", f"Cold random {runs[0]['random'][0]['side']}² windows at 32 connections (wrk) vs TensorStore "
                  "in-process from 32 threads, windows/s (target 1.5x):", "",
                  "| cores | layout | zarrd | TensorStore | zarrd / TensorStore |", "|---|---|---|---|---|"]
        for r in runs:
            for row in r["random"]:
                z, t = row["zarrd cold"]["windows_per_s"], row["tensorstore"]["windows_per_s"]
                lines.append(f"| {r['cores']} | {row['layout']} | {fmt(z, digits=0)} | {fmt(t, digits=0)} | "
                             f"{verdict(ratio(z, t), 1.5)} |")
    lines += ["", f"![requests/s and cold windows against cores]({sec['plot']})"]
    return lines


def maps_tables(sec):
    if "skipped" in sec:
        return [f"Skipped: {sec['skipped']}."]
    lines = [f"Tiles of zoom {sec['zoom']} (WebMercatorQuad, 256², PNG) of a {sec['grid']} grid, "
             f"{sec['connections']} requests in flight; the pictures of the same tile agree on "
             f"{', '.join(f'{100 * a:.1f}%' for a in sec['pictures_alike'])} of the pixels both draw.", "",
             "| tiles | zarrd tiles/s | zarrd p99 ms | xpublish-tiles tiles/s | xpublish-tiles p99 ms | zarrd / xpublish-tiles |",
             "|---|---|---|---|---|---|"]
    for kind in sec["rows"]:
        z, x = sec["rows"][kind]["zarrd"], sec["rows"][kind]["xpublish-tiles"]
        lines.append(f"| {kind} | {fmt(z['tiles_per_s'])} | {fmt(z['p99_ms'])} | "
                     f"{fmt(x['tiles_per_s'])} | {fmt(x['p99_ms'])} | "
                     f"{verdict(sec[kind + '_ratio'], sec['goals'][kind])} |")
    return lines


def standards_tables(sec):
    if "skipped" in sec:
        return [f"Skipped: {sec['skipped']}."]
    alike = ", ".join(f"{k}: {'the same' if v else 'DIFFERENT'}" for k, v in sec["series_alike"].items())
    lines = [f"A place's year of hourly values ({sec['grid']}), {sec['places']} places round robin, "
             f"{sec['connections']} requests in flight; each contender's series against the other's: {alike}.", "",
             "| query | zarrd req/s | zarrd p99 ms | xpublish req/s | xpublish p99 ms | zarrd / xpublish |",
             "|---|---|---|---|---|---|"]
    for kind in sec["rows"]:
        z, x = sec["rows"][kind]["zarrd"], sec["rows"][kind]["xpublish"]
        lines.append(f"| {kind} | {fmt(z['requests_per_s'])} | {fmt(z['p99_ms'])} | "
                     f"{fmt(x['requests_per_s'])} | {fmt(x['p99_ms'])} | "
                     f"{verdict(sec[kind + '_ratio'], sec['goal'])} |")
    lines += ["", f"Goal: {sec['goal']}x xpublish's requests/s with zarrd's p99 under {sec['p99_goal_ms']} ms."]
    return lines


TITLES = {
    "raw": ("1. Raw keys: zarrd vs nginx (wrk)", raw_table),
    "clients": ("2. Clients through zarrd's /zarr/ vs through nginx (client-side decoding)", clients_table),
    "slicing": ("3. Server-side slices (/api/v1/data, .npy) vs in-process reads of the same files", slicing_table),
    "peers": ("4. Other data servers", peers_tables),
    "memory": ("5. Memory", memory_lines),
    "writes": ("6. Region writes", writes_table),
    "viewport": ("7. A tiled viewer: 64 tiles of one view, 16 in flight", viewport_tables),
    "growth": ("8. How cost grows: selection size and connections", growth_lines),
    "scaleout": ("9. Replicas behind HAProxy: round robin vs hashing by array", scaleout_tables),
    "virtual": ("10. Reference sets and Icechunk vs plain Zarr, and xarray on the NetCDF file", virtual_tables),
    "protocols": ("11. The viewer's view over HTTP/2 vs HTTP/1.1 (TLS)", protocols_table),
    "reductions": ("12. Reductions on the server vs xarray in a notebook", reductions_table),
    "scaling": ("13. Speed against cores: zarrd vs nginx and TensorStore", scaling_tables),
    "maps": ("14. Map tiles: zarrd vs xpublish-tiles", maps_tables),
    "standards": ("15. OPeNDAP and EDR: zarrd vs xpublish-opendap and xpublish-edr", standards_tables),
}


def write(results, path):
    m = results["machine"]
    lines = ["# Benchmark results", "",
             f"Generated by `bench/run` on {results['started']} (each section says when it ran; a run of "
             f"some sections keeps the others' figures): {m['cpus']} CPUs, {m['platform']}. "
             f"float32 {results['size']} x {results['size']}; every figure is the median of "
             f"{results['reps']} alternated runs (min-max in brackets); ratios are zarrd's speed over the "
             f"peer's from the same run (above 1: zarrd faster). zarrd ran with `--cache-size {results['cache_size']}`.",
             ""]
    for key, (title, render) in TITLES.items():
        sec = results["sections"].get(key)
        if sec is None:
            continue
        ran = ([f"Run on {sec['ran_at']}.", ""] if sec.get("ran_at") else
               [f"Run on or before {sec['ran_by']}.", ""] if sec.get("ran_by") else [])
        if "failed" in sec:
            lines += [f"## {title}", ""] + ran + [f"**Failed**: {sec['failed']}", ""]
            continue
        lines += [f"## {title}", ""] + ran + render(sec) + [""]
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
