"""A fleet workload client: streamed chat (SSE), plain completions and
Responses over WebSocket through the balancer, each request recorded with its
outcome, the replica that served it (X-Spate-Replica) and its start and end
times. Shared by tests/integration/test_fleet.py and perf/scripts/bench_fleet.py."""

import http.client
import json
import threading
import time
from urllib.parse import urlparse

import websockets.exceptions
import websockets.sync.client as ws_client

from spate_server import MODEL_NAME, SLOWDOWN

HANG_S = 90 * SLOWDOWN  # a request with no progress for this long counts as a hang


# A WebSocket closed with one of these before any response event, or refused with an
# `error` event of this code, started nothing: the client may send it again (through
# the balancer, to another replica), as HAProxy re-sends a request answered 503. spate
# closes with 1001 (going away) when it drains; 1012 (service restart) is the same for
# other servers.
RETRYABLE_WS_CLOSE = (1001, 1012)
RETRYABLE_WS_ERROR = "shutting_down"
WS_ATTEMPTS = 3


class Outcome:
    __slots__ = ("kind", "session", "t_start", "t_end", "status", "replica", "result", "detail", "ttft_s", "n_tokens",
                 "refusals")

    def __init__(self, kind, session):
        self.kind, self.session = kind, session
        self.t_start, self.t_end = time.monotonic(), None
        self.status, self.replica, self.result, self.detail = None, None, None, ""
        self.ttft_s, self.n_tokens = None, 0
        self.refusals = []  # WebSocket attempts refused by a draining replica before this one, how

    @property
    def retries(self):
        return len(self.refusals)

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


def responses_ws(url, session, text, max_tokens=16, on_open=None):
    """One response over a Responses WebSocket. Sent again (up to WS_ATTEMPTS in all) when
    a draining replica refused it before it started: see RETRYABLE_WS_CLOSE. on_open(outcome),
    if given, is called on each attempt once the WebSocket is open, before the request is
    sent (a test drains the replica there)."""
    o = Outcome("responses_ws", session)
    try:
        while True:
            refusal = _responses_ws_attempt(o, url, session, text, max_tokens, on_open)
            if refusal is None or o.retries + 1 >= WS_ATTEMPTS:
                break
            o.refusals.append(refusal)
    finally:
        o.t_end = time.monotonic()
    return o


def _responses_ws_attempt(o, url, session, text, max_tokens, on_open):
    """One attempt, recorded in o. Returns None, or how a draining replica refused it
    ("close 1001", "error shutting_down; close 1001"): nothing was started, it may be retried."""
    o.status, o.replica, o.result, o.detail = None, None, None, ""
    started = False  # a response event arrived: never retried from here
    try:
        with ws_client.connect(url.replace("http", "ws", 1) + "/v1/responses", additional_headers={"X-Session-Id": session},
                               open_timeout=HANG_S) as ws:
            o.status = 101
            o.replica = ws.response.headers.get("X-Spate-Replica")
            if on_open:
                on_open(o)
            ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": text, "max_output_tokens": max_tokens,
                                "temperature": 0}))
            while True:
                ev = json.loads(ws.recv(timeout=HANG_S))
                started = started or ev["type"].startswith("response.")
                if ev["type"] == "response.output_text.delta":
                    o.n_tokens += 1
                    if o.ttft_s is None:
                        o.ttft_s = time.monotonic() - o.t_start
                if ev["type"] in ("response.completed", "response.incomplete"):
                    o.result = "ok"
                    break
                if ev["type"] in ("error", "response.failed"):
                    o.result, o.detail = "error", json.dumps(ev)
                    if not started and ev.get("error", {}).get("code") == RETRYABLE_WS_ERROR:
                        return f"error {RETRYABLE_WS_ERROR}; {await_close(ws)}"
                    break
    except TimeoutError:
        o.result = "hang"
    except websockets.exceptions.ConnectionClosed as e:  # closed before the response ended
        o.result, o.detail = "terminated", repr(e)
        if not started and e.rcvd is not None and e.rcvd.code in RETRYABLE_WS_CLOSE:
            return f"close {e.rcvd.code}"
    except Exception as e:  # refused, bad handshake: a clean failure
        o.result, o.detail = "terminated", repr(e)
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status:
            o.status, o.result = status, "error"
    return None


def await_close(ws, timeout=10):
    """After a refusal: how the server closes ("close 1001", "no close frame", "open")."""
    try:
        while True:
            ws.recv(timeout=timeout)
    except websockets.exceptions.ConnectionClosed as e:
        return f"close {e.rcvd.code}" if e.rcvd is not None else "no close frame"
    except TimeoutError:
        return f"open after {timeout} s"


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
