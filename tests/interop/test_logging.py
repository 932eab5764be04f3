"""The access log a deployment keeps on: one line per request (refused ones
included) in text or JSON, written in batches yet complete when the server
stops, and off with ZARRD_LOG=warn."""

import json
import re
import time

import numpy as np
import requests
import zarr

from conftest import start_zarrd, stop


def serve(tmp_path, *args, level=None):
    root = tmp_path / "root"
    if not root.exists():
        zarr.create_array(str(root / "a"), shape=(4,), chunks=(4,), dtype="i4")[:] = np.arange(4)
    log = open(tmp_path / "stderr.log", "w")
    # Without ZARRD_LOG (the tests unset it) zarrd logs at its default level.
    base, proc = start_zarrd(str(root), "--max-header-bytes", "8192", *args,
                             env={"ZARRD_LOG": level} if level else None, stderr=log)
    log.close()
    return base, proc, tmp_path / "stderr.log"


def ask(base):
    """A 200, a 404 and a 431 (headers over the limit), each with its own id."""
    sent = {}
    for status, path, headers in ((200, "/zarr/a/zarr.json", {}), (404, "/zarr/nothing/here", {}),
                                  (431, "/zarr/a/zarr.json", {"X-Padding": "x" * 20000})):
        rid = f"test-{status}"
        r = requests.get(base + path, headers={"X-Request-Id": rid, **headers})
        assert r.status_code == status, (path, r.status_code, r.text)
        sent[rid] = (status, path)
    return sent


def access_lines(text):
    return [line for line in text.splitlines() if "zarrd::access" in line]


def test_each_request_is_one_line_and_the_last_ones_reach_the_log_at_shutdown(tmp_path, monkeypatch):
    monkeypatch.delenv("ZARRD_LOG", raising=False)
    base, proc, log = serve(tmp_path)
    try:
        sent = ask(base)
    finally:
        # At once: the lines are still in their buffers, and stopping writes them.
        stop(proc)
    lines = access_lines(log.read_text())
    assert len(lines) == len(sent), lines
    for rid, (status, path) in sent.items():
        (line,) = [line for line in lines if f"request_id={rid}" in line]
        assert re.search(rf"INFO zarrd::access: GET {re.escape(path)} status={status} bytes=\d+ micros=\d+ ", line), line


def test_json_lines_parse_and_name_their_fields(tmp_path, monkeypatch):
    monkeypatch.delenv("ZARRD_LOG", raising=False)
    base, proc, log = serve(tmp_path, "--log-format", "json")
    try:
        sent = ask(base)
        # Written within the flush interval while the server runs.
        deadline = time.monotonic() + 5
        while len(access_lines(log.read_text())) < len(sent):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        stop(proc)
    docs = [json.loads(line) for line in access_lines(log.read_text())]
    got = {d["fields"]["request_id"]: d for d in docs}
    assert set(got) == set(sent)
    for rid, (status, path) in sent.items():
        d = got[rid]
        assert (d["target"], d["level"], d["fields"]["method"], d["fields"]["path"], d["fields"]["status"]) == \
            ("zarrd::access", "INFO", "GET", path, status)
        assert d["timestamp"].endswith("Z") and d["fields"]["micros"] >= 0
    assert got["test-200"]["fields"]["route"] == "/zarr/{*key}"


def test_warn_level_keeps_no_access_log(tmp_path):
    base, proc, log = serve(tmp_path, level="warn")
    try:
        ask(base)
    finally:
        stop(proc)
    assert access_lines(log.read_text()) == []


def test_a_stream_cut_short_is_logged_with_its_request_id(tmp_path, monkeypatch):
    import numcodecs
    monkeypatch.delenv("ZARRD_LOG", raising=False)
    root = tmp_path / "root"
    # 16 MiB in chunks of 2 MiB: the answer streams, and its last chunk is broken.
    a = zarr.create_array(str(root / "b"), shape=(4096, 1024), chunks=(512, 1024), dtype="<f4", zarr_format=2,
                          compressors=numcodecs.Blosc(cname="lz4"))
    a[:] = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)
    (root / "b" / "7.0").write_bytes((root / "b" / "7.0").read_bytes()[:100])
    base, proc, log = serve(tmp_path)
    try:
        r = requests.get(base + "/api/v1/data/b?format=npy", headers={"X-Request-Id": "cut-short"}, stream=True)
        assert r.status_code == 200
        try:
            got = sum(len(piece) for piece in r.iter_content(1 << 20))
        except requests.exceptions.RequestException:
            got = None
        assert got is None or got < 4096 * 1024 * 4
    finally:
        stop(proc)
    warned = [line for line in log.read_text().splitlines() if "ended early" in line]
    assert len(warned) == 1 and "cut-short" in warned[0], log.read_text()[-2000:]
