"""Section protocols: the viewport of section 7 (one view of 64 tiles, 16
requests in flight) over HTTPS, HTTP/2 against HTTP/1.1, as a browser
fetches: over HTTP/1.1 up to 16 connections, each with its own TLS
handshake once; over HTTP/2 one connection carrying all 16 streams. Both
through httpx, so the client costs the same; the anchor is HTTP/1.1 in the
same run; also HTTP/1.1 on the six connections per host browsers allow.
zarrd is warm (the view was shown once) so that the figure is the
protocol's, and cold (`--cache-size 0`). httpx's HTTP/2 (the h2 package)
advertises 64 KiB stream windows and runs in Python: the figures bound
what a client like it gets, not a browser's native stack. So the same view
is also fetched by Chromium (Playwright) from a page of zarrd's origin,
with HTTP/2 and with HTTP/2 disabled (HTTP/1.1 on the browser's six
connections per host), alternated, every body checked by its SHA-256."""

import datetime
import ipaddress
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import measure
import report
import viewport
from procs import OUT, Zarrd

BROWSER_CONNECTIONS = 6
CHROMIUM = os.environ.get("ZARRD_CHROMIUM", "/usr/bin/chromium")

# The view's requests made by the page: `IN_FLIGHT` at once, bodies taken
# whole, timed from the first request to the last body; the browser's cache
# is bypassed so that every run asks the server. Resolves to the seconds,
# each body's SHA-256 (hex, taken after the clock stopped) and the protocols
# the requests went over.
FETCH_VIEW_JS = """
async ([phases, inFlight]) => {
  performance.clearResourceTimings();
  performance.setResourceTimingBufferSize(100000);
  const bodies = [];
  const start = performance.now();
  for (const requests of phases) {
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const i = next++;
        const [url, range] = requests[i];
        const r = await fetch(url, {cache: "no-store", headers: range ? {Range: range} : {}});
        if (r.status !== 200 && r.status !== 206) throw new Error(`GET ${url}: ${r.status}`);
        bodies.push([url + " " + range, await r.arrayBuffer()]);
      }
    };
    await Promise.all(Array.from({length: inFlight}, worker));
  }
  const seconds = (performance.now() - start) / 1000;
  const digests = {};
  for (const [key, body] of bodies) {
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", body));
    digests[key] = Array.from(d, b => b.toString(16).padStart(2, "0")).join("");
  }
  const protocols = [...new Set(performance.getEntriesByType("resource").map(e => e.nextHopProtocol))];
  return {seconds, digests, protocols};
}
"""


class HttpxPool:
    """`viewport`'s pool interface (get, map) over one async httpx client on
    its own event loop thread, for 16 threads: HTTP/1.1 opens a connection
    per request in flight, HTTP/2 multiplexes them on one. (httpx's sync
    client shares HTTP/2 connections across threads unsafely.)"""

    def __init__(self, cert, http2, size=viewport.IN_FLIGHT):
        import asyncio

        import httpx

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)

        async def make():
            return httpx.AsyncClient(http2=http2, http1=not http2, verify=cert, limits=limits, timeout=600)

        self.client = self.run(make())
        self.executor = ThreadPoolExecutor(max_workers=size)
        self.versions = set()
        self.lock = threading.Lock()

    def run(self, coroutine):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def get(self, url, headers=None):
        response = self.run(self.client.get(url, headers=headers or {}))
        if response.status_code not in (200, 206):
            raise RuntimeError(f"GET {url}: {response.status_code} {response.content[:300]!r}")
        with self.lock:
            self.versions.add(response.http_version)
        return response.content

    def map(self, fn, items):
        return list(self.executor.map(fn, items))

    def close(self):
        self.executor.shutdown()
        self.run(self.client.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def get_tls(url, rng, cert):
    """One GET over HTTPS trusting `cert`: the body."""
    import ssl
    import urllib.request
    request = urllib.request.Request(url, headers={"Range": rng} if rng else {})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=cert)) as response:
        return response.read()


def view_requests(ctx, base, layout, origin, form, cert):
    """The view's requests in their phases, each (url, Range or ""): raw,
    the shards' indexes and then their inner chunks (the ranges read from
    the indexes here, beforehand: the page fetches, it does not decode);
    REST, one slice per tile."""
    if form == "REST slices":
        return [[(viewport.zarrd_tile_url(base, f"{viewport.LAYOUT}.zarr", sel), "")
                 for sel in viewport.tile_selections(ctx, origin)]]
    view, _ = viewport.geometry(ctx.n)
    r0, c0 = origin
    r1, c1 = min(r0 + view, ctx.n), min(c0 + view, ctx.n)
    url = f"{base}/zarr/{layout.layout}.zarr/"
    shards = layout.shards_under(r0, r1, c0, c1)
    indexes, chunks = [], []
    (s0, s1), (i0, i1) = layout.shard, layout.inner
    for si, sj in shards:
        key = url + layout.shard_key(si, sj)
        suffix = f"bytes=-{layout.index_bytes}"
        indexes.append((key, suffix))
        index = layout.parse_index(get_tls(key, suffix, cert))
        for a in range(layout.per_shard[0]):
            for b in range(layout.per_shard[1]):
                g0, g1 = si * s0 + a * i0, sj * s1 + b * i1
                offset, nbytes = (int(v) for v in index[a, b])
                under = max(g0, r0) < min(g0 + i0, r1) and max(g1, c0) < min(g1 + i1, c1)
                if under and offset != viewport.EMPTY:
                    chunks.append((key, f"bytes={offset}-{offset + nbytes - 1}"))
    return [indexes, chunks]


class Browser:
    """Chromium driven by Playwright, on a page of the server's origin, with
    HTTP/2 or (`--disable-http2`) HTTP/1.1 and its six connections per host."""

    def __init__(self, playwright, http2):
        args = ["--no-sandbox"] + ([] if http2 else ["--disable-http2"])
        self.browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        self.page = self.browser.new_context(ignore_https_errors=True).new_page()
        self.protocols = set()

    def view(self, base, phases, expected):
        if not self.page.url.startswith(base):
            self.page.goto(base + "/healthz")
        got = self.page.evaluate(FETCH_VIEW_JS, [phases, viewport.IN_FLIGHT])
        if got["digests"] != expected:
            raise AssertionError(f"the browser got other bytes from {base} than the server sends")
        self.protocols.update(got["protocols"])
        return {"seconds": got["seconds"]}

    def close(self):
        self.browser.close()


def digests(phases, cert):
    """What each of the view's requests answers, as the page keys it."""
    import hashlib
    return {f"{url} {rng}": hashlib.sha256(get_tls(url, rng, cert)).hexdigest()
            for url, rng in (r for phase in phases for r in phase)}


def browser_rows(ctx, cert, servers, layout, origin):
    """The view in Chromium over HTTP/2 and over HTTP/1.1, alternated."""
    if not os.path.exists(CHROMIUM):
        return [], f"no Chromium at {CHROMIUM}"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [], "Playwright is not installed"
    rows = []
    with sync_playwright() as p:
        browsers = {"HTTP/1.1": Browser(p, http2=False), "HTTP/2": Browser(p, http2=True)}
        try:
            for form in ("raw", "REST slices"):
                contenders = {}
                for state, server in servers.items():
                    phases = view_requests(ctx, server.url, layout, origin, form, cert)
                    expected = digests(phases, cert)
                    for protocol, browser in browsers.items():
                        contenders[f"zarrd {state}, {protocol}"] = (
                            lambda b=browser, u=server.url, ph=phases, e=expected: b.view(u, ph, e))
                for run in contenders.values():
                    run()   # once untimed: the connections, and zarrd warm's cache
                res = measure.alternate(contenders, ctx.args.reps)
                rows.append({"form": form, **res})
                print("protocols, Chromium", form, report.brief(res, "seconds"))
            spoken = {name: sorted(b.protocols) for name, b in browsers.items()}
        finally:
            for b in browsers.values():
                b.close()
    if spoken != {"HTTP/1.1": ["http/1.1"], "HTTP/2": ["h2"]}:
        raise AssertionError(f"Chromium spoke {spoken}")
    return rows, None


def self_signed(directory):
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(directory, "bench-cert.pem"), os.path.join(directory, "bench-key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def section(ctx):
    cert, key = self_signed(OUT)
    tls = ("--tls-cert", cert, "--tls-key", key)
    origin = viewport.main_view(ctx.n)
    layout = viewport.ShardedLayout(ctx.root)
    errors, rows = {}, []
    pools = {"HTTP/1.1": HttpxPool(cert, http2=False), "HTTP/2": HttpxPool(cert, http2=True),
             # What a browser allows over HTTP/1.1: six connections per host.
             "HTTP/1.1, 6 connections": HttpxPool(cert, http2=False, size=BROWSER_CONNECTIONS)}
    try:
        with ctx.zarrd(*tls) as warm, Zarrd(ctx.root, "--cache-size", "0", *tls) as cold:
            for form in ("raw", "REST slices"):
                contenders = {}
                for state, server in (("warm", warm), ("cold", cold)):
                    for protocol, pool in pools.items():
                        if form == "raw":
                            def run(pool=pool, url=server.url):
                                return viewport.raw_view(ctx, pool, url, layout, origin)
                        else:
                            def run(pool=pool, url=server.url):
                                return viewport.rest_view(ctx, pool, url, origin)
                        contenders[f"zarrd {state}, {protocol}"] = run
                contenders = measure.working(contenders, errors, f"protocols {form}")
                res = measure.alternate(contenders, ctx.args.reps)
                rows.append({"form": form, **res})
                print("protocols", form, report.brief(res, "seconds"))
            browser, skipped = browser_rows(ctx, cert, {"warm": warm, "cold": cold}, layout, origin)
            rss = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
        versions = {name: sorted(pool.versions) for name, pool in pools.items()}
    finally:
        for pool in pools.values():
            pool.close()
    # Each client spoke the protocol it is named for, or the figures mean nothing.
    if versions != {"HTTP/1.1": ["HTTP/1.1"], "HTTP/2": ["HTTP/2"], "HTTP/1.1, 6 connections": ["HTTP/1.1"]}:
        raise AssertionError(f"protocols spoken: {versions}")
    sec = {"rows": rows, "errors": errors, "in_flight": viewport.IN_FLIGHT, "versions": versions, "peak_rss": rss,
           "browser": browser}
    if skipped:
        sec["browser_skipped"] = skipped
    return sec
