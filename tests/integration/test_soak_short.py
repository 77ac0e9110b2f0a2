"""The soak client (perf/scripts/soak.py) for 45 s against the real server, as CI's
short version of the 30-minute soak: 16 connections mixing streamed and
non-streamed chat and completions, WebSocket responses, client aborts,
malformed requests and oversized bodies. It passes when no answer was a 5xx
or otherwise unexpected, the KV cache and the running requests are back to 0,
and the server's open file descriptors return to where they started. RSS
growth needs the long run (it is judged after a 5-minute warmup) and is not
checked here."""

import json
import subprocess
import sys
from pathlib import Path

from spate_server import MODEL_NAME, SANITIZED, SpateServer

SOAK = Path(__file__).resolve().parents[2] / "perf" / "scripts" / "soak.py"


def test_short_soak(tmp_path):
    s = SpateServer("--max-body-bytes", "65536")
    try:
        s.wait_ready()
        out = tmp_path / "soak.jsonl"
        r = subprocess.run([sys.executable, str(SOAK), "--url", s.base_url, "--pid", str(s.proc.pid),
                            "--duration-s", "45", "--connections", "16", "--model-name", MODEL_NAME,
                            "--sample-s", "5", "--oversized-bytes", "100000", "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
        summary = json.loads(out.read_text().splitlines()[-1])["summary"]
        assert r.returncode == 0, (summary, r.stderr[-2000:])
        assert summary["requests"] > (20 if SANITIZED else 50)  # a sanitized server is 10-50x slower at model work
        assert summary["status_5xx"] == 0 and not summary["unexpected"]
        assert summary["kv_usage_end"] == 0 and summary["running_end"] == 0
        for kind in ("chat_stream", "chat", "completion", "ws_response", "abort", "malformed", "oversized"):
            assert summary["by_kind"].get(kind, 0) > 0, kind
        assert s.proc.poll() is None, "the server is still running"
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]
