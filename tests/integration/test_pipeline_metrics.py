"""Metrics recorded by the one generation pipeline, the same on every path:
a context-length rejection counts as reason="context_length" in
spate:request_rejected_total over HTTP and over the Responses WebSocket mode
(the WebSocket path used to count it as "invalid", or not at all), and a
completed WebSocket response is observed like an HTTP one.
"""

import json

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
