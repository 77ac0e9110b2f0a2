"""Metrics recorded by the one generation pipeline, the same on every path:
a context-length rejection counts as reason="context_length" in
spate:request_rejected_total over HTTP and over the Responses WebSocket mode
(the WebSocket path used to count it as "invalid", or not at all), and a
completed WebSocket response is observed like an HTTP one.
"""

import json
import time

import pytest
import websockets.sync.client as ws_client

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, post_json
from test_server import ws_collect, ws_url

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--max-model-len", "64")
    try:
        yield s.wait_ready()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def metric(server, name, label=None):
    """The value of the series `name` (with a label like 'reason="x"' when given), 0 when absent."""
    total = 0.0
    for key, value in server.metrics().items():
        base = key.split("{", 1)[0]
        if base == name and (label is None or label in key):
            total += value
    return total


def test_context_length_rejections_counted_on_every_path(server):
    reason = 'reason="context_length"'
    before = metric(server, "spate:request_rejected_total", reason)
    st, body, _ = post_json(server.base_url, "/v1/chat/completions",
                            {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000})
    assert st == 400 and body["error"]["code"] == "context_length_exceeded"
    assert metric(server, "spate:request_rejected_total", reason) == before + 1

    with ws_client.connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "hi", "max_output_tokens": 1000}))
        err = ws_collect(ws)[-1]
        assert err["type"] == "error" and err["code"] == "context_length_exceeded"
    assert metric(server, "spate:request_rejected_total", reason) == before + 2
    assert metric(server, "spate:request_rejected_total", 'reason="invalid"') == 0


def test_ws_response_observed_like_http(server):
    e2e_before = metric(server, "spate:e2e_request_latency_seconds_count")
    ttft_before = metric(server, "spate:time_to_first_token_seconds_count")
    with ws_client.connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "Say hi.", "max_output_tokens": 4,
                            "temperature": 0}))
        last = ws_collect(ws)[-1]
        assert last["type"] in ("response.completed", "response.incomplete")
    assert metric(server, "spate:e2e_request_latency_seconds_count") == e2e_before + 1
    assert metric(server, "spate:time_to_first_token_seconds_count") == ttft_before + 1
    assert metric(server, "spate:request_success_total") >= 1


def test_vllm_series_with_model_name(server):
    """Every spate: series carries model_name, as vLLM's do, and the
    counterparts of vLLM's prefill/decode time, iteration tokens and cache
    config series exist and move with real work."""
    before = server.metrics()
    st, body, _ = post_json(server.base_url, "/v1/completions",
                            {"model": MODEL_NAME, "prompt": "One, two,", "max_tokens": 5, "temperature": 0, "ignore_eos": True})
    assert st == 200, body
    raw = server.metrics(keep_model_label=True)
    assert raw and all(f'model_name="{MODEL_NAME}"' in k for k in raw), [k for k in raw if "model_name" not in k][:3]
    # The engine publishes its step counters after the step that finished the
    # request: poll until they include it (bounded).
    want = before.get("spate:iteration_tokens_total_sum", 0) + body["usage"]["prompt_tokens"] + 4
    deadline = time.time() + 10
    after = server.metrics()
    while after["spate:iteration_tokens_total_sum"] < want and time.time() < deadline:
        time.sleep(0.05)
        after = server.metrics()
    for name in ("spate:request_prefill_time_seconds_count", "spate:request_decode_time_seconds_count"):
        assert after[name] == before.get(name, 0) + 1, name
    assert after["spate:request_decode_time_seconds_sum"] > before.get("spate:request_decode_time_seconds_sum", 0)
    # One observation per engine step; the step tokens add up to at least the prompt and 4 decodes.
    assert after["spate:iteration_tokens_total_count"] == after["spate:engine_steps_total"]
    assert after["spate:iteration_tokens_total_sum"] >= want
    assert after['spate:iteration_tokens_total_bucket{le="+Inf"}'] == after["spate:iteration_tokens_total_count"]
    info = [k for k in raw if k.startswith("spate:cache_config_info{")]
    assert len(info) == 1 and raw[info[0]] == 1.0
    for label in ('block_size="16"', 'cache_dtype="f16"', 'enable_prefix_caching="True"', "num_cpu_blocks=", "kv_cache_memory_bytes="):
        assert label in info[0], info[0]
