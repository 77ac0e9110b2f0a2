"""A fleet on loopback: N real `spate serve` replicas behind HAProxy running
deploy/haproxy/haproxy.cfg unchanged (addresses through its environment
variables). Shared by tests/integration/test_fleet.py and perf/scripts/bench_fleet.py.

Replica i (1-based) is HAProxy's server "spate<i>"; HAProxy's view of it
(UP/DOWN) comes from its stats CSV."""

import csv
import io
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from spate_server import REPO, SLOWDOWN, SpateServer, free_port, process_env

HAPROXY_CFG = REPO / "deploy" / "haproxy" / "haproxy.cfg"


class Fleet:
    def __init__(self, n=3, server_args=(), env=None, haproxy_cfg=HAPROXY_CFG, threads=1):
        assert 1 <= n <= 3, "deploy/haproxy/haproxy.cfg names three replicas"
        assert shutil.which("haproxy"), "the fleet needs Debian's haproxy (scripts/install-deps.sh)"
        self.n = n
        self.server_args = list(server_args)
        self.env = dict(env or {})
        self.threads = threads
        self.ports = [free_port() for _ in range(3)]
        self.replicas = [None] * 3
        for i in range(n):
            self.replicas[i] = SpateServer(*self.server_args, env=self.env, port=self.ports[i], threads=self.threads)
        for r in self.replicas[:n]:
            r.wait_ready()
        self.lb_port, self.stats_port = free_port(), free_port()
        self.lb_log = tempfile.NamedTemporaryFile(prefix="haproxy-", suffix=".log", delete=False)
        hap_env = {"SPATE_LB_BIND": f"127.0.0.1:{self.lb_port}", "SPATE_LB_STATS": f"127.0.0.1:{self.stats_port}",
                   # Replicas beyond n point at a closed port: DOWN, never chosen.
                   **{f"SPATE_REPLICA_{i + 1}": f"127.0.0.1:{self.ports[i]}" for i in range(3)}}
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(haproxy_cfg)], stdout=self.lb_log, stderr=subprocess.STDOUT,
                                        env=process_env(hap_env))
        # HAProxy starts every server UP; the absent ones go DOWN after their first checks.
        self.wait_states({i: "UP" if i <= n else "DOWN" for i in range(1, 4)}, timeout=30 * SLOWDOWN)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.lb_port}"

    def states(self):
        """{i: "UP" | "DOWN" | ...} as HAProxy sees each replica."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5) as r:
            rows = csv.DictReader(io.StringIO(r.read().decode().lstrip("# ")))
            return {int(row["svname"][5:]): row["status"].split()[0] for row in rows
                    if row["pxname"] == "spate" and row["svname"].startswith("spate")}

    def wait_states(self, want, timeout=60):
        deadline = time.time() + timeout
        while True:
            if self.haproxy.poll() is not None:
                raise RuntimeError("haproxy exited:\n" + Path(self.lb_log.name).read_text()[-3000:])
            try:
                st = self.states()
                if all(st.get(i) == s for i, s in want.items()):
                    return st
            except OSError:
                pass
            if time.time() > deadline:
                raise AssertionError(f"replicas not {want} within {timeout}s: {st}")
            time.sleep(0.1)

    def kill(self, i, sig=signal.SIGKILL):
        """Sends sig to replica i; SIGKILL returns at once, SIGTERM after its drain and exit."""
        r = self.replicas[i - 1]
        r.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            r.proc.wait(timeout=30)
        else:
            assert r.proc.wait(timeout=120 * SLOWDOWN) == 0, r.log_text()[-3000:]

    def restart(self, i):
        """Starts replica i again on its port; returns once HAProxy sees it UP."""
        self.replicas[i - 1] = SpateServer(*self.server_args, env=self.env, port=self.ports[i - 1], threads=self.threads)
        self.replicas[i - 1].wait_ready()
        self.wait_states({i: "UP"}, timeout=30 * SLOWDOWN)

    def metric_sum(self, name):
        return sum(r.metrics().get(name, 0.0) for r in self.replicas[:self.n] if r and r.proc.poll() is None)

    def stop(self):
        self.haproxy.terminate()
        try:
            self.haproxy.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.haproxy.kill()
        codes = []
        for r in self.replicas:
            if r is not None and r.proc.poll() is None:
                codes.append(r.stop())
        return codes
