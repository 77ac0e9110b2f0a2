#!/usr/bin/env python3
"""Detects spate's green-list watermark (TGI's `watermark: true`; Kirchenbauer et al., 2023).

The server adds --watermark-delta to the logits of the "green" tokens at each step; which tokens
are green depends only on the token before (engine/sampler.h, watermark_green). This script counts
the green tokens of a text and computes the z-score of that count against chance:

    z = (green - gamma * T) / sqrt(T * gamma * (1 - gamma))

over the T scored tokens (every token after the first; with --prompt the first too, after the
prompt's last token). Plain text gives |z| of a few at most; watermarked text of ~100 tokens, z
well above 4 (at gamma 0.5, delta 2 and sampled decoding).

The text is tokenized by the server's POST /tokenize (no special tokens added), or token ids are
given directly (--ids, e.g. a /generate response's details.tokens ids).

Usage:
  watermark_detect.py --url http://127.0.0.1:8000 --text "..." [--prompt "..."] [--gamma 0.5]
  watermark_detect.py --ids 12,345,6789 [--prev 42] [--gamma 0.5]
Prints a JSON object {"tokens": T, "green": G, "gamma": g, "z": z}.
"""
import argparse
import json
import math
import sys
import urllib.request

MASK = (1 << 64) - 1
SALT = 0x5350415445574D4B  # "SPATEWMK"


def mix64(z):
    """The splitmix64 finalizer, as in engine/sampler.cpp (64-bit wrap-around)."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def green(prev, token, gamma):
    """Whether token is on the green list after prev (watermark_green in engine/sampler.h)."""
    key = mix64((prev & 0xFFFFFFFF) ^ SALT)
    h = mix64(key ^ (token & 0xFFFFFFFF))
    return (h >> 11) < int(gamma * float(1 << 53))


def score(ids, gamma, prev=None):
    """{"tokens", "green", "gamma", "z"} of token ids; prev: the token before ids[0], if known."""
    seq = ([prev] if prev is not None else []) + list(ids)
    pairs = list(zip(seq, seq[1:]))
    t = len(pairs)
    g = sum(1 for a, b in pairs if green(a, b, gamma))
    z = (g - gamma * t) / math.sqrt(t * gamma * (1 - gamma)) if t else 0.0
    return {"tokens": t, "green": g, "gamma": gamma, "z": z}


def tokenize(url, text, api_key=None, add_special=False):
    body = json.dumps({"prompt": text, "add_special_tokens": add_special}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    if api_key:
        req.add_header("Authorization", "Bearer " + api_key)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["tokens"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="the spate server (for /tokenize)")
    ap.add_argument("--api-key")
    ap.add_argument("--text", help="the text to test")
    ap.add_argument("--prompt", help="the prompt the text followed (scores the text's first token too)")
    ap.add_argument("--ids", help="comma-separated token ids instead of --text")
    ap.add_argument("--prev", type=int, help="with --ids: the token before the first id")
    ap.add_argument("--gamma", type=float, default=0.5, help="the server's --watermark-gamma (default 0.5)")
    a = ap.parse_args(argv)
    if not 0 < a.gamma < 1:
        ap.error("--gamma must be in (0, 1)")
    prev = a.prev
    if a.ids is not None:
        ids = [int(x) for x in a.ids.split(",") if x.strip()]
    elif a.text is not None and a.url:
        ids = tokenize(a.url, a.text, a.api_key)
        if a.prompt is not None:
            prompt_ids = tokenize(a.url, a.prompt, a.api_key, add_special=True)
            prev = prompt_ids[-1] if prompt_ids else None
    else:
        ap.error("give --ids, or --text with --url")
    print(json.dumps(score(ids, a.gamma, prev)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
