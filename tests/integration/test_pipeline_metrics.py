"""Metrics recorded by the one generation pipeline, the same on every path:
a context-length rejection counts as reason="context_length" in
spate:request_rejected_total over HTTP and over the Responses WebSocket mode
(the WebSocket path used to count it as "invalid", or not at all), and a
completed WebSocket response is observed like an HTTP one. The tokens of a
stream the client closed count in spate:generation_tokens_total and in the
access log's completion_tokens, on every API; spate:request_params_n and
spate:request_params_max_tokens observe each completed request with vLLM's
buckets.
"""

import json
import re
import time

import openai
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


@pytest.fixture(scope="module")
def long_server():
    """The model's whole context: streams long enough to close mid-way."""
    s = SpateServer()
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


def bucket_bounds(metrics, name):
    return [k.split('le="', 1)[1].rstrip('"}') for k in metrics if k.startswith(name + "_bucket{")]


def test_request_params_histograms(server):
    """vLLM's buckets (max_tokens: 1-2-5 steps up to max_model_len, 64 here);
    n once per request, max_tokens once per choice, the default filled in."""
    before = server.metrics()
    assert bucket_bounds(before, "spate:request_params_n") == ["1.0", "2.0", "5.0", "10.0", "20.0", "+Inf"]
    assert bucket_bounds(before, "spate:request_params_max_tokens") == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "+Inf"]
    st, body, _ = post_json(server.base_url, "/v1/completions",
                            {"model": MODEL_NAME, "prompt": "One, two,", "max_tokens": 4, "n": 2, "temperature": 0})
    assert st == 200, body
    # No max_tokens: the rest of the context (64 - prompt tokens).
    st, chat, _ = post_json(server.base_url, "/v1/chat/completions",
                            {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": None,
                             "temperature": 0})
    assert st == 200, chat
    room = 64 - chat["usage"]["prompt_tokens"]
    after = server.metrics()

    def delta(key):
        return after[key] - before.get(key, 0)

    assert delta('spate:request_params_n_bucket{le="1.0"}') == 1
    assert delta('spate:request_params_n_bucket{le="2.0"}') == 2
    assert delta("spate:request_params_n_count") == 2 and delta("spate:request_params_n_sum") == 3
    assert delta('spate:request_params_max_tokens_bucket{le="2.0"}') == 0
    assert delta('spate:request_params_max_tokens_bucket{le="5.0"}') == 2
    assert delta("spate:request_params_max_tokens_count") == 3
    assert delta("spate:request_params_max_tokens_sum") == 4 + 4 + room
    assert delta('spate:request_params_max_tokens_bucket{le="50.0"}') == 2 + (room <= 50)


def read_then_close(client, api, request_id, n_want):
    """Streams a long answer on `api`, reads n_want pieces of text (each from
    a tokens event, so at least one token each), then closes the connection.
    Returns the number read."""
    headers = {"X-Request-Id": request_id}
    if api == "responses":
        stream = client.responses.create(model=MODEL_NAME, input="Count to a thousand.", max_output_tokens=2000,
                                         temperature=0, stream=True, extra_headers=headers)
        text = lambda ev: ev.type == "response.output_text.delta" and ev.delta
    elif api == "chat":
        stream = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Count to a thousand."}],
                                                max_tokens=2000, temperature=0, stream=True, extra_headers=headers,
                                                extra_body={"ignore_eos": True})
        text = lambda ch: ch.choices and ch.choices[0].delta.content
    else:
        stream = client.completions.create(model=MODEL_NAME, prompt="1, 2, 3,", max_tokens=2000, temperature=0, stream=True,
                                           extra_headers=headers, extra_body={"ignore_eos": True})
        text = lambda ch: ch.choices and ch.choices[0].text
    n = 0
    for piece in stream:
        n += 1 if text(piece) else 0
        if n >= n_want:
            break
    stream.close()
    assert n == n_want, f"the stream ended after {n} pieces"
    return n


@pytest.mark.parametrize("api", ["responses", "chat", "completions"])
def test_cancelled_stream_tokens_counted_and_logged(long_server, api):
    """A stream the client closed: its tokens count in
    spate:generation_tokens_total (they used to count only when a request
    finished) and in the access log's completion_tokens (0 for /v1/responses)."""
    client = openai.OpenAI(base_url=long_server.base_url + "/v1", api_key="unused", max_retries=0)
    m0 = long_server.metrics()
    request_id = f"cancel-{api}-{time.monotonic_ns()}"
    n = read_then_close(client, api, request_id, 12)
    m = long_server.wait_metric(lambda m: m.get("spate:request_cancelled_total", 0) > m0.get("spate:request_cancelled_total", 0)
                                and m["spate:num_requests_running"] == 0
                                and m["spate:generation_tokens_total"] >= m0["spate:generation_tokens_total"] + n)
    assert m["spate:request_success_total" + '{finished_reason="stop"}'] == m0.get('spate:request_success_total{finished_reason="stop"}', 0)
    deadline = time.time() + 20
    while True:
        lines = [l for l in long_server.log_text().splitlines() if request_id in l and "completion_tokens=" in l]
        if lines or time.time() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1, long_server.log_text()[-3000:]
    assert "finish_reason=cancelled" in lines[0], lines[0]
    logged = int(re.search(r"completion_tokens=(\d+)", lines[0]).group(1))
    assert logged >= n, lines[0]
    # The counter holds at least what the access log saw.
    assert m["spate:generation_tokens_total"] - m0["spate:generation_tokens_total"] >= logged
