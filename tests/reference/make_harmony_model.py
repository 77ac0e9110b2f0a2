#!/usr/bin/env python3
"""A gpt-oss GGUF whose greedy output is a known harmony script (issue 36),
for end-to-end tests of the harmony parsers through the real server and the
real `openai` SDK: no real gpt-oss model fits here, and a random one never
writes harmony.

The model is the small random gpt-oss of make_random_models.py (same shape,
MXFP4 experts, sinks, sliding windows, YaRN), every layer computed in full,
but its attention output and expert down projections (weights and biases)
are zero, so the last hidden state is the last token's embedding: the model
is a bigram model. The tokens of the script get one-hot embeddings, and the
output row of each one's successor reads that one-hot (logit 16 x the norm
weight, against about 0.3 for every other token), so greedy decoding follows
the script from the prompt's last token, the end of "assistant" in the
generation prompt's "<|start|>assistant".

The vocabulary is the default model's (SmolLM2) plus gpt-oss's harmony
tokens (<|start|> <|end|> <|message|> <|channel|> <|constrain|> <|return|>
<|call|>, control tokens; EOS <|return|>), and the chat template is
gpt-oss's own (../shared/testdata/chat-templates/openai-gpt-oss-120b.jinja).

A bigram model cannot write a token twice with different successors, so each
token id appears once in the script: text is spelled with tokens not used
before ("assistant" the second time as "assis" "tant"), and a marker the
script writes n times is n tokens of the vocabulary (n - 1 copies, typed
user-defined, before the original): the harmony parser reads text, so every
copy is the marker. The script:

  <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>
    final<|message|>ANSWER<|return|>
  or, where "final" is masked (tool_choice "required": harmony_constraint.h),
    commentary to=functions.get_weather <|constrain|>json<|message|>ARGS<|call|>

The branch is the second-best successor of the spelled "<|channel|>": its
output row reads the one-hot at 0.6 of the first's weight.

Usage: make_harmony_model.py --out FILE [--vocab-model GGUF] [--template JINJA]
Prints the script as JSON (reasoning, answer, tool, arguments) on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_random_models as rm  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = REPO.parent / "shared" / "testdata" / "chat-templates" / "openai-gpt-oss-120b.jinja"
MARKERS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
CONTROL, USER_DEFINED = 3, 4
REASONING = "The user wants the forecast for Paris, so I will call the tool"
ANSWER = "It is sunny there!"
TOOL, ARGS = "get_weather", '{"city": "Paris"}'
PROMPT_LAST = "assistant"  # the generation prompt's last word (its last token starts the script)
PRIMARY, SECOND = 16.0, 0.6 * 16.0
SEED = 1010


def byte_decoder() -> dict:
    """GPT-2's byte-level BPE: the character that stands for each byte, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_texts(vocab: dict) -> list:
    """Each token's bytes (None for tokens that are not ordinary text)."""
    dec = byte_decoder()
    out = []
    for tok, typ in zip(vocab["tokens"], vocab["types"]):
        if typ != 1 or any(c not in dec for c in tok):
            out.append(None)
        else:
            out.append(bytes(dec[c] for c in tok))
    return out


def spell(segments: list, texts: list, marker_ids: dict, used: set) -> list:
    """Token ids for segments (markers and text), no id in used or twice: a
    marker's next free copy, text the longest free ordinary tokens
    (depth-first, longest first, a bounded search). Adds the ids to used."""
    by_first = {}
    for i, t in enumerate(texts):
        if t:
            by_first.setdefault(t[0], []).append(i)
    for ids in by_first.values():
        ids.sort(key=lambda i: -len(texts[i]))
    budget = [100000]

    def text_ids(s: bytes, taken: set):
        if not s:
            return []
        for i in by_first.get(s[0], []):
            if i not in taken and s.startswith(texts[i]):
                budget[0] -= 1
                if budget[0] < 0:
                    return None
                rest = text_ids(s[len(texts[i]):], taken | {i})
                if rest is not None:
                    return [i] + rest
        return None

    out = []
    for seg in segments:
        if seg in marker_ids:
            free = [i for i in marker_ids[seg] if i not in used]
            if not free:
                raise SystemExit(f"no free copy of {seg}")
            ids = free[:1]
        else:
            ids = text_ids(seg.encode(), used)
            if ids is None:
                raise SystemExit(f"cannot spell {seg!r} with unused tokens")
        used.update(ids)
        out.extend(ids)
    return out


def bpe(word: str, vocab: dict) -> list:
    """The byte-level BPE ids of one pre-tokenized ASCII word (merges by rank)."""
    rank = {tuple(m.split(" ")): i for i, m in enumerate(vocab["merges"])}
    parts = list(word)
    while len(parts) > 1:
        pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        r, i = min(pairs)
        if r == len(rank):
            break
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    ids = {t: i for i, t in enumerate(vocab["tokens"])}
    return [ids[p] for p in parts]


def split_markers(text: str) -> list:
    """"a<|b|>c" -> ["a", "<|b|>", "c"] (markers kept whole)."""
    out, i = [], 0
    while i < len(text):
        j = min([k for k in (text.find(m, i) for m in MARKERS) if k >= 0], default=len(text))
        if j > i:
            out.append(text[i:j])
        if j == len(text):
            break
        m = next(m for m in MARKERS if text.startswith(m, j))
        out.append(m)
        i = j + len(m)
    return out


def write(path: Path, vocab_model: str, template: str) -> dict:
    base = rm.vocab_fields(vocab_model)
    head_text = f"<|channel|>analysis<|message|>{REASONING}<|end|><|start|>assistant<|channel|>"
    final_text = f"final<|message|>{ANSWER}<|return|>"
    call_text = f"commentary to=functions.{TOOL} <|constrain|>json<|message|>{ARGS}<|call|>"
    # Each marker as many times as the script writes it: copies first (user
    # defined: text, as the tokenizer makes the originals), the original last
    # (control, as in gpt-oss's GGUF; the prompt's markers encode to it).
    segments = split_markers(head_text + final_text + call_text)
    tokens, types = list(base["tokens"]), list(base["types"])
    marker_ids = {}
    for m in MARKERS:
        for copy in range(max(1, segments.count(m))):
            marker_ids.setdefault(m, []).append(len(tokens))
            tokens.append(m)
            types.append(USER_DEFINED if copy + 1 < segments.count(m) else CONTROL)
    vocab = dict(base, tokens=tokens, types=types)
    vocab["eos"] = marker_ids["<|return|>"][-1]
    texts = token_texts(vocab)
    prompt_last = bpe(PROMPT_LAST, vocab)
    start = prompt_last[-1]

    used = set(prompt_last)
    head = spell(split_markers(head_text), texts, marker_ids, used)
    final = spell(split_markers(final_text), texts, marker_ids, used)
    call = spell(split_markers(call_text), texts, marker_ids, used)
    chain = [start] + head + final
    edges = [(a, b, PRIMARY) for a, b in zip(chain, chain[1:])]
    edges.append((head[-1], call[0], SECOND))
    edges += [(a, b, PRIMARY) for a, b in zip(call, call[1:])]
    sources = sorted({a for a, _, _ in edges})
    assert len(sources) <= rm.N_EMBD, "more script tokens than dimensions"
    dim = {t: d for d, t in enumerate(sources)}

    m = rm.GPT_OSS
    rng = np.random.default_rng(SEED)
    n_vocab = len(vocab["tokens"])
    w = gguf.GGUFWriter(str(path), m.arch)
    w.add_name("spate harmony script model")
    rm.add_gpt_oss_keys(w, 4096)
    rm.add_vocab(w, vocab)
    w.add_chat_template(template)

    embd = (rng.standard_normal((n_vocab, rm.N_EMBD)) * 0.5).astype(np.float32)
    for t, d in dim.items():
        embd[t] = 0.0
        embd[t, d] = 1.0
    rm.add_typed(w, "token_embd.weight", embd, m.type_of("embd"))
    w.add_tensor("output_norm.weight", np.ones(rm.N_EMBD, np.float32))
    n_q, n_kv = rm.N_HEAD * rm.HEAD_DIM, rm.N_HEAD_KV * rm.HEAD_DIM
    for l in range(rm.N_LAYER):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", rm.norm_weight(rng, rm.N_EMBD))
        for name, n_out in (("attn_q", n_q), ("attn_k", n_kv), ("attn_v", n_kv)):
            rm.add_typed(w, p + name + ".weight", rm.matrix(rng, n_out, rm.N_EMBD), m.type_of(name, l))
            w.add_tensor(p + name + ".bias", rm.bias(rng, n_out))
        # Nothing the attention or the experts compute reaches the residual stream.
        rm.add_typed(w, p + "attn_output.weight", np.zeros((rm.N_EMBD, n_q), np.float32), m.type_of("attn_output", l))
        w.add_tensor(p + "attn_output.bias", np.zeros(rm.N_EMBD, np.float32))
        w.add_tensor(p + "attn_sinks.weight", rm.bias(rng, rm.N_HEAD, scale=1.0))
        w.add_tensor(p + "post_attention_norm.weight", rm.norm_weight(rng, rm.N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.weight", rm.matrix(rng, m.n_expert, rm.N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.bias", rm.bias(rng, m.n_expert))
        for name in ("gate", "up"):
            rm.add_typed(w, p + f"ffn_{name}_exps.weight", rm.experts(rng, m.n_expert, m.n_ff_exp, rm.N_EMBD),
                         m.type_of(f"{name}_exps", l))
            w.add_tensor(p + f"ffn_{name}_exps.bias", rm.bias(rng, m.n_expert, m.n_ff_exp))
        rm.add_typed(w, p + "ffn_down_exps.weight", np.zeros((m.n_expert, rm.N_EMBD, m.n_ff_exp), np.float32),
                     m.type_of("down_exps", l))
        w.add_tensor(p + "ffn_down_exps.bias", np.zeros((m.n_expert, rm.N_EMBD), np.float32))
    out = (0.02 * rng.standard_normal((n_vocab, rm.N_EMBD))).astype(np.float32)
    for a, b, weight in edges:
        out[b, :] = 0.0
    for a, b, weight in edges:
        # The norm makes the one-hot sqrt(N_EMBD) long: weight / 16 gives a logit of weight.
        out[b, dim[a]] = weight / np.sqrt(rm.N_EMBD)
    rm.add_typed(w, "output.weight", out, m.type_of("output"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"reasoning": REASONING, "answer": ANSWER, "tool": TOOL, "arguments": ARGS,
            "n_script_tokens": len(set(chain) | set(call))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-model", default=os.environ.get("SPATE_MODEL", rm.DEFAULT_VOCAB_MODEL))
    ap.add_argument("--template", default=str(DEFAULT_TEMPLATE))
    args = ap.parse_args()
    template = Path(args.template)
    if not template.exists():
        print(f"no gpt-oss chat template at {template}", file=sys.stderr)
        return 1
    print(json.dumps(write(Path(args.out), args.vocab_model, template.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
