"""HTTP/1.1 protocol corners (issue 13), on the real server with raw sockets,
Python's http.client and curl: deadlines for silent connections (plain and
TLS), Expect: 100-continue, 413 read to the end, RFC 9112 head checks, the
drain on keep-alive connections, GET /v1/models/{id}, and CORS."""

import http.client
import json
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, exchange, post_json, status_of

HEADER_TIMEOUT = 2


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--header-timeout", str(HEADER_TIMEOUT), "--max-body-bytes", "65536", "--max-connections", "8",
                    "--allowed-origins", '["https://app.example"]', "--allowed-headers", '["authorization", "content-type"]',
                    api_key="k1")
    try:
        yield s.wait_ready()
    finally:
        s.stop()


AUTH = {"Authorization": "Bearer k1"}


def raw(server, data: bytes, timeout=10) -> bytes:
    """Sends data on a fresh connection and reads until the server closes."""
    return exchange(server.port, data, timeout)


def test_silent_connections_are_closed_after_the_header_timeout(server):
    """Silent sockets give their slots back after --header-timeout, not
    --idle-timeout, so --max-connections silent clients cannot shut others out."""
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    try:
        t0 = time.monotonic()
        for s in socks:
            s.settimeout(HEADER_TIMEOUT + 5)
            assert s.recv(1) == b"", "a silent connection is closed without an answer"
        assert time.monotonic() - t0 < HEADER_TIMEOUT + 3
        st, _, _ = post_json(server.base_url, "/tokenize", {"prompt": "hi"}, headers=AUTH)
        assert st == 200
    finally:
        for s in socks:
            s.close()


def test_expect_100_continue_is_answered(server):
    """curl sends Expect: 100-continue for bodies over 1 MiB... and over 1 KiB
    with -H; it must not wait a second for our answer."""
    body = json.dumps({"prompt": "x" * 2000})
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        s.settimeout(HEADER_TIMEOUT)
        interim = s.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), interim
        s.sendall(body.encode())
        s.settimeout(10)
        final = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        while b"\r\n\r\n" not in final:
            final += s.recv(4096)
        assert status_of(final) == 200, final
    t0 = time.monotonic()
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Expect: 100-continue",
                          "-H", "Authorization: Bearer k1", "-H", "Content-Type: application/json",
                          "--data-binary", body, server.base_url + "/tokenize"], capture_output=True, text=True, timeout=30)
    assert out.stdout == "200"
    assert time.monotonic() - t0 < 0.9, "curl did not wait for its 1 s Expect timeout"


def test_unknown_expectation_gets_417(server):
    r = raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n")
    assert status_of(r) == 417


def test_413_reaches_a_client_still_uploading(server):
    """http.client sends the whole body before it reads: it must read the 413,
    not a broken pipe."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = b"x" * (4 << 20)
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json", **AUTH})
    resp = conn.getresponse()
    assert resp.status == 413
    assert "larger than the limit" in json.loads(resp.read())["error"]["message"]
    conn.close()


def test_413_chunked_body_reaches_the_client(server):
    def chunks():
        for _ in range(64):
            yield b"y" * 65536

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/v1/completions", body=chunks(), headers={"Content-Type": "application/json", **AUTH},
                 encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()


def test_http11_without_host_is_400(server):
    r = raw(server, b"GET /health HTTP/1.1\r\n\r\n")
    assert status_of(r) == 400 and b"Host" in r
    r = raw(server, b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    assert status_of(r) == 400
    assert status_of(raw(server, b"GET /health HTTP/1.0\r\n\r\n")) == 200, "HTTP/1.0 needs no Host"


def test_obs_fold_is_400(server):
    r = raw(server, b"GET /health HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b\r\n\r\n")
    assert status_of(r) == 400 and b"folding" in r
    r = raw(server, b"GET /health HTTP/1.1\r\nHost: a\r\nX-A: a\r\n\tb\r\n\r\n")
    assert status_of(r) == 400


def test_model_retrieve(server):
    import openai
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="k1", max_retries=0)
    m = client.models.retrieve(MODEL_NAME)
    assert m.id == MODEL_NAME and m.object == "model" and m.owned_by == "spate"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def cors_request(server, method, path, headers):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def test_cors_preflight_before_auth(server):
    st, h, _ = cors_request(server, "OPTIONS", "/v1/chat/completions",
                            {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                             "Access-Control-Request-Headers": "authorization, content-type"})
    assert st == 204
    assert h["access-control-allow-origin"] == "https://app.example"
    assert "POST" in h["access-control-allow-methods"]
    assert h["access-control-allow-headers"] == "authorization, content-type"
    assert h["vary"] == "Origin"
    st, _, body = cors_request(server, "OPTIONS", "/v1/chat/completions",
                               {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert st == 400 and b"origin" in body
    st, _, body = cors_request(server, "OPTIONS", "/v1/chat/completions",
                               {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                                "Access-Control-Request-Headers": "x-custom"})
    assert st == 400 and b"x-custom" in body


def test_cors_headers_on_responses(server):
    st, h, _ = cors_request(server, "GET", "/v1/models", {"Origin": "https://app.example", **AUTH})
    assert st == 200 and h["access-control-allow-origin"] == "https://app.example"
    st, h, _ = cors_request(server, "GET", "/v1/models", {"Origin": "https://app.example"})
    assert st == 401 and h["access-control-allow-origin"] == "https://app.example", "a browser app can read the 401"
    st, h, body = cors_request(server, "GET", "/v1/models", {"Origin": "https://evil.example", **AUTH})
    assert st == 403 and "access-control-allow-origin" not in h, "a disallowed origin is refused (issue 32)"
    assert json.loads(body)["error"]["code"] == "origin_not_allowed"
    st, h, _ = cors_request(server, "GET", "/v1/models", {"Origin": f"http://127.0.0.1:{server.port}", **AUTH})
    assert st == 200, "the server's own origin (the chat page) is always allowed"


def test_cors_credentials_need_listed_origins():
    """Credentials with "*" would reflect any origin, "null" included: refused
    at start-up (issue 32). Listed origins with credentials work."""
    bad = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--allow-credentials"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--allow-credentials cannot be combined with --allowed-origins" in bad.stderr, bad.stderr
    s = SpateServer("--allow-credentials", "--allowed-origins", '["http://localhost:3000"]', env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, h, _ = cors_request(s, "OPTIONS", "/v1/completions",
                                {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
        assert st == 204 and h["access-control-allow-origin"] == "http://localhost:3000"
        assert h["access-control-allow-credentials"] == "true"
        st, h, _ = cors_request(s, "OPTIONS", "/v1/completions", {"Origin": "null", "Access-Control-Request-Method": "POST"})
        assert st == 400 and "access-control-allow-credentials" not in h
    finally:
        s.stop()


def test_cors_default_allows_any_origin():
    s = SpateServer(env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, h, _ = cors_request(s, "OPTIONS", "/v1/completions",
                                {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
        assert st == 204 and h["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in h
        st, h, _ = cors_request(s, "GET", "/v1/models", {"Origin": "null"})
        assert st == 200 and h["access-control-allow-origin"] == "*"
    finally:
        s.stop()
    bad = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--allowed-origins", "*"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--allowed-origins must be a JSON list" in bad.stderr


def test_keep_alive_request_during_drain_gets_503():
    s = SpateServer("--shutdown-timeout", "20")
    try:
        s.wait_ready()
        # A stream in flight keeps the drain going: long enough that it cannot
        # finish (and end the drain) before the second request, however fast decode is.
        streaming = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        streaming.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                          body=json.dumps({"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 6000,
                                           "ignore_eos": True, "stream": True}))
        stream_resp = streaming.getresponse()
        assert stream_resp.status == 200
        stream_resp.read(64)
        idle = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        idle.request("GET", "/health")
        assert idle.getresponse().read()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        idle.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                     body=json.dumps({"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2}))
        resp = idle.getresponse()
        assert resp.status == 503
        assert resp.getheader("Connection", "").lower() == "close"
        assert "shutting down" in json.loads(resp.read())["error"]["message"]
        streaming.close()
    finally:
        s.stop()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


def test_tls_silent_connections_time_out(tls_files):
    """The handshake has a deadline, and so has the first request after it."""
    s = SpateServer("--header-timeout", str(HEADER_TIMEOUT), tls=tls_files)
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s.wait_ready(ssl_context=ctx)
        no_handshake = socket.create_connection(("127.0.0.1", s.port))
        handshaken = ctx.wrap_socket(socket.create_connection(("127.0.0.1", s.port)))
        t0 = time.monotonic()
        for sock in (no_handshake, handshaken):
            sock.settimeout(HEADER_TIMEOUT + 5)
            try:
                assert sock.recv(1) == b""
            except (ConnectionResetError, ssl.SSLError):
                pass  # closed: what matters is that it did not wait for --idle-timeout
        assert time.monotonic() - t0 < HEADER_TIMEOUT + 3
        no_handshake.close()
        handshaken.close()
    finally:
        s.stop()


def raw_json(server, method, path, extra=b"", auth=True, body=b""):
    """One raw request (Connection: close); returns (status, lower-cased head, parsed JSON body)."""
    head = (f"{method} {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n".encode() + (b"Authorization: Bearer k1\r\n" if auth else b"")
            + extra + b"\r\n")
    r = raw(server, head + body)
    head_part, _, out = r.partition(b"\r\n\r\n")
    return status_of(r), head_part.decode().lower(), json.loads(out)


def test_errors_before_the_handler_take_each_apis_shape(server):
    """413 decided on the Content-Length, 401, 404 and 405 come before any
    handler runs: Anthropic's routes answer in Anthropic's shape, Ollama's in
    Ollama's, the rest in OpenAI's; every 401 asks for Bearer."""
    big = b"Content-Type: application/json\r\nContent-Length: 100000\r\n"
    st, head, body = raw_json(server, "POST", "/v1/messages?beta=true", big)
    assert st == 413 and body["type"] == "error" and body["error"]["type"] == "request_too_large", body
    assert "larger than the limit" in body["error"]["message"]
    st, head, body = raw_json(server, "POST", "/api/chat", big)
    assert st == 413 and list(body) == ["error"] and "larger than the limit" in body["error"], body
    st, head, body = raw_json(server, "POST", "/v1/chat/completions", big)
    assert st == 413 and body["error"]["type"] == "invalid_request_error", body

    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        st, head, body = raw_json(server, "POST", path, b"Content-Length: 0\r\n", auth=False)
        assert st == 401 and body == {"type": "error", "error": {"type": "authentication_error", "message": "missing or invalid API key"}}
        assert "www-authenticate: bearer" in head, head
    for path in ("/api/chat", "/api/tags", "/v1/chat/completions", "/v1/models"):
        st, head, body = raw_json(server, "POST" if path in ("/api/chat", "/v1/chat/completions") else "GET", path, auth=False)
        assert st == 401 and "www-authenticate: bearer" in head, (path, head)
        assert body == {"error": "missing or invalid API key"} if path.startswith("/api/") else body["error"]["code"] == "invalid_api_key"

    st, head, body = raw_json(server, "POST", "/v1/messages/batches", b"Content-Length: 0\r\n")
    assert st == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error", body
    st, head, body = raw_json(server, "GET", "/v1/messages")
    assert st == 405 and body["error"]["type"] == "invalid_request_error" and "allow: post" in head, body
    st, head, body = raw_json(server, "POST", "/api/nope", b"Content-Length: 0\r\n")
    assert st == 404 and body == {"error": "no route for POST /api/nope"}
    # Bad JSON reaches the handler, which answers in its API's shape too.
    st, head, body = raw_json(server, "POST", "/v1/messages", b"Content-Type: application/json\r\nContent-Length: 1\r\n", body=b"{")
    assert st == 400 and body["type"] == "error" and "malformed JSON" in body["error"]["message"], body
    st, head, body = raw_json(server, "POST", "/api/chat", b"Content-Type: application/json\r\nContent-Length: 1\r\n", body=b"{")
    assert st == 400 and isinstance(body["error"], str), body


def test_413_in_the_official_clients_shapes(server):
    """The SDKs read the 413 of an over-long body as their own error."""
    import anthropic
    import ollama
    c = anthropic.Anthropic(base_url=server.base_url, api_key="k1", max_retries=0, timeout=60)
    with pytest.raises(anthropic.APIStatusError) as e:
        c.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "x" * 70000}])
    assert e.value.status_code == 413 and e.value.body["error"]["type"] == "request_too_large", e.value.body
    o = ollama.Client(host=server.base_url, headers={"Authorization": "Bearer k1"}, timeout=60)
    with pytest.raises(ollama.ResponseError) as e:
        o.chat(model=MODEL_NAME, messages=[{"role": "user", "content": "x" * 70000}])
    assert e.value.status_code == 413 and e.value.error.startswith("request body"), e.value.error
