#!/usr/bin/env python3
"""The shared library of the perf/ scripts (Python side; lib.sh is the shell side).

Import it from a script in perf/scripts/ (`from perflib import ...`; a script
elsewhere puts perf/scripts/ on sys.path first), or call it from shell:

  perflib.py record OUT KEY=VALUE...      append one JSON object to OUT
  perflib.py merge OUT KEY=VALUE... [--from FILE] [--first] [--drop K,K] [--failure-if-error]
                                          append each JSON line of FILE (default stdin),
                                          without the --drop keys, after the KEY=VALUE pairs
  perflib.py free-port [BASE]             print a loopback port that binds (see free_port)
  perflib.py peer-tok-s KIND METRIC NPL FILE...
                                          the tok/s of a llama-bench (KIND bench) or
                                          llama-batched-bench (KIND batched: its JSON lines, else
                                          its Markdown table) run from its output
  perflib.py bench-metrics FILE...        one {"metric": "pp<N>"|"tg<N>", "tok_s": ...} line per
                                          llama-bench test in the files (see bench_metrics)

Contracts:
- KEY=VALUE values that parse as JSON stay JSON (numbers, true, null, lists);
  any other value is a string.
- Medians are statistics.median over the values given (None when there are none);
  ratio(a, b) is None when either side is missing or b is 0.
- Server is not thread-safe: one thread starts, polls and stops it. stop() is
  idempotent and runs at interpreter exit too (atexit), so no server outlives
  its script.
"""
import atexit
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PERF = REPO / "perf"
DEFAULT_MODEL = Path.home() / ".cache" / "spate" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


# --- values -------------------------------------------------------------------------------------

def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_pairs(pairs):
    """["a=1", "b=x"] -> {"a": 1, "b": "x"}."""
    out = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep:
            raise ValueError(f"not KEY=VALUE: {kv!r}")
        out[key] = parse_value(value)
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt(x, digits=2):
    """A figure for a table: "-" when missing, one decimal from 100 up."""
    if x is None:
        return "-"
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.{digits}f}"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def spread(values):
    """min-max of the values as "a-b", "-" when there are none."""
    values = [v for v in values if v is not None]
    return f"{fmt(min(values))}-{fmt(max(values))}" if values else "-"


# --- JSON lines -------------------------------------------------------------------------------------

def json_objects(text):
    """The JSON objects of a program's output: each line that starts with "{" and parses.
    A whole-text JSON array of objects (ik_llama.cpp's `llama-bench -o json`) counts too."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return [o for o in json.loads(stripped) if isinstance(o, dict)]
        except ValueError:
            pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def read_jsonl(path):
    with open(path, errors="replace") as f:
        return json_objects(f.read())


def append_jsonl(path, objects):
    with open(path, "a") as f:
        for o in objects:
            f.write(json.dumps(o) + "\n")


def sse_objects(res):
    """The JSON payloads of an SSE stream (an http.client response), as they arrive: each
    "data:" line of each event, parsed; "[DONE]" and lines that do not parse are skipped."""
    buf = b""
    while True:
        chunk = res.read1(65536)
        if not chunk:
            return
        buf += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                data = line[5:].strip() if line.startswith(b"data:") else b""
                if data and data != b"[DONE]":
                    try:
                        yield json.loads(data)
                    except ValueError:
                        pass


# --- tables and summaries ---------------------------------------------------------------------------

def print_table(headers, rows, file=None):
    """A Markdown table, columns padded to their widest cell; cells are str()-ed."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = file or sys.stdout
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |", file=out)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=out)
    for r in rows:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |", file=out)


def run_header(run):
    """Merges the "kind":"run" records (start and end) of a results file into one dict."""
    merged = {}
    for r in run:
        merged.update(r)
    return merged


def load_warning(peak, ncpu):
    """The benchmark keeps about `threads` cores busy, so a 1-min load average up to the
    core count is its own; above cores + 1 other work shared the machine."""
    print(f"peak 1-min load average before a run: {peak:.2f}")
    if peak > ncpu + 1:
        print(f"  WARNING: load average {peak:.2f} > {ncpu} cpus + 1: other work shared the machine, "
              f"figures are not comparable")


def peak_load(samples, key="loadavg_before"):
    return max((float(s[key].split()[0]) for s in samples if s.get(key)), default=0.0)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --- peers -------------------------------------------------------------------------------------------

BATCHED_KEYS = ("pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed")


def batched_table_rows(text):
    """The rows of llama-batched-bench's Markdown table (all ik_llama.cpp's prints) as dicts with
    the keys of llama.cpp's JSON lines (BATCHED_KEYS; pl an int)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(BATCHED_KEYS):
            continue
        try:
            row = dict(zip(BATCHED_KEYS, (float(c) for c in cells)))
        except ValueError:
            continue
        row["pl"] = int(row["pl"])
        out.append(row)
    return out


def peer_tok_s(rows, kind, npl):
    """tok/s of one peer run: llama-bench's avg_ts (kind "bench"), or the speed_tg of the
    npl row of llama-batched-bench (kind "batched"). None when the output has no such row."""
    if kind == "bench":
        rows = [r for r in rows if "avg_ts" in r]
        return rows[0]["avg_ts"] if rows else None
    rows = [r for r in rows if r.get("pl") == npl and "speed_tg" in r]
    return rows[0]["speed_tg"] if rows else None


def bench_metrics(rows):
    """The tests of one llama-bench run (llama.cpp's -o jsonl or ik_llama.cpp's -o json) as
    {"metric": "pp<n_prompt>" (n_gen 0) or "tg<n_gen>" (n_prompt 0), "tok_s": avg_ts}; mixed
    tests (both non-zero) are skipped."""
    out = []
    for r in rows:
        if "avg_ts" not in r:
            continue
        n_prompt, n_gen = int(r.get("n_prompt", 0)), int(r.get("n_gen", 0))
        if (n_prompt > 0) != (n_gen > 0):
            out.append({"metric": f"pp{n_prompt}" if n_prompt else f"tg{n_gen}", "tok_s": round(r["avg_ts"], 2)})
    return out


def find_peer_bin(build_script=PERF / "peer" / "build_llama_cpp.sh"):
    """PEER_BIN from the environment, else the last line of build_llama_cpp.sh's output
    (which builds the peer when it is missing)."""
    if os.environ.get("PEER_BIN"):
        return os.environ["PEER_BIN"]
    out = subprocess.run(["bash", str(build_script)], check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


# --- servers -----------------------------------------------------------------------------------------

def free_port(base=None, span=100):
    """A loopback port that binds without SO_REUSEADDR: the first from `base` (up to base +
    span - 1), or one the kernel picks when base is None. A server stopped a moment ago
    leaves its port in TIME_WAIT, where llama-server cannot bind; this skips such ports."""
    candidates = [0] if base is None else range(base, base + span)
    for p in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in {base}..{base + span - 1}")


def http_status(url, timeout=2.0):
    """The HTTP status of GET url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Server:
    """One server process on 127.0.0.1 (spate serve, llama-server, ...), ready when GET
    ready_path answers 200. argv gets the port through the "{port}" placeholder in any of
    its items. The log goes to log_path (default: discarded)."""

    def __init__(self, argv, ready_path="/ready", log_path=None, env=None, port=None, port_base=None):
        self.port = port or free_port(port_base)
        self.argv = [str(a).replace("{port}", str(self.port)) for a in argv]
        self.ready_path = ready_path
        self.log_path = log_path
        self.env = env
        self.proc = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s=600.0):
        """Starts the process and waits until it is ready. Raises RuntimeError (after
        stopping it) when it exits first or is not ready within timeout_s."""
        log = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        env = dict(os.environ, **self.env) if self.env else None
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        if log is not subprocess.DEVNULL:
            log.close()
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise RuntimeError(f"server exited with {code} during start-up: {' '.join(self.argv)}")
            if http_status(self.url + self.ready_path) == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout_s:.0f} s: {' '.join(self.argv)}")

    def stop(self, grace_s=10.0):
        """SIGTERM, then SIGKILL after grace_s. Returns the exit status (None if not running)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# --- benchmark clients ---------------------------------------------------------------------------------

def add_client_args(ap):
    """The options every client of an OpenAI-compatible server takes: --url, --label, --model-name."""
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    ap.add_argument("--label", default="", help="copied into the output (e.g. spate, llama.cpp)")
    ap.add_argument("--model-name", default="", help="the request's \"model\" (default: first id of GET /v1/models)")


def run_or_exit(what, fn, errors=(OSError, ValueError)):
    """fn() or, when it raises one of errors, the error on stderr prefixed by `what` and exit status 1."""
    try:
        return fn()
    except errors as e:
        print(f"{what}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


# --- command line (for lib.sh) ---------------------------------------------------------------------

def _cli_merge(argv):
    src, first, drop, error_kind, pairs = None, False, set(), False, []
    it = iter(argv)
    for a in it:
        if a == "--from":
            src = next(it)
        elif a == "--first":
            first = True
        elif a == "--drop":
            drop = set(next(it).split(","))
        elif a == "--failure-if-error":
            error_kind = True
        else:
            pairs.append(a)
    text = open(src, errors="replace").read() if src else sys.stdin.read()
    objects = json_objects(text)
    if first:
        objects = objects[:1]
    if not objects:
        sys.exit("perflib merge: no JSON object in the input")
    head = parse_pairs(pairs)
    out = []
    for o in objects:
        merged = dict(head)
        merged.update({k: v for k, v in o.items() if k not in drop})
        if error_kind and "error" in o:
            merged["kind"] = "failure"
        out.append(merged)
    return out


def main(argv):
    if not argv:
        sys.exit(__doc__)
    cmd, rest = argv[0], argv[1:]
    if cmd == "record":
        append_jsonl(rest[0], [parse_pairs(rest[1:])])
    elif cmd == "merge":
        append_jsonl(rest[0], _cli_merge(rest[1:]))
    elif cmd == "free-port":
        print(free_port(int(rest[0]) if rest else None))
    elif cmd == "peer-tok-s":
        kind, _metric, npl, files = rest[0], rest[1], int(rest[2]), rest[3:]
        rows = [r for f in files for r in read_jsonl(f)]
        tok_s = peer_tok_s(rows, kind, npl)
        if tok_s is None and kind == "batched":  # no JSON: the Markdown table
            tok_s = peer_tok_s([r for f in files for r in batched_table_rows(open(f, errors="replace").read())],
                               kind, npl)
        if tok_s is None:
            sys.exit(f"no {rest[1]} figure in {' '.join(files)}")
        print(round(tok_s, 2))
    elif cmd == "bench-metrics":
        metrics = bench_metrics([r for f in rest for r in read_jsonl(f)])
        if not metrics:
            sys.exit(f"no llama-bench test in {' '.join(rest)}")
        for m in metrics:
            print(json.dumps(m))
    else:
        sys.exit(f"perflib: unknown command {cmd!r}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv[1:])
