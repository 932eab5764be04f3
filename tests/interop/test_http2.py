"""HTTP/2 and TLS. With `--tls-cert`/`--tls-key` zarrd serves HTTPS and
speaks HTTP/2 or HTTP/1.1 as ALPN agrees; in cleartext it takes HTTP/2 with
prior knowledge (h2c) beside HTTP/1.1. curl and httpx (HTTP/2, many
requests multiplexed on one connection) read the corpus's stored keys
through it, byte for byte, ranges included; bad certificate settings stop
the server at start with a message."""

import asyncio
import datetime
import ipaddress
import os
import ssl
import subprocess

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import start_zarrd, stop


def self_signed(folder):
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def stored_keys(root, limit=200):
    """Stored keys of the corpus's v3 hierarchy (metadata and chunks)."""
    base = os.path.join(root, "v3.zarr")
    keys = []
    for folder, _, files in sorted(os.walk(base)):
        for name in sorted(files):
            keys.append(os.path.relpath(os.path.join(folder, name), root))
    return keys[:limit]


@pytest.fixture(scope="module")
def servers(corpus, tmp_path_factory):
    root, _ = corpus
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    tls_url, tls = start_zarrd(root, "--tls-cert", str(cert), "--tls-key", str(key))
    plain_url, plain = start_zarrd(root)
    yield root, cert, tls_url, plain_url
    stop(plain)
    stop(tls)


def curl_version(*args):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", *args],
                         capture_output=True, text=True, timeout=30)
    return out.stdout


def test_tls_speaks_http2_or_http1_as_alpn_agrees(servers):
    root, cert, tls_url, _ = servers
    url = f"{tls_url}/zarr/{stored_keys(root)[0]}"
    assert tls_url.startswith("https://")
    assert curl_version("--cacert", str(cert), "--http2", url) == "2 200"
    assert curl_version("--cacert", str(cert), "--http1.1", url) == "1.1 200"
    # A client that does not trust the certificate gets no answer at all.
    assert curl_version(url).startswith("0 000")


def test_cleartext_takes_http2_with_prior_knowledge(servers):
    root, _, _, plain_url = servers
    url = f"{plain_url}/zarr/{stored_keys(root)[0]}"
    assert curl_version("--http2-prior-knowledge", url) == "2 200"
    assert curl_version(url) == "1.1 200"


@pytest.mark.parametrize("which", ["tls", "h2c"])
def test_httpx_over_http2_reads_every_key(servers, which):
    root, cert, tls_url, plain_url = servers
    if which == "tls":
        options = dict(http2=True, verify=ssl.create_default_context(cafile=str(cert)), base_url=tls_url, timeout=30)
    else:
        options = dict(http1=False, http2=True, base_url=plain_url, timeout=30)
    keys = stored_keys(root)

    async def fetch_all():
        # Many requests in flight on one connection: HTTP/2 multiplexes them.
        # (An async client: httpx's sync client races when threads share an
        # HTTP/2 connection.)
        async with httpx.AsyncClient(**options) as client:
            limit = asyncio.Semaphore(16)

            async def one(k):
                async with limit:
                    return await client.get(f"/zarr/{k}")

            return await asyncio.gather(*(one(k) for k in keys))

    answers = asyncio.run(fetch_all())
    client = httpx.Client(**options)
    with client:
        for k, r in zip(keys, answers):
            assert (r.http_version, r.status_code) == ("HTTP/2", 200), k
            with open(os.path.join(root, k), "rb") as f:
                assert r.content == f.read(), k
        big = max(keys, key=lambda k: os.path.getsize(os.path.join(root, k)))
        r = client.get(f"/zarr/{big}", headers={"Range": "bytes=-7"})
        with open(os.path.join(root, big), "rb") as f:
            assert (r.status_code, r.content) == (206, f.read()[-7:])
        head = client.head(f"/zarr/{big}")
        assert int(head.headers["content-length"]) == os.path.getsize(os.path.join(root, big))
        assert client.get("/zarr/v3.zarr/no-such-key").status_code == 404


def test_bad_tls_settings_stop_the_server_at_start(servers, tmp_path):
    root, cert, _, _ = servers
    binary = os.environ.get("ZARRD_BIN")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    for args, says in [(["--tls-cert", str(cert)], "--tls-cert and --tls-key go together"),
                       (["--tls-cert", str(cert), "--tls-key", str(garbage)], "TLS key"),
                       (["--tls-cert", str(garbage), "--tls-key", str(garbage)], "TLS certificate")]:
        out = subprocess.run([binary, "serve", "--listen", "127.0.0.1:0", root, *args],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0, args
        assert says in out.stderr + out.stdout, (args, out.stderr)
