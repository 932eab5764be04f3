"""Replicas behind a real load balancer: three zarrd processes on one S3
bucket (moto) behind HAProxy (from Debian), with writers and readers going
through the balancer. One replica is killed with SIGKILL mid-run and later
restarted on the same port. No acknowledged write may be lost, no read may
see data older than a write acknowledged before it was sent, and reads must
carry on through the other two replicas while the third is gone."""

import csv
import io
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
import traceback

import numpy as np
import pytest
import requests

from conftest import create_bucket, free_port, s3_env, start_moto, stop

BIN = os.environ.get("ZARRD_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "zarrd"))

SIZE, CHUNK = 64, 16      # a 64x64 int32 array in 16x16 chunks
WRITERS, READERS = 8, 4
# Seconds of load before the kill, with the replica dead, and after its restart.
BEFORE, DOWN, AFTER = 3.0, 4.0, 3.0
# Reads may fail only if they were in flight within this many seconds after
# the kill (HAProxy's health checks run every 200 ms and mark a server down
# after one failure; its retries should hide the kill from clients anyway).
KILL_WINDOW = 1.0
TIMEOUT = (2, 15)         # (connect, read) seconds for every client request


def haproxy_binary():
    """scripts/test installs HAProxy and exports its path; a CI run without
    it is a broken setup, not a reason to skip."""
    binary = os.environ.get("ZARRD_HAPROXY") or shutil.which("haproxy")
    if binary and os.access(binary, os.X_OK):
        return binary
    reason = "HAProxy is missing: scripts/test installs it from Debian and sets ZARRD_HAPROXY"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


class Replica:
    """One zarrd process on a loopback port that stays the same across
    restarts, because the balancer's configuration names it."""

    def __init__(self, name, root, env, logdir):
        self.name, self.root, self.env, self.logdir = name, root, env, logdir
        self.port, self.proc, self.starts = 0, None, 0

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        # The first start takes any free port (no race with other processes);
        # restarts ask for the port it had. stdout goes to a file rather than
        # a pipe so a hung start cannot block the test on readline.
        self.starts += 1
        out = self.logdir / f"{self.name}.{self.starts}.out"
        with open(out, "w") as stdout, open(self.logdir / f"{self.name}.{self.starts}.err", "w") as stderr:
            self.proc = subprocess.Popen(
                [BIN, "serve", "--listen", f"127.0.0.1:{self.port}", self.root, "--allow-anonymous-writes"],
                stdout=stdout, stderr=stderr, env={**os.environ, **self.env})
        deadline = time.monotonic() + 20
        while True:
            match = re.search(r"http://127\.0\.0\.1:(\d+)/", out.read_text())
            if match:
                break
            assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}: {out.read_text()!r}"
            assert time.monotonic() < deadline, f"{self.name} did not start"
            time.sleep(0.05)
        port = int(match.group(1))
        assert self.port in (0, port), f"{self.name} came back on port {port}, not {self.port}"
        self.port = port

    def kill(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            stop(self.proc)


def haproxy_config(port, stats_port, replicas):
    """Round robin over the replicas with health checks on /healthz. Reads
    and writes go to two backends over the same servers because they may be
    retried on different failures:

    - reads (GET, HEAD) are retried on a refused connection, on a connection
      closed without a response (a replica killed mid-request) and on a
      response timeout, each time on another server (redispatch);
    - writes are retried on the first two only. A killed replica cannot apply
      a write later, so sending it again elsewhere is safe (a region write is
      idempotent). A replica that is merely slow may still apply it after the
      retry and after the client's next write, which would put an older value
      back: so writes are not retried on a timeout.

    The writes backend tracks the reads backend's health checks, so each
    replica is checked once."""
    checked = "\n".join(f"    server {r.name} 127.0.0.1:{r.port} check inter 200ms fall 1 rise 1" for r in replicas)
    tracked = "\n".join(f"    server {r.name} 127.0.0.1:{r.port} track reads/{r.name}" for r in replicas)
    return f"""
global
    maxconn 1024

defaults
    mode http
    log stderr format raw local0 info
    option httplog
    timeout connect 1s
    timeout client 30s
    timeout server 10s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout check 1s
    retries 3
    option redispatch

frontend balancer
    bind 127.0.0.1:{port}
    use_backend reads if METH_GET
    default_backend writes

backend reads
    balance roundrobin
    option httpchk GET /healthz
    retry-on conn-failure empty-response response-timeout
{checked}

backend writes
    balance roundrobin
    # The whole body must be held for a retry to resend it.
    option http-buffer-request
    retry-on conn-failure empty-response
{tracked}

frontend stats
    bind 127.0.0.1:{stats_port}
    stats enable
    stats uri /stats
"""


def haproxy_stats(stats_url):
    """HAProxy's counters and server states, one dict per proxy or server."""
    text = requests.get(f"{stats_url};csv", timeout=TIMEOUT).text.lstrip("# ")
    return list(csv.DictReader(io.StringIO(text)))


def server_status(stats_url, name):
    """HAProxy's own view of a replica (UP, DOWN, ...)."""
    rows = haproxy_stats(stats_url)
    for row in rows:
        if row["pxname"] == "reads" and row["svname"] == name:
            return row["status"]
    raise AssertionError(f"{name} is not in HAProxy's stats: {rows}")


def wait_for_status(stats_url, name, wanted, within):
    deadline = time.monotonic() + within
    while (status := server_status(stats_url, name)) != wanted:
        assert time.monotonic() < deadline, f"HAProxy did not mark {name} {wanted} within {within} s (it says {status})"
        time.sleep(0.05)
    return time.monotonic()


def data_requests(metrics_text):
    """How many /api/v1/data requests a replica has answered, from /metrics."""
    return sum(float(line.split()[-1]) for line in metrics_text.splitlines()
               if line.startswith("zarrd_http_requests_total") and "/api/v1/data" in line)


def test_three_replicas_behind_haproxy_lose_no_acknowledged_write(tmp_path):
    """8 writers and 4 readers through HAProxy for about 10 s; the second
    replica is SIGKILLed after 3 s and restarted on its port 4 s later."""
    haproxy = haproxy_binary()
    moto = balancer = None  # with the replicas, everything this test starts, stopped by PID in `finally`
    replicas = []
    try:
        endpoint, moto = start_moto()
        create_bucket(endpoint, "replicas")
        replicas = [Replica(f"zarrd{i}", "s3://replicas", s3_env(endpoint), tmp_path) for i in range(3)]
        for replica in replicas:
            replica.start()

        port, stats_port = free_port(), free_port()
        lb, stats_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{stats_port}/stats"
        config = tmp_path / "haproxy.cfg"
        config.write_text(haproxy_config(port, stats_port, replicas))
        check = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        with open(tmp_path / "haproxy.log", "w") as log:
            balancer = subprocess.Popen([haproxy, "-f", str(config), "-db"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                if requests.get(f"{lb}/healthz", timeout=TIMEOUT).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert balancer.poll() is None, (tmp_path / "haproxy.log").read_text()
            assert time.monotonic() < deadline, "HAProxy did not start"
            time.sleep(0.05)
        for replica in replicas:
            wait_for_status(stats_url, replica.name, "UP", within=5)

        resp = requests.put(f"{lb}/api/v1/meta/grid", timeout=TIMEOUT, json={
            "node_type": "array", "zarr_format": 3, "shape": [SIZE, SIZE], "chunks": [CHUNK, CHUNK],
            "dtype": "int32", "fill_value": 0})
        assert resp.status_code == 201, resp.text

        run_workload(lb, stats_url, replicas, tmp_path)
    finally:
        if balancer:
            stop(balancer)
        for replica in replicas:
            replica.stop()
        if moto:
            stop(moto)


def run_workload(lb, stats_url, replicas, logdir):
    # Writer w owns rows w, w + 8, ...: every row has one writer, whose values
    # only grow, so "older" is well defined per row; yet every chunk holds
    # rows of all eight writers, so writes through different replicas race
    # on the same chunks and only compare-and-swap keeps them all.
    owner_rows = {w: list(range(w, SIZE, WRITERS)) for w in range(WRITERS)}
    lock = threading.Lock()
    sent = {r: [] for r in range(SIZE)}      # values sent to each row, in order
    acked = {r: 0 for r in range(SIZE)}      # the last acknowledged value (0: none, the fill value)
    write_log = []                           # (sent at, answered at, acknowledged, detail, row, value)
    read_log = []                            # (sent at, answered at, ok, detail)
    stale = []                               # reads that returned less than a write acknowledged before them
    errors = []                              # unexpected exceptions in the threads
    done = threading.Event()

    def writer(w):
        session = requests.Session()
        seq = 0
        while not done.is_set():
            for row in owner_rows[w]:
                seq += 1
                value = seq * WRITERS + w
                with lock:
                    sent[row].append(value)
                t0 = time.monotonic()
                try:
                    resp = session.put(f"{lb}/api/v1/data/grid?select={row},:", json={"data": value}, timeout=TIMEOUT)
                    ok, detail = resp.status_code == 200, f"{resp.status_code} {resp.text[:200]}"
                except requests.RequestException as e:
                    ok, detail = False, repr(e)
                t1 = time.monotonic()
                with lock:
                    if ok:
                        acked[row] = value
                    write_log.append((t0, t1, ok, detail, row, value))

    def reader(k):
        session = requests.Session()
        rng = random.Random(k)
        while not done.is_set():
            row = rng.randrange(SIZE)
            raw = rng.random() < 0.25
            with lock:
                floor = acked[row]
            t0 = time.monotonic()
            try:
                if raw:
                    resp = session.get(f"{lb}/zarr/grid/zarr.json", timeout=TIMEOUT)
                    ok = resp.status_code == 200 and resp.json().get("shape") == [SIZE, SIZE]
                else:
                    resp = session.get(f"{lb}/api/v1/data/grid?select={row},:&format=json", timeout=TIMEOUT)
                    ok = resp.status_code == 200
                    if ok:
                        values = resp.json()["data"]
                        # Every replica revalidates cached chunks against the
                        # store, so a read sent after a write was acknowledged
                        # sees that write or a later one, whichever replica answers.
                        # And it holds only values some writer sent (or the fill value).
                        with lock:
                            possible = set(sent[row]) | {0}
                            if len(values) != SIZE or min(values) < floor or not set(values) <= possible:
                                stale.append((row, floor, values, resp.headers.get("X-Request-Id")))
                detail = f"{resp.status_code} {resp.text[:200]}"
            except requests.RequestException as e:
                ok, detail = False, repr(e)
            with lock:
                read_log.append((t0, time.monotonic(), ok, detail))

    def guarded(target, *args):
        try:
            target(*args)
        except Exception:
            errors.append(traceback.format_exc())
            done.set()

    threads = [threading.Thread(target=guarded, args=(writer, w)) for w in range(WRITERS)]
    threads += [threading.Thread(target=guarded, args=(reader, k)) for k in range(READERS)]
    victim = replicas[1]
    try:
        for t in threads:
            t.start()
        time.sleep(BEFORE)
        t_kill = time.monotonic()
        victim.kill()
        t_down = wait_for_status(stats_url, victim.name, "DOWN", within=2)
        time.sleep(max(0.0, t_kill + DOWN - time.monotonic()))
        t_restart = time.monotonic()
        victim.start()
        t_up = wait_for_status(stats_url, victim.name, "UP", within=2)
        time.sleep(AFTER)
    finally:
        done.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads), "client threads did not finish"

    def count(log, start, end, ok):
        return sum(1 for e in log if start <= e[0] < end and e[2] == ok)

    phases = {"before the kill": (0, t_kill), "while down": (t_kill, t_restart), "after the restart": (t_up, float("inf"))}
    summary = {name: {"reads ok": count(read_log, a, b, True), "reads failed": count(read_log, a, b, False),
                      "writes acked": count(write_log, a, b, True), "writes failed": count(write_log, a, b, False)}
               for name, (a, b) in phases.items()}
    summary["HAProxy marked it down after"] = round(t_down - t_kill, 3)
    summary["HAProxy marked it up after restart"] = round(t_up - t_restart, 3)
    # Requests HAProxy sent again to another replica (those in flight on the
    # killed one, or sent to it before it was marked down), for the record.
    summary["redispatched"] = {row["pxname"]: int(row["wredis"] or 0) for row in haproxy_stats(stats_url)
                               if row["svname"] == "BACKEND"}

    # Reads and writes carried on through the other replicas while one was
    # gone, and through all three once it was back; failures only around the
    # kill. (Lower bounds are loose: moto serves one request at a time, so
    # throughput depends on the machine.)
    for name in phases:
        assert summary[name]["reads ok"] >= 5, (name, summary)
        assert summary[name]["writes acked"] >= 5, (name, summary)
    failed_reads = [e for e in read_log if not e[2]]
    outside = [e for e in failed_reads if not (e[0] <= t_kill + KILL_WINDOW and e[1] >= t_kill)]
    assert not outside, (f"{len(outside)} of {len(failed_reads)} failed reads were outside the kill window "
                         f"(first: {outside[0][3]}, sent {outside[0][0] - t_kill:+.3f} s after the kill)", summary)
    assert len(failed_reads) <= 5, (f"{len(failed_reads)} reads failed around the kill "
                                    f"(first: {failed_reads[0][3]})", summary)
    assert not stale, (f"{len(stale)} reads were older than a write acknowledged before them or held values "
                       f"never sent; first: "
                       f"row {stale[0][0]}, acknowledged {stale[0][1]}, read {stale[0][2]}, request id {stale[0][3]}",
                       summary)
    # Failed writes are allowed (not acknowledged), but only around the kill.
    failed_writes = [e for e in write_log if not e[2]]
    outside = [e for e in failed_writes if not (e[0] <= t_kill + KILL_WINDOW and e[1] >= t_kill)]
    assert not outside, (f"{len(outside)} failed writes outside the kill window (first: {outside[0][3]})", summary)

    # The restarted replica took its share of requests again.
    metrics = requests.get(f"{victim.url}/metrics", timeout=TIMEOUT).text
    assert data_requests(metrics) > 0, ("the restarted replica answered no data requests", summary)
    summary["data requests the restarted replica answered"] = int(data_requests(metrics))

    # No acknowledged write was lost: each element holds its row's last
    # acknowledged value or a value sent after it that was not acknowledged
    # (it may have landed before the failure), never an older one. Checked
    # on each replica directly and through the balancer.
    allowed = {}
    for row in range(SIZE):
        values = sent[row]
        last = values.index(acked[row]) if acked[row] else -1
        allowed[row] = set(values[last + 1:]) | {acked[row]}
    for name, url in [(r.name, r.url) for r in replicas] + [("balancer", lb)]:
        resp = requests.get(f"{url}/api/v1/data/grid?format=raw", timeout=TIMEOUT)
        assert resp.status_code == 200, (name, resp.status_code, resp.text)
        got = np.frombuffer(resp.content, dtype="<i4").reshape(SIZE, SIZE)
        for row in range(SIZE):
            bad = [(c, int(got[row, c])) for c in range(SIZE) if int(got[row, c]) not in allowed[row]]
            assert not bad, (f"{name}: row {row} lost its last acknowledged write {acked[row]} "
                             f"(sent after it: {sorted(allowed[row] - {acked[row]})}); "
                             f"(column, value) read: {bad[:8]}", summary)
    print(summary)
