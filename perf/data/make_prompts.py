#!/usr/bin/env python3
"""Generates the prompt files of the serving benchmarks (perf/scripts/serving_bench.py,
perf/bench/engine_serving_bench.cpp) and calibrates their lengths with the model's
own tokenizer (`spate tokenize`).

Usage: perf/data/make_prompts.py [--spate build/spate] [--model GGUF] [--out perf/data]

Writes (JSON lines, UTF-8, deterministic for a given tokenizer):
  throughput.jsonl  32 x {"id", "prompt", "tokens"}: ~120-token prompts
  prefix.jsonl      16 x {"id", "turn1", "turn1_tokens", "turn2_user"}: a
                    ~1000-token first turn ending in "\\nAssistant:", and a short
                    second user message
  chunked.jsonl     16 x {"kind": "stream", ...} ~64-token prompts (8 per phase)
                    and 4 x {"kind": "long", ...} ~2000-token prompts

"tokens" is the count from `spate tokenize --special` (the way a server
tokenizes a plain prompt string; SmolLM2 adds no BOS). The text is synthetic
English made from the word lists below with a seeded RNG. Within each file no
two prompts share a token prefix longer than MAX_SHARED_PREFIX tokens, so a
prefix cache cannot serve one prompt from another (checked; the script fails
otherwise).
"""
import argparse
import json
import os
import random
import subprocess
import sys

MAX_SHARED_PREFIX = 4

NAMES = """Amara Bastien Celia Dmitri Elowen Farid Greta Hiroshi Ingrid Jonas Kalani Leona Matteo Nadia
Oskar Priya Quentin Rosalind Soren Tamsin Ulric Vesna Wendell Xiomara Yusuf Zelda Anouk Bruno Cosima
Dario Esme Fintan Gideon Halima Ilse Jasper Kiran Linnea Magnus Noor Odile Pavel Rafaela Stellan
Thea Umberto Valeria Wilhelmina Yannick""".split()
PLACES = """harbor orchard observatory library quarry lighthouse monastery greenhouse bakery foundry
vineyard archive marketplace railway-station boathouse workshop laboratory courtyard mill
tannery apiary granary ferry-dock glassworks bell-tower museum print-shop cannery""".split()
ADJ = """quiet restless amber crooked gentle hollow luminous brittle patient stubborn weathered
curious silver narrow ancient careful bright dusty clever heavy tidy sudden distant humble
polished faded secret tangled generous peculiar sturdy nimble solemn cheerful""".split()
NOUNS = """lantern ledger compass kettle bridge engine garden letter violin anchor blanket clock
ladder mirror orchard parcel quill ribbon saddle telescope umbrella wagon basket candle
harp map notebook pendulum rope sail teapot barrel chimney coin drum feather hammer key
loom net oar pebble scarf spindle thimble whistle""".split()
VERBS = """repaired carried painted measured polished gathered counted mended described traded
borrowed lifted sketched weighed sorted wrapped tested delivered cleaned hid found opened
studied copied returned assembled inspected labelled""".split()
ADVS = """slowly carefully quietly eagerly patiently suddenly gladly briskly silently proudly
cautiously warmly steadily boldly neatly gently""".split()
TIMES = ["at dawn", "before noon", "after supper", "during the storm", "on market day",
         "in late autumn", "at midnight", "before the first frost", "after the harvest",
         "on a grey morning", "in early spring", "while the bells rang", "on the longest day"]
QUESTIONS = ["Which object mattered most, and why?", "Who should be thanked first?",
             "What happened right after that?", "Can you shorten this to two sentences?",
             "Which place would you visit first?", "What is missing from these notes?",
             "Does anything here contradict itself?", "Who was the most careful person?"]


def sentence(rng):
    """One sentence from a few templates; every slot is drawn independently."""
    n, p, a, o, v, t, d = (rng.choice(NAMES), rng.choice(PLACES), rng.choice(ADJ), rng.choice(NOUNS),
                           rng.choice(VERBS), rng.choice(TIMES), rng.choice(ADVS))
    a2, o2, n2 = rng.choice(ADJ), rng.choice(NOUNS), rng.choice(NAMES)
    forms = [
        f"{n} {d} {v} the {a} {o} at the {p} {t}.",
        f"{t.capitalize()}, {n} {v} a {a} {o} and gave it to {n2}.",
        f"The {a} {o} near the {p} was {v} by {n} {t}.",
        f"Nobody at the {p} remembered who had {v} the {a2} {o2}, but {n} suspected {n2}.",
        f"{n} wrote that the {o} felt {a} and the {o2} looked {a2}.",
        f"When {n2} arrived at the {p}, the {a} {o} had already been {v}.",
        f"{n} asked {n2} whether the {o2} belonged to the {p}.",
    ]
    return rng.choice(forms).replace("-", " ")


class Tokenizer:
    def __init__(self, spate, model):
        self.cmd = [spate, "tokenize", "--special", "--log-level", "error"] + (["--model", model] if model else [])

    def ids(self, text):
        r = subprocess.run(self.cmd, input=text.encode(), capture_output=True, check=False)
        if r.returncode != 0:
            sys.exit(f"{' '.join(self.cmd)} failed: {r.stderr.decode(errors='replace')}")
        return json.loads(r.stdout)

    def count(self, text):
        return len(self.ids(text))


def fit(tok, words, target, head="", tail=""):
    """Returns (text, n) with text = head + words[:k] + tail for the largest k
    whose token count n is <= target (and >= target - 3 when words suffice)."""
    def build(k):
        return head + " ".join(words[:k]) + tail
    k = max(1, min(len(words), int(target / 1.3)))
    best = None
    for _ in range(40):
        text = build(k)
        n = tok.count(text)
        if n <= target:
            best = (text, n, k)
            if n >= target - 3 or k == len(words):
                return text, n
            k = min(len(words), k + max(1, int((target - n) / 1.4)))
        else:
            k = max(1, k - max(1, int((n - target) / 1.1)))
            if best and k <= best[2]:
                return best[0], best[1]
    if best is None:
        sys.exit(f"could not fit {target} tokens")
    return best[0], best[1]


def words_of(rng, n_sentences):
    return " ".join(sentence(rng) for _ in range(n_sentences)).split(" ")


def opening(rng, i):
    """A distinct first sentence: the i-th name starts it, so prefixes differ after 1-2 tokens."""
    return f"{NAMES[i % len(NAMES)]} {rng.choice(VERBS)} the {rng.choice(ADJ)} {rng.choice(NOUNS)}."


def check_prefixes(tok, texts, what):
    ids = [tok.ids(t) for t in texts]
    worst = 0
    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            a, b = ids[i], ids[j]
            k = 0
            while k < min(len(a), len(b)) and a[k] == b[k]:
                k += 1
            worst = max(worst, k)
    if worst > MAX_SHARED_PREFIX:
        sys.exit(f"{what}: two prompts share {worst} leading tokens (> {MAX_SHARED_PREFIX})")
    return worst


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spate", default=os.path.join(repo, "build", "spate"))
    ap.add_argument("--model", default="")
    ap.add_argument("--out", default=here)
    args = ap.parse_args()
    tok = Tokenizer(args.spate, args.model)

    # Throughput: 32 prompts of ~120 tokens, each starting with a different name.
    rng = random.Random(20240601)
    thr = []
    for i in range(32):
        words = (opening(rng, i) + " " + " ".join(words_of(rng, 12))).split(" ")
        text, n = fit(tok, words, 120, tail=" Continue the notes:")
        thr.append({"id": i, "prompt": text, "tokens": n})
    # Names cycle after 48, so the opening also differs for all 32.
    shared = check_prefixes(tok, [p["prompt"] for p in thr], "throughput")
    print(f"throughput: {len(thr)} prompts, {sum(p['tokens'] for p in thr)} tokens "
          f"({min(p['tokens'] for p in thr)}-{max(p['tokens'] for p in thr)}), longest shared prefix {shared}",
          file=sys.stderr)

    # Prefix: 16 conversations, first turn ~1000 tokens.
    rng = random.Random(20240602)
    pre = []
    for i in range(16):
        head = f"User: {NAMES[(i * 5 + 3) % len(NAMES)]} kept these notes about the {PLACES[i % len(PLACES)].replace('-', ' ')}.\n"
        words = words_of(rng, 110)
        text, n = fit(tok, words, 1000, head=head, tail="\nPlease summarize them in one sentence.\nAssistant:")
        pre.append({"id": i, "turn1": text, "turn1_tokens": n, "turn2_user": QUESTIONS[i % len(QUESTIONS)]})
    shared = check_prefixes(tok, [p["turn1"] for p in pre], "prefix")
    print(f"prefix: {len(pre)} conversations, turn 1 {min(p['turn1_tokens'] for p in pre)}-"
          f"{max(p['turn1_tokens'] for p in pre)} tokens, longest shared prefix {shared}", file=sys.stderr)

    # Chunked: 16 short streaming prompts (8 per phase) and 4 long prompts.
    rng = random.Random(20240603)
    chk = []
    for i in range(16):
        words = (opening(rng, 17 + i) + " " + " ".join(words_of(rng, 8))).split(" ")
        text, n = fit(tok, words, 64, tail=" Continue the story:")
        chk.append({"kind": "stream", "id": i, "prompt": text, "tokens": n})
    for i in range(4):
        head = f"{PLACES[(i * 5 + 2) % len(PLACES)].replace('-', ' ').capitalize()} log, volume {i + 1}.\n"
        text, n = fit(tok, words_of(rng, 220), 2000, head=head, tail="\nSummary:")
        chk.append({"kind": "long", "id": i, "prompt": text, "tokens": n})
    shared = check_prefixes(tok, [p["prompt"] for p in chk], "chunked")
    print(f"chunked: 16 stream prompts {min(p['tokens'] for p in chk if p['kind'] == 'stream')}-"
          f"{max(p['tokens'] for p in chk if p['kind'] == 'stream')} tokens, 4 long prompts "
          f"{min(p['tokens'] for p in chk if p['kind'] == 'long')}-{max(p['tokens'] for p in chk if p['kind'] == 'long')} "
          f"tokens, longest shared prefix {shared}", file=sys.stderr)

    for name, rows in (("throughput.jsonl", thr), ("prefix.jsonl", pre), ("chunked.jsonl", chk)):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
