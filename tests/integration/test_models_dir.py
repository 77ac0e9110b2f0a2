"""Several models in one server (issue 38): --models-dir with both real models
(SmolLM2 and Gemma 3 270M) and a broken file, loaded on demand, under a
one-model limit, with the model routes, idle unload and per-model metrics.

Each model's greedy output must equal a single-model server's."""

import concurrent.futures
import json
import os
import time
import urllib.request
from pathlib import Path

import openai
import pytest

from spate_server import REPO, SPATE_MODEL, SpateServer, post_json

GEMMA = Path(os.environ.get("SPATE_GEMMA_MODEL") or Path.home() / ".cache" / "spate" / "models" / "gemma-3-270m-q4_k_m.gguf")
GEMMA_TEMPLATE = REPO / "etc" / "chat-templates" / "gemma3.jinja"
PROMPTS = ["Name three colors.", "What is 2 plus 2?", "Write one word about the sea."]
SMALL_KV = ["--kv-cache-memory", "256MiB"]
if not GEMMA.exists():
    pytest.fail(f"Gemma model missing at {GEMMA}: run scripts/fetch-model.sh gemma3-270m", pytrace=False)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    (d / "smollm2.gguf").symlink_to(SPATE_MODEL)
    (d / "gemma.gguf").symlink_to(GEMMA)
    (d / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00 this is not a model")
    (d / "notes.txt").write_text("not a model file: ignored")
    cfg = d.parent / "models.ini"
    cfg.write_text(f"[model.gemma]\nchat-template = {GEMMA_TEMPLATE}\nmax-model-len = 4096\n")
    return d, cfg


def chat(base_url, model, prompt, stream=False, max_tokens=12):
    c = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    msgs = [{"role": "user", "content": prompt}]
    if not stream:
        r = c.chat.completions.create(model=model, messages=msgs, max_tokens=max_tokens, temperature=0)
        assert r.model == model
        return r.choices[0].message.content
    out = ""
    for ch in c.chat.completions.create(model=model, messages=msgs, max_tokens=max_tokens, temperature=0, stream=True):
        assert ch.model == model
        if ch.choices and ch.choices[0].delta.content:
            out += ch.choices[0].delta.content
    return out


def get_json(base_url, path):
    with urllib.request.urlopen(base_url + path, timeout=30) as r:
        return json.loads(r.read())


def total(metrics, name):
    """The sum of a family's series over models (and labels), e.g. total(m, 'spate:models_loaded')."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def statuses(base_url):
    return {m["id"]: m["status"]["value"] for m in get_json(base_url, "/v1/models")["data"]}


@pytest.fixture(scope="module")
def expected():
    """Greedy outputs of single-model servers: {model id: [output per prompt]}."""
    out = {}
    for mid, args, model in (("smollm2", [], SPATE_MODEL), ("gemma", ["--chat-template", GEMMA_TEMPLATE, "--max-model-len", "4096"], GEMMA)):
        s = SpateServer(*args, *SMALL_KV, model=model)
        try:
            s.wait_ready()
            out[mid] = [chat(s.base_url, "smollm2", p) for p in PROMPTS]
        finally:
            s.stop()
    assert out["smollm2"] != out["gemma"]
    return out


@pytest.fixture(scope="module")
def server(models_dir):
    d, cfg = models_dir
    s = SpateServer("--models-dir", d, "--config", cfg, *SMALL_KV, single=False)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def test_lists_every_file_with_its_status(server):
    data = {m["id"]: m for m in get_json(server.base_url, "/v1/models")["data"]}
    assert set(data) == {"smollm2", "gemma", "broken"}
    assert data["broken"]["status"]["value"] == "error"
    assert "broken.gguf" in data["broken"]["status"]["error"]
    assert data["gemma"]["max_model_len"] == 4096
    one = get_json(server.base_url, "/v1/models/gemma")
    assert one["id"] == "gemma" and one["status"]["value"] in ("unloaded", "loaded")
    assert get_json(server.base_url, "/models")["data"]  # llama-server's name for the list
    st, body, _ = post_json(server.base_url, "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]})
    assert st == 404 and body["error"]["code"] == "model_not_found" and "'nope'" in body["error"]["message"]
    with pytest.raises(urllib.error.HTTPError) as e:
        get_json(server.base_url, "/v1/models/nope")
    assert e.value.code == 404


def test_both_models_serve_their_own_output(server, expected):
    for mid in ("smollm2", "gemma"):
        assert [chat(server.base_url, mid, p) for p in PROMPTS] == expected[mid]
    assert chat(server.base_url, "gemma", PROMPTS[0], stream=True) == expected["gemma"][0]
    assert statuses(server.base_url)["gemma"] == "loaded" and statuses(server.base_url)["smollm2"] == "loaded"


def test_a_broken_file_fails_its_requests_only(server, expected):
    st, body, _ = post_json(server.base_url, "/v1/completions", {"model": "broken", "prompt": "hi", "max_tokens": 2})
    assert st == 500 and body["error"]["code"] == "model_load_failed" and "broken.gguf" in body["error"]["message"]
    assert chat(server.base_url, "smollm2", PROMPTS[1]) == expected["smollm2"][1]


def test_per_model_metrics(server):
    m = server.metrics(keep_model_label=True)
    assert m['spate:request_success_total{model_name="smollm2",finished_reason="length"}'] >= 1
    assert m['spate:request_success_total{model_name="gemma",finished_reason="length"}'] >= 1
    assert m['spate:models_loaded{model_name="gemma"}'] == 1 and m['spate:models_loaded{model_name="broken"}'] == 0
    assert total(m, "spate:models_loaded") == 2
    assert m['spate:model_load_seconds_count{model_name="smollm2"}'] >= 1


def test_load_and_unload_routes(server, expected):
    b = server.base_url
    st, body, _ = post_json(b, "/models/unload", {"model": "gemma"})
    assert st == 200 and body == {"success": True}
    deadline = time.time() + 60
    while statuses(b)["gemma"] != "unloaded":
        assert time.time() < deadline
        time.sleep(0.1)
    st, body, _ = post_json(b, "/models/unload", {"model": "gemma"})
    assert st == 400 and body["error"]["code"] == "model_not_loaded"
    st, body, _ = post_json(b, "/models/load", {"model": "gemma"})
    assert st == 200 and statuses(b)["gemma"] == "loaded"
    for bad, code in (({"model": "nope"}, 404), ({}, 400), ({"model": 3}, 400)):
        assert post_json(b, "/models/load", bad)[0] == code
    assert post_json(b, "/models/unload", None, raw=b"{not json")[0] == 400
    assert server.metrics(keep_model_label=True)['spate:model_unloads_total{model_name="gemma",reason="request"}'] >= 1
    assert chat(b, "gemma", PROMPTS[2]) == expected["gemma"][2]


def test_one_model_limit_under_concurrent_traffic(models_dir, expected):
    d, cfg = models_dir
    s = SpateServer("--models-dir", d, "--config", cfg, "--max-loaded-models", "1", *SMALL_KV, single=False)
    try:
        s.wait_ready()
        jobs = [(mid, i, i % 2 == 0) for i in range(len(PROMPTS)) for mid in ("smollm2", "gemma")] * 2
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futs = [(mid, i, pool.submit(chat, s.base_url, mid, PROMPTS[i], stream)) for mid, i, stream in jobs]
            for mid, i, f in futs:
                assert f.result() == expected[mid][i], (mid, i)
        st = statuses(s.base_url)
        assert sum(v == "loaded" for v in st.values()) <= 1, st
        m = s.metrics(keep_model_label=True)
        assert total(m, "spate:model_unloads_total") >= 1
        assert m['spate:model_unloads_total{model_name="smollm2",reason="capacity"}'] + \
            m['spate:model_unloads_total{model_name="gemma",reason="capacity"}'] >= 1
        assert total(m, "spate:models_loaded") <= 1
    finally:
        s.stop()


def test_idle_unload_and_pinned(models_dir, expected, tmp_path):
    d, _ = models_dir
    cfg = tmp_path / "pinned.ini"
    cfg.write_text(f"[model.gemma]\nchat-template = {GEMMA_TEMPLATE}\nmax-model-len = 4096\npinned = true\n")
    s = SpateServer("--models-dir", d, "--config", cfg, "--model-idle-unload", "1", *SMALL_KV, single=False)
    try:
        s.wait_ready()  # /ready waits for the pinned model
        assert statuses(s.base_url)["gemma"] == "loaded"
        # A request without "model" gets the pinned one.
        st, body, _ = post_json(s.base_url, "/v1/chat/completions", {"messages": [{"role": "user", "content": PROMPTS[0]}],
                                                                     "max_tokens": 12, "temperature": 0})
        assert st == 200 and body["model"] == "gemma" and body["choices"][0]["message"]["content"] == expected["gemma"][0]
        assert chat(s.base_url, "smollm2", PROMPTS[0]) == expected["smollm2"][0]
        deadline = time.time() + 30
        while statuses(s.base_url)["smollm2"] != "unloaded":
            assert time.time() < deadline, "smollm2 was not unloaded after 1 s idle"
            time.sleep(0.2)
        time.sleep(1.5)
        assert statuses(s.base_url)["gemma"] == "loaded"  # pinned: never unloaded
        st, body, _ = post_json(s.base_url, "/models/unload", {"model": "gemma"})
        assert st == 400 and "pinned" in body["error"]["message"]
        assert s.metrics(keep_model_label=True)['spate:model_unloads_total{model_name="smollm2",reason="idle"}'] >= 1
    finally:
        s.stop()


def test_bad_catalogs_stop_the_start(tmp_path, models_dir):
    d, _ = models_dir
    import subprocess
    from spate_server import SPATE_BIN
    cases = [
        (["--models-dir", tmp_path / "missing"], "--models-dir"),
        (["--models-dir", d, "--served-model-name", "x"], "--served-model-name"),
        (["--model", d / "smollm2.gguf", "--model", d / "smollm2.gguf"], "two models have the id 'smollm2'"),
    ]
    bad_key = tmp_path / "bad.ini"
    bad_key.write_text("[model.gemma]\ncolour = blue\n")
    cases.append((["--models-dir", d, "--config", bad_key], "unknown key 'colour'"))
    no_path = tmp_path / "nopath.ini"
    no_path.write_text("[model.other]\npinned = true\n")
    cases.append((["--models-dir", d, "--config", no_path], "needs a path"))
    for args, needle in cases:
        r = subprocess.run([str(SPATE_BIN), "serve", "--port", "0", *map(str, args)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and needle in r.stderr, (args, r.returncode, r.stderr)


def test_a_stream_gets_keep_alives_while_its_model_loads(models_dir):
    """A streamed request for an unloaded model opens its SSE stream at once and
    sends keep-alive comments until the model has loaded, then its tokens."""
    import socket
    d, cfg = models_dir
    s = SpateServer("--models-dir", d, "--config", cfg, "--sse-keepalive", "0.05", *SMALL_KV, single=False)
    try:
        s.wait_ready()
        body = json.dumps({"model": "gemma", "prompt": "Hello", "max_tokens": 4, "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", s.port), timeout=120) as c:
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            data = b""
            while chunk := c.recv(65536):
                data += chunk
        text = data.decode(errors="replace")
        assert text.startswith("HTTP/1.1 200"), text[:300]
        first_data = text.index("data: {")
        assert text.count(": keep-alive", 0, first_data) >= 1, text[:2000]
        assert "data: [DONE]" in text
    finally:
        s.stop()
