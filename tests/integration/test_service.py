"""`spate serve` as a systemd service, each mechanism exercised for real:
sd_notify over a datagram socket of the test (STATUS/READY/WATCHDOG/STOPPING),
socket activation (an inherited fd 3 with LISTEN_FDS/LISTEN_PID, by hand and
with systemd-socket-activate), graceful drain on SIGTERM, reload on SIGHUP
(TLS certificate and API key file), the --config file, and the unit files
(systemd-analyze verify, cmake --install, cpack DEB).

SPATE_BIN / SPATE_MODEL as in spate_server.py. The unit-file tests need
systemd-analyze (Debian package systemd) and skip without it; the package
test needs cpack and dpkg-deb.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from spate_server import REPO, SPATE_BIN, SPATE_MODEL, START_TIMEOUT, free_port

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

SKIP_WARMUP = {"SPATE_SKIP_WARMUP": "1"}
# Few warmup buckets (4 prompt + 9 decode) so the warmup test stays quick.
SMALL_BUCKETS = {"SPATE_PROMPT_SEQ_BUCKET_MAX": "64", "SPATE_DECODE_BS_BUCKET_MAX": "4",
                 "SPATE_DECODE_BLOCK_BUCKET_MAX": "16"}
PROMPT = "Write a long story about a lighthouse keeper."


# ---------------------------------------------------------------- helpers

class Proc:
    """One process (`spate serve`, possibly behind a wrapper) with its output
    in a temporary log file, printed in assertion messages."""

    def __init__(self, cmd, env=None, pass_fds=(), clean_env=False):
        self.log = tempfile.NamedTemporaryFile(prefix="spate-service-", suffix=".log", delete=False)
        full_env = {} if clean_env else dict(os.environ)
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
            full_env.pop(k, None)
        full_env.update(env or {})
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=full_env, pass_fds=pass_fds)

    def log_text(self, tail=4000) -> str:
        return Path(self.log.name).read_text(errors="replace")[-tail:]

    def wait(self, timeout) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"spate did not exit within {timeout}s:\n{self.log_text()}") from None

    def stop(self, timeout=90) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def serve_cmd(*args, port=None):
    cmd = [SPATE_BIN, "serve", "--model", SPATE_MODEL, "--host", "127.0.0.1", "--threads", "2"]
    if port is not None:
        cmd += ["--port", port]
    return cmd + list(args)


def get(url, *, ctx=None, headers=None, timeout=10):
    """GET returning (status, body text); raises OSError when no connection."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def wait_ready(p: Proc, base_url, ctx=None, timeout=START_TIMEOUT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if p.proc.poll() is not None:
            raise AssertionError(f"spate serve exited with {p.proc.returncode}:\n{p.log_text()}")
        try:
            if get(base_url + "/ready", ctx=ctx, timeout=2)[0] == 200:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"spate serve not ready within {timeout}s:\n{p.log_text()}")


class Stream:
    """A streaming /v1/completions request read line by line over http.client."""

    def __init__(self, port, max_tokens, *, ctx=None, headers=None, timeout=300):
        if ctx is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        else:
            self.conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=ctx)
        body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        self.conn.request("POST", "/v1/completions", body=json.dumps(body),
                          headers={"Content-Type": "application/json", **(headers or {})})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        self.chunks = 0  # chunks with text
        self.tokens = None  # usage.completion_tokens of the final chunk
        self.finish_reason = None
        self.done = False

    def next_data(self):
        """The next `data:` payload, or None at the end of the stream."""
        while True:
            line = self.resp.readline()
            if not line:
                return None
            line = line.strip()
            if line.startswith(b"data:"):
                return line[5:].strip().decode()

    def read_some(self, n_chunks):
        for _ in range(n_chunks):
            data = self.next_data()
            assert data is not None and data != "[DONE]", "stream ended early"
            self._account(data)

    def read_to_end(self):
        while (data := self.next_data()) is not None:
            if data == "[DONE]":
                self.done = True
                continue
            self._account(data)
        self.conn.close()
        return self

    def _account(self, data):
        chunk = json.loads(data)
        if chunk.get("usage"):
            self.tokens = chunk["usage"]["completion_tokens"]
        for choice in chunk.get("choices", []):
            if choice.get("text"):
                self.chunks += 1
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]


def make_cert(d: Path, name: str):
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", crt, "-days", "2", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True, timeout=60)
    return crt, key


def peer_cert_der(port) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def pem_to_der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def replace_file(path: Path, content: bytes):
    """Atomically replaces path (as an operator's deploy tool would)."""
    tmp = path.with_suffix(path.suffix + ".new")
    tmp.write_bytes(content)
    os.replace(tmp, path)


def models(base_url):
    status, body = get(base_url + "/v1/models")
    assert status == 200, body
    return [m["id"] for m in json.loads(body)["data"]]


# ---------------------------------------------------------------- sd_notify

class NotifyListener:
    """The NOTIFY_SOCKET end: collects (time, [assignments]) per datagram."""

    def __init__(self, directory: Path):
        self.path = directory / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.messages.append((time.monotonic(), data.decode(errors="replace").splitlines()))

    def lines(self):
        with self.lock:
            return [(t, line) for t, msg in self.messages for line in msg]

    def wait_for(self, assignment, timeout, proc: Proc, after=0.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for t, line in self.lines():
                if line == assignment and t >= after:
                    return t
            if proc.proc.poll() is not None:
                time.sleep(0.3)  # let the last datagrams arrive
                for t, line in self.lines():
                    if line == assignment and t >= after:
                        return t
                raise AssertionError(f"spate exited ({proc.proc.returncode}) before {assignment}; got "
                                     f"{[l for _, l in self.lines()]}\n{proc.log_text()}")
            time.sleep(0.05)
        raise AssertionError(f"no {assignment} within {timeout}s; got {[l for _, l in self.lines()]}\n{proc.log_text()}")

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


def test_sd_notify_status_ready_watchdog_stopping(tmp_path):
    notify = NotifyListener(tmp_path)
    port = free_port()
    watchdog_usec = 2_000_000
    p = Proc(serve_cmd(port=port), env={"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": str(watchdog_usec),
                                        **SMALL_BUCKETS})
    try:
        t_ready = notify.wait_for("READY=1", START_TIMEOUT, p)
        lines = notify.lines()
        statuses = [(t, l[len("STATUS="):]) for t, l in lines if l.startswith("STATUS=")]
        assert any("loading" in s for _, s in statuses), statuses
        # Loading and warmup report at every 10%: "loading model: 40% (12/30 layers)",
        # "warming up: 30% (6/20 buckets)".
        loads = [int(m.group(1)) for _, s in statuses if (m := re.search(r"loading model: (\d+)% \(\d+/\d+ layers", s))]
        assert loads == list(range(10, 101, 10)), statuses
        warm = [(t, s, re.search(r"warming up: (\d+)% \((\d+)/(\d+) buckets\)", s)) for t, s in statuses]
        warm = [(t, int(m.group(1)), int(m.group(2)), int(m.group(3))) for t, s, m in warm if m]
        assert warm, f"no 'warming up: p% (i/N buckets)' STATUS: {statuses}"
        n_total = warm[0][3]
        assert n_total >= 2 and all(n == n_total for *_, n in warm), warm
        pcts = [p for _, p, _, _ in warm]
        assert pcts == sorted(set(pcts)) and pcts[-1] == 100 and all(p % 10 == 0 for p in pcts), warm
        assert [i for _, _, i, _ in warm] == sorted(i for _, _, i, _ in warm), warm
        t_last = max(t for t, _, i, _ in warm if i == n_total)
        assert t_last <= t_ready, "READY=1 came before the last warmup STATUS"
        first_loading = min(t for t, s in statuses if "loading" in s)
        assert first_loading <= warm[0][0]
        assert [l for _, l in lines].count("READY=1") == 1
        # Ready means ready: /ready answers 200 (allowing for the notification racing the flag).
        deadline = time.time() + 5
        while get(f"http://127.0.0.1:{port}/ready")[0] != 200:
            assert time.time() < deadline, "READY=1 sent but /ready is not 200"
            time.sleep(0.05)

        # Watchdog: pings while idle and while generating, never further apart than WATCHDOG_USEC.
        t0 = time.monotonic()
        s = Stream(port, 64)
        s.read_to_end()
        assert s.finish_reason == "length"
        time.sleep(max(0.0, 5.0 - (time.monotonic() - t0)))
        pings = [t for t, l in notify.lines() if l == "WATCHDOG=1" and t >= t_ready]
        assert len(pings) >= 3, f"{len(pings)} WATCHDOG=1 pings in {time.monotonic() - t_ready:.1f}s after READY"
        gaps = [b - a for a, b in zip([t_ready] + pings, pings + [time.monotonic()])]
        assert max(gaps) < watchdog_usec / 1e6, f"watchdog gap {max(gaps):.2f}s >= WATCHDOG_USEC"

        t_term = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        notify.wait_for("STOPPING=1", 30, p, after=t_term)
        assert p.wait(60) == 0, p.log_text()
    finally:
        p.kill()
        notify.close()


def test_no_watchdog_pings_without_watchdog_usec(tmp_path):
    notify = NotifyListener(tmp_path)
    port = free_port()
    p = Proc(serve_cmd(port=port), env={"NOTIFY_SOCKET": str(notify.path), **SKIP_WARMUP})
    try:
        t_ready = notify.wait_for("READY=1", START_TIMEOUT, p)
        time.sleep(2)
        assert not [l for t, l in notify.lines() if l == "WATCHDOG=1"], "WATCHDOG=1 sent although WATCHDOG_USEC is unset"
        assert t_ready
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()
        notify.close()


# ---------------------------------------------------------------- socket activation

def listening_socket():
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    return ls


# argv: FD PROGRAM ARGS...; moves FD to 3, sets LISTEN_* for its own pid and execs.
EXEC_WITH_FD3 = """
import os, sys
fd = int(sys.argv[1])
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), LISTEN_FDNAMES="spate.socket")
os.execv(sys.argv[2], sys.argv[2:])
"""


def activated(ls: socket.socket, *args, env=None):
    """Starts spate on ls as systemd does: the socket as fd 3, LISTEN_FDS=1,
    LISTEN_PID = spate's own pid (the shell execs into spate, keeping its pid)."""
    fd = ls.fileno()
    return Proc([sys.executable, "-c", EXEC_WITH_FD3, str(fd), *serve_cmd(*args)], env=env, pass_fds=(fd,))


def test_socket_activation_serves_inherited_fd_and_keeps_port_across_restart():
    ls = listening_socket()
    port = ls.getsockname()[1]
    unused = free_port()
    a = activated(ls, "--port", unused, env=SKIP_WARMUP)
    try:
        wait_ready(a, f"http://127.0.0.1:{port}")
        assert get(f"http://127.0.0.1:{port}/health")[0] == 200
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", unused), timeout=5).close()  # --port was not bound
        assert a.stop() == 0, a.log_text()
    finally:
        a.kill()

    # Between the two processes the port stays bound: a client connects and
    # waits in the backlog; the next spate answers it.
    queued = socket.create_connection(("127.0.0.1", port), timeout=START_TIMEOUT)
    queued.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    b = activated(ls, "--port", unused, env=SKIP_WARMUP)
    try:
        reply = b""
        while chunk := queued.recv(4096):
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200] + b"\n" + b.log_text().encode()
        queued.close()
        wait_ready(b, f"http://127.0.0.1:{port}")
        assert b.stop() == 0, b.log_text()
    finally:
        b.kill()
        ls.close()


@pytest.mark.skipif(shutil.which("systemd-socket-activate") is None, reason="systemd-socket-activate not installed")
def test_systemd_socket_activate():
    port = free_port()
    cmd = ["systemd-socket-activate", "-l", f"127.0.0.1:{port}", "-E", "SPATE_SKIP_WARMUP=1",
           "-E", f"HOME={os.environ.get('HOME', '/')}", *serve_cmd()]
    p = Proc(cmd)
    try:
        deadline = time.time() + 30
        while True:  # systemd-socket-activate binds, then execs spate on the first connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                assert time.time() < deadline and p.proc.poll() is None, p.log_text()
                time.sleep(0.1)
        wait_ready(p, f"http://127.0.0.1:{port}")
        assert get(f"http://127.0.0.1:{port}/health")[0] == 200
        assert models(f"http://127.0.0.1:{port}") == [SPATE_MODEL.stem]
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()


# ---------------------------------------------------------------- drain

def test_sigterm_drains_stream_in_flight():
    port = free_port()
    p = Proc(serve_cmd("--shutdown-timeout", "300", port=port), env=SKIP_WARMUP)
    try:
        wait_ready(p, f"http://127.0.0.1:{port}")
        max_tokens = 2000  # several seconds of decode, so the stream outlives the /ready polling
        s = Stream(port, max_tokens)
        s.read_some(3)
        p.proc.send_signal(signal.SIGTERM)
        # While the stream drains, no new request is served: refused or /ready 503.
        deadline = time.time() + 10
        while True:
            try:
                status = get(f"http://127.0.0.1:{port}/ready", timeout=5)[0]
            except OSError:
                break
            if status == 503:
                break
            assert time.time() < deadline, "/ready still 200 after SIGTERM"
            time.sleep(0.05)
        assert p.proc.poll() is None, "spate exited with a stream in flight"
        s.read_to_end()
        assert s.done, "stream did not end with data: [DONE]"
        assert s.finish_reason == "length" and s.tokens == max_tokens, (s.finish_reason, s.tokens)
        assert p.wait(60) == 0, p.log_text()
    finally:
        p.kill()


def test_shutdown_timeout_cancels_with_finish_reason():
    port = free_port()
    p = Proc(serve_cmd("--shutdown-timeout", "1", port=port), env=SKIP_WARMUP)
    try:
        wait_ready(p, f"http://127.0.0.1:{port}")
        s = Stream(port, 6000)
        s.read_some(3)
        t = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        s.read_to_end()
        assert time.monotonic() - t < 30
        assert s.finish_reason not in (None, "stop", "length"), s.finish_reason
        assert s.chunks < 6000 and (s.tokens or 0) < 6000
        assert p.wait(30) == 0, p.log_text()
    finally:
        p.kill()


def test_second_sigterm_forces_stop():
    port = free_port()
    p = Proc(serve_cmd("--shutdown-timeout", "600", port=port), env=SKIP_WARMUP)
    try:
        wait_ready(p, f"http://127.0.0.1:{port}")
        s = Stream(port, 6000)
        s.read_some(3)
        p.proc.send_signal(signal.SIGTERM)
        time.sleep(1)
        assert p.proc.poll() is None, "exited before the stream finished or the deadline"
        p.proc.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0, p.log_text()
        s.read_to_end()
        assert s.chunks < 6000 and (s.tokens or 0) < 6000
    finally:
        p.kill()


# ---------------------------------------------------------------- reload (SIGHUP)

def test_sighup_reloads_tls_certificate_without_dropping_stream(tmp_path):
    crt_a, key_a = make_cert(tmp_path, "cert-a")
    crt_b, key_b = make_cert(tmp_path, "cert-b")
    crt, key = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copy(crt_a, crt)
    shutil.copy(key_a, key)
    port = free_port()
    p = Proc(serve_cmd("--ssl-certfile", crt, "--ssl-keyfile", key, port=port), env=SKIP_WARMUP)
    ctx_a = ssl.create_default_context(cafile=str(crt_a))
    ctx_b = ssl.create_default_context(cafile=str(crt_b))
    try:
        wait_ready(p, f"https://127.0.0.1:{port}", ctx=ctx_a)
        assert peer_cert_der(port) == pem_to_der(crt_a)
        max_tokens = 300
        s = Stream(port, max_tokens, ctx=ctx_a)
        s.read_some(3)
        assert s.conn.sock.getpeercert(binary_form=True) == pem_to_der(crt_a)

        replace_file(key, key_b.read_bytes())
        replace_file(crt, crt_b.read_bytes())
        p.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 15
        while peer_cert_der(port) != pem_to_der(crt_b):
            assert time.time() < deadline, f"new connections still see cert A after SIGHUP\n{p.log_text()}"
            assert p.proc.poll() is None, p.log_text()
            time.sleep(0.1)
        assert get(f"https://127.0.0.1:{port}/health", ctx=ctx_b)[0] == 200
        assert p.proc.poll() is None

        s.read_to_end()  # the stream opened under cert A goes on to the end
        assert s.done and s.finish_reason == "length" and s.tokens == max_tokens, (s.done, s.finish_reason, s.tokens)
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()


def test_sighup_reloads_api_key_file(tmp_path):
    keys = tmp_path / "api-keys"
    keys.write_text("# keys of spate\n\nkey-old\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    p = Proc(serve_cmd("--api-key-file", keys, port=port), env=SKIP_WARMUP)

    def status(key):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return get(base + "/v1/models", headers=headers)[0]

    try:
        wait_ready(p, base)
        assert (status("key-old"), status("key-new"), status(None)) == (200, 401, 401)
        assert status("# keys of spate") == 401  # comments are not keys
        s = Stream(port, 200, headers={"Authorization": "Bearer key-old"})
        s.read_some(2)

        replace_file(keys, b"key-new\n")
        p.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 15
        while status("key-new") != 200:
            assert time.time() < deadline and p.proc.poll() is None, f"key-new not accepted after SIGHUP\n{p.log_text()}"
            time.sleep(0.1)
        assert status("key-old") == 401
        s.read_to_end()  # authenticated before the reload: not cut off
        assert s.done and s.tokens == 200
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()


# ---------------------------------------------------------------- --config

def test_config_file_and_command_line_override(tmp_path):
    port = free_port()
    conf = tmp_path / "spate.conf"
    conf.write_text(f"# test config\nmodel = {SPATE_MODEL}\nhost = 127.0.0.1\nport = {port}\n"
                    "served-model-name = from-file\nthreads = 2\nshutdown-timeout = 5\n")
    base = f"http://127.0.0.1:{port}"
    p = Proc([SPATE_BIN, "serve", "--config", conf], env=SKIP_WARMUP)
    try:
        wait_ready(p, base)
        assert models(base) == ["from-file"]
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()

    p = Proc([SPATE_BIN, "serve", "--config", conf, "--served-model-name", "from-cli"], env=SKIP_WARMUP)
    try:
        wait_ready(p, base)  # port still from the file
        assert models(base) == ["from-cli"]
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()


@pytest.mark.parametrize("content, needle", [
    ("bogus-option = 1\n", "bogus-option"),
    ("port = eighty\n", "port"),
])
def test_config_file_errors(tmp_path, content, needle):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"model = {SPATE_MODEL}\n" + content)
    out = subprocess.run([SPATE_BIN, "serve", "--config", conf], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **SKIP_WARMUP})
    assert out.returncode != 0
    assert needle in out.stderr, out.stderr


def test_config_file_missing(tmp_path):
    out = subprocess.run([SPATE_BIN, "serve", "--config", tmp_path / "nope.conf"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "nope.conf" in out.stderr, out.stderr


def serve_help():
    return subprocess.run([SPATE_BIN, "serve", "--help"], capture_output=True, text=True, timeout=30, check=True).stdout


def serve_help_options():
    names = set(re.findall(r"^\s+(?:-\w \[ )?--([a-z0-9][a-z0-9-]*)", serve_help(), re.M))
    return names - {"help", "config"}


def serve_help_defaults():
    """{name: default} of the options whose --help shows `arg (=default)`."""
    return dict(re.findall(r"^\s+--([a-z0-9][a-z0-9-]*) arg \(=([^)]*)\)", serve_help(), re.M))


def test_example_config_lists_every_option_with_a_valid_default(tmp_path):
    example = (REPO / "etc" / "spate.conf").read_text()
    keys = set(re.findall(r"^#? ?([a-z][a-z0-9-]*) =", example, re.M))
    missing = serve_help_options() - keys
    assert not missing, f"etc/spate.conf lacks {sorted(missing)}"
    shown = dict(re.findall(r"^#? ?([a-z][a-z0-9-]*) = (.*)$", example, re.M))
    wrong = {k: (shown.get(k), v) for k, v in serve_help_defaults().items() if shown.get(k) != v}
    assert not wrong, f"etc/spate.conf shows other defaults than --help (shown, actual): {wrong}"

    # Every commented default, uncommented, must be accepted as is.
    port = free_port()
    lines = []
    for line in example.splitlines():
        m = re.match(r"^# ([a-z][a-z0-9-]*) = (.+)$", line)
        if m:
            line = f"{m.group(1)} = {m.group(2)}"
        m = re.match(r"^([a-z][a-z0-9-]*) =", line)
        if m and m.group(1) in ("model", "port", "threads"):
            continue
        lines.append(line)
    lines += [f"model = {SPATE_MODEL}", f"port = {port}", "threads = 2"]
    conf = tmp_path / "spate.conf"
    conf.write_text("\n".join(lines) + "\n")
    p = Proc([SPATE_BIN, "serve", "--config", conf], env=SKIP_WARMUP)
    try:
        wait_ready(p, f"http://127.0.0.1:{port}")
        assert models(f"http://127.0.0.1:{port}") == [SPATE_MODEL.stem]
        assert p.stop() == 0, p.log_text()
    finally:
        p.kill()


# ---------------------------------------------------------------- unit files and install

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")


def analyze_verify(unit_dir: Path):
    """systemd-analyze verify of the two units; it checks that ExecStart's
    binary exists, so callers point ExecStart at a real spate."""
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", unit_dir / "spate.service", unit_dir / "spate.socket"],
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    ours = [l for l in text.splitlines() if "spate" in l]
    assert out.returncode == 0 and not ours, text


@needs_analyze
def test_units_verify(tmp_path):
    unit = (REPO / "systemd" / "spate.service").read_text()
    assert "ExecStart=/usr/bin/spate serve --config /etc/spate/spate.conf" in unit
    (tmp_path / "spate.service").write_text(unit.replace("/usr/bin/spate ", f"{SPATE_BIN} "))
    shutil.copy(REPO / "systemd" / "spate.socket", tmp_path / "spate.socket")
    analyze_verify(tmp_path)

    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--man=no", tmp_path / "spate.service"],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for spate.service: ([\d.]+)", out.stdout + out.stderr)
    assert m and float(m.group(1)) <= 2.0, out.stdout[-3000:] + out.stderr


def unit_settings(path: Path) -> dict:
    settings = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            k, v = line.split("=", 1)
            settings.setdefault(k.strip(), []).append(v.strip())
    return settings


def seconds(v: str) -> float:
    m = re.fullmatch(r"(\d+)(min|s)?", v)
    assert m, v
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def test_unit_contract():
    svc = unit_settings(REPO / "systemd" / "spate.service")
    sock = unit_settings(REPO / "systemd" / "spate.socket")
    for k, v in {"Type": "notify", "NotifyAccess": "main", "ExecReload": "/bin/kill -HUP $MAINPID",
                 "Restart": "on-failure", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                 "NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "StateDirectory": "spate",
                 "ConfigurationDirectory": "spate", "MemoryDenyWriteExecute": "yes"}.items():
        assert svc.get(k) == [v], (k, svc.get(k))
    assert svc["RestrictAddressFamilies"] == ["AF_INET AF_INET6 AF_UNIX"]
    assert int(svc["LimitNOFILE"][0]) >= 65536
    assert "WatchdogSec" in svc and "TimeoutStartSec" in svc
    # The unit's stop timeout covers spate's drain (example config's shutdown-timeout).
    example = (REPO / "etc" / "spate.conf").read_text()
    drain = float(re.search(r"^#? ?shutdown-timeout = ([\d.]+)", example, re.M).group(1))
    assert seconds(svc["TimeoutStopSec"][0]) > drain
    assert sock["Service"] == ["spate.service"] and sock["ListenStream"]
    assert re.search(r"^model = /var/lib/spate/", example, re.M), "the example config sets the model path"


def build_dir() -> Path:
    d = SPATE_BIN.parent
    if not (d / "cmake_install.cmake").is_file():
        pytest.skip(f"{d} is not a CMake build directory")
    return d


@needs_analyze
def test_cmake_install_tree(tmp_path):
    prefix = tmp_path / "inst"
    subprocess.run(["cmake", "--install", build_dir(), "--prefix", prefix], check=True, capture_output=True, timeout=300)
    for rel in ("bin/spate", "lib/systemd/system/spate.service", "lib/systemd/system/spate.socket",
                "etc/spate/spate.conf", "lib/sysusers.d/spate.conf"):
        assert (prefix / rel).is_file(), rel
    unit = (prefix / "lib/systemd/system/spate.service").read_text()
    assert f"ExecStart={prefix}/bin/spate serve --config {prefix}/etc/spate/spate.conf" in unit
    out = subprocess.run([prefix / "bin/spate", "version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("spate "), out
    analyze_verify(prefix / "lib/systemd/system")


@pytest.mark.skipif(not all(shutil.which(t) for t in ("cpack", "dpkg-deb", "dpkg-shlibdeps")),
                    reason="cpack, dpkg-deb or dpkg-shlibdeps missing")
def test_deb_package(tmp_path):
    cfg = build_dir() / "CPackConfig.cmake"
    out = subprocess.run(["cpack", "-G", "DEB", "--config", cfg, "-B", tmp_path / "pkg"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    debs = list((tmp_path / "pkg").glob("spate_*.deb"))
    assert len(debs) == 1, list((tmp_path / "pkg").iterdir())
    deb = debs[0]

    contents = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/spate", "./usr/lib/systemd/system/spate.service", "./usr/lib/systemd/system/spate.socket",
                 "./etc/spate/spate.conf", "./usr/lib/sysusers.d/spate.conf"):
        assert re.search(rf" {re.escape(path)}$", contents, re.M), f"{path} not in\n{contents}"
    info = subprocess.run(["dpkg-deb", "-I", deb], capture_output=True, text=True, check=True).stdout
    depends = re.search(r"^ Depends: (.*)$", info, re.M)
    assert depends and "libc6" in depends.group(1) and "libssl3" in depends.group(1), info
    assert "libsystemd0" in depends.group(1), info
    conffiles = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], capture_output=True, text=True, check=True).stdout
    assert conffiles.split() == ["/etc/spate/spate.conf"]

    # dpkg -i into a scratch root (its own dpkg database; the maintainer
    # scripts run on the host with DPKG_ROOT and touch only the scratch root).
    # The libraries of Depends are those of this machine, hence --force-depends.
    root = tmp_path / "root"
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc"):
        (root / d).mkdir(parents=True)
    for f in ("status", "available"):
        (root / "var/lib/dpkg" / f).touch()
    dpkg = ["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends", "--force-not-root"]
    out = subprocess.run([*dpkg, "-i", deb], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    status = subprocess.run([*dpkg, "--status", "spate"], capture_output=True, text=True, check=True).stdout
    assert "install ok installed" in status and "/etc/spate/spate.conf" in status, status
    if shutil.which("systemd-sysusers"):
        assert re.search(r"^spate:", (root / "etc/passwd").read_text(), re.M), "postinst did not create user spate"
    unit = (root / "usr/lib/systemd/system/spate.service").read_text()
    assert "ExecStart=/usr/bin/spate serve --config /etc/spate/spate.conf" in unit
    out = subprocess.run([root / "usr/bin/spate", "version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("spate "), out

    # Removing keeps the (edited) conffile; purging removes it.
    with open(root / "etc/spate/spate.conf", "a") as f:
        f.write("# edited by the operator\n")
    subprocess.run([*dpkg, "-r", "spate"], capture_output=True, check=True, timeout=120)
    assert not (root / "usr/bin/spate").exists()
    assert (root / "etc/spate/spate.conf").read_text().endswith("# edited by the operator\n")
    subprocess.run([*dpkg, "-P", "spate"], capture_output=True, check=True, timeout=120)
    assert not (root / "etc/spate/spate.conf").exists()
