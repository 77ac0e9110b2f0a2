"""The step profiler: SPATE_PROFILER_ENABLED=true turns on POST /start_profile
and /stop_profile (behind the API key); the trace is Chrome trace-event JSON
with per-step spans (schedule, forward with layer groups and ops, sample,
deliver; bucket, batch size, tokens and KV usage as arguments) and the
executor's worker threads on their own tracks."""

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

KEY = "sk-profiler"


def post(srv, path, key=KEY):
    return post_json(srv.base_url, path, None, raw=b"", headers={"Authorization": f"Bearer {key}"} if key else {})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    out = tmp_path_factory.mktemp("traces")
    s = SpateServer(api_key=KEY, env={"SPATE_SKIP_WARMUP": "1", "SPATE_PROFILER_ENABLED": "true",
                                      "SPATE_PROFILER_DIR": str(out)})
    s.trace_dir = out
    try:
        yield s.wait_ready()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def complete(srv, prompt, n):
    st, body, _ = post_json(srv.base_url, "/v1/completions", {"model": MODEL_NAME, "prompt": prompt, "max_tokens": n,
                                                              "temperature": 0}, headers={"Authorization": f"Bearer {KEY}"})
    assert st == 200, body
    return body


def test_profile_records_steps_ops_and_worker_tracks(server):
    st, body, _ = post(server, "/start_profile")
    assert st == 200 and body["status"] == "recording", body
    assert post(server, "/start_profile")[0] == 409
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: complete(server, f"Story {i}: once upon a time", 12), range(4)))
    st, body, _ = post(server, "/stop_profile")
    assert st == 200 and body["status"] == "stopped", body
    assert body["n_events"] > 0 and body["n_dropped"] == 0
    assert str(server.trace_dir) in body["path"]
    with open(body["path"]) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "engine" in names and any(n.startswith("worker ") for n in names), names
    steps = [e for e in spans if e["name"] == "step"]
    assert len(steps) >= 12
    for key in ("prefill", "batch_size", "tokens", "bucket_bs", "bucket_len", "kv_blocks_used"):
        assert all(key in s["args"] for s in steps), key
    assert max(s["args"]["batch_size"] for s in steps) >= 2
    assert any(s["args"]["prefill"] == 1 for s in steps) and any(s["args"]["prefill"] == 0 for s in steps)
    assert all(s["args"]["kv_blocks_used"] >= 1 for s in steps)
    # Each step holds its phases, in order, within its time.
    by_tid = [e for e in spans if e["tid"] == steps[0]["tid"]]
    for s in steps:
        inside = [e for e in by_tid if e is not s and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]]
        phases = [e["name"] for e in inside if e["cat"] == "engine"]
        assert phases == ["schedule", "forward", "sample", "deliver"], phases
        ops = {e["name"] for e in inside if e["cat"] == "op"}
        assert {"qkv_proj", "rope_kv_store", "attention", "o_proj", "gate_up_proj", "down_proj", "residual", "output"} <= ops, ops
        assert any(e["cat"] == "layers" and e["name"].startswith("layers 0-") for e in inside)
    workers = [e for e in spans if e["cat"] == "worker"]
    assert workers and all(e["tid"] != steps[0]["tid"] for e in workers)
    # Nothing is recorded once stopped.
    complete(server, "after", 2)
    assert post(server, "/stop_profile")[0] == 409


def test_profile_routes_need_the_api_key(server):
    assert post(server, "/start_profile", key=None)[0] == 401
    assert post(server, "/stop_profile", key="wrong")[0] == 401


def test_profile_routes_are_off_by_default():
    s = SpateServer(env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, body, _ = post(s, "/start_profile", key=None)
        assert st == 404 and "SPATE_PROFILER_ENABLED=true" in body["error"]["message"], body
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def test_a_bad_profiler_setting_is_refused_at_start_up():
    s = SpateServer(env={"SPATE_SKIP_WARMUP": "1", "SPATE_PROFILER_ENABLED": "maybe"})
    assert s.proc.wait(timeout=60) != 0
    assert "SPATE_PROFILER_ENABLED must be true or false" in s.log_text()
