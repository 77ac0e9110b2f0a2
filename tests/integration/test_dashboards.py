"""etc/grafana's dashboard and etc/prometheus's scrape example: every
expression names a metric a real `spate serve` exports (with its model_name
label), and every expression is well formed enough for Prometheus to parse
(balanced brackets, known functions)."""

import json
import re
import urllib.request
from pathlib import Path

import pytest

from spate_server import REPO, SPATE_BIN, SPATE_MODEL, SpateServer

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

DASHBOARD = REPO / "etc" / "grafana" / "spate-dashboard.json"
SCRAPE = REPO / "etc" / "prometheus" / "prometheus.yml"
PROMQL_FUNCS = {"histogram_quantile", "sum", "rate", "max", "clamp_min", "by"}


@pytest.fixture(scope="module")
def exported():
    s = SpateServer(env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        with urllib.request.urlopen(s.base_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            series.setdefault(name, []).append(line)
    return series


def dashboard_exprs():
    d = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    for v in d["templating"]["list"]:
        if v.get("type") == "query":
            exprs.append(v["query"]["query"])
    return d, exprs


def test_every_expression_names_an_exported_metric(exported):
    _, exprs = dashboard_exprs()
    assert len(exprs) >= 12
    used = set()
    for e in exprs:
        names = re.findall(r"spate:[a-zA-Z0-9_:]+", e)
        assert names, f"no spate: metric in {e!r}"
        for n in names:
            assert n in exported, f"{n} (in {e!r}) is not exported; exported: {sorted(exported)}"
            assert all('model_name="' in line for line in exported[n]), f"{n} lacks the model_name label"
            used.add(re.sub(r"_(bucket|sum|count)$", "", n))
    # The list: TTFT and ITL quantiles, throughput, KV usage, queue,
    # preemptions, prefix-cache hit rate.
    for want in ("spate:time_to_first_token_seconds", "spate:inter_token_latency_seconds", "spate:generation_tokens_total",
                 "spate:kv_cache_usage_perc", "spate:num_requests_waiting", "spate:num_preemptions_total",
                 "spate:prefix_cache_hits_total", "spate:prefix_cache_queries_total"):
        assert want in used, want


def test_expressions_are_well_formed():
    d, exprs = dashboard_exprs()
    for e in exprs:
        depth = {"(": 0, "[": 0, "{": 0}
        pairs = {")": "(", "]": "[", "}": "{"}
        for c in e:
            if c in depth:
                depth[c] += 1
            elif c in pairs:
                depth[pairs[c]] -= 1
                assert depth[pairs[c]] >= 0, e
        assert all(v == 0 for v in depth.values()), e
        for f in re.findall(r"([a-z_]+)\s*\(", e):
            assert f in PROMQL_FUNCS | {"label_values"}, f"unknown function {f} in {e!r}"
        if "histogram_quantile" in e:
            assert "_bucket" in e and "by (le)" in e, e
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    assert d["uid"] and d["title"]


def test_scrape_example_targets_the_metrics_route():
    text = SCRAPE.read_text()
    assert re.search(r"^\s*metrics_path:\s*/metrics\s*$", text, re.M)
    assert re.search(r"^\s*- job_name:\s*spate\s*$", text, re.M)
    assert re.search(r'targets:\s*\["127\.0\.0\.1:8000"\]', text)
    try:
        import yaml
    except ImportError:
        return
    doc = yaml.safe_load(text)
    job = doc["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == ["127.0.0.1:8000"]
