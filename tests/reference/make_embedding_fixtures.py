#!/usr/bin/env python3
"""Reference embeddings of llama.cpp (llama-cpp-python's Llama.embed, which
tokenizes with the model's BOS setting and no special-token parsing) for
spate's /v1/embeddings, written to
tests/integration/fixtures/smollm2_embeddings.json: each text's full vector
under mean and last pooling, L2-normalized. Requires the pinned
llama-cpp-python (see README.md here).

Usage: ~/.cache/spate/venv-ref/bin/python tests/reference/make_embedding_fixtures.py [--model PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

TEXTS = ["The capital of France is Paris.",
         "def add(a, b):\n    return a + b",
         "Embeddings map text to vectors; similar texts get similar vectors.",
         "Ünïcödé and emoji 🍕 work too."]
POOLINGS = {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "last": llama_cpp.LLAMA_POOLING_TYPE_LAST}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=mf.DEFAULT_MODEL)
    ap.add_argument("--out", default=str(mf.DEFAULT_OUT / "smollm2_embeddings.json"))
    args = ap.parse_args()
    out = {"generator": {"tool": "llama-cpp-python " + llama_cpp.__version__ + " Llama.embed(normalize=True)",
                         "command": "tests/reference/make_embedding_fixtures.py"},
           "model": {"file": Path(args.model).name, "sha256": mf.sha256_file(args.model)},
           "texts": TEXTS, "vectors": {}}
    for name, pooling in POOLINGS.items():
        llm = llama_cpp.Llama(model_path=args.model, embedding=True, pooling_type=pooling, n_ctx=512, n_threads=2,
                              verbose=False)
        vecs = [llm.embed(t, normalize=True) for t in TEXTS]  # one sequence per call (n_seq_max is 1)
        out["vectors"][name] = [[round(float(x), 6) for x in v] for v in vecs]
        del llm
    Path(args.out).write_text(json.dumps(out) + "\n")
    print("wrote", args.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
