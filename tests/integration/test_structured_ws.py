"""Structured outputs over the Responses API's WebSocket mode: text.format
json_schema constrains the streamed text exactly as over HTTP, and a bad
schema is an `error` event while the connection stays usable."""

import json

import pytest
import websockets.sync.client as ws_client
from jsonschema import Draft202012Validator

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                           "population": {"type": "integer", "minimum": 0}},
          "required": ["city", "population"], "additionalProperties": False}


def run(ws, body):
    ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, **body}))
    events = []
    while True:
        ev = json.loads(ws.recv(timeout=120))
        events.append(ev)
        if ev["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return events


def test_text_format_over_websocket(server):
    with ws_client.connect(server.base_url.replace("http", "ws", 1) + "/v1/responses") as ws:
        bad = run(ws, {"input": "x", "text": {"format": {"type": "json_schema", "name": "c",
                                                          "schema": {"type": "object", "not": {}}}}})
        assert bad[-1]["type"] == "error" and "'not'" in bad[-1]["message"]
        events = run(ws, {"input": "Name a big city and its population.", "temperature": 0.7, "max_output_tokens": 200,
                          "text": {"format": {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}}})
        assert events[-1]["type"] == "response.completed"
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert not list(Draft202012Validator(SCHEMA).iter_errors(json.loads(text)))
        assert events[-1]["response"]["text"]["format"]["type"] == "json_schema"
