"""`spate perplexity` (issue 40): llama-perplexity's method on the real default
model — chunks of --ctx-size from an empty cache, the second half of each
scored — over Debian's license texts (always installed with base-files).

Checked: the count of scored tokens follows the method; the result is the same
whatever --batch-size cuts the chunks into (batch invariance); natural text
scores far better than the same words shuffled; the f32 cache agrees with f16,
and the quantized caches stay close to it (q8_0 within 2%, fp8_e5m2 within 10%:
measured +0.4% and +5.6% on 3 chunks of 256);
bad arguments and a text too short get clear errors."""

import json
import math
import random
import subprocess
from pathlib import Path

import pytest

from spate_server import SPATE_BIN, SPATE_MODEL

LICENSES = Path("/usr/share/common-licenses")


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("ppl") / "licenses.txt"
    p.write_text("".join((LICENSES / n).read_text() for n in ("GPL-3", "Apache-2.0")))
    return p


def perplexity(*args, check=True):
    r = subprocess.run([str(SPATE_BIN), "perplexity", "--model", str(SPATE_MODEL), *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def ppl_json(*args):
    return json.loads(perplexity(*args, "--json").stdout.strip().splitlines()[-1])


def test_scores_the_second_half_of_each_chunk_whatever_the_batch_size(text):
    a = ppl_json("--file", text, "--ctx-size", 128, "--chunks", 6, "--batch-size", 128)
    assert a["chunks"] == 6 and a["tokens_scored"] == 6 * 63
    assert 1.0 < a["ppl"] < 1000.0 and a["ppl_error"] > 0
    b = ppl_json("--file", text, "--ctx-size", 128, "--chunks", 6, "--batch-size", 37)
    assert b["ppl"] == a["ppl"]  # the same logits, bit for bit, however the chunk is cut


def test_llama_perplexity_output_and_kv_dtypes_agree(text):
    out = perplexity("--file", text, "--ctx-size", 256, "--chunks", 3).stdout
    assert "[1]" in out and "[3]" in out
    final = [ln for ln in out.splitlines() if ln.startswith("Final estimate: PPL = ")]
    assert len(final) == 1
    f16 = float(final[0].split("=")[1].split("+/-")[0])
    f32 = ppl_json("--file", text, "--ctx-size", 256, "--chunks", 3, "--kv-cache-dtype", "f32")["ppl"]
    assert math.isclose(f16, f32, rel_tol=0.01), (f16, f32)
    q8 = ppl_json("--file", text, "--ctx-size", 256, "--chunks", 3, "--kv-cache-dtype", "q8_0")["ppl"]
    assert q8 != f16 and math.isclose(f16, q8, rel_tol=0.02), (f16, q8)
    fp8 = ppl_json("--file", text, "--ctx-size", 256, "--chunks", 3, "--kv-cache-dtype", "fp8_e5m2")["ppl"]
    assert fp8 != f16 and math.isclose(f16, fp8, rel_tol=0.10), (f16, fp8)


def test_shuffled_words_score_worse(text, tmp_path):
    words = text.read_text().split()
    random.Random(0).shuffle(words)
    shuffled = tmp_path / "shuffled.txt"
    shuffled.write_text(" ".join(words))
    good = ppl_json("--file", text, "--ctx-size", 128, "--chunks", 4)["ppl"]
    bad = ppl_json("--file", shuffled, "--ctx-size", 128, "--chunks", 4)["ppl"]
    assert bad > 3 * good, (good, bad)


def test_errors(text, tmp_path):
    r = perplexity(check=False)
    assert r.returncode == 2 and "--file is required" in r.stderr
    short = tmp_path / "short.txt"
    short.write_text("Too short to score.")
    r = perplexity("--file", short, check=False)
    assert r.returncode == 1 and "at least 1024" in r.stderr
    r = perplexity("--file", tmp_path / "missing.txt", check=False)
    assert r.returncode == 1 and "cannot open" in r.stderr
    r = perplexity("--file", text, "--kv-cache-dtype", "int3", check=False)
    assert r.returncode == 1 and "kv-cache-dtype" in r.stderr
