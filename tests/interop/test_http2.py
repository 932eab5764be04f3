"""HTTP/2 and TLS. With `--tls-cert`/`--tls-key` zarrd serves HTTPS and
speaks HTTP/2 or HTTP/1.1 as ALPN agrees; in cleartext it takes HTTP/2 with
prior knowledge (h2c) beside HTTP/1.1. curl and httpx (HTTP/2, many
requests multiplexed on one connection) read the corpus's stored keys
through it, byte for byte, ranges included; bad certificate settings stop
the server at start with a message."""

import asyncio
import socket
import time
import datetime
import ipaddress
import json
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


class H2Client:
    """An HTTP/2 client over a raw socket that reads frames but, unless told
    to, grants no flow-control window: a client that stops taking data."""

    def __init__(self, url, window, connection_window=None):
        import h2.config
        import h2.connection
        import h2.settings
        host, port = url.split("//")[1].split(":")
        self.authority = f"{host}:{port}"
        self.sock = socket.create_connection((host, int(port)))
        self.sock.settimeout(0.2)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        if connection_window:
            # The connection's own window starts at 64 KiB whatever the settings say.
            self.conn.increment_flow_control_window(connection_window - 65535)
        self.sock.sendall(self.conn.data_to_send())
        self.events = []
        self.closed = False
        self.buffer = b""
        self.terminated = False
        self.goaways = []

    def get(self, path):
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                        (":authority", self.authority)], end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        return stream

    def pump(self, seconds, every=None, limit=None):
        """Read frames for `seconds` (or until `limit` bytes have come),
        answering pings and settings only; with `every`, also send a
        request each `every` seconds and grant it the window to be answered
        (a client keeping its connection busy while other streams stay
        stalled)."""
        end = time.monotonic() + seconds
        received = 0
        due = time.monotonic()
        while time.monotonic() < end and not self.closed:
            if every is not None and time.monotonic() >= due:
                due += every
                try:
                    stream = self.get("/healthz")
                    self.conn.increment_flow_control_window(1 << 16, stream_id=stream)
                    self.sock.sendall(self.conn.data_to_send())
                except OSError:
                    self.closed = True
                    break
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                self.closed = True
                break
            self.receive(data)
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)
            received += len(data)
            if limit is not None and received >= limit:
                break

    def receive(self, data):
        """Frames, one at a time: the h2 library takes nothing after a
        GOAWAY, where a server closing gracefully sends a PING with its
        first one and a second GOAWAY once the PING is answered; those are
        handled here."""
        import h2.events
        self.buffer += data
        while len(self.buffer) >= 9:
            end = 9 + int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < end:
                break
            frame, self.buffer = self.buffer[:end], self.buffer[end:]
            kind, flags = frame[3], frame[4]
            if kind == 7:  # GOAWAY: last stream id, error code
                self.goaways.append((int.from_bytes(frame[9:13], "big") & 0x7FFFFFFF,
                                     int.from_bytes(frame[13:17], "big")))
            if self.terminated:
                if kind == 6 and not flags & 1:  # a PING: acknowledged, as clients do
                    self.sock.sendall(b"\x00\x00\x08\x06\x01\x00\x00\x00\x00" + frame[9:17])
                if kind == 0:  # DATA of a stream the GOAWAY let finish
                    stream, payload = int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF, frame[9:]
                    if flags & 8:
                        payload = payload[1:len(payload) - payload[0]]
                    self.events.append(h2.events.DataReceived(
                        stream_id=stream, data=payload, flow_controlled_length=len(frame) - 9))
                    if flags & 1:
                        self.events.append(h2.events.StreamEnded(stream_id=stream))
                continue
            for e in self.conn.receive_data(frame):
                self.events.append(e)
                self.terminated |= isinstance(e, h2.events.ConnectionTerminated)

    def read_slowly(self, path, rate, seconds, read_rate=None):
        """Fetch `path`, granting window back at `rate` bytes a second, as
        a client on a slow link, and with `read_rate` also taking bytes
        off the socket no faster than that; returns (bytes received,
        whether the stream ended)."""
        import h2.events
        stream, got, owed, start = self.get(path), 0, 0, time.monotonic()
        while time.monotonic() - start < seconds and not self.closed:
            if read_rate and got > read_rate * (time.monotonic() - start):
                time.sleep(0.005)
                continue
            self.pump(0.01, limit=65536 if read_rate else None)
            for e in self.events:
                if isinstance(e, h2.events.DataReceived) and e.stream_id == stream:
                    got += len(e.data)
                    owed += e.flow_controlled_length
                if isinstance(e, h2.events.StreamEnded) and e.stream_id == stream:
                    return got, True
            self.events = []
            # Give back what the rate allows by now.
            allowed = int(rate * (time.monotonic() - start)) - (got - owed)
            grant = min(owed, max(0, allowed))
            if grant:
                if self.terminated:  # the h2 library sends nothing after a GOAWAY
                    for sid in (0, stream):
                        self.sock.sendall(b"\x00\x00\x04\x08\x00" + sid.to_bytes(4, "big") + grant.to_bytes(4, "big"))
                else:
                    self.conn.acknowledge_received_data(grant, stream)
                    self.sock.sendall(self.conn.data_to_send())
                owed -= grant
        return got, False

    def close(self):
        self.sock.close()


@pytest.fixture
def blob_server(tmp_path):
    folder = tmp_path / "data" / "big"
    folder.mkdir(parents=True)
    (folder / "blob").write_bytes(os.urandom(2 << 20))
    # An array whose JSON answer (about 3 MB) is one piece of body.
    (folder / "table").mkdir()
    (folder / "table" / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [384, 384], "chunks": [384, 384], "dtype": "<f8", "compressor": None,
        "filters": None, "fill_value": 0, "order": "C"}))
    (folder / "table" / "0.0").write_bytes(os.urandom(384 * 384 * 8))
    url, proc = start_zarrd(str(tmp_path / "data"), "--body-timeout", "1", "--header-timeout", "2",
                            "--max-concurrency", "4")
    yield url
    stop(proc)


@pytest.mark.parametrize("path", ["/zarr/big/blob", "/api/v1/data/big/table?format=json"])
def test_a_stream_its_client_stops_taking_frees_its_place(blob_server, path):
    import h2.events
    stalled = H2Client(blob_server, window=1)
    try:
        streams = [stalled.get(path) for _ in range(4)]
        stalled.pump(0.3)
        # Every place is taken by a response its client takes nothing of ...
        assert httpx.get(f"{blob_server}/zarr/big/blob", headers={"Range": "bytes=0-9"}).status_code == 503
        # ... until --body-timeout passes without progress: then its
        # connection is closed, as an HTTP/1.1 client's that stops reading,
        # though it kept answering pings and asking for other things (an
        # answer handed over whole would have been out of reach), and the
        # places are free again.
        stalled.pump(5, every=0.5)
        assert stalled.closed
        ended = {e.stream_id for e in stalled.events if isinstance(e, h2.events.StreamEnded)}
        assert not ended & set(streams), "no stalled answer was passed off as complete"
        r = httpx.get(f"{blob_server}/zarr/big/blob", headers={"Range": "bytes=0-9"})
        assert (r.status_code, len(r.content)) == (206, 10)
    finally:
        stalled.close()


def test_a_stalled_stream_is_closed_one_body_timeout_after_its_last_progress(blob_server):
    """--body-timeout (1 s here) holds HTTP/2 streams as it holds HTTP/1.1
    bodies: the connection of a stream its client takes nothing of closes
    between one and 1.25 timeouts later (checking twice a timeout apart held
    it for two)."""
    stalled = H2Client(blob_server, window=1)
    try:
        started = time.monotonic()
        stalled.get("/zarr/big/blob")
        stalled.pump(5)
        took = time.monotonic() - started
        assert stalled.closed
        assert 1.0 <= took < 1.7, f"closed after {took:.2f} s"
    finally:
        stalled.close()


def test_an_idle_http2_connection_is_closed_with_goaway(blob_server):
    import h2.errors
    idle = H2Client(blob_server, window=65535)
    try:
        stream = idle.get("/healthz")
        idle.pump(8)
        # --header-timeout (2 s) after its last request, as HTTP/1.1 keep-alive.
        assert idle.closed
        # Announced with GOAWAY (no error, the answered stream its last), so
        # a client knows a request it sent meanwhile was not taken.
        assert idle.goaways, [type(e).__name__ for e in idle.events]
        assert idle.goaways[-1] == (stream, h2.errors.ErrorCodes.NO_ERROR), idle.goaways
    finally:
        idle.close()


def test_shutdown_closes_http2_connections_with_goaway_and_finishes_their_answers(tmp_path):
    import h2.errors
    import h2.events
    (tmp_path / "a").write_bytes(b"x")
    blob = os.urandom(128 << 10)
    (tmp_path / "blob").write_bytes(blob)
    url, proc = start_zarrd(str(tmp_path), "--shutdown-timeout", "60")
    try:
        idle = H2Client(url, window=65535)
        stream = idle.get("/zarr/a")
        idle.pump(0.3)
        # A client on a slow link, in the middle of an answer.
        import threading
        slow, result = H2Client(url, window=65535), []
        reader = threading.Thread(target=lambda: result.append(slow.read_slowly("/zarr/blob", 40_000, 20)))
        reader.start()
        time.sleep(0.5)
        proc.terminate()
        reader.join()
        assert result == [(len(blob), True)]
        idle.pump(3)
        # The idle one gets GOAWAY (no error, its answered stream the last)
        # and is closed once it answers the GOAWAY's ping.
        assert idle.closed and idle.goaways[-1] == (stream, h2.errors.ErrorCodes.NO_ERROR), idle.goaways
        assert proc.wait(timeout=20) == 0
        idle.close()
        slow.close()
    finally:
        stop(proc)


def test_shutdown_does_not_cut_off_a_client_still_granting_window(tmp_path):
    # A client with a large window has most of an answer in flight when
    # the server finishes sending it, and keeps granting window as it
    # reads. Closing the socket at that point, with its window updates
    # unread, resets the connection and throws away what the client has
    # not read yet; the server lingers until the client's FIN instead.
    import threading
    blob = os.urandom(8 << 20)
    (tmp_path / "blob").write_bytes(blob)
    url, proc = start_zarrd(str(tmp_path), "--shutdown-timeout", "60")
    try:
        client, result = H2Client(url, window=32 << 20, connection_window=32 << 20), []
        reader = threading.Thread(target=lambda: result.append(client.read_slowly("/zarr/blob", 64 << 20, 20, read_rate=4 << 20)))
        reader.start()
        time.sleep(0.3)
        proc.terminate()
        reader.join()
        assert result == [(len(blob), True)]
        client.close()
        assert proc.wait(timeout=20) == 0
    finally:
        stop(proc)


def test_headers_up_to_the_limit_are_taken_over_http2(blob_server):
    with httpx.Client(http1=False, http2=True, base_url=blob_server) as client:
        big = {"x-padding": "a" * 20_000}
        assert client.get("/zarr/big/blob", headers={**big, "Range": "bytes=0-3"}).status_code == 206
        r = client.get("/zarr/big/blob", headers={"x-padding": "a" * 70_000})
        assert r.status_code == 431
        assert r.json()["error"]["code"] == "headers_too_large"


def test_a_client_that_sends_part_of_the_preface_and_leaves_is_let_go(tmp_path):
    url, proc = start_zarrd(str(tmp_path), "--header-timeout", "60")
    try:
        host, port = url.split("//")[1].split(":")
        s = socket.create_connection((host, int(port)))
        s.sendall(b"PRI")
        s.shutdown(socket.SHUT_WR)
        s.settimeout(20)
        # The server closes its side once it sees the client has gone, not
        # when --header-timeout passes (it peeked at those bytes every few
        # milliseconds until then).
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
        s.close()
    finally:
        stop(proc)


@pytest.mark.parametrize("path", ["/zarr/big/blob", "/api/v1/data/big/table?format=json"])
def test_a_slow_but_steady_http2_client_gets_all_of_a_long_answer(blob_server, path):
    # Several seconds at 1 MB/s: past --body-timeout (1 s) and
    # --header-timeout (2 s), each 64 KiB piece taken well within them.
    slow = H2Client(blob_server, window=65535)
    try:
        got, ended = slow.read_slowly(path, rate=1_000_000, seconds=60)
        assert ended and got > 2_000_000, (got, ended)
    finally:
        slow.close()
