"""A fleet workload client: streamed chat (SSE), plain completions and
Responses over WebSocket through the balancer, each request recorded with its
outcome, the replica that served it (X-Spate-Replica) and its start and end
times. Shared by tests/integration/test_fleet.py and perf/bench_fleet.py."""

import http.client
import json
import threading
import time
from urllib.parse import urlparse

import websockets.sync.client as ws_client

from spate_server import MODEL_NAME, SLOWDOWN

HANG_S = 90 * SLOWDOWN  # a request with no progress for this long counts as a hang


class Outcome:
    __slots__ = ("kind", "session", "t_start", "t_end", "status", "replica", "result", "detail", "ttft_s", "n_tokens")

    def __init__(self, kind, session):
        self.kind, self.session = kind, session
        self.t_start, self.t_end = time.monotonic(), None
        self.status, self.replica, self.result, self.detail = None, None, None, ""
        self.ttft_s, self.n_tokens = None, 0

    def in_flight_at(self, t):
        return self.t_start <= t <= (self.t_end or float("inf"))

    def __repr__(self):
        return (f"<{self.kind} {self.session} {self.result} status={self.status} replica={self.replica} "
                f"t={self.t_start:.2f}-{self.t_end or 0:.2f} {self.detail[:120]}>")


def chat_stream(url, session, messages, max_tokens=24, headers=None):
    o = Outcome("chat_stream", session)
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG_S)
    body = {"model": MODEL_NAME, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                     {"Content-Type": "application/json", "X-Session-Id": session, **(headers or {})})
        res = conn.getresponse()
        o.status, o.replica = res.status, res.getheader("X-Spate-Replica")
        if res.status != 200:
            o.result, o.detail = "error", res.read().decode(errors="replace")
            return o
        text, done, buf = "", False, b""
        while True:
            chunk = res.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                for line in ev.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    if line == b"data: [DONE]":
                        done = True
                        continue
                    d = json.loads(line[6:])
                    if "error" in d:
                        o.detail = json.dumps(d)
                    for c in d.get("choices", []):
                        piece = c.get("delta", {}).get("content")
                        if piece:
                            if o.ttft_s is None:
                                o.ttft_s = time.monotonic() - o.t_start
                            o.n_tokens += 1
                            text += piece
        o.result = "ok" if done else "terminated"
        o.detail = o.detail or text
    except TimeoutError:
        o.result = "hang"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        o.result, o.detail = "terminated", repr(e)
    finally:
        conn.close()
        o.t_end = time.monotonic()
    return o


def completion(url, session, prompt, max_tokens=16):
    o = Outcome("completion", session)
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG_S)
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "user": session}
    try:
        conn.request("POST", "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
        res = conn.getresponse()
        payload = res.read()
        o.status, o.replica = res.status, res.getheader("X-Spate-Replica")
        if res.status == 200:
            o.result = "ok"
            o.n_tokens = json.loads(payload)["usage"]["completion_tokens"]
        else:
            o.result, o.detail = "error", payload.decode(errors="replace")
    except TimeoutError:
        o.result = "hang"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        o.result, o.detail = "terminated", repr(e)
    finally:
        conn.close()
        o.t_end = time.monotonic()
    return o


def responses_ws(url, session, text, max_tokens=16):
    o = Outcome("responses_ws", session)
    try:
        with ws_client.connect(url.replace("http", "ws", 1) + "/v1/responses", additional_headers={"X-Session-Id": session},
                               open_timeout=HANG_S) as ws:
            o.status = 101
            o.replica = ws.response.headers.get("X-Spate-Replica")
            ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": text, "max_output_tokens": max_tokens,
                                "temperature": 0}))
            while True:
                ev = json.loads(ws.recv(timeout=HANG_S))
                if ev["type"] == "response.output_text.delta":
                    o.n_tokens += 1
                    if o.ttft_s is None:
                        o.ttft_s = time.monotonic() - o.t_start
                if ev["type"] in ("response.completed", "response.incomplete"):
                    o.result = "ok"
                    break
                if ev["type"] in ("error", "response.failed"):
                    o.result, o.detail = "error", json.dumps(ev)
                    break
    except TimeoutError:
        o.result = "hang"
    except Exception as e:  # closed, refused, bad handshake: a clean failure
        o.result, o.detail = "terminated", repr(e)
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status:
            o.status, o.result = status, "error"
    finally:
        o.t_end = time.monotonic()
    return o


class Workload:
    """n_clients threads sending a mix of requests until stop(); outcomes in order of completion."""

    def __init__(self, url, n_clients=4, max_tokens=24):
        self.url, self.n_clients, self.max_tokens = url, n_clients, max_tokens
        self.outcomes, self.lock = [], threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in range(n_clients)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _run(self, c):
        i = 0
        while not self.stopping.is_set():
            session = f"s{c}-{i % 5}"
            kind = (c + i) % 4
            if kind in (0, 1):
                o = chat_stream(self.url, session, [{"role": "user", "content": f"Tell me about item {i} of client {c}."}],
                                self.max_tokens)
            elif kind == 2:
                o = completion(self.url, session, f"Client {c} request {i}: once upon a time", self.max_tokens)
            else:
                o = responses_ws(self.url, session, f"Say something about {i}.", self.max_tokens)
            with self.lock:
                self.outcomes.append(o)
            i += 1

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=HANG_S + 30)
        assert not any(t.is_alive() for t in self.threads), "a client thread hung"
        return self.outcomes
