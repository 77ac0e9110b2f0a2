"""A client that goes away during a non-streamed request cancels it (issue 54,
item 4), as vLLM does: the real server on loopback, raw sockets (plain TCP and
TLS), one long request per API's non-streamed route, closed once it runs; then
spate:num_requests_running must fall to 0 within a couple of seconds (the
engine frees the blocks next step), the request counts as cancelled, and the
server answers the next request. A half-close (shutdown(SHUT_WR)) now ends the
request too; pipelined bytes read while a request generates are not lost."""

import json
import re
import socket
import ssl
import time
import urllib.request

import pytest

from spate_server import MODEL_NAME, SpateServer, self_signed_cert

SKIP_WARMUP = {"SPATE_SKIP_WARMUP": "1"}
# Counting on: SmolLM2 goes on far beyond the second the test waits.
LONG_TEXT = "Count from 1 to 5000, one number per line."

# (path, body): the non-streamed generation routes that can be held to thousands of tokens (ignore_eos). The
# Responses, Anthropic and Ollama routes go through the same handler and watch (server/api_generate.cpp) but have no
# ignore_eos, so SmolLM2 may end on its own within the second the test waits: not tested here.
ROUTES = {
    "chat": ("/v1/chat/completions", {"model": MODEL_NAME, "messages": [{"role": "user", "content": LONG_TEXT}],
                                      "max_tokens": 3000, "ignore_eos": True}),
    "completions": ("/v1/completions", {"model": MODEL_NAME, "prompt": LONG_TEXT, "max_tokens": 3000, "ignore_eos": True}),
}


def raw_request(path: str, body: dict, extra: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)


@pytest.fixture(scope="module")
def server():
    s = SpateServer(env=SKIP_WARMUP)
    try:
        yield s.wait_ready()
    finally:
        s.stop()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    s = SpateServer(env=SKIP_WARMUP, tls=self_signed_cert(tmp_path_factory.mktemp("tls")))
    try:
        s.wait_ready(ssl_context=ssl._create_unverified_context())
        yield s
    finally:
        s.stop()


def metrics_of(s: SpateServer) -> dict:
    """/metrics as SpateServer.metrics() parses it, over TLS too (an unverified context)."""
    ctx = ssl._create_unverified_context() if s.tls else None
    with urllib.request.urlopen(s.base_url + "/metrics", timeout=10, context=ctx) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[re.sub(r'model_name="(?:[^"\\]|\\.)*",?', "", name).replace("{}", "")] = float(value)
    return out


def wait_for(s: SpateServer, pred, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        m = metrics_of(s)
        if pred(m) or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def connect(s: SpateServer):
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    if s.tls:
        sock = ssl._create_unverified_context().wrap_socket(sock)
    return sock


def close_while_running(s: SpateServer, path: str, body: dict, how: str = "close"):
    """Sends the request, waits until it runs and a second more, goes away
    (how: close, half_close, close_notify), and checks that it is cancelled
    within a couple of seconds."""
    before = metrics_of(s)
    cancelled = before.get("spate:request_cancelled_total", 0)
    sock = connect(s)
    sock.sendall(raw_request(path, body))
    m = wait_for(s, lambda m: m["spate:num_requests_running"] >= 1, 30)
    assert m["spate:num_requests_running"] >= 1, "the request never ran"
    time.sleep(1.0)
    assert metrics_of(s)["spate:num_requests_running"] >= 1, "the request ended by itself before the client left"
    t_close = time.monotonic()
    if how == "half_close":
        sock.shutdown(socket.SHUT_WR)
    elif how == "close_notify":
        sock = sock.unwrap()  # TLS close_notify, then the TCP close
        sock.close()
    else:
        sock.close()
    m = wait_for(s, lambda m: m["spate:num_requests_running"] == 0 and m.get("spate:request_cancelled_total", 0) > cancelled, 10)
    waited = time.monotonic() - t_close
    assert m["spate:num_requests_running"] == 0, f"still running {waited:.1f} s after the client left"
    assert m.get("spate:request_cancelled_total", 0) == cancelled + 1
    assert waited < 3.0, f"cancelled only {waited:.1f} s after the client left"
    if how == "half_close":
        sock.close()


def assert_serving(s: SpateServer):
    sock = connect(s)
    sock.sendall(raw_request("/v1/completions", {"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 4}, b"Connection: close\r\n"))
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    assert data.startswith(b"HTTP/1.1 200 "), data
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"] >= 1


@pytest.mark.parametrize("route", list(ROUTES))
def test_closed_client_cancels_non_streamed_request(server, route):
    path, body = ROUTES[route]
    close_while_running(server, path, body)
    assert_serving(server)


def test_half_closed_client_cancels(server):
    path, body = ROUTES["chat"]
    close_while_running(server, path, body, how="half_close")
    close_while_running(server, path, {**body, "stream": True}, how="half_close")
    assert_serving(server)


def test_pipelined_request_after_a_generating_one(server):
    """Bytes the server reads while a request generates are the next request."""
    first = raw_request("/v1/completions", {"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 200, "ignore_eos": True})
    second = raw_request("/v1/completions", {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 3, "ignore_eos": True},
                         b"Connection: close\r\n")
    sock = connect(server)
    sock.sendall(first)
    wait_for(server, lambda m: m["spate:num_requests_running"] >= 1, 30)
    sock.sendall(second)  # while the first generates
    data = b""
    sock.settimeout(60)
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    answers = data.split(b"HTTP/1.1 ")[1:]
    assert len(answers) == 2, data
    tokens = [json.loads(a.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"] for a in answers]
    assert tokens == [200, 3], data


@pytest.mark.parametrize("how", ["close", "close_notify"])
def test_tls_client_that_closes_cancels(tls_server, how):
    path, body = ROUTES["chat"]
    close_while_running(tls_server, path, body, how=how)
    assert_serving(tls_server)
