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
import urllib.request

import kubernetes_validate
import pytest
import yaml
from helm_python import chart as helm

from conftest import start_zarrd, stop

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


def docs_of(manifests):
    return [d for text in manifests.values() for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("case", list(VALUES))
def test_rendered_config_starts_the_server(case):
    docs = docs_of(render(VALUES[case]))
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["zarrd.toml"]
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
        finally:
            stop(proc)
