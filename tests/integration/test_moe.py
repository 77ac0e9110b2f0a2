"""Mixture-of-experts models end to end (issue 35): a random-weight qwen3moe
served through `spate serve` with the official openai SDK, batch invariance
of its greedy tokens across concurrent requests, and the memory guards a
12-17 GB MoE file needs on a 24 GiB machine:

- a model whose repacked weights cannot fit the available memory is refused
  at start-up with a message naming what it needs (a sparse GGUF that declares
  ~280 GB of Q4_0 experts: nothing is read, the file costs no disk);
- an explicit --kv-cache-memory beyond what is left is refused at start-up;
  the default (auto) fits.

The small model comes from tests/reference/make_random_models.py in
SPATE_RANDOM_MODELS_DIR (scripts/test.sh makes it).
"""

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spate_server import SPATE_BIN, SPATE_MODEL, SpateServer, process_env

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
import gguf  # noqa: E402
from make_random_models import vocab_fields  # noqa: E402

RANDOM_DIR = Path(os.environ.get("SPATE_RANDOM_MODELS_DIR", REPO / "build" / "random-models"))
MOE_MODEL = RANDOM_DIR / "random-qwen3moe.gguf"

needs_moe = pytest.mark.skipif(not MOE_MODEL.is_file() and os.environ.get("SPATE_REQUIRE_TESTDATA") != "1",
                               reason=f"no random qwen3moe model at {MOE_MODEL}")


def write_sparse_moe(path: Path, n_layer=48, n_embd=4096, n_ff_exp=8192, n_expert=128):
    """A qwen3moe GGUF whose tensor data is one hole: the header is real, the
    weights read as zeros, and the declared size (Q4_0) is n_layer x 3 experts'
    matrices. Returns the declared tensor bytes."""
    q4_0, f32 = gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.F32
    vocab = vocab_fields(str(SPATE_MODEL))
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_head_count(32)
    w.add_head_count_kv(4)
    w.add_key_length(128)
    w.add_value_length(128)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(8)
    w.add_expert_feed_forward_length(n_ff_exp)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    total = 0

    def tensor(name, shape, q=q4_0):
        nonlocal total
        n = int(np.prod(shape))
        if q == f32:
            nbytes = n * 4
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        else:
            block, size = gguf.GGML_QUANT_SIZES[q]
            nbytes = n // block * size
            w.add_tensor_info(name, tuple(shape[:-1]) + (shape[-1] // block * size,), np.dtype(np.uint8), nbytes,
                              raw_dtype=q)
        total += -(-nbytes // 32) * 32

    n_vocab = len(vocab["tokens"])
    tensor("token_embd.weight", (n_vocab, n_embd))
    tensor("output_norm.weight", (n_embd,), f32)
    for l in range(n_layer):
        p = f"blk.{l}."
        for name, n in (("attn_norm", n_embd), ("ffn_norm", n_embd), ("attn_q_norm", 128), ("attn_k_norm", 128)):
            tensor(p + name + ".weight", (n,), f32)
        tensor(p + "attn_q.weight", (4096, n_embd))
        tensor(p + "attn_k.weight", (512, n_embd))
        tensor(p + "attn_v.weight", (512, n_embd))
        tensor(p + "attn_output.weight", (n_embd, 4096))
        tensor(p + "ffn_gate_inp.weight", (n_expert, n_embd), f32)
        tensor(p + "ffn_gate_exps.weight", (n_expert, n_ff_exp, n_embd))
        tensor(p + "ffn_up_exps.weight", (n_expert, n_ff_exp, n_embd))
        tensor(p + "ffn_down_exps.weight", (n_expert, n_embd, n_ff_exp))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    start = -(-path.stat().st_size // 32) * 32
    os.truncate(path, start + total)
    return total


def run_serve(*args, timeout=120):
    return subprocess.run([str(SPATE_BIN), "serve", "--host", "127.0.0.1", "--port", "0", "--threads", "2", *args],
                          capture_output=True, text=True, timeout=timeout, env=process_env({"SPATE_SKIP_WARMUP": "1"}))


def test_a_model_too_big_for_memory_is_refused_at_start_up(tmp_path):
    path = tmp_path / "huge-qwen3moe.gguf"
    available = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemAvailable:"))
    per_layer = 3 * 128 * 8192 * 4096 * 18 // 32  # one layer's Q4_0 experts, bytes
    declared = write_sparse_moe(path, n_layer=max(48, 3 * available // per_layer + 1))
    assert declared > 2 * available, "the sparse model must exceed this machine's memory"
    p = run_serve("--model", str(path))
    assert p.returncode not in (0, None) and p.returncode > 0, p.returncode
    err = p.stderr
    assert "needs about" in err and "is available (MemAvailable)" in err, err[-2000:]
    assert "smaller quantization" in err


def test_an_explicit_kv_budget_beyond_memory_is_refused_and_auto_fits():
    p = run_serve("--model", str(SPATE_MODEL), "--kv-cache-memory", "64TiB")
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "--kv-cache-memory 64TiB does not fit" in p.stderr
    assert "use --kv-cache-memory auto or at most" in p.stderr


@needs_moe
def test_qwen3moe_serves_with_the_openai_sdk_streamed_and_not():
    from openai import OpenAI
    s = SpateServer(model=MOE_MODEL, env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        client = OpenAI(base_url=s.base_url + "/v1", api_key="none")
        r = client.completions.create(model=s.model_name, prompt="The experts", max_tokens=16, temperature=0)
        assert r.usage.completion_tokens == 16 and r.choices[0].text
        streamed = "".join(c.choices[0].text for c in client.completions.create(
            model=s.model_name, prompt="The experts", max_tokens=16, temperature=0, stream=True))
        assert streamed == r.choices[0].text
        assert "arch qwen3moe" in s.log_text()
    finally:
        assert s.stop() == 0


@needs_moe
def test_qwen3moe_greedy_tokens_do_not_depend_on_the_batch():
    """Eight different prompts, each alone and then all at once: the experts
    each row picks are shared with other rows in a step, yet every request's
    greedy tokens are identical."""
    from openai import OpenAI
    prompts = [f"Prompt {i}: " + "word " * (3 * i + 1) for i in range(8)]
    s = SpateServer(model=MOE_MODEL, env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        client = OpenAI(base_url=s.base_url + "/v1", api_key="none")

        def run(p):
            r = client.completions.create(model=s.model_name, prompt=p, max_tokens=24, temperature=0, logprobs=1)
            return r.choices[0].logprobs.tokens

        alone = [run(p) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(run, prompts))
        assert together == alone
    finally:
        assert s.stop() == 0
