"""The drain (SIGTERM) and the Responses WebSocket mode, on a real `spate
serve` on loopback with the `websockets` client. A drain never cuts a
WebSocket (a TCP close without a close frame):

- a response in flight at SIGTERM completes, then the server closes the
  socket with 1001 (going away); one the shutdown timeout cuts short ends
  with its final event, then 1001;
- an idle WebSocket gets 1001 at once, and the server does not wait for it;
- a response.create during the drain starts nothing: an `error` event (code
  shutting_down, like HTTP's 503) at most, then 1001; a client may retry it
  elsewhere, as a balancer retries a 503;
- an upgrade on a keep-alive connection during the drain gets 503.

A long streamed completion (ignore_eos) keeps the drain going where a test
needs the server alive after SIGTERM; closing it ends the drain."""

import http.client
import json
import signal
import time

import pytest
import websockets.exceptions
import websockets.sync.client as ws_client

from spate_server import MODEL_NAME, SLOWDOWN, SPATE_BIN, SPATE_MODEL, SpateServer, wait_listener_closed

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

GOING_AWAY = 1001
EVENT_TIMEOUT = 120 * SLOWDOWN  # one event; generous for a loaded 2-core machine


def ws_url(s):
    return s.base_url.replace("http", "ws", 1) + "/v1/responses"


def create(text, max_output_tokens):
    return json.dumps({"type": "response.create", "model": MODEL_NAME, "input": text,
                       "max_output_tokens": max_output_tokens, "temperature": 0})


def read_until_closed(ws, timeout=EVENT_TIMEOUT):
    """Every event until the server closes; returns (events, the ConnectionClosed).
    A TCP close without a close frame is ConnectionClosedError with rcvd None;
    no close within timeout seconds of the last event raises TimeoutError."""
    events = []
    while True:
        try:
            events.append(json.loads(ws.recv(timeout=timeout)))
        except websockets.exceptions.ConnectionClosed as e:
            return events, e


def assert_going_away(closed, events):
    assert closed.rcvd is not None, f"closed without a close frame (TCP cut) after {[e['type'] for e in events][-5:]}"
    assert closed.rcvd.code == GOING_AWAY, closed.rcvd
    assert isinstance(closed, websockets.exceptions.ConnectionClosedOK), closed


def one_response(ws, text="Say hi.", max_output_tokens=4):
    ws.send(create(text, max_output_tokens))
    while True:
        ev = json.loads(ws.recv(timeout=EVENT_TIMEOUT))
        if ev["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return ev


def start_drain_holder(s):
    """A streamed completion far too long to finish during a test: it keeps the
    drain (and the server) going until its connection is closed."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=EVENT_TIMEOUT)
    c.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
              body=json.dumps({"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 6000,
                               "ignore_eos": True, "stream": True}))
    r = c.getresponse()
    assert r.status == 200
    r.read1(64)  # the first events: it is generating
    return c


def test_response_in_flight_at_sigterm_completes_then_close_1001():
    s = SpateServer("--shutdown-timeout", "120")
    try:
        s.wait_ready()
        ws = ws_client.connect(ws_url(s))
        max_tokens = 300
        ws.send(create("Count from 1 to 1000, separated by commas.", max_tokens))
        deltas = 0
        while json.loads(ws.recv(timeout=EVENT_TIMEOUT))["type"] != "response.output_text.delta":
            pass
        deltas += 1
        s.proc.send_signal(signal.SIGTERM)
        events, closed = read_until_closed(ws)
        types = [e["type"] for e in events]
        deltas += types.count("response.output_text.delta")
        done = [e for e in events if e["type"] in ("response.completed", "response.incomplete")]
        assert done, f"the response did not finish: {types[-5:]}, {closed!r}"
        assert done[0] is events[-1], types[-5:]  # nothing after the final event but the close
        usage = done[0]["response"]["usage"]
        # Finished by itself (EOS or max_output_tokens), not cut short by the drain.
        assert done[0]["type"] == "response.completed" or usage["output_tokens"] == max_tokens, done[0]
        assert usage["output_tokens"] >= deltas > 1, (usage, deltas)
        assert_going_away(closed, events)
        assert s.proc.wait(timeout=60 * SLOWDOWN) == 0, s.log_text()[-3000:]
        assert "still in flight" not in s.log_text()
    finally:
        s.stop()


def test_response_cut_by_the_shutdown_timeout_still_ends_with_its_final_event_and_1001():
    s = SpateServer("--shutdown-timeout", "1")
    try:
        s.wait_ready()
        ws = ws_client.connect(ws_url(s))
        # Far longer than the 1 s drain: counting to 1000 takes over 2000 tokens.
        ws.send(create("Count from 1 to 1000, separated by commas.", 4000))
        while json.loads(ws.recv(timeout=EVENT_TIMEOUT))["type"] != "response.output_text.delta":
            pass
        s.proc.send_signal(signal.SIGTERM)
        events, closed = read_until_closed(ws)
        types = [e["type"] for e in events]
        assert types and types[-1] in ("response.completed", "response.incomplete", "response.failed"), types[-5:]
        assert events[-1]["response"]["usage"]["output_tokens"] < 4000, events[-1]["response"]["usage"]
        assert_going_away(closed, events)
        assert s.proc.wait(timeout=60 * SLOWDOWN) == 0, s.log_text()[-3000:]
        assert "shutdown timeout: cancelling 1 request(s) still in flight" in s.log_text(), s.log_text()[-3000:]
    finally:
        s.stop()


def test_idle_websocket_gets_1001_at_once_on_sigterm():
    s = SpateServer("--shutdown-timeout", "120")
    try:
        s.wait_ready()
        ws = ws_client.connect(ws_url(s))
        assert one_response(ws)["type"] in ("response.completed", "response.incomplete")
        t = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        events, closed = read_until_closed(ws)
        assert events == []
        assert_going_away(closed, events)
        # The drain does not wait for --shutdown-timeout on an idle WebSocket.
        assert s.proc.wait(timeout=60 * SLOWDOWN) == 0, s.log_text()[-3000:]
        assert time.monotonic() - t < 30 * SLOWDOWN
    finally:
        s.stop()


def test_response_requested_during_drain_is_refused_then_1001():
    s = SpateServer("--shutdown-timeout", "120")
    try:
        s.wait_ready()
        ws = ws_client.connect(ws_url(s))
        assert one_response(ws)["type"] in ("response.completed", "response.incomplete")
        keep_alive = http.client.HTTPConnection("127.0.0.1", s.port, timeout=EVENT_TIMEOUT)
        keep_alive.request("GET", "/health")
        assert keep_alive.getresponse().read()
        holder = start_drain_holder(s)
        s.proc.send_signal(signal.SIGTERM)
        wait_listener_closed(s.port)  # the drain has begun
        try:
            ws.send(create("Say hi again.", 4))
        except websockets.exceptions.ConnectionClosed:
            pass  # the server's 1001 came first: nothing was started either
        events, closed = read_until_closed(ws, timeout=30 * SLOWDOWN)
        assert all(e["type"] == "error" and e["error"]["code"] == "shutting_down" for e in events), events
        assert_going_away(closed, events)
        # An upgrade on a keep-alive connection during the drain is refused like any new work.
        keep_alive.request("GET", "/v1/responses", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                                            "Sec-WebSocket-Version": "13"})
        r = keep_alive.getresponse()
        assert r.status == 503, (r.status, r.read())
        assert "shutting down" in json.loads(r.read())["error"]["message"]
        assert s.proc.poll() is None, "the drain ended with a stream in flight"
        holder.close()  # the client goes: its stream is cancelled and the drain ends
        assert s.proc.wait(timeout=60 * SLOWDOWN) == 0, s.log_text()[-3000:]
    finally:
        s.stop()
