"""Security defects found by abuse probes (issue 32), each tried as an attacker
would, against the real server on loopback with raw sockets, Python's http.client
and ssl, and the websockets client:

1. a key file without keys never turns authentication off (start, SIGHUP);
2. no request smuggling through Transfer-Encoding;
3. keyless uploads are refused on the head (no 100 Continue, body not held);
4. a disallowed Origin cannot open the WebSocket;
5. CORS: no credentials with "*", no "simple" cross-origin POST from a disallowed origin;
6. a half-closed client is gone, as in vLLM: its request is cancelled (issue 54 turned the earlier answer around);
7. TLS 1.2 offers only ECDHE with AEAD; --ssl-ciphers;
8. an embeddings request the queue can never hold gets 400, the documented maximum works;
and: idle keep-alive connections make room at --max-connections; HEAD wherever GET."""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
import websockets.sync.client
from websockets.exceptions import InvalidStatus

from spate_server import (MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, exchange, free_port, post_json, self_signed_cert,
                          status_of)

SKIP_WARMUP = {"SPATE_SKIP_WARMUP": "1"}
KEY = "k1"
AUTH = {"Authorization": f"Bearer {KEY}"}
APP = "https://app.example"


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--allowed-origins", json.dumps([APP]), "--max-queued-requests", "8", api_key=KEY, env=SKIP_WARMUP)
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def completion_request(body: dict, extra_headers: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
            b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)


# ---------------------------------------------------------------- 1. key file

def serve_cmd(*args):
    return [str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--host", "127.0.0.1", "--port", str(free_port()),
            *map(str, args)]


@pytest.mark.parametrize("content", ["", "# only a comment\n", "  \n\t\n"])
def test_start_refuses_a_key_file_without_keys(tmp_path, content):
    keys = tmp_path / "api-keys"
    keys.write_text(content)
    r = subprocess.run(serve_cmd("--api-key-file", keys), capture_output=True, text=True, timeout=60, env={**os.environ, **SKIP_WARMUP})
    assert r.returncode == 2, r.stderr
    assert str(keys) in r.stderr and "holds no API key" in r.stderr


def test_start_refuses_a_directory_as_key_file(tmp_path):
    r = subprocess.run(serve_cmd("--api-key-file", tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is a directory" in r.stderr and str(tmp_path) in r.stderr, r.stderr


def test_sighup_with_an_emptied_key_file_keeps_the_keys(tmp_path):
    keys = tmp_path / "api-keys"
    keys.write_text("key-old\n")
    s = SpateServer("--api-key-file", keys, env=SKIP_WARMUP)

    def status(key):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return post_json(s.base_url, "/tokenize", {"prompt": "hi"}, headers=headers)[0]

    try:
        s.wait_ready()
        assert (status(None), status("key-old")) == (401, 200)
        n_failed = 0
        for make_bad in (lambda: keys.write_text(""), lambda: keys.write_text("# comments only\n\n"),
                         lambda: (keys.unlink(), keys.mkdir())):
            make_bad()
            s.proc.send_signal(signal.SIGHUP)
            n_failed += 1
            deadline = time.time() + 15
            while s.log_text().count("SIGHUP: reload failed") < n_failed:
                assert time.time() < deadline, s.log_text()[-3000:]
                time.sleep(0.1)
            assert (status(None), status("key-old")) == (401, 200), "the previous keys stay"
        assert "reloaded the TLS certificate and API keys" not in s.log_text()
        assert "holds no API key" in s.log_text() and "is a directory" in s.log_text()
        keys.rmdir()
        keys.write_text("key-new\n")
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 15
        while status("key-new") != 200:
            assert time.time() < deadline, s.log_text()[-3000:]
            time.sleep(0.1)
        assert (status(None), status("key-old")) == (401, 401)
    finally:
        s.stop()


# ---------------------------------------------------------------- 2. smuggling

@pytest.mark.parametrize("te", [b"identity", b"gzip", b"xchunked", b"chunked, identity", b"chunked\r\nTransfer-Encoding: identity"])
def test_transfer_encoding_not_ending_in_chunked_is_400_and_closes(server, te):
    marker = f"smuggled-{abs(hash(te))}"
    smuggled = completion_request({"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2},
                                  b"Authorization: Bearer k1\r\nX-Request-Id: " + marker.encode() + b"\r\n")
    r = exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te + b"\r\n\r\n" + smuggled)
    assert status_of(r) == 400, r
    assert r.count(b"HTTP/1.1 ") == 1, f"one answer, then the connection closes: {r!r}"
    assert b"Transfer-Encoding" in r
    time.sleep(0.2)
    assert marker not in server.log_text(), "the smuggled request ran"


def test_other_ambiguous_framings_are_refused(server):
    # Content-Length and chunked together (either order): 400.
    for head in (b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n"):
        r = exchange(server.port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\n" + head + b"\r\n0\r\n\r\n")
        assert status_of(r) == 400 and r.count(b"HTTP/1.1 ") == 1, r
    # A coding we cannot decode before chunked: 501.
    r = exchange(server.port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\n"
                              b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    assert status_of(r) == 501, r
    # HTTP/1.0 has no transfer codings.
    r = exchange(server.port, b"GET /health HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert status_of(r) == 400, r
    # A plain chunked request still works.
    body = json.dumps({"prompt": "hi"}).encode()
    r = exchange(server.port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nConnection: close\r\n"
                              b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    assert status_of(r) == 200, r


# ---------------------------------------------------------------- 3. keyless uploads

def test_keyless_upload_gets_401_on_the_head(server):
    """8 MB announced, nothing sent: the 401 comes at once, not after the body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 8000000\r\n\r\n")
        head = s.recv(4096)
        assert status_of(head) == 401, head
        assert b"WWW-Authenticate: Bearer" in head
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 8000000\r\n\r\n")
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 401"), f"no 100 Continue without a key: {head!r}"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 8000000\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 401")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 2\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue"), "a valid key still gets 100"


def rss_bytes(pid) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_what_is_served_without_a_key_takes_no_body(server):
    """Public routes and OPTIONS need no key, so a keyless client could use
    them to make the server buffer a body: refused on the head instead."""
    for method, path in (("GET", "/health"), ("POST", "/metrics"), ("OPTIONS", "/v1/completions"), ("GET", "/")):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n".encode())
            head = s.recv(4096)
            assert status_of(head) == 413, (method, path, head)
    assert exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").startswith(
        b"HTTP/1.1 200")


def test_keyless_uploads_are_not_held_in_memory(server):
    """20 concurrent keyless 7 MiB uploads read to the end: each client reads its
    401 (lingering close), and the server holds none of the bodies (before the
    fix, each was buffered in full: +140 MiB at the peak)."""
    body = b"x" * (7 << 20)
    before = rss_bytes(server.proc.pid)
    statuses = []

    def upload():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            statuses.append(conn.getresponse().status)
        except (BrokenPipeError, ConnectionResetError) as e:
            statuses.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=upload) for _ in range(20)]
    peak = before
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_bytes(server.proc.pid))
        time.sleep(0.01)
    assert statuses == [401] * 20
    assert peak - before < 40 << 20, f"RSS grew by {(peak - before) >> 20} MiB for 140 MiB of keyless uploads"


# ---------------------------------------------------------------- 4 and 5. Origin

def test_websocket_upgrade_from_a_disallowed_origin_is_403(server):
    url = f"ws://127.0.0.1:{server.port}/v1/responses"
    for headers in (AUTH, {}):
        with pytest.raises(InvalidStatus) as e:
            websockets.sync.client.connect(url, origin="https://evil.example", additional_headers=headers, open_timeout=10)
        assert e.value.response.status_code == 403
    with websockets.sync.client.connect(url, origin=APP, additional_headers=AUTH, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "hi", "max_output_tokens": 2}))
        while json.loads(ws.recv(timeout=60))["type"] not in ("response.completed", "response.incomplete"):
            pass


def test_simple_cross_origin_posts_from_a_disallowed_origin_do_not_run(server):
    """text/plain and form posts need no preflight: the server itself must refuse them."""
    for ctype in ("text/plain", "application/x-www-form-urlencoded"):
        for headers in (AUTH, {}):
            marker = f"xorigin-{ctype}-{len(headers)}".replace("/", "-")
            st, body, _ = post_json(server.base_url, "/v1/completions", None,
                                    raw=json.dumps({"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2}).encode(),
                                    headers={"Content-Type": ctype, "Origin": "https://evil.example", "X-Request-Id": marker, **headers})
            assert st == 403 and body["error"]["code"] == "origin_not_allowed", body
            assert body["error"]["type"] == "permission_error"
    st, body, _ = post_json(server.base_url, "/tokenize", {"prompt": "hi"}, headers={"Origin": APP, **AUTH})
    assert st == 200


# ---------------------------------------------------------------- 6. half-close

def test_half_closed_client_is_cancelled(server):
    """shutdown(SHUT_WR) after the request ends it (non-streamed and streamed), without an answer."""
    body = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": True}
    for stream in (False, True):
        before = server.metrics().get("spate:request_cancelled_total", 0)
        t0 = time.monotonic()
        r = exchange(server.port, completion_request({**body, "stream": stream}, b"Authorization: Bearer k1\r\n"), timeout=120,
                     half_close=True)
        assert time.monotonic() - t0 < 30, "the server waited for the whole generation"
        assert b'"finish_reason":"length"' not in r, r[-500:]
        server.wait_metric(lambda m: m.get("spate:request_cancelled_total", 0) > before and m["spate:num_requests_running"] == 0,
                           timeout=10)


def test_a_reset_client_is_still_cancelled(server):
    """A client that resets (closes with unread data, or SO_LINGER 0) is gone: its request is cancelled."""
    before = server.metrics().get("spate:request_cancelled_total", 0)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(completion_request({"model": MODEL_NAME, "prompt": "Once", "max_tokens": 4000, "ignore_eos": True},
                                 b"Authorization: Bearer k1\r\n"))
    time.sleep(0.5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # RST
    server.wait_metric(lambda m: m.get("spate:request_cancelled_total", 0) > before and m["spate:num_requests_running"] == 0,
                       timeout=30)


# ---------------------------------------------------------------- 7. TLS

@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def tls12_handshake(port, ciphers) -> bool:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers + ":@SECLEVEL=0")
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as s:
            return s.version() == "TLSv1.2"
    except (ssl.SSLError, ConnectionResetError):
        return False


def test_tls12_offers_only_ecdhe_with_aead(tls_files):
    s = SpateServer(tls=tls_files, env=SKIP_WARMUP)
    try:
        ctx = ssl._create_unverified_context()
        s.wait_ready(ssl_context=ctx)
        for weak in ("AES128-SHA", "AES256-GCM-SHA384", "AES128-SHA256", "ECDHE-RSA-AES256-SHA", "ECDHE-RSA-AES128-SHA256",
                     "DHE-RSA-AES128-GCM-SHA256"):
            assert not tls12_handshake(s.port, weak), weak
        for strong in ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"):
            assert tls12_handshake(s.port, strong), strong
        with urllib.request.urlopen(s.base_url + "/health", context=ctx, timeout=10) as r:  # TLS 1.3
            assert r.status == 200
    finally:
        s.stop()


def test_tls_client_renegotiation_is_refused(tls_files):
    """A TLS 1.2 client may not renegotiate (a CPU cost it could repeat at will)."""
    s = SpateServer(tls=tls_files, env=SKIP_WARMUP)
    try:
        s.wait_ready(ssl_context=ssl._create_unverified_context())
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{s.port}", "-tls1_2"],
                           input="R\n", capture_output=True, text=True, timeout=30)
        assert "RENEGOTIATING" in p.stdout + p.stderr, p.stdout + p.stderr
        assert "no renegotiation" in p.stdout + p.stderr, p.stdout + p.stderr
        with urllib.request.urlopen(s.base_url + "/health", context=ssl._create_unverified_context(), timeout=10) as r:
            assert r.status == 200
    finally:
        s.stop()


def test_ssl_ciphers_sets_the_list(tls_files):
    s = SpateServer("--ssl-ciphers", "ECDHE-RSA-AES256-GCM-SHA384", tls=tls_files, env=SKIP_WARMUP)
    try:
        s.wait_ready(ssl_context=ssl._create_unverified_context())
        assert tls12_handshake(s.port, "ECDHE-RSA-AES256-GCM-SHA384")
        assert not tls12_handshake(s.port, "ECDHE-RSA-AES128-GCM-SHA256")
    finally:
        s.stop()
    r = subprocess.run(serve_cmd("--ssl-certfile", tls_files[0], "--ssl-keyfile", tls_files[1], "--ssl-ciphers", "NO-SUCH-CIPHER"),
                       capture_output=True, text=True, timeout=120, env={**os.environ, **SKIP_WARMUP})
    assert r.returncode != 0 and "--ssl-ciphers" in r.stderr, r.stderr


# ---------------------------------------------------------------- 8. embeddings

def test_embeddings_over_the_queue_bound_get_400_not_429(server):
    st, body, _ = post_json(server.base_url, "/v1/embeddings", {"input": ["a"] * 9}, headers=AUTH)
    assert st == 400, body
    assert "--max-queued-requests 8" in body["error"]["message"] and body["error"]["param"] == "input"
    st, body, _ = post_json(server.base_url, "/v1/embeddings", {"input": ["a"] * 8}, headers=AUTH)
    assert st == 200 and len(body["data"]) == 8
    # The same bound for prompts x n: 10 choices can never be queued at once.
    st, body, _ = post_json(server.base_url, "/v1/completions", {"prompt": ["a", "b"], "n": 5, "max_tokens": 1}, headers=AUTH)
    assert st == 400 and body["error"]["param"] == "n" and "--max-queued-requests 8" in body["error"]["message"], body
    st, body, _ = post_json(server.base_url, "/v1/completions", {"prompt": ["a", "b"], "n": 4, "max_tokens": 1}, headers=AUTH)
    assert st == 200 and len(body["choices"]) == 8


# ------------------------------------------- idle connections and HEAD, default limits

@pytest.fixture(scope="module")
def small_server():
    s = SpateServer("--max-connections", "4", env=SKIP_WARMUP)
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def test_embeddings_at_the_documented_maximum(small_server):
    st, body, _ = post_json(small_server.base_url, "/v1/embeddings", {"input": ["a b"] * 2048}, timeout=300)
    assert st == 200, body
    assert len(body["data"]) == 2048


def test_idle_keep_alive_connections_make_room(small_server):
    idle = []
    for _ in range(4):
        c = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=10)
        c.request("GET", "/health")
        assert c.getresponse().read()
        idle.append(c)
    t0 = time.monotonic()
    fresh = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=10)
    fresh.request("GET", "/health")
    assert fresh.getresponse().status == 200
    assert time.monotonic() - t0 < 5
    fresh.close()
    # The oldest idle one was closed; the newest three are still open.
    idle[0].sock.settimeout(5)
    assert idle[0].sock.recv(1) == b""
    for c in idle[1:]:
        c.request("GET", "/health")
        assert c.getresponse().status == 200
        c.close()


def test_head_wherever_get(small_server):
    for path in ("/", "/health", "/ready", "/metrics", "/v1/models", f"/v1/models/{MODEL_NAME}", "/ui/chat.js"):
        c = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=10)
        c.request("GET", path)
        got = c.getresponse()
        get_body = got.read()
        c.request("HEAD", path)
        head = c.getresponse()
        assert head.status == got.status == 200, path
        assert head.read() == b""
        assert head.getheader("Content-Type") == got.getheader("Content-Type")
        if path != "/metrics":  # the counters move between the two requests
            assert int(head.getheader("Content-Length")) == len(get_body), path
        c.close()
    c = http.client.HTTPConnection("127.0.0.1", small_server.port, timeout=10)
    c.request("HEAD", "/v1/completions")
    r = c.getresponse()
    assert r.status == 405 and r.getheader("Allow") == "POST"
    c.close()


# ------------------------------------------- API keys in queries and x-api-key

LOG_KEY = "sk-log-secret-7f3a91c2"


@pytest.fixture(scope="module")
def keyed_server():
    s = SpateServer(api_key=LOG_KEY, env=SKIP_WARMUP)
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def get_status(url, headers=None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_key_in_the_query_never_reaches_the_log(keyed_server):
    """Clients written for other servers put the key in the query (?key=,
    ?api_key=, ...): the access log shows REDACTED instead, whatever the
    parameter's name, for admitted, refused and unknown requests alike."""
    base = keyed_server.base_url
    auth = {"Authorization": f"Bearer {LOG_KEY}"}
    other = "sk-other-5d2e8b"  # not a configured key, but under a key's name
    assert get_status(f"{base}/v1/models?api_key={LOG_KEY}&marker=m-admitted", auth) == 200
    assert get_status(f"{base}/v1/models?key={other}&marker=m-refused") == 401
    assert get_status(f"{base}/v1/nope?limit=2&x={LOG_KEY}&marker=m-unknown", auth) == 404
    assert get_status(f"{base}/health?access_token={other}&marker=m-public") == 200
    st, _, _ = post_json(base, f"/v1/completions?token={other}&marker=m-completion", {"prompt": "Hi", "max_tokens": 1}, headers=auth)
    assert st == 200
    deadline = time.time() + 10
    while time.time() < deadline and "m-completion" not in keyed_server.log_text():
        time.sleep(0.1)
    log = keyed_server.log_text()
    for m in ("m-admitted", "m-refused", "m-unknown", "m-public", "m-completion"):
        assert m in log, f"no access-log line for {m}"
    assert LOG_KEY not in log and other not in log, [line for line in log.splitlines() if LOG_KEY in line or other in line]
    assert "api_key=REDACTED" in log and "key=REDACTED" in log and "x=REDACTED" in log and "token=REDACTED" in log


def test_x_api_key_only_on_anthropics_routes(keyed_server):
    """x-api-key (Anthropic's header) is taken where Anthropic's clients send
    it (/v1/messages, /v1/messages/count_tokens, /v1/models); elsewhere only
    Authorization: Bearer carries the key."""
    import anthropic
    import openai
    base = keyed_server.base_url
    c = anthropic.Anthropic(base_url=base, api_key=LOG_KEY, max_retries=0, timeout=120)
    assert [m.id for m in c.models.list().data] == [MODEL_NAME]
    assert c.models.retrieve(MODEL_NAME).id == MODEL_NAME
    assert c.messages.count_tokens(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}]).input_tokens > 0
    assert c.messages.create(model=MODEL_NAME, max_tokens=1, messages=[{"role": "user", "content": "Hi"}]).type == "message"
    # An OpenAI client that sends only x-api-key is refused on OpenAI's routes.
    o = openai.OpenAI(base_url=base + "/v1", api_key="wrong", default_headers={"x-api-key": LOG_KEY}, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        o.chat.completions.create(model=MODEL_NAME, max_tokens=1, messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.AuthenticationError):
        o.completions.create(model=MODEL_NAME, max_tokens=1, prompt="Hi")
    for path in ("/api/tags", "/models", "/v1/models"):
        want = 200 if path == "/v1/models" else 401
        assert get_status(base + path, {"x-api-key": LOG_KEY}) == want, path
    st, _, _ = post_json(base, "/tokenize", {"prompt": "Hi"}, headers={"x-api-key": LOG_KEY})
    assert st == 401
