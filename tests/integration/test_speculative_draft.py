"""Draft-model speculative decoding on a requantized pair through the real
server: the target is the default model requantized to Q8_0 (with the PyPI
gguf package, tests/reference/requantize.py), its draft the default Q4_1
itself. Outputs, greedy and seeded-sampled, alone and four at once (speculating
at every batch size), equal those with speculation off; most drafts are
accepted; a draft of another architecture or vocabulary is refused at start-up."""
import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

REPO = Path(__file__).resolve().parents[2]
PROMPTS = ["Write a short poem about rain.", "What is the capital of France?", "List three uses of a brick.",
           "Explain what a compiler does in two sentences."]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    out = tmp_path_factory.mktemp("pair") / "smollm2-q8_0.gguf"
    subprocess.run([sys.executable, str(REPO / "tests/reference/requantize.py"), str(SPATE_MODEL), str(out),
                    "--type", "Q8_0"], check=True, capture_output=True, timeout=600)
    return out


@pytest.fixture(scope="module")
def server(target):
    spec = f'{{"model": "{SPATE_MODEL}", "num_speculative_tokens": 4, "disable_by_batch_size": 0}}'
    s = SpateServer("--speculative-config", spec, model=target)
    s.wait_ready()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def chat(client, prompt, speculative, **kw):
    r = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": prompt}], max_tokens=48,
                                       extra_body={"speculative_decoding": speculative}, **kw)
    return r.choices[0].message.content, r.choices[0].finish_reason, r.usage.completion_tokens


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.8, seed=5)])
def test_draft_model_output_equals_plain_alone_and_batched(server, client, sampling):
    plain = [chat(client, p, False, **sampling) for p in PROMPTS]
    before = server.metrics()
    alone = [chat(client, p, True, **sampling) for p in PROMPTS]
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        batched = list(pool.map(lambda p: chat(client, p, True, **sampling), PROMPTS))
    assert alone == plain
    assert batched == plain
    after = server.metrics()
    drafted = after["spate:spec_decode_num_draft_tokens_total"] - before["spate:spec_decode_num_draft_tokens_total"]
    accepted = after["spate:spec_decode_num_accepted_tokens_total"] - before["spate:spec_decode_num_accepted_tokens_total"]
    assert drafted > 0 and accepted > 0
    if sampling["temperature"] == 0:
        assert accepted > 0.5 * drafted  # the draft is the same weights, quantized coarser


def test_a_draft_with_another_architecture_or_vocabulary_is_refused():
    gemma = os.environ.get("SPATE_GEMMA_MODEL")
    if not gemma or not Path(gemma).exists():
        pytest.skip("SPATE_GEMMA_MODEL not set")
    p = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--port", "1", "--speculative-config",
                        f'{{"model": "{gemma}", "num_speculative_tokens": 4}}'], capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, err
    assert "--speculative-config: the draft model's architecture 'gemma3' differs from the target's 'llama'" in err


def test_a_missing_draft_is_refused(tmp_path):
    p = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--port", "1", "--speculative-config",
                        f'{{"model": "{tmp_path}/none.gguf", "num_speculative_tokens": 4}}'], capture_output=True,
                       timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2 and "--speculative-config: the draft model: cannot open model file" in err, err
