"""Special files never hang the server (issue 54, item 2): every file it reads
is opened without blocking and checked to be a regular file first
(util/regular_file.h), and every filesystem error is caught and reported.

- At start-up a FIFO given to --config, --api-key-file, --lora-modules, a
  draft model, --chat-template or --ssl-certfile is refused within seconds
  with a message naming the flag and "FIFO"; --config refuses a directory and
  /dev/zero too.
- In --models-dir, a FIFO and a symbolic link loop named *.gguf are listed
  with their error (the start-up used to block, or abort on an uncaught
  filesystem_error); the other models serve.
- At run time, /v1/load_lora_adapter of a FIFO gets a clear 400 at once, later
  loads and requests are served, and SIGTERM stops the server promptly.

Real server on loopback, real model, FIFOs made with os.mkfifo."""

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest

from spate_server import SPATE_BIN, SPATE_MODEL, SpateServer, free_port, post_json, process_env, self_signed_cert

ENV = {"SPATE_SKIP_WARMUP": "1"}
# Start-up refusals must come within this (the model loads in about a second);
# before the fix each of these blocked for good.
QUICK_S = 60


def serve(*args, model=True):
    cmd = [str(SPATE_BIN), "serve", *(["--model", str(SPATE_MODEL)] if model else []), "--host", "127.0.0.1", "--port",
           str(free_port()), "--threads", "2", *map(str, args)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=QUICK_S, env=process_env(ENV))
    return r, time.monotonic() - t0


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "x.gguf"
    os.mkfifo(p)
    return p


def assert_refused(r, *needles, code=2):
    assert r.returncode == code, (r.returncode, r.stderr[-3000:])
    for n in needles:
        assert n in r.stderr, (n, r.stderr[-3000:])


def test_config_refuses_a_fifo_a_directory_and_dev_zero(fifo, tmp_path):
    r, _ = serve("--config", fifo)
    assert_refused(r, f"--config {fifo}: cannot be read: is a FIFO, not a regular file")
    r, _ = serve("--config", tmp_path)
    assert_refused(r, f"--config {tmp_path}: cannot be read: is a directory")
    r, _ = serve("--config", "/dev/zero")
    assert_refused(r, "--config /dev/zero: cannot be read: is a character device")


def test_api_key_file_refuses_a_fifo(fifo):
    r, _ = serve("--api-key-file", fifo)
    assert_refused(r, f"--api-key-file {fifo}: cannot be read: is a FIFO, not a regular file")


def test_lora_modules_refuses_a_fifo(fifo):
    r, _ = serve("--lora-modules", f"a={fifo}")
    assert_refused(r, "--lora-modules a:", "is not a regular file (a FIFO)")


def test_draft_model_refuses_a_fifo(fifo):
    r, _ = serve("--speculative-config", json.dumps({"model": str(fifo), "num_speculative_tokens": 4}))
    assert_refused(r, "--speculative-config: the draft model:", "is not a regular file (a FIFO)")


def test_chat_template_refuses_a_fifo(tmp_path):
    t = tmp_path / "t.jinja"
    os.mkfifo(t)
    r, _ = serve("--chat-template", t)
    assert r.returncode != 0 and "is a FIFO, not a regular file" in r.stderr, r.stderr[-3000:]


def test_tls_files_refuse_a_fifo(tmp_path):
    (tmp_path / "tls").mkdir()
    crt, key = self_signed_cert(tmp_path / "tls")
    bad = tmp_path / "fifo.pem"
    os.mkfifo(bad)
    r, _ = serve("--ssl-certfile", bad, "--ssl-keyfile", key)
    assert r.returncode != 0 and f"--ssl-certfile {bad}: is a FIFO, not a regular file" in r.stderr, r.stderr[-3000:]
    r, _ = serve("--ssl-certfile", crt, "--ssl-keyfile", bad)
    assert r.returncode != 0 and f"--ssl-keyfile {bad}: is a FIFO, not a regular file" in r.stderr, r.stderr[-3000:]


def test_single_model_refuses_a_fifo(fifo):
    r, _ = serve("--model", fifo, model=False)
    assert r.returncode != 0 and "is not a regular file (a FIFO)" in r.stderr, r.stderr[-3000:]


def test_models_dir_lists_a_fifo_and_a_symlink_loop_with_their_errors(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    (d / "smollm2.gguf").symlink_to(SPATE_MODEL)
    os.mkfifo(d / "fifo.gguf")
    (d / "loop.gguf").symlink_to(d / "loop.gguf")
    t0 = time.monotonic()
    s = SpateServer("--models-dir", d, "--kv-cache-memory", "128MiB", single=False, env=ENV)
    try:
        s.wait_ready()
        assert time.monotonic() - t0 < QUICK_S
        st, body, _ = post_json(s.base_url, "/v1/completions", {"model": "smollm2", "prompt": "Hi", "max_tokens": 2})
        assert st == 200, body
        with urllib.request.urlopen(s.base_url + "/v1/models", timeout=30) as r:
            data = {m["id"]: m for m in json.loads(r.read())["data"]}
        assert data["fifo"]["status"]["value"] == "error" and "is not a regular file (a FIFO)" in data["fifo"]["status"]["error"]
        assert data["loop"]["status"]["value"] == "error" and "Too many levels of symbolic links" in data["loop"]["status"]["error"]
        for name in ("fifo", "loop"):
            st, body, _ = post_json(s.base_url, "/v1/completions", {"model": name, "prompt": "Hi", "max_tokens": 2}, timeout=30)
            assert st == 500 and body["error"]["code"] == "model_load_failed", body
        t1 = time.monotonic()
        assert s.stop() == 0
        assert time.monotonic() - t1 < 30
    finally:
        s.stop()


def test_runtime_lora_load_of_a_fifo_is_a_400_and_the_server_keeps_serving(tmp_path):
    d = tmp_path / "adapters"
    d.mkdir()
    os.mkfifo(d / "x.gguf")
    os.mkfifo(d / "y.gguf")
    s = SpateServer("--enable-lora-runtime-loading", "--lora-allowed-dirs", d, "--kv-cache-memory", "128MiB", env=ENV)
    try:
        s.wait_ready()
        for name in ("x", "y"):  # the registry thread was blocked for good by the first
            t0 = time.monotonic()
            st, body, _ = post_json(s.base_url, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(d / f"{name}.gguf")},
                                    timeout=30)
            assert st == 400 and "is not a regular file (a FIFO)" in body["error"]["message"], body
            assert time.monotonic() - t0 < 10
        st, body, _ = post_json(s.base_url, "/v1/completions", {"model": s.model_name, "prompt": "Hi", "max_tokens": 2}, timeout=30)
        assert st == 200, body
        st, body, _ = post_json(s.base_url, "/models/load", {"model": s.model_name}, timeout=30)
        assert st == 200, body
        t1 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=30) == 0
        assert time.monotonic() - t1 < 30
    finally:
        s.stop()
