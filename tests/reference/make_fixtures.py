#!/usr/bin/env python3
"""Generate llama.cpp reference fixtures for spate's integration tests.

Produces (by default into tests/integration/fixtures/), for --set smollm2:
  smollm2_q4_1_greedy.json     greedy continuations + raw-logit top-5 per step
  smollm2_tokenizer.json       tokenizer reference vectors
and for --set gemma3 (with --model the Gemma 3 270M Q4_K_M GGUF):
  gemma3_270m_q4_k_m_greedy.json, gemma3_270m_tokenizer.json
The gemma3 set replaces the ChatML prompt by Gemma's turn format and adds a
prompt longer than the 512-token sliding window.

Uses llama-cpp-python's *low-level* ctypes API (llama_cpp.llama_*) so that the
logits are the raw model outputs: no samplers, no penalties, no softmax.

Usage:
  ~/.cache/spate/venv-ref/bin/python tests/reference/make_fixtures.py \
      [--model PATH] [--out-dir DIR] [--threads 2] [--n-ctx 2048] [--n-gen 64]

See tests/reference/README.md for how to set up the pinned llama-cpp-python.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np

try:
    import llama_cpp
    from llama_cpp import llama_cpp as L
except ImportError:  # pragma: no cover
    sys.exit("llama-cpp-python is not installed; see tests/reference/README.md")

PINNED_LLAMA_CPP_PYTHON = "0.3.16"
DEFAULT_MODEL = os.path.expanduser(
    "~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf")
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "integration" / "fixtures"

# --------------------------------------------------------------------------
# Prompts for greedy fixtures. parse_special is True for all of them (it only
# matters for the chat prompt); add_special=True is passed to llama_tokenize,
# which adds BOS only if the GGUF says so (recorded as add_bos in the output).
# --------------------------------------------------------------------------
LONG_PROMPT = (
    "The history of computing is a story of steadily increasing abstraction. "
    "Early machines such as the ENIAC were programmed by physically rewiring "
    "panels and setting switches, a process that could take days for a single "
    "calculation. The invention of the stored-program computer, described in "
    "John von Neumann's 1945 report, allowed instructions to be held in memory "
    "alongside data, which made it possible to change a program without "
    "touching the hardware. Assembly languages soon replaced raw machine code, "
    "giving mnemonic names to operations and symbolic labels to addresses. In "
    "the late 1950s, FORTRAN and COBOL introduced the idea that a compiler "
    "could translate mathematical formulas or business rules into efficient "
    "machine instructions, and LISP showed that programs could manipulate "
    "other programs as data. The following decades brought structured "
    "programming, object orientation, garbage collection, and eventually "
    "languages that run on virtual machines across many kinds of hardware. "
    "Each step traded a little raw control for a large gain in productivity, "
    "and each was met with skepticism by programmers who worried that the "
    "generated code would be too slow. Today, large language models are "
    "sometimes described as the next layer in this stack: instead of writing "
    "code in a formal language, a person describes what they want in plain "
    "English and a model produces the program. Whether this will prove as "
    "durable as the compiler remains an open question, but the pattern is "
    "familiar. In summary, the main lesson of this history is that"
)

GREEDY_PROMPTS = [
    ("english_fact", "The capital of France is"),
    ("english_story", "Once upon a time, in a small village by the sea, there lived"),
    ("code_python",
     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("code_cpp",
     "#include <vector>\n\n// Sum all elements of a vector.\nint sum(const std::vector<int>& v) {\n"),
    ("chat_template",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
     "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the boiling point of "
     "water in Celsius?<|im_end|>\n<|im_start|>assistant\n"),
    ("math", "Question: What is 17 * 23?\nAnswer: 17 * 23 ="),
    ("number_sequence", "1, 2, 3, 5, 8, 13, 21,"),
    ("multilingual_unicode",
     "La vie est belle. Das Leben ist schön. 人生は美しい。Жизнь прекрасна. Translation:"),
    ("emoji", "I love 🍕 and ☕! My favourite emoji is"),
    ("json", "{\"name\": \"Alice\", \"age\": 30, \"languages\": [\"en\", "),
    ("long_prompt", LONG_PROMPT),
    ("one_token", "Hello"),
    ("repetition", "the the the the the the the the the the the the"),
]

GEMMA_CHAT = ("<start_of_turn>user\nWhat is the boiling point of water in Celsius?<end_of_turn>\n"
              "<start_of_turn>model\n")
# Gemma 3's layers slide over 512 positions: this prompt (~840 tokens) makes
# every sliding layer drop its earliest positions.
GEMMA_GREEDY_PROMPTS = ([(n, GEMMA_CHAT if n == "chat_template" else t) for n, t in GREEDY_PROMPTS] +
                        [("beyond_sliding_window", LONG_PROMPT + " " + LONG_PROMPT)])
SETS = {
    "smollm2": {"greedy_prompts": GREEDY_PROMPTS, "greedy_file": "smollm2_q4_1_greedy.json",
                "tokenizer_file": "smollm2_tokenizer.json", "extra_strings": []},
    "gemma3": {"greedy_prompts": GEMMA_GREEDY_PROMPTS, "greedy_file": "gemma3_270m_q4_k_m_greedy.json",
               "tokenizer_file": "gemma3_270m_tokenizer.json",
               "extra_strings": [("gemma_turns", "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n"),
                                 ("leading_spaces", "   three spaces and a\u00a0nbsp"),
                                 ("newlines_tabs", "\n\n\tindented\n\t\tmore")]},
}

# --------------------------------------------------------------------------
# Tokenizer vectors. Each string is tokenized with add_special=False and with
# parse_special False and True.
# --------------------------------------------------------------------------
TOKENIZER_STRINGS = [
    ("empty", ""),
    ("single_space", " "),
    ("hello_world", "Hello world"),
    ("leading_space", " Hello world"),
    ("sentence", "The quick brown fox jumps over the lazy dog."),
    ("contractions", "I'm sure you'll see they've done it, haven't they?"),
    ("numbers", "3.14159 2025 1234567890 0x1F -42 1e-5"),
    ("math_expr", "17*23=391; (a+b)^2 = a^2 + 2ab + b^2"),
    ("whitespace_runs", "a  b   c    d\t\te\n\nf\n\n\n   g"),
    ("code_python", "def f(x):\n    return x ** 2  # square\n"),
    ("code_cpp", "for (int i = 0; i < n; ++i) { v[i] += 1; }"),
    ("accents", "Ça va? Naïve café, señor. Größe straße"),
    ("cjk", "人生は美しい。我爱北京天安门。한국어 텍스트"),
    ("cyrillic_greek_arabic", "Привет мир. Γειά σου κόσμε. مرحبا بالعالم"),
    ("emoji", "I love 🍕 and ☕! 👍🏽 👨‍👩‍👧‍👦 🇫🇷"),
    ("im_start_text", "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
    ("special_inline", "text<|im_end|>more <|endoftext|> end"),
    ("url_email", "https://example.com/path?q=1&r=two user@example.org"),
    ("punctuation", "...!!!???---___***~~~"),
    ("mixed_case", "HTTPServer camelCaseVariable snake_case_name SCREAMING_CASE"),
    ("long_word", "Supercalifragilisticexpialidocious antidisestablishmentarianism"),
    ("control_chars", "tab\there\r\nwindows line\x0bvt"),
]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Ref:
    """Thin wrapper over llama.cpp's C API via llama_cpp ctypes bindings."""

    def __init__(self, model_path: str, n_ctx: int, n_threads: int, n_batch: int, extra_bufts: bool = True,
                 cb_eval=None):
        """extra_bufts=False: plain CPU weights (no AMX, no REPACK buffers; llama-cpp-python
        >= 0.3.36, whose AMX path crashes on this machine). cb_eval: a
        ggml_backend_sched_eval_callback that sees the graph's tensors."""
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_mmap = True
        if not extra_bufts:
            mp.use_extra_bufts = False
        self.model = L.llama_model_load_from_file(model_path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"failed to load model {model_path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)

        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_seq_max = 1
        cp.n_threads = n_threads
        cp.n_threads_batch = n_threads
        if any(f[0] == "flash_attn_type" for f in cp._fields_):  # llama-cpp-python >= 0.3.36
            cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        else:
            cp.flash_attn = False
        cp.no_perf = True
        if cb_eval is not None:
            cp.cb_eval = cb_eval
        self.cparams = {
            "n_ctx": n_ctx, "n_batch": n_batch, "n_ubatch": n_batch,
            "n_threads": n_threads, "n_threads_batch": n_threads,
            "flash_attn": False, "type_k": int(cp.type_k), "type_v": int(cp.type_v),
            "offload_kqv": bool(cp.offload_kqv),
        }
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("failed to create context")
        self.n_batch = n_batch
        self.batch = L.llama_batch_init(n_batch, 0, 1)

    # -- metadata ---------------------------------------------------------
    def meta(self, key: str):
        buf = ctypes.create_string_buffer(4096)
        n = L.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    # -- tokenizer ---------------------------------------------------------
    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        arr = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), arr, cap,
                             add_special, parse_special)
        if n < 0:
            cap = -n
            arr = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), arr, cap,
                                 add_special, parse_special)
        return list(arr[:n])

    def piece(self, tok: int, special: bool = True) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(self.vocab, tok, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self.vocab, tok, buf, len(buf), 0, special)
        return buf.raw[:n]

    def detokenize(self, toks: list[int], special: bool) -> bytes:
        if not toks:
            return b""
        arr = (L.llama_token * len(toks))(*toks)
        cap = 64 + 32 * len(toks)
        buf = ctypes.create_string_buffer(cap)
        n = L.llama_detokenize(self.vocab, arr, len(toks), buf, cap, False, special)
        if n < 0:
            cap = -n
            buf = ctypes.create_string_buffer(cap)
            n = L.llama_detokenize(self.vocab, arr, len(toks), buf, cap, False, special)
        return buf.raw[:n]

    # -- decoding ----------------------------------------------------------
    def clear(self):
        mem = L.llama_get_memory(self.ctx)
        L.llama_memory_clear(mem, True)

    def decode(self, toks: list[int], pos0: int) -> np.ndarray:
        """Decode toks at positions pos0.., logits requested for the last token
        only. Returns the raw logits (float32 copy) of the last token."""
        assert 0 < len(toks) <= self.n_batch
        b = self.batch
        b.n_tokens = len(toks)
        for i, t in enumerate(toks):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(toks) - 1 else 0
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed: {rc}")
        ptr = L.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def eval_prompt(self, toks: list[int]) -> np.ndarray:
        logits = None
        for s in range(0, len(toks), self.n_batch):
            logits = self.decode(toks[s:s + self.n_batch], s)
        return logits


def rnd(x: float) -> float:
    return round(float(x), 4)


def top_k(logits: np.ndarray, k: int) -> list[list]:
    # Sort by logit descending, then token id ascending (deterministic ties).
    idx = np.lexsort((np.arange(logits.size), -logits))[:k]
    return [[int(i), rnd(logits[i])] for i in idx]


def greedy(ref: Ref, prompt_ids: list[int], n_gen: int, eog: set[int]):
    ref.clear()
    logits = ref.eval_prompt(prompt_ids)
    pos = len(prompt_ids)
    steps = []
    first_eog = None
    for step in range(n_gen):
        # argmax with lowest-id tie break (np.argmax returns the first max)
        tok = int(np.argmax(logits))
        steps.append({
            "token": tok,
            "logit": rnd(logits[tok]),
            "top5": top_k(logits, 5),
            "margin": rnd(logits[tok] - np.partition(logits, -2)[-2]),
        })
        if first_eog is None and tok in eog:
            first_eog = step
        if step + 1 < n_gen:
            logits = ref.decode([tok], pos)
            pos += 1
    return steps, first_eog


def text_or_hex(b: bytes) -> dict | str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}


# --------------------------------------------------------------------------
# JSON emitters: indented at the top, one line per step / per token list.
# --------------------------------------------------------------------------
def dumps_compact(obj, indent=0, inline_keys=("steps",), oneline_keys=()) -> str:
    """Pretty JSON where lists of scalars, the elements of `inline_keys`
    lists, and whole `oneline_keys` values are written on a single line each."""
    pad = "  " * indent
    pad1 = "  " * (indent + 1)

    def one(o):
        return json.dumps(o, ensure_ascii=False, separators=(",", ":"))

    if isinstance(obj, dict):
        if not obj:
            return "{}"
        parts = []
        for k, v in obj.items():
            if k in inline_keys and isinstance(v, list):
                inner = (",\n" + pad1 + "  ").join(one(e) for e in v)
                val = "[\n" + pad1 + "  " + inner + "\n" + pad1 + "]" if v else "[]"
            elif k in oneline_keys:
                val = one(v)
            else:
                val = dumps_compact(v, indent + 1, inline_keys, oneline_keys)
            parts.append(pad1 + json.dumps(k) + ": " + val)
        return "{\n" + ",\n".join(parts) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(not isinstance(e, (dict, list)) for e in obj):
            return one(obj)
        return "[\n" + ",\n".join(pad1 + dumps_compact(e, indent + 1, inline_keys,
                                                         oneline_keys)
                                  for e in obj) + "\n" + pad + "]"
    return one(obj)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--n-batch", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=64)
    ap.add_argument("--set", choices=sorted(SETS), default="smollm2",
                    help="prompt set and output file names (default smollm2)")
    ap.add_argument("--only", choices=("greedy", "tokenizer"),
                    help="write only one of the two fixtures")
    args = ap.parse_args()

    if not os.path.exists(args.model):
        sys.exit(f"model not found: {args.model}")
    version = llama_cpp.__version__
    if version != PINNED_LLAMA_CPP_PYTHON:
        print(f"warning: llama-cpp-python {version} != pinned "
              f"{PINNED_LLAMA_CPP_PYTHON}", file=sys.stderr)

    model_sha = sha256_file(args.model)
    ref = Ref(args.model, args.n_ctx, args.threads, args.n_batch)
    bos = L.llama_vocab_bos(ref.vocab)
    eos = L.llama_vocab_eos(ref.vocab)
    eot = L.llama_vocab_eot(ref.vocab)
    add_bos = bool(L.llama_vocab_get_add_bos(ref.vocab))
    eog = {t for t in range(ref.n_vocab) if L.llama_vocab_is_eog(ref.vocab, t)}

    cmd = "python tests/reference/make_fixtures.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:])
    common = {
        "generator": {
            "tool": "llama-cpp-python (low-level llama_cpp C API bindings)",
            "llama_cpp_python_version": version,
            "command": cmd,
            "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
            "machine": platform.machine(),
        },
        "model": {
            "file": os.path.basename(args.model),
            "sha256": model_sha,
            "n_vocab": ref.n_vocab,
            "architecture": ref.meta("general.architecture"),
            "tokenizer_model": ref.meta("tokenizer.ggml.model"),
            "tokenizer_pre": ref.meta("tokenizer.ggml.pre"),
            "bos_id": bos, "eos_id": eos, "eot_id": eot,
            "eog_ids": sorted(eog),
            "add_bos": add_bos,
            "add_bos_token_meta": ref.meta("tokenizer.ggml.add_bos_token"),
        },
    }

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    # ---------------- greedy fixture ----------------
    if args.only != "tokenizer":
        write_greedy(ref, args, common, eog, bos, add_bos, out, SETS[args.set])
    if args.only != "greedy":
        write_tokenizer(ref, common, out, SETS[args.set])

    L.llama_batch_free(ref.batch)
    L.llama_free(ref.ctx)
    L.llama_model_free(ref.model)
    return 0


def write_greedy(ref, args, common, eog, bos, add_bos, out, fixture_set):
    cases = []
    for name, text in fixture_set["greedy_prompts"]:
        ids = ref.tokenize(text, add_special=True, parse_special=True)
        steps, first_eog = greedy(ref, ids, args.n_gen, eog)
        gen = [s["token"] for s in steps]
        cases.append({
            "name": name,
            "prompt": text,
            "parse_special": True,
            "add_special": True,
            "bos_added": bool(ids and ids[0] == bos and add_bos),
            "n_prompt_tokens": len(ids),
            "prompt_ids": ids,
            "generated_ids": gen,
            "generated_text": text_or_hex(ref.detokenize(gen, special=True)),
            "first_eog_step": first_eog,
            "steps": [[s["token"], s["logit"], s["margin"], s["top5"]] for s in steps],
        })
        print(f"{name:22s} prompt={len(ids):4d} tok  first_eog={first_eog}  "
              f"{ref.detokenize(gen[:16], True)!r}", file=sys.stderr)

    greedy_doc = dict(common)
    greedy_doc["settings"] = {
        **ref.cparams,
        "n_gen": args.n_gen,
        "sampling": "greedy argmax over raw logits (ties -> lowest token id); "
                    "no samplers, penalties, temperature or softmax",
        "eos_handling": "ignored: always generate n_gen tokens; generation "
                        "continues past end-of-generation tokens; first_eog_step "
                        "records the first step (0-based) whose token is EOG, or null",
        "prompt_eval": "prompt decoded in chunks of n_batch tokens with logits "
                       "only for the last token; then one llama_decode per "
                       "generated token",
        "logits": "raw llama_get_logits_ith output (float32), rounded to 4 decimals",
        "step_format": "[chosen_token, chosen_logit, margin_to_second_best, "
                       "top5 [[token, logit], ...] sorted by logit desc then id asc]; "
                       "steps[i] are the logits after prompt + generated_ids[:i]",
    }
    greedy_doc["cases"] = cases
    p = out / fixture_set["greedy_file"]
    p.write_text(dumps_compact(greedy_doc) + "\n", encoding="utf-8")
    print(f"wrote {p}", file=sys.stderr)


def write_tokenizer(ref, common, out, fixture_set):
    vecs = []
    for name, text in TOKENIZER_STRINGS + fixture_set["extra_strings"]:
        plain = ref.tokenize(text, add_special=False, parse_special=False)
        special = ref.tokenize(text, add_special=False, parse_special=True)
        with_bos = ref.tokenize(text, add_special=True, parse_special=True)
        entry = {
            "name": name,
            "text": text,
            "ids": plain,
            "ids_parse_special": special,
        }
        if with_bos != special:
            entry["ids_add_special_parse_special"] = with_bos
        entry["pieces"] = [text_or_hex(ref.piece(t)) for t in plain]
        rt = ref.detokenize(plain, special=False)
        entry["detok_roundtrip_equal"] = rt == text.encode("utf-8")
        if not entry["detok_roundtrip_equal"]:
            entry["detok"] = text_or_hex(rt)
        vecs.append(entry)
    tok_doc = dict(common)
    tok_doc["settings"] = {
        "ids": "llama_tokenize(add_special=false, parse_special=false)",
        "ids_parse_special": "llama_tokenize(add_special=false, parse_special=true)",
        "ids_add_special_parse_special": "llama_tokenize(add_special=true, "
            "parse_special=true); present only when it differs from ids_parse_special",
        "pieces": "llama_token_to_piece(special=true) of each id in ids; "
                  "{\"hex\":...} when not valid UTF-8 on its own",
        "detok_roundtrip_equal": "llama_detokenize(ids, remove_special=false, "
                                 "unparse_special=false) == text",
    }
    tok_doc["vectors"] = vecs
    p = out / fixture_set["tokenizer_file"]
    p.write_text(dumps_compact(tok_doc, inline_keys=(), oneline_keys=("pieces",)) + "\n",
                 encoding="utf-8")
    print(f"wrote {p}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
