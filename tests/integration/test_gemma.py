"""Gemma 3 270M Q4_K_M, the second real model (scripts/fetch-model.sh
gemma3-270m; SPATE_GEMMA_MODEL overrides the path): its 262k-entry
SentencePiece vocabulary against llama.cpp's tokenizer
(fixtures/gemma3_270m_tokenizer.json), greedy completions through the server
against llama.cpp's (fixtures/gemma3_270m_q4_k_m_greedy.json; the C++ test
test_reference_llamacpp.cpp checks the logits step by step), and chat with
etc/chat-templates/gemma3.jinja."""
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import openai
import pytest

from spate_server import REPO, SPATE_BIN, SpateServer

FIXTURES = Path(__file__).parent / "fixtures"


def _gemma_path() -> Path:
    if os.environ.get("SPATE_GEMMA_MODEL"):
        return Path(os.environ["SPATE_GEMMA_MODEL"])
    cache = os.environ.get("SPATE_CACHE_DIR")
    base = Path(cache) if cache else Path.home() / ".cache" / "spate"
    return base / "models" / "gemma-3-270m-q4_k_m.gguf"


GEMMA = _gemma_path()
if not GEMMA.exists():
    pytest.fail(f"Gemma model missing at {GEMMA}: run scripts/fetch-model.sh gemma3-270m", pytrace=False)


def tokenize(text, special=False):
    p = subprocess.run([str(SPATE_BIN), "tokenize", "--model", str(GEMMA)] + (["--special"] if special else []),
                       input=text.encode(), capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout)


TOKENIZER = json.loads((FIXTURES / "gemma3_270m_tokenizer.json").read_text())


@pytest.mark.parametrize("vec", TOKENIZER["vectors"], ids=lambda v: v["name"])
def test_tokenizer_matches_llama_cpp(vec):
    assert tokenize(vec["text"]) == vec["ids"]
    assert tokenize(vec["text"], special=True) == vec.get("ids_add_special_parse_special", vec["ids_parse_special"])


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--chat-template", REPO / "etc" / "chat-templates" / "gemma3.jinja", "--max-model-len", "4096",
                    model=GEMMA)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def client(s):
    return openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


GREEDY = json.loads((FIXTURES / "gemma3_270m_q4_k_m_greedy.json").read_text())


def clear_prefix(case):
    """Greedy steps before llama.cpp's first near-tie (margin <= 0.5) or end-of-generation token:
    there the continuation must be llama.cpp's exactly."""
    n = 0
    for step in case["steps"]:
        if step[2] <= 0.5 or (case["first_eog_step"] is not None and n >= case["first_eog_step"]):
            break
        n += 1
    return n


CLEAR = [c for c in GREEDY["cases"] if clear_prefix(c) >= 1]


def detokenize(s, ids):
    req = urllib.request.Request(s.base_url + "/detokenize", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"tokens": ids}).encode())
    return json.loads(urllib.request.urlopen(req, timeout=60).read())["prompt"]


# A divergence from llama.cpp is allowed only where llama.cpp's margin is at
# most this (Gemma's logit errors reach 1.55; see test_reference_llamacpp.cpp,
# where number_sequence step 10, margin 0.66, flipped on an AVX-512 machine).
DIVERGE_MARGIN = 1.0


@pytest.mark.parametrize("case", CLEAR, ids=lambda c: c["name"])
def test_greedy_completion_matches_llama_cpp(server, case):
    n = clear_prefix(case)
    r = client(server).completions.create(model=server.model_name, prompt=case["prompt_ids"], max_tokens=n, temperature=0)
    assert r.usage.prompt_tokens == len(case["prompt_ids"])
    assert r.usage.completion_tokens == n
    text = r.choices[0].text
    if text == detokenize(server, case["generated_ids"][:n]):
        return
    # The first step whose llama.cpp prefix is no longer a prefix of ours (a
    # token ending mid-character may not be, so the last prefix that is counts).
    matched = max([k for k in range(n + 1) if text.startswith(detokenize(server, case["generated_ids"][:k]))])
    margin = case["steps"][matched][2]
    assert margin <= DIVERGE_MARGIN, f"diverged at step {matched} with llama.cpp margin {margin}: {text!r}"


def test_most_cases_are_checked():
    assert len(CLEAR) >= 8, [c["name"] for c in CLEAR]


def test_chat_with_the_gemma_template(server):
    c = client(server)
    r = c.chat.completions.create(model=server.model_name, max_tokens=16, temperature=0,
                                  messages=[{"role": "system", "content": "Answer briefly."},
                                            {"role": "user", "content": "What is the capital of France?"}])
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.choices[0].message.content
    # The rendered prompt is Gemma's turn format: BOS, <start_of_turn>user, the system text folded in.
    # (--special adds the BOS, as the template's bos_token does.)
    expected = tokenize("<start_of_turn>user\nAnswer briefly.\n\nWhat is the capital of France?<end_of_turn>\n"
                        "<start_of_turn>model\n", special=True)
    assert expected[0] == 2 and expected.count(2) == 1  # <bos>
    assert r.usage.prompt_tokens == len(expected)
