"""Readers of a sharded array while many writers rewrite its shards, through
one zarrd and through two zarrd processes sharing one directory.

A write into a sharded array replaces a whole shard (its inner chunks and
the index at its end) at once, and the store swaps the file atomically. A
reader that takes the index from one version of a shard and the inner-chunk
bytes from another (or that trusts a cached index while the shard changed
under it) decodes garbage: a failed crc32c, a shard shorter than its index,
a bad zstd frame, or an `.npy` stream that stops before its Content-Length.
Every read here must succeed, and every element it returns must be the fill
value or the value of a write whose region covers that element."""

import collections
import io
import json
import threading
import time

import numpy as np
import pytest
import requests

from conftest import start_zarrd, stop

SHAPE, CHUNKS, SHARDS = 256, 32, 128
WRITERS, READERS = 14, 6
DURATION = 5.0  # seconds of concurrent writing and reading
NAME = "torn/sharded"


@pytest.fixture(params=[1, 2], ids=["one process", "two processes"])
def servers(request, tmp_path):
    """One zarrd, or two zarrd processes serving the same directory (their
    file locks and ETag revalidation are what keep them consistent)."""
    started = [start_zarrd(str(tmp_path), "--allow-anonymous-writes") for _ in range(request.param)]
    yield [url for url, _ in started]
    for _, proc in started:
        stop(proc)


def window(rng, longest):
    """A half-open [start, stop) range along one axis. Half of the time it
    straddles a shard boundary (128), otherwise it lies anywhere; either way
    its ends are rarely aligned, so it also cuts through inner chunks and most
    writes are read-modify-writes of one to four shards."""
    if rng.random() < 0.5:
        length = int(rng.integers(2, longest + 1))
        start = int(rng.integers(max(0, SHARDS - length + 1), SHARDS))
    else:
        length = int(rng.integers(1, longest + 1))
        start = int(rng.integers(0, SHAPE))
    return start, min(SHAPE, start + length)


def parse(resp, fmt):
    """The window a 200 response holds, or raise with what is wrong with it.
    A body cut short (the stream ended before its declared Content-Length)
    is an error, not a smaller window."""
    body = resp.content
    declared = resp.headers.get("Content-Length")
    if declared is None and fmt == "npy":
        raise ValueError("npy response without Content-Length")
    if declared is not None and int(declared) != len(body):
        raise ValueError(f"truncated body: Content-Length {declared}, got {len(body)} bytes")
    if fmt == "npy":
        got = np.load(io.BytesIO(body), allow_pickle=False)
        if got.dtype != np.dtype("<i4"):
            raise ValueError(f"npy dtype {got.dtype.str}, expected <i4")
        return got
    doc = json.loads(body)
    return np.array(doc["data"], dtype="int64").reshape(doc["shape"])


def test_sharded_reads_during_writes_see_no_torn_shard(servers):
    first = servers[0]
    resp = requests.put(f"{first}/api/v1/meta/{NAME}", timeout=30, json={
        "node_type": "array", "zarr_format": 3, "shape": [SHAPE, SHAPE], "chunks": [CHUNKS, CHUNKS],
        "shards": [SHARDS, SHARDS], "dtype": "int32", "fill_value": 0})
    assert resp.status_code == 201, resp.text
    meta = requests.get(f"{first}/api/v1/meta/{NAME}", timeout=30).json()
    assert meta["shard_shape"] == [SHARDS, SHARDS], meta

    # value -> [r0, r1, c0, c1, sent, acked]. A value is registered before its
    # PUT is sent, so a reader that sees it (even from a write still in flight)
    # finds its region; acked stays None for writes not (yet) acknowledged.
    # Each writer adds only its own keys, and a dict item assignment is atomic.
    writes = {}
    write_errors = []
    reads = []  # (server, select, format, window or None, error or None)
    lock = threading.Lock()
    deadline = [0.0]

    def go():
        deadline[0] = time.monotonic() + DURATION

    start = threading.Barrier(WRITERS + READERS, action=go)  # everyone starts once all threads exist

    def writer(w):
        rng = np.random.default_rng(1000 + w)
        session = requests.Session()
        url = servers[w % len(servers)]
        start.wait()
        seq = 0
        while time.monotonic() < deadline[0]:
            (r0, r1), (c0, c1) = window(rng, 80), window(rng, 80)
            value = w * 1_000_000 + seq + 1  # unique across all writes
            seq += 1
            record = [r0, r1, c0, c1, time.monotonic(), None]
            writes[value] = record
            try:
                resp = session.put(f"{url}/api/v1/data/{NAME}?select={r0}:{r1},{c0}:{c1}",
                                   json={"data": value}, timeout=30)
            except requests.RequestException as e:
                with lock:
                    write_errors.append(f"PUT {r0}:{r1},{c0}:{c1}: {type(e).__name__}: {e}")
                continue
            if 200 <= resp.status_code < 300:
                record[5] = time.monotonic()
            else:
                with lock:
                    write_errors.append(f"PUT {r0}:{r1},{c0}:{c1}: {resp.status_code} {resp.text[:300]}")

    def reader(k):
        rng = np.random.default_rng(2000 + k)
        session = requests.Session()
        start.wait()
        n = 0
        while time.monotonic() < deadline[0]:
            # Alternate servers and formats: npy streams slab by slab (so a
            # failure after the first slab shows as a short body), json is
            # built whole (so a failure shows as a status).
            url = servers[(k + n) % len(servers)]
            fmt = ("npy", "json")[(n // len(servers)) % 2]
            n += 1
            if rng.random() < 0.25:
                # Whole rows across both shard columns: several slabs, up to four shards.
                (r0, r1), (c0, c1) = window(rng, 120), (0, SHAPE)
            else:
                (r0, r1), (c0, c1) = window(rng, 100), window(rng, 100)
            select = f"{r0}:{r1},{c0}:{c1}"
            try:
                resp = session.get(f"{url}/api/v1/data/{NAME}?select={select}&format={fmt}", timeout=30)
                if resp.status_code != 200:
                    got, error = None, f"{resp.status_code} {resp.text[:400]}"
                else:
                    got, error = parse(resp, fmt), None
                    if got.shape != (r1 - r0, c1 - c0):
                        got, error = None, f"shape {got.shape}, expected {(r1 - r0, c1 - c0)}"
            except Exception as e:  # a broken connection, a short body, an unparseable one
                got, error = None, f"{type(e).__name__}: {e}"[:400]
            with lock:
                reads.append((url, (r0, r1, c0, c1), fmt, got, error))

    crashed = []

    def run(target, i):
        # A thread that dies would quietly shrink the test; make it fail instead.
        try:
            target(i)
        except BaseException as e:
            crashed.append(f"{target.__name__} {i}: {type(e).__name__}: {e}")
            start.abort()
            raise

    threads = [threading.Thread(target=run, args=(writer, w)) for w in range(WRITERS)]
    threads += [threading.Thread(target=run, args=(reader, k)) for k in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not crashed, crashed

    acked = sum(1 for rec in writes.values() if rec[5] is not None)
    failed_reads = [r for r in reads if r[4] is not None]
    assert len(reads) >= 50 and acked >= 100, f"too little happened: {len(reads)} reads, {acked} acknowledged writes"

    # Every element read is 0 or a value written to a region holding it. Checked
    # after the run, so the check does not compete with the servers for CPU.
    bad_values = []
    for url, (r0, r1, c0, c1), fmt, got, error in reads:
        if got is None:
            continue
        bad_values += misplaced(got, r0, c0, writes, f"{fmt} read {r0}:{r1},{c0}:{c1} from {url}")

    # Once the writers are done, each server returns the same array, in which
    # every element is 0 only where no acknowledged write covers it, and is
    # otherwise the value of a covering write that was not superseded: no
    # covering write was sent after it had been acknowledged.
    final_errors = []
    finals = []
    for url in servers:
        try:
            resp = requests.get(f"{url}/api/v1/data/{NAME}?format=npy", timeout=30)
            assert resp.status_code == 200, f"{resp.status_code} {resp.text[:400]}"
            finals.append(parse(resp, "npy"))
        except Exception as e:
            final_errors.append(f"whole-array read from {url}: {type(e).__name__}: {e}"[:400])
    if finals:
        final = finals[0]
        for other in finals[1:]:
            if not np.array_equal(final, other):
                final_errors.append(f"the servers disagree on {int((final != other).sum())} elements")
        final_errors += misplaced(final, 0, 0, writes, "final read")
        final_errors += superseded(final, writes)

    problems = []
    if failed_reads:
        kinds = collections.Counter(kind(r[4]) for r in failed_reads)
        examples = {}  # up to two per kind of error
        for r in failed_reads:
            examples.setdefault(kind(r[4]), []).append(f"{r[2]} read {r[1]} from {r[0]}: {r[4]}")
        examples = [e for group in examples.values() for e in group[:2]][:8]
        problems.append(f"{len(failed_reads)} of {len(reads)} window reads failed ({dict(kinds)}); e.g.\n  "
                        + "\n  ".join(examples))
    if bad_values:
        problems.append(f"{len(bad_values)} reads returned values outside their writes' regions; e.g.\n  "
                        + "\n  ".join(bad_values[:6]))
    if write_errors:
        problems.append(f"{len(write_errors)} of {len(writes)} writes failed; e.g.\n  " + "\n  ".join(write_errors[:4]))
    if final_errors:
        problems.append("the array after the writes is wrong:\n  " + "\n  ".join(final_errors[:6]))
    assert not problems, (f"{len(servers)} server(s), {len(writes)} writes ({acked} acknowledged), "
                          f"{len(reads)} reads:\n" + "\n".join(problems))


def misplaced(got, r0, c0, writes, what):
    """One message per element value in `got` (a window whose top-left
    element is (r0, c0)) that is neither 0 nor the value of a write whose
    region holds every element carrying it."""
    out = []
    for value in np.unique(got):
        value = int(value)
        if value == 0:
            continue
        rows, cols = np.nonzero(got == value)
        rows, cols = rows + r0, cols + c0
        rec = writes.get(value)
        if rec is None:
            out.append(f"{what}: value {value} was never written ({len(rows)} elements, e.g. {rows[0]},{cols[0]})")
            continue
        outside = (rows < rec[0]) | (rows >= rec[1]) | (cols < rec[2]) | (cols >= rec[3])
        if outside.any():
            i = int(np.argmax(outside))
            out.append(f"{what}: value {value} (written to {rec[0]}:{rec[1]},{rec[2]}:{rec[3]}) "
                       f"at {rows[i]},{cols[i]} and {int(outside.sum()) - 1} more elements outside it")
    return out


def superseded(final, writes):
    """Elements of the final array holding a value that an acknowledged
    covering write must have replaced: one sent after that value's write was
    acknowledged (or any acknowledged covering write, for the fill value).
    Writes never acknowledged cannot supersede anything, nor be superseded."""
    acked_at = {0: -np.inf}
    for value, rec in writes.items():
        acked_at[value] = np.inf if rec[5] is None else rec[5]
    values, inverse = np.unique(final, return_inverse=True)
    grid = np.array([acked_at.get(int(v), np.inf) for v in values])[inverse].reshape(final.shape)
    out = []
    for value, (r0, r1, c0, c1, sent, acked) in writes.items():
        if acked is None:
            continue
        stale = grid[r0:r1, c0:c1] < sent
        if stale.any():
            i, j = np.argwhere(stale)[0]
            out.append(f"{r0 + i},{c0 + j} holds {int(final[r0 + i, c0 + j])}, but write {value} "
                       f"({r0}:{r1},{c0}:{c1}) was sent after that value was acknowledged")
    return out


def kind(error):
    """A short class for a read error: the status and error code, or the exception."""
    if "truncated body" in error or "IncompleteRead" in error:
        return "truncated body"
    try:
        status, body = error.split(" ", 1)
        return f"{status} {json.loads(body)['error']['code']}"
    except Exception:
        return error.split(":", 1)[0]
