"""A fleet on loopback: three real `spate serve` replicas (--threads 1) behind
HAProxy with deploy/haproxy/haproxy.cfg, and a mixed workload through it
(streamed chat over SSE, completions, Responses over WebSocket).

- SIGKILL one replica mid-workload: only requests in flight on it fail, each
  cleanly (an error status or a terminated stream, never a hang); all others
  succeed; restarted, it rejoins once /ready says so and serves again.
- A rolling restart (SIGTERM, one replica at a time) loses no request.
- A Responses WebSocket open on a replica that drains is never cut: its
  response.create is refused (error shutting_down, close 1001 through
  HAProxy) and the client's retry is served by another replica.
- Affinity: every turn of a conversation (X-Session-Id, or the "user" field)
  lands on the same replica, so second turns hit its prefix cache."""

import http.client
import json
import signal
import time

import pytest

from fleet import Fleet
from fleet_client import Workload, chat_stream, completion, responses_ws
from spate_server import MODEL_NAME, SANITIZED, SLOWDOWN, SPATE_BIN, SPATE_MODEL, wait_listener_closed

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

ARGS = ["--shutdown-timeout", "20"]
ENV = {"SPATE_SKIP_WARMUP": "1"}
# A sanitized build (TSan: 10-50x slower at model work) serves far fewer
# requests per second: observe longer and expect fewer.
WINDOW = 6 if SANITIZED else 1   # multiplies the observation windows
MIN_OK = 4 if SANITIZED else 20  # requests that must succeed in a workload


@pytest.fixture
def fleet():
    f = Fleet(3, ARGS, ENV)
    try:
        yield f
    finally:
        f.stop()


def summary(outcomes):
    by = {}
    for o in outcomes:
        by.setdefault(o.result, []).append(o)
    return {k: len(v) for k, v in by.items()}


def test_sigkill_fails_only_the_victims_requests_and_the_replica_rejoins(fleet):
    w = Workload(fleet.url, n_clients=4).start()
    time.sleep(4 * WINDOW)
    t_kill = time.monotonic()
    fleet.kill(2, signal.SIGKILL)
    time.sleep(3)
    fleet.restart(2)  # returns once HAProxy has it UP again (its /ready is 200)
    t_back = time.monotonic()
    time.sleep(4 * WINDOW)
    outcomes = w.stop()
    print("outcomes:", summary(outcomes), [o for o in outcomes if o.result != "ok"])
    assert not [o for o in outcomes if o.result == "hang"], "a request hung"
    failed = [o for o in outcomes if o.result != "ok"]
    assert len(outcomes) - len(failed) >= MIN_OK, summary(outcomes)
    for o in failed:
        # In flight when the replica died, and served by it when we know who served it.
        assert o.in_flight_at(t_kill), f"{o} failed but was not in flight at the kill ({t_kill:.2f})"
        assert o.replica in (None, "spate2"), o
        assert o.result == "terminated" or (o.status is not None and o.status >= 500), o
    assert len(failed) <= 4, f"more failures than requests in flight (4 clients): {failed}"
    rejoined = [o for o in outcomes if o.result == "ok" and o.replica == "spate2" and o.t_start > t_back]
    assert rejoined, f"the restarted replica served nothing after rejoining: {summary(outcomes)}"
    assert all(r.proc.poll() is None for r in fleet.replicas), "a replica died"


def test_rolling_restart_loses_no_request(fleet):
    w = Workload(fleet.url, n_clients=4).start()
    time.sleep(2 * WINDOW)
    for i in (1, 2, 3):
        fleet.kill(i, signal.SIGTERM)  # drains: in-flight requests finish, /ready turns 503
        time.sleep(0.5)
        fleet.restart(i)
        time.sleep(1 * WINDOW)
    outcomes = w.stop()
    print("outcomes:", summary(outcomes), "WebSocket retries:", sum(o.retries for o in outcomes))
    bad = [o for o in outcomes if o.result != "ok"]
    assert not bad, f"{len(bad)} of {len(outcomes)} requests failed: {bad[:5]}"
    assert len(outcomes) >= MIN_OK
    served = {o.replica for o in outcomes if o.replica}
    assert served == {"spate1", "spate2", "spate3"}, served


def test_turns_of_a_conversation_stay_on_one_replica(fleet):
    first, second = {}, {}
    for s in range(12):
        session = f"conv-{s}"
        msgs = [{"role": "user", "content": f"Conversation {s}: tell me a fact about the number {s * 7}."}]
        a = chat_stream(fleet.url, session, msgs, max_tokens=12)
        assert a.result == "ok", a
        msgs += [{"role": "assistant", "content": a.detail}, {"role": "user", "content": "And another one?"}]
        b = chat_stream(fleet.url, session, msgs, max_tokens=12)
        assert b.result == "ok", b
        first[session], second[session] = a.replica, b.replica
    assert first == second
    assert len(set(first.values())) >= 2, f"12 conversations all hashed to one replica: {first}"
    # The OpenAI "user" field is the key when no X-Session-Id is sent.
    seen = {completion(fleet.url, "user-42", f"Turn {t}: hello", 4).replica for t in range(4)}
    assert len(seen) == 1, seen
    # Second turns hit the prefix cache of the replica that served the first.
    hits = fleet.metric_sum("spate:prefix_cache_hits_total")
    queries = fleet.metric_sum("spate:prefix_cache_queries_total")
    assert queries > 0 and hits / queries > 0.3, (hits, queries)


def test_websocket_on_a_draining_replica_is_closed_cleanly_and_retried(fleet):
    session = "ws-drain"
    drained = {}

    def drain_its_replica(o):
        # Once the WebSocket is open on replica i: a long stream of the same
        # conversation (so on i too) keeps i's drain going; SIGTERM i; wait
        # until the drain has begun. Then the client sends its response.create.
        if drained:
            return
        i = int(o.replica.removeprefix("spate"))
        c = http.client.HTTPConnection("127.0.0.1", fleet.lb_port, timeout=120 * SLOWDOWN)
        c.request("POST", "/v1/completions", headers={"Content-Type": "application/json", "X-Session-Id": session},
                  body=json.dumps({"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 6000,
                                   "ignore_eos": True, "stream": True}))
        r = c.getresponse()
        assert r.status == 200 and r.getheader("X-Spate-Replica") == o.replica
        r.read1(64)
        drained.update(i=i, holder=c)
        fleet.replicas[i - 1].proc.send_signal(signal.SIGTERM)
        wait_listener_closed(fleet.ports[i - 1])

    o = responses_ws(fleet.url, session, "Say hi.", 8, on_open=drain_its_replica)
    i = drained["i"]
    # Refused on replica i with a close frame (1001: closed at the drain's start, or
    # after the error event if the request came first), then served by another one.
    assert o.result == "ok" and o.refusals in (["close 1001"], ["error shutting_down; close 1001"]), (o, o.refusals)
    assert o.replica != f"spate{i}", o
    assert fleet.replicas[i - 1].proc.poll() is None, "the drain ended with a stream in flight"
    drained["holder"].close()  # its stream is cancelled: the drain ends
    assert fleet.replicas[i - 1].proc.wait(timeout=60 * SLOWDOWN) == 0
    fleet.restart(i)
