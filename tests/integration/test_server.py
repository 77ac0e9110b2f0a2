"""End-to-end tests of `spate serve` with real clients: the official `openai`
SDK (completions, chat, responses, Responses WebSocket mode), `curl` for raw
SSE, raw sockets for slow/partial/abrupt clients, and `websockets`.

Every error case checks the OpenAI error shape and that the server still
answers a normal request afterwards.
"""

import json
import socket
import subprocess
import threading
import time
import urllib.request

import openai
import pytest
import websockets.sync.client as ws_client

from spate_server import MODEL_NAME, SLOWDOWN, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--header-timeout", "2", "--max-body-bytes", "65536", "--max-ws-message-bytes", "65536",
                    "--sse-keepalive", "0.5", "--strict-model-names")
    try:
        yield s.wait_ready()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def assert_serving(server):
    """The server still answers a normal request."""
    st, body, _ = post_json(server.base_url, "/v1/completions",
                            {"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 4, "temperature": 0})
    assert st == 200, body
    assert body["usage"]["completion_tokens"] == 4


def assert_error(status, body, want_status, *, param=None, code=None, contains=None):
    assert status == want_status, body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    if contains is not None:
        assert contains.lower() in err["message"].lower(), err


def spate_generate(prompt, max_tokens):
    line = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    out = subprocess.run([str(SPATE_BIN), "generate", "--model", str(SPATE_MODEL), "--threads", "2"], input=line.encode(),
                         capture_output=True, timeout=300, check=True, env={"SPATE_SKIP_WARMUP": "1", "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.decode().splitlines()[0])


# ---------------------------------------------------------------- basics

def test_health_ready_models(server, client):
    with urllib.request.urlopen(server.base_url + "/health") as r:
        assert r.status == 200
    with urllib.request.urlopen(server.base_url + "/ready") as r:
        assert r.status == 200
        assert r.headers["X-Request-Id"]
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]


def test_completion_matches_offline_engine(client):
    """Greedy over HTTP gives the same text as `spate generate`, streamed or not."""
    want = spate_generate(PROMPT, 24)
    r = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=24, temperature=0)
    assert r.choices[0].text == want["text"]
    assert r.usage.prompt_tokens == want["prompt_tokens"]
    assert r.usage.completion_tokens == want["completion_tokens"]
    assert r.choices[0].finish_reason == want["finish_reason"]
    chunks = list(client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == want["text"]
    assert chunks[-1].usage.completion_tokens == want["completion_tokens"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [want["finish_reason"]]


def test_chat_stream_and_not(client):
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."}]
    r = client.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=16, temperature=0)
    assert r.choices[0].message.role == "assistant"
    text = r.choices[0].message.content
    assert r.usage.completion_tokens >= 1
    stream = client.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=16, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == r.usage.total_tokens


def test_chat_n_and_seed(client):
    msgs = [{"role": "user", "content": "Tell me a word."}]
    a = client.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=8, temperature=1.0, seed=7, n=2)
    b = client.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=8, temperature=1.0, seed=7, n=2)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]


def test_stop_string_never_emitted(client):
    full = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=24, temperature=0).choices[0].text
    assert len(full) > 6
    stop = full[3:6]
    r = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].text == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL_NAME, prompt=PROMPT, max_tokens=24, temperature=0, stop=stop, stream=True))
    assert streamed == r.choices[0].text


def test_responses_stream_and_not(client):
    r = client.responses.create(model=MODEL_NAME, input="Say hi.", max_output_tokens=12, temperature=0)
    assert r.status in ("completed", "incomplete")
    assert r.output_text
    assert r.usage.output_tokens >= 1
    types = []
    text = ""
    with client.responses.stream(model=MODEL_NAME, input="Say hi.", max_output_tokens=12, temperature=0) as s:
        for ev in s:
            types.append(ev.type)
            if ev.type == "response.output_text.delta":
                text += ev.delta
    assert text == r.output_text
    assert types[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in types and "response.output_text.done" in types
    assert types[-1] in ("response.completed", "response.incomplete")


def test_responses_completed_event(client):
    """A response that ends on its own emits response.completed."""
    types = []
    with client.responses.stream(model=MODEL_NAME, input=[{"role": "user", "content": "Say OK and nothing else."}],
                                 instructions="Answer with one word.", max_output_tokens=200, temperature=0) as s:
        for ev in s:
            types.append(ev.type)
    assert types[-1] == "response.completed"


def test_tokenize_detokenize(server):
    st, body, _ = post_json(server.base_url, "/tokenize", {"prompt": "Hello world"})
    assert st == 200 and body["count"] == len(body["tokens"]) > 0
    st, back, _ = post_json(server.base_url, "/detokenize", {"tokens": body["tokens"]})
    assert st == 200 and back["prompt"] == "Hello world"
    st, body, _ = post_json(server.base_url, "/detokenize", {"tokens": [10**9]})
    assert_error(st, body, 400)


def test_raw_sse_with_curl(server):
    body = json.dumps({"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "stream": True})
    out = subprocess.run(["curl", "-sN", "--max-time", "120", "-H", "Content-Type: application/json", "-d", body,
                          server.base_url + "/v1/completions"], capture_output=True, timeout=150, check=True).stdout.decode()
    events = [l for l in out.split("\n\n") if l.strip()]
    assert all(e.startswith("data: ") or e.startswith(":") for e in events), out
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(e[6:]) for e in events[:-1] if e.startswith("data: ")]
    assert payloads[-1]["choices"][0]["finish_reason"] == "length"


def test_metrics(server, client):
    client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=3, temperature=0)
    m = server.metrics()
    for name in ["spate:num_requests_running", "spate:num_requests_waiting", "spate:kv_cache_usage_perc",
                 "spate:prefix_cache_queries_total", "spate:prefix_cache_hits_total", "spate:prompt_tokens_total",
                 "spate:generation_tokens_total", "spate:time_to_first_token_seconds_count",
                 "spate:inter_token_latency_seconds_count", "spate:e2e_request_latency_seconds_count",
                 "spate:request_queue_time_seconds_count"]:
        assert any(k == name or k.startswith(name + "{") for k in m), name
    assert m["spate:generation_tokens_total"] >= 3
    assert any(k.startswith("spate:request_success_total{") and 'finished_reason="length"' in k for k in m)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("raw,contains", [
    (b"{not json", "malformed json"),
    (b"[1, 2]", "object"),
    (b'{"prompt": "\xff\xfe bad"}', "utf-8"),
])
def test_malformed_bodies(server, raw, contains):
    st, body, _ = post_json(server.base_url, "/v1/completions", None, raw=raw)
    assert_error(st, body, 400, contains=contains)
    assert_serving(server)


@pytest.mark.parametrize("path,body,param", [
    ("/v1/completions", {"prompt": PROMPT, "max_tokens": "many"}, "max_tokens"),
    ("/v1/completions", {"prompt": PROMPT, "max_tokens": -5}, "max_tokens"),
    ("/v1/completions", {"prompt": PROMPT, "max_tokens": 10**12}, "max_tokens"),
    ("/v1/completions", {"prompt": PROMPT, "temperature": "hot"}, "temperature"),
    ("/v1/completions", {"prompt": PROMPT, "temperature": -1}, "temperature"),
    ("/v1/completions", {"prompt": PROMPT, "n": 0}, "n"),
    ("/v1/completions", {"prompt": 42}, "prompt"),
    ("/v1/completions", {"prompt": ""}, "prompt"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": "hi"}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ("/v1/responses", {"input": 5}, "input"),
])
def test_invalid_parameters(server, path, body, param):
    st, resp, _ = post_json(server.base_url, path, {"model": MODEL_NAME, **body})
    assert_error(st, resp, 400, param=param)
    assert_serving(server)


def test_context_length_exceeded(server):
    long_prompt = "hello " * 9000
    st, body, _ = post_json(server.base_url, "/v1/completions", {"prompt": long_prompt, "max_tokens": 4})
    assert_error(st, body, 400, code="context_length_exceeded")
    st, body, _ = post_json(server.base_url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8190})
    assert_error(st, body, 400, code="context_length_exceeded")
    assert_serving(server)


def test_unknown_route_and_model(server):
    st, body, _ = post_json(server.base_url, "/v1/nope", {})
    assert_error(st, body, 404)
    st, body, _ = post_json(server.base_url, "/v1/completions", {"model": "gpt-9", "prompt": PROMPT})
    assert_error(st, body, 404, code="model_not_found")


def test_oversized_body(server):
    st, body, _ = post_json(server.base_url, "/v1/completions", None, raw=b'{"prompt": "' + b"a" * 70000 + b'"}')
    assert_error(st, body, 413)
    assert_serving(server)


def test_unknown_fields_ignored(client):
    r = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=2, extra_body={"frobnicate": True})
    assert r.usage.completion_tokens == 2


def test_slow_partial_header(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # never finished
    s.settimeout(20)
    t0 = time.time()
    data = s.recv(4096)
    assert b"408" in data.split(b"\r\n")[0], data
    assert time.time() - t0 < 15
    s.close()
    assert_serving(server)


def test_abrupt_disconnect_cancels(server):
    body = json.dumps({"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True, "stream": True}).encode()
    before = server.metrics().get("spate:request_cancelled_total", 0)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    s.recv(4096)  # the stream started
    s.close()
    deadline = time.time() + 20
    m = server.metrics()
    while time.time() < deadline and (m["spate:num_requests_running"] != 0 or
                                      m.get("spate:request_cancelled_total", 0) <= before):
        time.sleep(0.1)
        m = server.metrics()
    assert m["spate:num_requests_running"] == 0
    assert m.get("spate:request_cancelled_total", 0) == before + 1
    assert m["spate:kv_cache_usage_perc"] == 0 or m["spate:num_requests_running"] == 0
    assert_serving(server)


def test_keep_alive_reuses_connection(server):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    for _ in range(3):
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": PROMPT, "max_tokens": 2}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200
        json.loads(r.read())
    c.close()


# ---------------------------------------------------------------- WebSocket

def ws_url(server):
    return server.base_url.replace("http", "ws", 1) + "/v1/responses"


def ws_collect(ws):
    events = []
    while True:
        ev = json.loads(ws.recv(timeout=120))
        events.append(ev)
        if ev["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return events


def test_ws_sequence_and_errors(server):
    with ws_client.connect(ws_url(server)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "Say hi.", "max_output_tokens": 8,
                            "temperature": 0}))
        first = ws_collect(ws)
        assert first[0]["type"] == "response.created"
        assert first[-1]["type"] in ("response.completed", "response.incomplete")
        text = "".join(e["delta"] for e in first if e["type"] == "response.output_text.delta")
        ws.send(json.dumps({"type": "response.frobnicate"}))
        err = ws_collect(ws)
        assert err[-1]["type"] == "error" and err[-1]["code"] == "unknown_event_type"
        ws.send("{not json")
        assert ws_collect(ws)[-1]["type"] == "error"
        ws.send(json.dumps({"type": "response.create", "input": "Say hi.", "max_output_tokens": -1}))
        assert ws_collect(ws)[-1]["type"] == "error"
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "Say hi.", "max_output_tokens": 8,
                            "temperature": 0}))
        second = ws_collect(ws)
        assert "".join(e["delta"] for e in second if e["type"] == "response.output_text.delta") == text


def test_ws_with_openai_sdk(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    with client.responses.connect() as conn:
        conn.response.create(model=MODEL_NAME, input="Say hi.", max_output_tokens=8, temperature=0)
        types = []
        for ev in conn:
            types.append(ev.type)
            if ev.type in ("response.completed", "response.incomplete", "response.failed", "error"):
                break
    assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete")


def test_ws_close_mid_response_cancels(server):
    before = server.metrics().get("spate:request_cancelled_total", 0)
    ws = ws_client.connect(ws_url(server))
    ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "Count to a thousand.",
                        "max_output_tokens": 4000, "temperature": 0}))
    while json.loads(ws.recv(timeout=120))["type"] != "response.output_text.delta":
        pass
    ws.close()
    deadline = time.time() + 20
    m = server.metrics()
    while time.time() < deadline and (m["spate:num_requests_running"] != 0 or m.get("spate:request_cancelled_total", 0) <= before):
        time.sleep(0.1)
        m = server.metrics()
    assert m["spate:num_requests_running"] == 0
    assert m.get("spate:request_cancelled_total", 0) == before + 1
    assert_serving(server)


def test_ws_oversized_message(server):
    ws = ws_client.connect(ws_url(server), max_size=None)
    ws.send(json.dumps({"type": "response.create", "input": "x" * 100000}))
    with pytest.raises(Exception):
        ws.recv(timeout=30)
    ws.close()
    assert_serving(server)


# ---------------------------------------------------------------- API key, queue limit

def test_api_key():
    s = SpateServer(api_key="sekret", env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, body, hdrs = post_json(s.base_url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert_error(st, body, 401)
        st, body, _ = post_json(s.base_url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2},
                                headers={"Authorization": "Bearer wrong"})
        assert_error(st, body, 401)
        good = openai.OpenAI(base_url=s.base_url + "/v1", api_key="sekret", max_retries=0)
        assert good.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=2).usage.completion_tokens == 2
        for path in ("/health", "/ready", "/metrics"):
            with urllib.request.urlopen(s.base_url + path) as r:
                assert r.status == 200
        with pytest.raises(Exception):
            ws_client.connect(s.base_url.replace("http", "ws", 1) + "/v1/responses").close()
    finally:
        assert s.stop() == 0


def test_queue_full_gets_429_before_stream():
    s = SpateServer("--max-num-seqs", "1", "--max-queued-requests", "1", env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        body = {"prompt": PROMPT, "max_tokens": 400, "ignore_eos": True}
        results = []

        def run():
            results.append(post_json(s.base_url, "/v1/completions", body, timeout=120 * SLOWDOWN)[0])

        threads = [threading.Thread(target=run) for _ in range(2)]
        threads[0].start()  # fills the one running slot ...
        s.wait_metric(lambda m: m["spate:num_requests_running"] == 1)
        threads[1].start()  # ... and this one the one queue slot
        s.wait_metric(lambda m: m["spate:num_requests_waiting"] == 1)
        st, resp, hdrs = post_json(s.base_url, "/v1/completions", {**body, "stream": True})
        assert st == 429, resp
        assert hdrs.get("Retry-After")
        assert_error(st, resp, 429)
        for t in threads:
            t.join()
        assert results == [200, 200]
    finally:
        assert s.stop() == 0


# ---------------------------------------------------------------- logprobs, templates, keep-alive

def test_logprobs(client):
    r = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=4, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert "".join(lp.tokens) == r.choices[0].text
    for tok, v, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert v <= 0 and len(top) == 2
        assert max(top.values()) == pytest.approx(v, abs=1e-4)  # greedy: the chosen token is the most likely
    c = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = c.choices[0].logprobs.content
    assert len(content) == 3 and all(len(e.top_logprobs) == 3 for e in content)
    assert "".join(e.token for e in content) == c.choices[0].message.content


def test_chat_template_override_and_template_error(tmp_path):
    tmpl = tmp_path / "t.jinja"
    tmpl.write_text("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('tool messages are not allowed here') }}"
                    "{% endif %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}")
    s = SpateServer("--chat-template", tmpl, env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, body, _ = post_json(s.base_url, "/tokenize", {"messages": [{"role": "user", "content": "hello"}],
                                                          "add_special_tokens": False})
        assert st == 200, body
        st, text, _ = post_json(s.base_url, "/detokenize", {"tokens": body["tokens"]})
        assert text["prompt"] == "[user] hello\n[assistant] "
        st, body, _ = post_json(s.base_url, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "hi"},
                                              {"role": "tool", "content": "x", "tool_call_id": "1"}], "max_tokens": 2})
        assert_error(st, body, 400, contains="tool messages are not allowed here")
        assert_serving(s)
    finally:
        assert s.stop() == 0


def test_sse_keepalive_during_long_prefill(server):
    # ~2 s of prefill in a release build; a sanitized build is far slower per token,
    # so a shorter prompt still outlasts the 0.5 s keep-alive interval there.
    body = json.dumps({"model": MODEL_NAME, "prompt": "word " * (3000 // SLOWDOWN), "max_tokens": 2, "stream": True})
    out = subprocess.run(["curl", "-sN", "--max-time", "300", "-H", "Content-Type: application/json", "-d", body,
                          server.base_url + "/v1/completions"], capture_output=True, timeout=320, check=True).stdout.decode()
    assert out.startswith(": keep-alive\n\n"), out[:200]
    assert out.rstrip().endswith("data: [DONE]")
