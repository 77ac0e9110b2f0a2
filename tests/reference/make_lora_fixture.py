#!/usr/bin/env python3
"""llama.cpp's greedy output with LoRA adapters, for tests/integration/test_lora.py.

Runs llama.cpp's llama-server (from llama-cpp-python 0.3.36's sources, built as
perf/scripts/build_peer.sh builds the peers) once per adapter with
`--lora ADAPTER`, feeds the prompts of smollm2_q4_1_greedy.json as token ids
and records, per greedy step, the chosen token and its margin over the
runner-up (the difference of their log-probabilities, which is the raw logit
difference). The adapters are tests/reference/make_lora_adapters.py's, by
seed; their SHA-256 goes into the fixture so that the test refuses others.

Usage:
  python3 tests/reference/make_lora_fixture.py --server ~/.cache/spate/peer/0.3.36/bin/llama-server \\
      --model ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf --adapters-dir build/lora
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "integration" / "fixtures"
SEEDS = {"a1": 1, "a2": 2}
N_GEN = 24


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    return json.loads(urllib.request.urlopen(req, timeout=300).read())


def run_adapter(server: str, model: str, adapter: Path, prompts: list, threads: int) -> list:
    port = free_port()
    proc = subprocess.Popen([server, "-m", model, "--lora", str(adapter), "--port", str(port), "-t", str(threads), "-c", "2048",
                             "-np", "1", "--no-webui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                sys.exit("llama-server did not start")
            time.sleep(0.3)
        cases = []
        for c in prompts:
            r = post(port, "/completion", {"prompt": c["prompt_ids"], "n_predict": N_GEN, "temperature": 0, "top_k": 1,
                                            "n_probs": 2, "cache_prompt": False, "samplers": ["top_k"]})
            steps = []
            for p in r["completion_probabilities"]:
                top = p["top_logprobs"]
                margin = top[0]["logprob"] - top[1]["logprob"] if len(top) > 1 else 99.0
                steps.append([p["id"], round(margin, 4)])
            cases.append({"name": c["name"], "prompt_ids": c["prompt_ids"], "generated_ids": [s[0] for s in steps], "steps": steps})
        return cases
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapters-dir", required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    greedy = json.loads((FIXTURES / "smollm2_q4_1_greedy.json").read_text())
    prompts = [c for c in greedy["cases"] if len(c["prompt_ids"]) <= 256][:8]
    out = {"generator": "tests/reference/make_lora_fixture.py", "tool": "llama-server (llama-cpp-python 0.3.36) --lora",
           "system": platform.machine(), "model_sha256": sha256(Path(a.model)), "n_gen": N_GEN, "adapters": {}}
    for name, seed in SEEDS.items():
        path = Path(a.adapters_dir) / f"smollm2-{name}.gguf"
        out["adapters"][name] = {"seed": seed, "sha256": sha256(path), "cases": run_adapter(a.server, a.model, path, prompts, a.threads)}
    (FIXTURES / "smollm2_lora_greedy.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
