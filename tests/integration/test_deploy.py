"""deploy/: the Kubernetes manifests validate against Kubernetes 1.31's schema
(kubernetes-validate from PyPI, strict: unknown fields fail), the flags and
the ConfigMap's INI they pass start a real `spate serve` over HTTPS with API
keys, the probes and grace period fit spate's routes and drain, and the
HAProxy configuration passes `haproxy -c`."""

import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from spate_server import REPO, SPATE_BIN, SPATE_MODEL, free_port, process_env, self_signed_cert

K8S = REPO / "deploy" / "k8s"
HAPROXY_CFG = REPO / "deploy" / "haproxy" / "haproxy.cfg"

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)


def manifests():
    out = {}
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def container():
    return manifests()[("Deployment", "spate")]["spec"]["template"]["spec"]["containers"][0]


def test_manifests_validate_against_the_kubernetes_schema():
    docs = manifests()
    assert {k for k, _ in docs} >= {"Deployment", "Service", "ConfigMap", "Secret", "HorizontalPodAutoscaler"}
    for (kind, name), doc in docs.items():
        kubernetes_validate.validate(doc, "1.31.0", strict=True)


def test_probes_grace_period_and_scrape_annotations_fit_spate():
    docs = manifests()
    dep = docs[("Deployment", "spate")]
    pod = dep["spec"]["template"]
    c = container()
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    args = dict(a[2:].split("=", 1) for a in c["args"] if a.startswith("--"))
    shutdown_s = float(args["shutdown-timeout"])
    pre_stop_s = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop_s + shutdown_s
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/path"] == "/metrics"
    assert ann["prometheus.io/port"] == args["port"]
    # The Service and the HPA point at this Deployment.
    assert docs[("Service", "spate")]["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    hpa = docs[("HorizontalPodAutoscaler", "spate")]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "spate"
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "spate_num_requests_waiting"
    rules = docs[("ConfigMap", "prometheus-adapter-spate-rules")]["data"]["config.yaml"]
    assert "spate:num_requests_waiting" in rules and "spate_num_requests_waiting" in rules
    # Mounted files are where the flags and the config say.
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    for flag in ("ssl-certfile", "ssl-keyfile", "api-key-file", "config"):
        assert any(args[flag].startswith(m) for m in mounts), flag


def test_every_flag_and_config_key_starts_a_real_server(tmp_path):
    """Runs the Deployment's args and the ConfigMap's INI, with the mounted paths
    pointing at local files, and checks the server comes up over HTTPS with the key."""
    c = container()
    ini = manifests()[("ConfigMap", "spate-config")]["data"]["spate.conf"]
    help_text = subprocess.run([str(SPATE_BIN), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for line in ini.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key = line.split("=", 1)[0].strip()
            assert f"--{key} " in help_text, f"config key {key} is not a spate serve option"
    for a in c["args"][1:]:
        assert f"{a.split('=', 1)[0]} " in help_text, f"{a} is not a spate serve option"

    crt, key = self_signed_cert(tmp_path)
    (tmp_path / "api-keys").write_text("# test\nsk-deploy-test\n")
    (tmp_path / "spate.conf").write_text(ini.replace("/var/lib/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf", str(SPATE_MODEL)))
    paths = {"/etc/spate/spate.conf": str(tmp_path / "spate.conf"), "/etc/spate/tls/tls.crt": str(crt),
             "/etc/spate/tls/tls.key": str(key), "/etc/spate/keys/api-keys": str(tmp_path / "api-keys")}
    port = free_port()
    args = []
    for a in c["args"]:
        flag, _, value = a.partition("=")
        value = paths.get(value, value)
        if flag == "--port":
            value = str(port)
        if flag == "--host":
            value = "127.0.0.1"
        args.append(f"{flag}={value}" if _ else a)
    proc = subprocess.Popen([str(SPATE_BIN), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=process_env({"SPATE_SKIP_WARMUP": "1"}))
    ctx = ssl.create_default_context(cafile=str(crt))
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/ready", timeout=2, context=ctx) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.time() < deadline, "the Deployment's command line did not become ready"
            time.sleep(0.3)
        req = urllib.request.Request(f"https://127.0.0.1:{port}/v1/models", headers={"Authorization": "Bearer sk-deploy-test"})
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            assert b"SmolLM2-135M-Instruct.Q4_1" in r.read()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/v1/models", timeout=10, context=ctx)
        assert e.value.code == 401
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed (scripts/install-deps.sh)")
def test_haproxy_config_is_valid():
    env = {"SPATE_LB_BIND": "127.0.0.1:18000", "SPATE_LB_STATS": "127.0.0.1:18004",
           **{f"SPATE_REPLICA_{i}": f"127.0.0.1:{18000 + i}" for i in (1, 2, 3)}}
    p = subprocess.run(["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=60,
                       env={**process_env(), **env})
    assert p.returncode == 0, p.stdout + p.stderr
    text = HAPROXY_CFG.read_text()
    for must in ("option httpchk GET /ready", "hash-type consistent", "X-Session-Id", "json_query('$.user')",
                 "retry-on conn-failure empty-response 503", "timeout tunnel"):
        assert must in text, must
