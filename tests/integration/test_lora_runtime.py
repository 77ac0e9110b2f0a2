"""LoRA adapter paths and names (issue 54, items 3 and 0c), real server on loopback:

- runtime loading (/v1/load_lora_adapter, /v1/unload_lora_adapter) is off
  unless --enable-lora-runtime-loading, and then confined to
  --lora-allowed-dirs: a path outside them (by "..", a symbolic link, or just
  elsewhere) gets the same 403 "not allowed" whether it exists or not and
  whatever it is;
- a newline in lora_name (or in a path that is logged) never writes a forged
  log line;
- --lora-modules with --models-dir binds an adapter to the model it fits (a
  llama adapter to SmolLM2, not to Gemma 3 listed first); an adapter that
  fits several models or none is refused at start-up, and a [model.NAME]
  section's lora-modules binds one explicitly."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import openai
import pytest

from spate_server import REPO, SPATE_BIN, SPATE_MODEL, SpateServer, free_port, post_json, process_env

ENV = {"SPATE_SKIP_WARMUP": "1"}
GEMMA = Path(os.environ.get("SPATE_GEMMA_MODEL") or Path.home() / ".cache" / "spate" / "models" / "gemma-3-270m-q4_k_m.gguf")


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    d = tmp_path_factory.mktemp("allowed")
    path = d / "a.gguf"
    subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", SPATE_MODEL, "--out", path,
                    "--seed", "1", "--std-b", "0.2"], check=True, timeout=300)  # strong enough to change the greedy text
    return path


def complete(base_url, model, prompt="The capital of France is", max_tokens=8):
    c = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    return c.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0).choices[0].text


def models(base_url):
    with urllib.request.urlopen(base_url + "/v1/models", timeout=30) as r:
        return {m["id"]: m for m in json.loads(r.read())["data"]}


def serve_exit(*args):
    cmd = [str(SPATE_BIN), "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--threads", "2", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=process_env(ENV))


def test_runtime_loading_is_off_by_default(adapter):
    s = SpateServer("--kv-cache-memory", "128MiB", env=ENV)
    try:
        s.wait_ready()
        for route, body in (("/v1/load_lora_adapter", {"lora_name": "a", "lora_path": str(adapter)}),
                            ("/v1/unload_lora_adapter", {"lora_name": "a"})):
            st, b, _ = post_json(s.base_url, route, body)
            assert st == 404 and b["error"]["code"] == "lora_runtime_loading_disabled", b
            assert "--enable-lora-runtime-loading" in b["error"]["message"]
        assert "a" not in models(s.base_url)
    finally:
        s.stop()
    r = serve_exit("--model", SPATE_MODEL, "--enable-lora-runtime-loading")
    assert r.returncode == 2 and "--enable-lora-runtime-loading needs --lora-allowed-dirs" in r.stderr, r.stderr
    r = serve_exit("--model", SPATE_MODEL, "--enable-lora-runtime-loading", "--lora-allowed-dirs", adapter.parent / "missing")
    assert r.returncode == 2 and "--lora-allowed-dirs" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def confined(adapter, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "a.gguf").write_bytes(adapter.read_bytes())  # a real adapter, but outside
    (adapter.parent / "escape.gguf").symlink_to(outside / "a.gguf")
    s = SpateServer("--kv-cache-memory", "128MiB", "--enable-lora-runtime-loading", "--lora-allowed-dirs", adapter.parent, env=ENV)
    try:
        s.wait_ready()
        yield s, outside
    finally:
        s.stop()


def test_loads_from_the_allowed_directory(confined, adapter):
    s, _ = confined
    st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter", {"lora_name": "in", "lora_path": str(adapter)})
    assert st == 200 and "in" in body, body
    assert complete(s.base_url, "in") != complete(s.base_url, s.model_name)
    assert post_json(s.base_url, "/v1/unload_lora_adapter", {"lora_name": "in"})[0] == 200


def test_paths_outside_get_the_same_not_allowed(confined, adapter):
    s, outside = confined
    bodies = []
    for p in (outside / "a.gguf", outside / "none.gguf", outside, "/etc/passwd", "/proc/self/environ", "/nonexistent/x.gguf",
              adapter.parent / ".." / outside.name / "a.gguf", adapter.parent / "escape.gguf", "relative/a.gguf"):
        st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter", {"lora_name": "out", "lora_path": str(p)})
        assert st == 403, (p, body)
        bodies.append(body)
    assert all(b == bodies[0] for b in bodies), bodies  # nothing tells what is there
    assert bodies[0]["error"]["code"] == "lora_path_not_allowed" and "not allowed" in bodies[0]["error"]["message"]
    assert "out" not in models(s.base_url)
    # Inside, the errors may say more: the operator put the files there.
    st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter", {"lora_name": "m", "lora_path": str(adapter.parent / "none.gguf")})
    assert st == 400 and "No such file" in body["error"]["message"], body
    assert complete(s.base_url, s.model_name)  # still serving


def test_a_newline_in_names_or_paths_forges_no_log_line(confined, adapter):
    s, _ = confined
    forged = "E 12-02 00:00:00.000 FORGED"
    st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter", {"lora_name": "x\n" + forged, "lora_path": str(adapter)})
    assert st == 400 and body["error"]["param"] == "lora_name", body
    st, body, _ = post_json(s.base_url, "/v1/unload_lora_adapter", {"lora_name": "x\r\n" + forged})
    assert st == 400 and body["error"]["param"] == "lora_name", body
    # A path below the allowed directory with a newline: refused (no such file), and logged escaped.
    st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter",
                            {"lora_name": "nl", "lora_path": str(adapter.parent) + "/y\n" + forged + ".gguf"})
    assert st == 400, body
    deadline = time.time() + 10
    while "FORGED" not in s.log_text() and time.time() < deadline:
        time.sleep(0.1)
    log = s.log_text()
    assert "\\n" + forged in log, log[-2000:]  # the path, escaped
    assert not any(line.startswith(forged) for line in log.splitlines()), log[-2000:]


# ------------------------------------------------------------ binding (0c)

@pytest.fixture(scope="module")
def two_archs(tmp_path_factory):
    if not GEMMA.exists():
        pytest.fail(f"Gemma model missing at {GEMMA}: run scripts/fetch-model.sh gemma3-270m", pytrace=False)
    d = tmp_path_factory.mktemp("models")
    (d / "gemma.gguf").symlink_to(GEMMA)  # sorts first: the adapters used to be bound to it
    (d / "smollm2.gguf").symlink_to(SPATE_MODEL)
    return d


def test_models_dir_binds_an_adapter_to_the_model_it_fits(two_archs, adapter):
    s = SpateServer("--models-dir", two_archs, "--lora-modules", f"a={adapter}", "--kv-cache-memory", "128MiB", single=False, env=ENV)
    try:
        s.wait_ready()
        assert models(s.base_url)["a"]["parent"] == "smollm2"
        assert complete(s.base_url, "a") != complete(s.base_url, "smollm2")
    finally:
        s.stop()


def test_an_adapter_fitting_several_models_or_none_is_refused_at_start(two_archs, adapter, tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    (d / "smollm2.gguf").symlink_to(SPATE_MODEL)
    (d / "smollm2b.gguf").symlink_to(SPATE_MODEL)
    r = serve_exit("--models-dir", d, "--lora-modules", f"a={adapter}")
    assert r.returncode == 2 and "fits several models (smollm2, smollm2b)" in r.stderr, r.stderr
    g = tmp_path / "gemma-only"
    g.mkdir()
    (g / "gemma.gguf").symlink_to(GEMMA)
    r = serve_exit("--models-dir", g, "--lora-modules", f"a={adapter}")
    assert r.returncode == 2 and "fits no served model" in r.stderr and "its architecture 'llama' is not the base model's 'gemma3'" in r.stderr, r.stderr
    r = serve_exit("--models-dir", two_archs, "--lora-modules", json.dumps({"name": "a", "path": str(adapter), "base_model_name": "gemma"}))
    assert r.returncode == 2 and "does not fit its base model 'gemma'" in r.stderr, r.stderr
    bad = tmp_path / "bad.gguf"
    subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", SPATE_MODEL, "--out", bad,
                    "--bad-shape"], check=True, timeout=300)
    r = serve_exit("--model", SPATE_MODEL, "--lora-modules", f"b={bad}")
    assert r.returncode == 2 and "blk.0.attn_k.weight" in r.stderr, r.stderr
    # Named in a [model.NAME] section: bound to that model.
    cfg = tmp_path / "spate.conf"
    cfg.write_text(f"[model.smollm2b]\nlora-modules = a={adapter}\n")
    s = SpateServer("--models-dir", d, "--config", cfg, "--kv-cache-memory", "128MiB", single=False, env=ENV)
    try:
        s.wait_ready()
        assert models(s.base_url)["a"]["parent"] == "smollm2b"
        assert complete(s.base_url, "a")
    finally:
        s.stop()
