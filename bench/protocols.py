"""Section protocols: the viewport of section 7 (one view of 64 tiles, 16
requests in flight) over HTTPS, HTTP/2 against HTTP/1.1, as a browser
fetches: over HTTP/1.1 up to 16 connections, each with its own TLS
handshake once; over HTTP/2 one connection carrying all 16 streams. Both
through httpx, so the client costs the same; the anchor is HTTP/1.1 in the
same run; also HTTP/1.1 on the six connections per host browsers allow.
zarrd is warm (the view was shown once) so that the figure is the
protocol's, and cold (`--cache-size 0`). httpx's HTTP/2 (the h2 package)
advertises 64 KiB stream windows and runs in Python: the figures bound
what a client like it gets, not a browser's native stack."""

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
            rss = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
        versions = {name: sorted(pool.versions) for name, pool in pools.items()}
    finally:
        for pool in pools.values():
            pool.close()
    # Each client spoke the protocol it is named for, or the figures mean nothing.
    if versions != {"HTTP/1.1": ["HTTP/1.1"], "HTTP/2": ["HTTP/2"], "HTTP/1.1, 6 connections": ["HTTP/1.1"]}:
        raise AssertionError(f"protocols spoken: {versions}")
    return {"rows": rows, "errors": errors, "in_flight": viewport.IN_FLIGHT, "versions": versions, "peak_rss": rss}
