"""Failure injection (issue 13), on the real server and model: each failure
fails only the affected requests, with a clear error, and the server keeps
serving (or, for a model file truncated under its mmap, exits with a clear
fatal line and a status systemd's Restart=on-failure restarts)."""

import concurrent.futures
import os
import shutil
import signal
import subprocess
import time
import urllib.request

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, free_port, post_json, process_env

EXIT_SIGBUS = 75  # cli/fault_injection.h


def complete(server, prompt="Once upon a time", max_tokens=12):
    return post_json(server.base_url, "/v1/completions",
                     {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                      "ignore_eos": True})


def test_forward_exception_fails_only_that_step():
    s = SpateServer("--debug-fail-forward-at", "6")
    try:
        s.wait_ready()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: complete(s, f"Story number {i}:", 30), range(4)))
        failed = [b for st, b, _ in results if st == 500]
        assert failed, results
        for b in failed:
            assert "internal error: injected forward failure" in b["error"]["message"]
            assert b["error"]["type"] == "server_error"
        for st, b, _ in results:
            assert st in (200, 500), (st, b)
        st, body, _ = complete(s)
        assert st == 200 and body["usage"]["completion_tokens"] == 12, "the server keeps serving"
        assert s.metrics()["spate:request_errors_total"] >= len(failed)
        # The stats snapshot is published after the step that finished the last request: poll.
        s.wait_metric(lambda m: m["spate:num_requests_running"] == 0 and m["spate:kv_cache_usage_perc"] == 0, timeout=30)
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def start_on(model_path, stderr=None):
    port = free_port()
    proc = subprocess.Popen([str(SPATE_BIN), "serve", "--model", str(model_path), "--host", "127.0.0.1", "--port",
                             str(port), "--served-model-name", MODEL_NAME, "--threads", "2"],
                            stdout=stderr or subprocess.PIPE, stderr=stderr or subprocess.STDOUT, env=process_env())

    class handle:
        base_url = f"http://127.0.0.1:{port}"

    h = handle()
    h.proc = proc
    deadline = time.time() + 300
    while time.time() < deadline:
        assert proc.poll() is None, "the server exited during start-up"
        try:
            with urllib.request.urlopen(h.base_url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return h
        except OSError:
            time.sleep(0.2)
    raise AssertionError("not ready")


def test_model_replaced_by_rename_keeps_the_old_weights(tmp_path):
    model = tmp_path / "model.gguf"
    shutil.copyfile(SPATE_MODEL, model)
    h = start_on(model)
    try:
        st, before, _ = complete(h)
        assert st == 200
        # A package upgrade: the new file is written elsewhere and renamed over the old one.
        new = tmp_path / "model.gguf.new"
        new.write_bytes(b"GGUF" + os.urandom(1 << 16))
        os.replace(new, model)
        st, after, _ = complete(h)
        assert st == 200 and after["choices"][0]["text"] == before["choices"][0]["text"]
    finally:
        h.proc.send_signal(signal.SIGTERM)
        assert h.proc.wait(60) == 0


def test_model_truncated_in_place_exits_with_a_fatal_line(tmp_path):
    model = tmp_path / "model.gguf"
    shutil.copyfile(SPATE_MODEL, model)
    log = open(tmp_path / "serve.log", "wb")
    h = start_on(model, stderr=log)
    try:
        assert complete(h)[0] == 200
        os.truncate(model, 4096)  # in place, under the server's mmap
        try:
            complete(h)
        except OSError:
            pass  # the connection dies with the process
        assert h.proc.wait(60) == EXIT_SIGBUS
        text = (tmp_path / "serve.log").read_text(errors="replace")
        assert "fatal: SIGBUS reading a memory-mapped file: the model file was truncated" in text, text[-2000:]
    finally:
        if h.proc.poll() is None:
            h.proc.kill()


def test_unwritable_logs_do_not_stop_serving():
    """stderr on /dev/full: every log line fails to write (ENOSPC)."""
    with open("/dev/full", "wb") as full:
        h = start_on(SPATE_MODEL, stderr=full)
    try:
        for _ in range(3):
            st, body, _ = complete(h)
            assert st == 200 and body["usage"]["completion_tokens"] == 12
        st, _, _ = post_json(h.base_url, "/v1/completions", {"model": MODEL_NAME, "prompt": 5})
        assert st == 400
    finally:
        h.proc.send_signal(signal.SIGTERM)
        assert h.proc.wait(60) == 0
