#!/usr/bin/env python3
"""llama.cpp's greedy output with a strong random LoRA adapter on the default
model, for tests/integration/test_lora.py (issue 54): fixtures/smollm2_lora_strong_greedy.json.

The adapter is make_lora_adapters.py's with --seed 5 --std-b 0.2 --alpha 16
(strong enough that rounding inside the adapter's two products moves logits by
tenths of a nat). llama.cpp converts the f32 activations of an F16 weight to
F16, for the adapter's A and B alike; spate does the same (model/lora.cpp),
and before it did not, its greedy tokens left llama.cpp's at margins up to 0.4.
Runs tests/reference/llama_greedy_dump.cpp (llama.cpp 0.3.36's static
libraries, F16 KV cache, flash attention off, 2 threads; README.md) over the
prompts of smollm2_q4_1_greedy.json.

Usage: make_lora_strong_fixture.py --dump PATH/llama_greedy_dump --model SmolLM2.gguf --work-dir DIR
"""
import argparse
import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "integration" / "fixtures"
SPEC = {"seed": 5, "std_b": 0.2, "alpha": 16.0}
N_GEN = 12


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    work = Path(a.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    adapter = work / "smollm2-s1.gguf"
    subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", a.model, "--out", adapter,
                    "--seed", str(SPEC["seed"]), "--std-b", str(SPEC["std_b"]), "--alpha", str(SPEC["alpha"])], check=True)
    cases = json.loads((FIXTURES / "smollm2_q4_1_greedy.json").read_text())["cases"]
    stdin = "".join(" ".join(map(str, c["prompt_ids"])) + "\n" for c in cases)
    out = subprocess.run([a.dump, a.model, str(N_GEN), "2", str(adapter)], input=stdin, capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    fixture = {
        "generator": "tests/reference/make_lora_strong_fixture.py",
        "tool": "llama_greedy_dump (llama.cpp of llama-cpp-python 0.3.36), flash attention off, F16 KV cache",
        "system": platform.machine(),
        "model_sha256": hashlib.sha256(Path(a.model).read_bytes()).hexdigest(),
        "n_gen": N_GEN,
        "adapters": {"s1": {**SPEC, "sha256": hashlib.sha256(adapter.read_bytes()).hexdigest(), "cases": [
            {"name": c["name"], "prompt_ids": r["prompt_ids"], "generated_ids": [s[0][0] for s in r["steps"]],
             "steps": [[s[0][0], round(s[0][1] - s[1][1], 4)] for s in r["steps"]]}
            for c, r in zip(cases, rows)]}},
    }
    (FIXTURES / "smollm2_lora_strong_greedy.json").write_text(json.dumps(fixture, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
