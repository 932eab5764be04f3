"""How things are measured: wrk for loads of many connections, one timed
request for single transfers, and the alternation of contenders (A B A B)
so that drift of a shared machine hits every contender alike."""

import http.client
import re
import statistics
import subprocess
import time
import urllib.parse


def summary(values):
    """Median and range of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def working(contenders, errors, label):
    """The contenders whose measurement runs once without error; the others
    are recorded in `errors` (a peer's bug is reported, not fatal)."""
    kept = {}
    for name, measure in contenders.items():
        try:
            measure()
            kept[name] = measure
        except Exception as e:  # noqa: BLE001  (any failure of a peer is a result)
            errors[f"{name}, {label}"] = f"{type(e).__name__}: {str(e)[:300]}"
    return kept


def alternate(contenders, reps):
    """Run each contender's measurement `reps` times, interleaved A B A B.

    `contenders` maps a name to a function returning a dict of numbers; the
    result maps each name to a dict of summaries."""
    samples = {name: [] for name in contenders}
    for _ in range(reps):
        for name, measure in contenders.items():
            samples[name].append(measure())
    return {name: {k: summary([s[k] for s in runs]) for k in runs[0]} for name, runs in samples.items()}


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def _seconds(text):
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * _UNITS[unit]


def wrk(url, connections, seconds, headers=None, response_bytes=None, cpus=None, threads=2, script=None):
    """Keep-alive load from wrk: requests/s, MB/s and latency percentiles.

    MB/s is requests/s times the known response size (wrk's own transfer
    figure counts headers too, in binary units). `cpus`: the cores wrk runs
    on; `script`: a Lua file that makes each request."""
    argv = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    # A generous timeout: a slow answer is counted late rather than dropped.
    argv += ["wrk", "--latency", "--timeout", "30s", "-t", str(min(threads, connections)), "-c", str(connections),
             "-d", f"{max(1, round(seconds))}s"]
    if script:
        argv += ["-s", script]
    for name, value in (headers or {}).items():
        argv += ["-H", f"{name}: {value}"]
    out = subprocess.run(argv + [url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)\s*$", out, re.M))
    if set(latency) != {"50", "99"}:
        raise RuntimeError(f"wrk printed no latency percentiles for {url}:\n{out[-1500:]}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"wrk saw {errors.group(1)} error responses from {url}")
    result = {"requests_per_s": rps, "p50_ms": _seconds(latency["50"]) * 1e3, "p99_ms": _seconds(latency["99"]) * 1e3}
    if response_bytes is not None:
        result["mb_per_s"] = rps * response_bytes / 1e6
    return result


def fetch(url, headers=None, auth=None):
    """One GET on a new connection: (seconds, status, body)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = dict(headers or {})
    if auth:
        headers["Authorization"] = auth
    start = time.perf_counter()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = read_body(resp)
    elapsed = time.perf_counter() - start
    conn.close()
    if resp.status not in (200, 206):
        raise RuntimeError(f"GET {url}: {resp.status} {body[:300]!r}")
    return elapsed, body


def read_body(resp):
    """The whole body, received straight into one buffer when its length is
    known (as a client that wants an array would), so the client's own
    copying does not count against the server."""
    length = resp.getheader("Content-Length")
    if length is None:
        return resp.read()
    buf = bytearray(int(length))
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = resp.readinto(view[got:])
        if not n:
            raise RuntimeError(f"body ended after {got} of {len(buf)} bytes")
        got += n
    return bytes(buf) if len(buf) < 1 << 20 else buf


def timed(fn):
    """Seconds one call of `fn` takes, and what it returned."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value
