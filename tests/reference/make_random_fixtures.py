#!/usr/bin/env python3
"""Reference logits of llama.cpp for the random-weight models of
make_random_models.py, written to tests/integration/fixtures/random_models.json.

For each model: one token sequence of 64 tokens (four times Gemma's window of
16), decoded by llama.cpp in one batch with logits at every position; the
fixture keeps each position's top-8 (token, raw logit). Requires the pinned
llama-cpp-python (see README.md here).

Usage: ~/.cache/spate/venv-ref/bin/python tests/reference/make_random_fixtures.py --models-dir DIR
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (Ref, llama_cpp bindings)
import make_random_models as rm  # noqa: E402

L = mf.L
TEXT = ("In a quiet corner of the old library, a student found a map that folded into itself "
        "seven times, each fold revealing a smaller city with narrower streets and older names, "
        "until the last one showed only a single door. Nobody in the town remembered who had drawn it, "
        "and the librarian only said that it had always been there, between two books about rivers.")
N_TOKENS = 64
TOP_K = 8


def reference(path: Path) -> dict:
    ref = mf.Ref(str(path), n_ctx=256, n_threads=2, n_batch=256)
    toks = ref.tokenize(TEXT, add_special=False, parse_special=False)[:N_TOKENS]
    assert len(toks) == N_TOKENS, len(toks)
    b = ref.batch
    b.n_tokens = len(toks)
    for i, t in enumerate(toks):
        b.token[i] = t
        b.pos[i] = i
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = 0
        b.logits[i] = 1
    if L.llama_decode(ref.ctx, b) != 0:
        raise RuntimeError("llama_decode failed")
    positions = []
    for i in range(len(toks)):
        logits = np.ctypeslib.as_array(L.llama_get_logits_ith(ref.ctx, i), shape=(ref.n_vocab,)).copy()
        positions.append(mf.top_k(logits, TOP_K))
    L.llama_batch_free(ref.batch)
    L.llama_free(ref.ctx)
    L.llama_model_free(ref.model)
    return {"tokens": toks, "top": positions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", default=str(mf.DEFAULT_OUT / "random_models.json"))
    args = ap.parse_args()
    models = []
    for arch in rm.ARCHS:
        path = Path(args.models_dir) / f"random-{arch}.gguf"
        r = reference(path)
        models.append({"arch": arch, "file": path.name, "sha256": rm.sha256(path), **r})
        print(arch, "top-1 at the last position:", r["top"][-1][0], file=sys.stderr)
    doc = {
        "generator": {"tool": "llama-cpp-python " + mf.llama_cpp.__version__,
                      "command": "tests/reference/make_random_fixtures.py",
                      "models": "tests/reference/make_random_models.py",
                      "system_info": L.llama_print_system_info().decode(errors="replace").strip()},
        "settings": {"decode": "one llama_decode of all tokens at positions 0.., logits at every position",
                     "top": f"top-{TOP_K} [token, raw logit] per position, logit desc then id asc, 4 decimals"},
        "models": models,
    }
    Path(args.out).write_text(mf.dumps_compact(doc, inline_keys=("top",), oneline_keys=("tokens",)) + "\n")
    print("wrote", args.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
