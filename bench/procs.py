"""The servers a benchmark run starts, each on a free loopback port, and
stops again (only the processes it started, by PID or by the process group
it created for them).

Every server exposes `url` (base URL), `pid` and `peak_rss()` (the peak
resident set of its processes, from /proc)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# Working files (corpus, logs, peers' venvs and data); ZARRD_BENCH_OUT moves them.
OUT = os.environ.get("ZARRD_BENCH_OUT") or os.path.join(HERE, "out")
VENVS = os.path.join(HERE, "out", "venvs")


def pinned(cpus):
    """The argv prefix that runs a command on the cores `cpus` only."""
    return ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=120, auth=None):
    """Poll until `url` answers with any HTTP status below 500."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        req = urllib.request.Request(url)
        if auth:
            req.add_header("Authorization", auth)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                if resp.status < 500:
                    return
        except urllib.error.HTTPError as e:
            if e.code < 500:
                return
            last = e
        except OSError as e:
            last = e
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up: {last}")


def rss_hwm_kib(pid):
    """Peak resident set (VmHWM) of one process, in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def group_pids(pgid):
    """Processes of one process group (a server and the workers it forked)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


class Server:
    """A child process in its own process group; `stop` signals only that group."""

    name = "server"

    def __init__(self):
        self.proc = None
        self.url = None

    @property
    def pid(self):
        return self.proc.pid

    def _spawn(self, argv, log_name, env=None, cwd=None):
        log = open(os.path.join(OUT, f"{log_name}.log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                     cwd=cwd, start_new_session=True)
        log.close()

    def peak_rss(self):
        """Sum of the peak resident sets of the server's processes, in bytes."""
        return sum(rss_hwm_kib(p) for p in group_pids(self.proc.pid)) * 1024

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        # Workers that outlive their parent are still in the group we created.
        for pid in group_pids(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Zarrd(Server):
    name = "zarrd"

    def __init__(self, root, *args, cpus=None, log=None):
        """`cpus`: the cores it may run on (taskset); `log`: a file for its
        default logging, access log included (otherwise warnings only)."""
        super().__init__()
        self.root, self.args, self.cpus, self.log = root, args, cpus, log

    def start(self):
        # The release build unless ZARRD_BIN names another (the harness's own test uses the debug build).
        binary = os.environ.get("ZARRD_BIN") or os.path.join(REPO, "target", "release", "zarrd")
        env = {k: v for k, v in os.environ.items() if k != "ZARRD_LOG"}
        if self.log is None:
            # Access logs off, as for nginx below: both log warnings and errors only.
            env["ZARRD_LOG"] = "warn"
            stderr = subprocess.DEVNULL
        else:
            stderr = open(self.log, "ab")
        self.proc = subprocess.Popen(pinned(self.cpus) + [binary, "serve", "--listen", "127.0.0.1:0", self.root,
                                                          *self.args],
                                     stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                     start_new_session=True)
        if self.log is not None:
            stderr.close()
        line = self.proc.stdout.readline()
        match = re.search(r"(https?)://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.stop()
            raise RuntimeError(f"zarrd did not start: {line!r}")
        self.url = f"{match.group(1)}://127.0.0.1:{match.group(2)}"
        return self


NGINX_CONF = """
daemon off;
worker_processes {workers};
pid {out}/nginx.pid;
error_log {out}/nginx-error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
{open_file_cache}    client_body_temp_path {out}/nginx-tmp/body;
    proxy_temp_path {out}/nginx-tmp/proxy;
    fastcgi_temp_path {out}/nginx-tmp/fastcgi;
    uwsgi_temp_path {out}/nginx-tmp/uwsgi;
    scgi_temp_path {out}/nginx-tmp/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        location /zarr/ {{ alias {root}/; autoindex on; }}
{static}    }}
}}
"""


class Nginx(Server):
    """nginx serving the corpus directory under /zarr/, the way a static site
    would, and optionally a second directory (ready-made .npy files) under /static/."""

    name = "nginx"

    def __init__(self, root, static=None, open_file_cache=True, cpus=None):
        super().__init__()
        self.root, self.static, self.open_file_cache, self.cpus = root, static, open_file_cache, cpus

    def start(self):
        port = free_port()
        os.makedirs(os.path.join(OUT, "nginx-tmp"), exist_ok=True)
        conf = os.path.join(OUT, "nginx.conf")
        # As root nginx would drop its workers to `nobody`; keep them as the invoking user.
        user = "user root;" if os.geteuid() == 0 else ""
        static = f"        location /static/ {{ alias {self.static}/; }}\n" if self.static else ""
        with open(conf, "w") as f:
            # Off: nginx's default, opening and stat-ing the file on every request.
            cache = ("    open_file_cache max=10000 inactive=60s;\n    open_file_cache_valid 60s;\n"
                     if self.open_file_cache else "")
            f.write(NGINX_CONF.format(out=OUT, port=port, root=self.root, user=user, static=static,
                                      open_file_cache=cache, workers=len(self.cpus) if self.cpus else "auto"))
        binary = "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else "nginx"
        self._spawn(pinned(self.cpus) + [binary, "-c", conf, "-e", os.path.join(OUT, "nginx-error.log")], "nginx")
        self.url = f"http://127.0.0.1:{port}"
        wait_http(self.url + "/zarr/")
        return self


class Tiled(Server):
    """Tiled serving the corpus directory (its own index, array slicing, Zarr facade)."""

    name = "tiled"

    def __init__(self, root):
        super().__init__()
        self.root = root

    def start(self):
        port = free_port()
        tiled = os.path.join(VENVS, "tiled", "bin", "tiled")
        self._spawn([tiled, "serve", "directory", "--public", "--host", "127.0.0.1", "--port", str(port), self.root],
                    "tiled", cwd=OUT)
        self.url = f"http://127.0.0.1:{port}"
        wait_http(self.url + "/api/v1/metadata/v2_blosc")
        return self


class PeerApp(Server):
    """A peer's app (`bench/peers/{script} PATH PORT`) run by the Python of
    its venv (`bench/out/venvs/{venv}`), ready when `ready` answers."""

    def __init__(self, name, venv, script, path, ready):
        super().__init__()
        self.name, self.venv, self.script, self.path, self.ready = name, venv, script, path, ready

    def start(self):
        port = free_port()
        python = os.path.join(VENVS, self.venv, "bin", "python")
        self._spawn([python, os.path.join(HERE, "peers", self.script), self.path, str(port)], self.venv)
        self.url = f"http://127.0.0.1:{port}"
        wait_http(self.url + self.ready)
        return self


def Xpublish(array_path):
    """xpublish serving the v2 array as an xarray Dataset (lazily, through dask)."""
    return PeerApp("xpublish", "xpublish", "xpublish_app.py", array_path, "/zarr/.zmetadata")


HSDS_USER = ("bench", "bench")


class Hsds(Server):
    """HSDS (posix storage under bench/out/hsdata) with two data nodes."""

    name = "hsds"

    def __init__(self):
        super().__init__()
        self.root = os.path.join(OUT, "hsdata")

    def start(self):
        port = free_port()
        os.makedirs(os.path.join(self.root, "hsdsbench"), exist_ok=True)
        hsds = os.path.join(VENVS, "hsds", "bin", "hsds")
        self._spawn([hsds, "--root_dir", self.root, "--bucket_name", "hsdsbench", "--hs_username", HSDS_USER[0],
                     "--hs_password", HSDS_USER[1], "--host", "127.0.0.1", "-p", str(port), "--count", "2",
                     "--logfile", os.path.join(OUT, "hsds-nodes.log"), "--loglevel", "ERROR"], "hsds")
        self.url = f"http://127.0.0.1:{port}"
        wait_http(self.url + "/about")
        return self

    def load(self, corpus):
        """Load the benchmark array into HSDS once; returns the dataset id."""
        python = os.path.join(VENVS, "hsds", "bin", "python")
        out = subprocess.run([python, os.path.join(HERE, "peers", "hsds_load.py"), self.url, corpus],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[-1]


def haproxy_binary():
    """$ZARRD_HAPROXY (scripts/test sets it) or haproxy on PATH; None if neither."""
    for candidate in (os.environ.get("ZARRD_HAPROXY"), shutil.which("haproxy"), "/usr/sbin/haproxy"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class HAProxy(Server):
    """HAProxy in front of zarrd replicas; `config(port)` returns its configuration
    text for the loopback port it is to listen on."""

    name = "haproxy"

    def __init__(self, config, label="haproxy"):
        super().__init__()
        self.config, self.label = config, label

    def start(self):
        port = free_port()
        binary = haproxy_binary()
        if binary is None:
            raise RuntimeError("HAProxy is not installed (haproxy on PATH or $ZARRD_HAPROXY)")
        path = os.path.join(OUT, f"{self.label}.cfg")
        with open(path, "w") as f:
            f.write(self.config(port))
        check = subprocess.run([binary, "-c", "-f", path], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy refuses {path}: {(check.stdout + check.stderr)[-1500:]}")
        self._spawn([binary, "-f", path, "-db"], self.label)
        self.url = f"http://127.0.0.1:{port}"
        wait_http(self.url + "/healthz", timeout=20)
        return self


def available(peer):
    """Whether a peer's environment was installed (bench/run installs them)."""
    if peer == "haproxy":
        return haproxy_binary() is not None
    if peer == "nginx":
        return os.path.exists("/usr/sbin/nginx") or any(
            os.path.exists(os.path.join(d, "nginx")) for d in os.environ.get("PATH", "").split(":"))
    return os.path.exists(os.path.join(VENVS, peer, "bin", "python"))


if __name__ == "__main__":
    sys.exit("procs.py is a module of bench/bench.py")
