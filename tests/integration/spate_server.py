"""Starts a real `spate serve` on a loopback port for the integration tests.

SPATE_BIN / SPATE_MODEL as in test_cli.py. Each server gets a free port, its
log in a temporary file (printed when a test fails to start it), and is
stopped with SIGTERM (then SIGKILL) at the end.
"""

import contextlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _default_model() -> Path:
    cache = os.environ.get("SPATE_CACHE_DIR")
    base = Path(cache) if cache else Path.home() / ".cache" / "spate"
    return base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


SPATE_BIN = Path(os.environ.get("SPATE_BIN") or REPO / "build" / "spate").resolve()
SPATE_MODEL = Path(os.environ.get("SPATE_MODEL") or _default_model())
MODEL_NAME = "smollm2"
START_TIMEOUT = 300  # seconds to reach /ready (load + warmup on a busy 2-core machine)


SANITIZED = os.environ.get("SPATE_SANITIZER") == "1"
# Wall-clock bounds in tests are multiplied by this: a sanitized binary runs 5 to
# 15 times slower (TSan on 2 cores), so a bound that holds for the release build
# would fail there for timing alone.
SLOWDOWN = 15 if SANITIZED else 1


def process_env(extra=None) -> dict:
    """The environment of a spate process a test starts. A sanitized binary
    (SPATE_SANITIZER=1) skips warmup: it warms up for minutes (TSan: over 100 s
    on 2 cores); warmup runs every bucket through the same forward the tests
    drive, and the ctest step covers it (EngineLoop.WarmupRunsEveryBucketOnTheExecutor)."""
    env = dict(os.environ)
    if SANITIZED:
        env.setdefault("SPATE_SKIP_WARMUP", "1")
    env.update(extra or {})
    return env


def self_signed_cert(d: Path):
    """Writes a self-signed RSA certificate for 127.0.0.1 and localhost into d; returns (cert, key) paths."""
    key, crt = Path(d) / "key.pem", Path(d) / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return crt, key


@contextlib.contextmanager
def loopback_only():
    """While active, a connection from this process to an address off loopback
    (127.0.0.0/8, ::1, "localhost") raises AssertionError instead of leaving
    the machine: for tests of client libraries that could fetch something at
    run time (tiktoken's encodings, telemetry). Patches socket.socket's
    connect and connect_ex, which blocking and asyncio clients both go
    through; not thread-safe against another patcher."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            try:
                ok = ipaddress.ip_address(host.split("%")[0]).is_loopback
            except ValueError:
                ok = host == "localhost"
            if not ok:
                raise AssertionError(f"a connection off loopback: {address}")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SpateServer:
    def __init__(self, *args, env=None, tls=None, api_key=None, model=None, port=None, threads=2, single=True):
        """single=False: no --model or --served-model-name (args name the models: --models-dir, --model...)."""
        self.port = port or free_port()
        self.model_name = MODEL_NAME
        self.tls = tls  # (certfile, keyfile) or None
        self.api_key = api_key
        self.log = tempfile.NamedTemporaryFile(prefix="spate-serve-", suffix=".log", delete=False)
        models = ["--model", str(model or SPATE_MODEL), "--served-model-name", MODEL_NAME] if single else []
        cmd = [str(SPATE_BIN), "serve", *models, "--host", "127.0.0.1", "--port", str(self.port),
               "--threads", str(threads), *map(str, args)]
        if tls:
            cmd += ["--ssl-certfile", str(tls[0]), "--ssl-keyfile", str(tls[1])]
        if api_key:
            cmd += ["--api-key", api_key]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=process_env(env))
        self.scheme = "https" if tls else "http"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def wait_ready(self, ssl_context=None):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"spate serve exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            try:
                with urllib.request.urlopen(self.base_url + "/ready", timeout=2, context=ssl_context) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"spate serve not ready within {START_TIMEOUT}s:\n{self.log_text()[-4000:]}")

    def metrics(self, keep_model_label=False) -> dict:
        """Parses /metrics into {name_with_labels: value}. Every series carries
        model_name="<served name>"; it is dropped from the keys unless
        keep_model_label (so tests name series as 'spate:x' or 'spate:x{reason="y"}')."""
        with urllib.request.urlopen(self.base_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            if not keep_model_label:
                name = re.sub(r'model_name="(?:[^"\\]|\\.)*",?', "", name).replace("{}", "")
            out[name] = float(value)
        return out

    def wait_metric(self, predicate, timeout=30.0) -> dict:
        """Polls /metrics until predicate(metrics) holds; returns those metrics.
        Raises AssertionError after timeout seconds (scaled by SLOWDOWN)."""
        deadline = time.time() + timeout * SLOWDOWN
        while True:
            m = self.metrics()
            if predicate(m):
                return m
            if time.time() > deadline:
                raise AssertionError(f"metrics never matched within {timeout * SLOWDOWN:.0f} s: "
                                     f"{ {k: v for k, v in m.items() if 'num_requests' in k} }")
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        check_sanitizer_log(self.log_text())
        return self.proc.returncode


# Report headers of the sanitizers (scripts/sanitize.sh sets SPATE_SANITIZER=1).
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")


def check_sanitizer_log(text: str):
    """Under SPATE_SANITIZER=1, fails the caller when a server log holds a sanitizer report."""
    if os.environ.get("SPATE_SANITIZER") != "1":
        return
    for marker in SANITIZER_REPORTS:
        at = text.find(marker)
        if at >= 0:
            raise AssertionError(f"sanitizer report in the server log:\n{text[max(0, at - 200):at + 6000]}")


def post_json(base_url, path, body, headers=None, timeout=120, raw=None):
    """POST returning (status, parsed JSON or text, headers)."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(base_url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            payload = r.read()
            status, hdrs = r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        payload = e.read()
        status, hdrs = e.code, dict(e.headers)
    try:
        return status, json.loads(payload), hdrs
    except ValueError:
        return status, payload.decode(errors="replace"), hdrs


def exchange(port, data: bytes, timeout=10, half_close=False) -> bytes:
    """Sends raw bytes on a fresh connection to 127.0.0.1:port (then
    shutdown(SHUT_WR) if half_close) and returns all that comes back until the
    server closes (or resets, or timeout seconds pass without a byte)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out


def status_of(response: bytes) -> int:
    """The status code of a raw HTTP response."""
    return int(response.split(b"\r\n", 1)[0].split(b" ")[1])


def wait_listener_closed(port, timeout=30.0):
    """Returns once 127.0.0.1:port refuses connections: a server that got SIGTERM
    has begun its drain (it sets the draining flag, then closes its listener)."""
    deadline = time.monotonic() + timeout * SLOWDOWN
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except (ConnectionRefusedError, ConnectionResetError):  # reset: in the backlog as the listener closed
            return
        time.sleep(0.02)
    raise AssertionError(f"port {port} still accepts connections after {timeout * SLOWDOWN:.0f} s")
