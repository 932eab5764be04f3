"""Deployment artifacts: the Dockerfile passes hadolint and only names files
and options that exist; the Helm chart lints, renders with default and
non-default values, validates against the Kubernetes schemas, and its
rendered config and tokens file start the real binary."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request

import kubernetes_validate
import pytest
import yaml
from helm_python import chart as helm

import time

from conftest import free_port, start_zarrd, stop

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(REPO, "helm", "zarrd")
BIN = os.environ.get("ZARRD_BIN", os.path.join(REPO, "target", "debug", "zarrd"))
KUBE_VERSION = "1.33"


def test_dockerfile_lints_clean():
    hadolint = os.path.join(os.path.dirname(sys.executable), "hadolint")
    result = subprocess.run([hadolint, os.path.join(REPO, "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_names_real_files_and_options():
    text = open(os.path.join(REPO, "Dockerfile")).read()
    for line in text.splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for src in line.split()[1:-1]:
                assert os.path.exists(os.path.join(REPO, src)), f"COPY of missing {src}"
    assert "--locked" in text and "USER 10001" in text and "HEALTHCHECK" in text
    helptext = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    for env in re.findall(r"\b(ZARRD_[A-Z_]+)=", text):
        assert env in helptext, f"{env} is not an option of zarrd serve"
    assert 'ENTRYPOINT ["zarrd"]' in text and 'CMD ["serve", "/data"]' in text


VALUES = {
    "default": {},
    "full": {
        "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 6},
        "ingress": {"enabled": True, "className": "nginx", "hosts": [{"host": "zarr.example.org", "paths": ["/"]}],
                    "tls": [{"hosts": ["zarr.example.org"], "secretName": "zarr-tls"}]},
        "serviceMonitor": {"enabled": True},
        "tokens": {"inline": [{"name": "pipeline", "token": "pipeline-secret-token", "scopes": ["write"], "prefixes": ["era5"]},
                              {"name": "ops", "token": "operations-secret-tok", "scopes": ["admin"]}]},
        "store": {"root": "s3://bucket/zarr"},
        "storeCredentialsSecret": "zarr-s3-credentials",
        "persistence": {"existingClaim": "zarr-data"},
        "zarrd": {"recheckCached": "30", "allowAnonymousReads": True, "requestTimeout": 2.5,
                  "extraConfig": "json_limit = \"32MiB\""},
        "router": {"enabled": True, "replicas": 3, "maxPods": 12},
    },
    "roundrobin": {"router": {"enabled": True, "balance": "roundrobin"}},
    "signin": {
        "oidc": [{"issuer": "https://login.example.org/realms/science", "audience": "zarrd",
                  "groups_claim": "realm_access.roles", "client_id": "zarrd-viewer"}],
        "corsCredentials": ["https://viewer.example.org"],
        "policy": [{"path": "", "grant": "read", "to": ["authenticated"]},
                   {"path": "public", "grant": "read", "to": ["anonymous"]},
                   {"path": "embargo", "grant": "read", "to": ["group:guests"], "deny": True}],
        "fairUse": [{"to": ["anonymous"], "bytes_per_second": "20MiB", "request_bytes": 16384}],
        "zarrd": {"extraConfig": "json_limit = \"32MiB\"", "publicUrl": "https://data.example.org"},
    },
}


def render(values):
    """Rendered manifests (NOTES.txt left out), by template path."""
    rendered = helm.Chart.load(CHART).render(values, name="demo", namespace="data")
    return {path: text for path, text in rendered.items() if path.endswith((".yaml", ".yml"))}


@pytest.mark.parametrize("case", list(VALUES))
def test_chart_lints_and_validates(case):
    report = helm.lint(CHART, VALUES[case], strict=True)
    errors = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2] + report.get("errors", [])
    assert not errors, errors
    manifests = render(VALUES[case])
    kinds = set()
    for path, text in manifests.items():
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            kinds.add(doc["kind"])
            if doc["apiVersion"].startswith("monitoring.coreos.com"):
                continue  # a CRD: not in the core schemas
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    assert {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"} <= kinds
    if case == "full":
        assert {"HorizontalPodAutoscaler", "Ingress", "ServiceMonitor", "Secret"} <= kinds
        ingress = next(d for d in docs_of(manifests) if d["kind"] == "Ingress")
        backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"]
        assert backend == "demo-zarrd-router"


def docs_of(manifests):
    return [d for text in manifests.values() for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("case", list(VALUES))
def test_rendered_config_starts_the_server(case):
    docs = docs_of(render(VALUES[case]))
    config = next(d for d in docs if d["kind"] == "ConfigMap" and "zarrd.toml" in d["data"])["data"]["zarrd.toml"]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "zarrd.toml"), "w") as f:
            f.write(config)
        args = [a.replace("/etc/zarrd/tokens", tmp).replace("/etc/zarrd", tmp) for a in container["args"][1:]]
        secret = next((d for d in docs if d["kind"] == "Secret"), None)
        if secret:
            with open(os.path.join(tmp, "tokens.toml"), "w") as f:
                f.write(secret["stringData"]["tokens.toml"])
        data = os.path.join(tmp, "data")
        # The ROOT argument stands in for the chart's store (flags win over the file).
        url, proc = start_zarrd(data, *args)
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=10) as r:
                assert r.status == 200
            if case == "signin":
                parsed = tomllib.loads(config)
                assert parsed["oidc"][0]["groups_claim"] == "realm_access.roles"
                assert parsed["oidc"][0]["client_id"] == "zarrd-viewer"
                assert parsed["cors"]["credentials"] == ["https://viewer.example.org"]
                assert parsed["public_url"] == "https://data.example.org"
                assert parsed["policy"][2] == {"path": "embargo", "grant": "read", "to": ["group:guests"], "deny": True}
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(f"{url}/zarr/private/zarr.json", timeout=10)
                assert refused.value.code == 401, "the policy gives anonymous callers only public/"
        finally:
            stop(proc)


def router_config(values):
    docs = docs_of(render(values))
    return next(d for d in docs if d["kind"] == "ConfigMap" and "haproxy.cfg" in d["data"])["data"]["haproxy.cfg"]


def haproxy_binary():
    binary = os.environ.get("ZARRD_HAPROXY") or shutil.which("haproxy")
    if binary:
        return binary
    reason = "HAProxy is missing: scripts/test installs it from Debian and sets ZARRD_HAPROXY"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.parametrize("balance", ["arrayPath", "roundrobin"])
def test_rendered_router_config_is_valid_haproxy(balance, tmp_path):
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(router_config({"router": {"enabled": True, "balance": balance}}))
    result = subprocess.run([haproxy_binary(), "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_router_sends_every_request_for_an_array_to_one_replica(tmp_path):
    """The chart's router, with its server slots filled by three local
    replicas: the raw keys and API calls of one array all land on one
    replica (told apart by the per-process prefix of x-request-id), and the
    arrays spread over more than one replica."""
    import numpy as np
    import requests
    import zarr

    root = tmp_path / "data"
    names = [f"group/a{i}.zarr" for i in range(12)]
    for i, name in enumerate(names):
        a = zarr.create_array(str(root / name), shape=(8, 8), chunks=(4, 4), dtype="i4", zarr_format=2 + i % 2)
        a[...] = np.arange(64, dtype="i4").reshape(8, 8) + i
    replicas = [start_zarrd(str(root), "--recheck-cached", "60") for _ in range(3)]
    port = free_port()
    cfg = router_config({"router": {"enabled": True, "balance": "arrayPath"}})
    servers = "\n".join(f"    server r{i} {url.removeprefix('http://')} check" for i, (url, _) in enumerate(replicas))
    cfg = re.sub(r"^\s*server-template .*$", servers, cfg, flags=re.M)
    cfg = cfg.replace("bind :8000", f"bind 127.0.0.1:{port}")
    cfg = re.sub(r"^resolvers cluster\n(\s+.*\n)+", "", cfg, flags=re.M)
    (tmp_path / "haproxy.cfg").write_text(cfg)
    balancer = subprocess.Popen([haproxy_binary(), "-f", str(tmp_path / "haproxy.cfg"), "-db"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        session = requests.Session()
        for _ in range(100):
            try:
                if session.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        served_by = {}
        for i, name in enumerate(names):
            meta = ".zarray" if i % 2 == 0 else "zarr.json"
            chunk = "1.1" if i % 2 == 0 else "c/1/1"
            paths = [f"/zarr/{name}/{meta}", f"/zarr/{name}/{chunk}", f"/api/v1/data/{name}?select=0:2,0:2",
                     f"/api/v1/meta/{name}", f"/zarr/{name}/{meta}"]
            for path in paths:
                r = session.get(base + path, timeout=10)
                assert r.status_code == 200, (path, r.status_code, r.text)
                served_by.setdefault(name, set()).add(r.headers["x-request-id"][:16])
        assert all(len(v) == 1 for v in served_by.values()), served_by
        assert len(set().union(*served_by.values())) > 1, served_by
    finally:
        balancer.terminate()
        balancer.wait(timeout=10)
        for _, proc in replicas:
            stop(proc)
