"""What several sections share: selections as URL parameters, the readers
(zarr-python and TensorStore, in-process or over HTTP), one .npy slice
fetched and checked, a pool of keep-alive connections with requests in
flight, and zarrd's /metrics counters."""

import http.client
import io
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import measure


def select_param(sel):
    return ",".join(f"{s.start}:{s.stop}" for s in sel)


def mb(sel):
    return np.prod([s.stop - s.start for s in sel]) * 4 / 1e6


# np.load parses the .npy header with ast.literal_eval, which CPython 3.11
# before 3.11.8 breaks when run in several threads at once ("SystemError: AST
# constructor recursion depth mismatch"): pool workers parse one at a time.
_NPY_LOCK = threading.Lock()


def npy_values(body):
    with _NPY_LOCK:
        return np.load(io.BytesIO(body), allow_pickle=False)


def read_zarr_python(url, sel):
    import zarr
    return zarr.open_array(url, mode="r")[sel]


def read_tensorstore(url, sel, zarr_format, kvstore="http"):
    import tensorstore as ts
    kv = {"driver": "http", "base_url": url + "/"} if kvstore == "http" else {"driver": "file", "path": url}
    spec = {"driver": "zarr3" if zarr_format == 3 else "zarr", "kvstore": kv,
            "context": {"cache_pool": {"total_bytes_limit": 0}}}
    return ts.open(spec, read=True).result()[sel].read().result()


def timed_checked(ctx, who, sel, fn):
    seconds, value = measure.timed(fn)
    ctx.check(value, sel, who)
    return {"seconds": seconds, "mb_per_s": mb(sel) / seconds}


def zarrd_slice_url(base, layout, sel):
    return f"{base}/api/v1/data/{layout}.zarr?select={select_param(sel)}&format=npy"


def npy_slice(ctx, url, sel, who, repeat):
    """One .npy document fetched on a new connection and checked; `repeat`
    asks once first (zarrd: a warm cache; nginx: an open file)."""
    if repeat:
        measure.fetch(url)
    seconds, body = measure.fetch(url)
    ctx.check(npy_values(body), sel, who)
    return {"seconds": seconds}


def zarrd_slice(ctx, server, layout, sel, who, repeat):
    """One server-side slice as .npy, checked; `repeat` asks once first (warm cache)."""
    return npy_slice(ctx, zarrd_slice_url(server.url, layout, sel), sel, who, repeat)


def static_slice(ctx, nginx, sel, who="nginx static .npy"):
    """The same selection written beforehand as a .npy file, from nginx."""
    return npy_slice(ctx, nginx.url + ctx.static_npy(sel), sel, who, True)


class Pool:
    """A browser's way of fetching: `size` requests in flight, each worker
    thread with its own keep-alive connection per host, kept across calls."""

    def __init__(self, size=16):
        self.executor = ThreadPoolExecutor(max_workers=size)
        self.local = threading.local()
        self.lock = threading.Lock()
        self.connections = []

    def _connection(self, netloc):
        conns = getattr(self.local, "conns", None)
        if conns is None:
            conns = self.local.conns = {}
        conn = conns.get(netloc)
        if conn is None:
            host, port = netloc.rsplit(":", 1)
            conn = conns[netloc] = http.client.HTTPConnection(host, int(port), timeout=600)
            with self.lock:
                self.connections.append(conn)
        return conn

    def get(self, url, headers=None):
        """One GET on this thread's connection to the host: the body (200 or 206)."""
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for attempt in (0, 1):
            conn = self._connection(parts.netloc)
            try:
                conn.request("GET", path, headers=headers or {})
                resp = conn.getresponse()
                body = measure.read_body(resp)
                break
            except (ConnectionError, http.client.HTTPException):
                # The server closed an idle keep-alive connection: once more on a new one.
                conn.close()
                del self.local.conns[parts.netloc]
                if attempt:
                    raise
        if resp.status not in (200, 206):
            raise RuntimeError(f"GET {url}: {resp.status} {bytes(body[:300])!r}")
        return body

    def submit(self, fn, *args):
        return self.executor.submit(fn, *args)

    def map(self, fn, items):
        """fn(item) for every item, `size` at a time; the results in order."""
        return [f.result() for f in [self.executor.submit(fn, item) for item in items]]

    def close(self):
        self.executor.shutdown(wait=True)
        for conn in self.connections:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def metrics(url):
    """zarrd's /metrics as {series: value}, a labelled series under its name with labels."""
    _, body = measure.fetch(url + "/metrics")
    values = {}
    for line in bytes(body).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values
