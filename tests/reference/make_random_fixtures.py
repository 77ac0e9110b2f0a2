#!/usr/bin/env python3
"""Reference logits of llama.cpp for the random-weight models of
make_random_models.py, written to tests/integration/fixtures/random_models.json.

For each model: one token sequence of 64 tokens (four times Gemma's window of
16), decoded by llama.cpp in one batch with logits at every position; the
fixture keeps each position's top-8 (token, raw logit). Requires a pinned
llama-cpp-python (see README.md here): 0.3.16 made the dense models' entries,
0.3.36 (the first with qwen3moe as spate reads it) the mixture-of-experts ones.

Entries made by this script carry the llama-cpp-python version and
system_info that made them (`tool`, `system_info`); entries without them were
made by the top-level `generator`. For mixture-of-experts models the entry
also has `routing`: per layer, the experts llama.cpp chose at some position
and the smallest gap between the k-th and the (k+1)-th router logit over the
positions (make_random_models.py builds the routers so that the gap is wide;
this script refuses a gap below MIN_ROUTING_GAP, where two correct engines
could choose different experts).

Usage: ~/.cache/spate/venv-ref36/bin/python tests/reference/make_random_fixtures.py --models-dir DIR [--only NAME ...]
--only regenerates the named models' entries (e.g. qwen3moe llama-moe) and
keeps the other entries of the existing fixture as they are.
"""
from __future__ import annotations

import argparse
import ctypes
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
MIN_ROUTING_GAP = 0.25  # router logits; the engines' hidden states differ by ~1e-3 relative


class GgmlTensor(ctypes.Structure):
    """The head of ggml.h's struct ggml_tensor (GGML_MAX_DIMS 4, GGML_MAX_SRC 10, GGML_MAX_NAME 64)."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


class RouterLogits:
    """Collects llama.cpp's router logits ("ffn_moe_logits-<layer>", F32 [n_expert, n_tokens]) by layer."""

    def __init__(self):
        self.by_layer: dict[int, np.ndarray] = {}
        self.callback = L.ggml_backend_sched_eval_callback(self._seen)  # kept alive with self

    def _seen(self, t, ask, _user):
        tt = ctypes.cast(t, ctypes.POINTER(GgmlTensor)).contents
        name = tt.name.decode(errors="replace")
        if not name.startswith("ffn_moe_logits-"):
            return not ask  # ask: "do you want this one?"; otherwise: "go on?"
        if ask:
            return True
        n_expert, n_tokens = tt.ne[0], tt.ne[1]
        assert tt.type == 0 and tt.nb[0] == 4 and tt.nb[1] == 4 * n_expert, name  # F32, contiguous
        a = np.ctypeslib.as_array(ctypes.cast(tt.data, ctypes.POINTER(ctypes.c_float)), shape=(n_tokens, n_expert))
        self.by_layer[int(name.rsplit("-", 1)[1])] = a.copy()
        return True


def routing(router: RouterLogits, n_used: int) -> dict:
    layers = []
    for layer in sorted(router.by_layer):
        a = router.by_layer[layer]
        s = -np.sort(-a, axis=1)
        chosen = np.argsort(-a, axis=1, kind="stable")[:, :n_used]
        layers.append({"experts_chosen": len(np.unique(chosen)), "min_gap": round(float((s[:, n_used - 1] - s[:, n_used]).min()), 4)})
    return {"n_expert_used": n_used, "layers": layers}


def reference(path: Path, n_expert_used: int = 0) -> dict:
    router = RouterLogits() if n_expert_used else None
    ref = mf.Ref(str(path), n_ctx=256, n_threads=2, n_batch=256, extra_bufts=not plain_cpu(),
                 cb_eval=router.callback if router else None)
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
    out = {"tokens": toks, "top": positions}
    if router:
        out["routing"] = routing(router, n_expert_used)
    return out


def plain_cpu() -> bool:
    """From 0.3.36 on, plain CPU weights: its AMX buffers crash on an AMX machine, and
    without AMX the REPACK buffers would be the only difference from 0.3.16's run."""
    return tuple(int(x) for x in mf.llama_cpp.__version__.split(".")[:3]) >= (0, 3, 36)


def tool() -> str:
    return "llama-cpp-python " + mf.llama_cpp.__version__ + (" (use_extra_bufts=false)" if plain_cpu() else "")


def system_info() -> str:
    return L.llama_print_system_info().decode(errors="replace").strip()


def entry(name: str, arch: str, path: Path) -> dict:
    moe = rm.MOE_MODELS.get(name) or (rm.GPT_OSS if name == "gpt-oss" else None)
    r = reference(path, moe.n_expert_used if moe else 0)
    e = {"arch": arch, **({"name": name} if name != arch else {}), "file": path.name, "sha256": rm.sha256(path),
         "tool": tool(), "system_info": system_info()}
    margins = np.array([t[0][1] - t[1][1] for t in r["top"]])
    print(f"{name}: top-1 margin min {margins.min():.3f} median {np.median(margins):.3f}, "
          f"> 0.5 at {(margins > 0.5).sum()}/{margins.size} positions", file=sys.stderr)
    if "routing" in r:
        gaps = [lay["min_gap"] for lay in r["routing"]["layers"]]
        print(f"{name}: routing gaps by layer {gaps}, experts chosen "
              f"{[lay['experts_chosen'] for lay in r['routing']['layers']]}", file=sys.stderr)
        if min(gaps) < MIN_ROUTING_GAP:
            raise SystemExit(f"{name}: a router top-k gap of {min(gaps)} < {MIN_ROUTING_GAP}: engines could "
                             "choose different experts (see make_random_models.py, Routing)")
        e["routing"] = r.pop("routing")
    return {**e, **r}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", default=str(mf.DEFAULT_OUT / "random_models.json"))
    ap.add_argument("--only", nargs="+", choices=list(rm.MODELS), help="regenerate these entries, keep the others")
    args = ap.parse_args()
    names = args.only or list(rm.MODELS)
    made = {n: entry(n, rm.MODELS[n][0], Path(args.models_dir) / f"random-{n}.gguf") for n in names}
    if args.only:
        doc = json.loads(Path(args.out).read_text())
        kept = {m.get("name", m["arch"]): m for m in doc["models"]}
        doc["models"] = [made.get(n) or kept[n] for n in rm.MODELS if n in made or n in kept]
    else:
        doc = {
            "generator": {"tool": tool(), "command": "tests/reference/make_random_fixtures.py",
                          "models": "tests/reference/make_random_models.py", "system_info": system_info()},
            "settings": {}, "models": list(made.values())}
    doc["settings"] = {
        "decode": "one llama_decode of all tokens at positions 0.., logits at every position",
        "top": f"top-{TOP_K} [token, raw logit] per position, logit desc then id asc, 4 decimals",
        "entries": "an entry's own tool and system_info, where it has them, replace the generator's; "
                   "name (default: arch) keys the entry and its file random-NAME.gguf",
        "routing": "mixture of experts: per layer, the number of experts chosen at some position and the "
                   "smallest gap between the k-th and (k+1)-th router logit over the positions",
    }
    Path(args.out).write_text(mf.dumps_compact(doc, inline_keys=("top", "layers"), oneline_keys=("tokens",)) + "\n")
    print("wrote", args.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
