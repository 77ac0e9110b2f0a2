"""The quantized KV cache dtypes end to end (--kv-cache-dtype q8_0 and
fp8_e5m2, kernels/ops.h kv_dtype): at the same --kv-cache-memory as f16 the
server gets more blocks (q8_0: 34 bytes per 32 values, 32/17 = 1.88x; fp8_e5m2:
one byte per value, 2x), the start-up log and spate:cache_config_info name the
dtype and the block count, greedy chat produces text, and q8_0's greedy output
for a request alone equals its output batched with other requests.
"""

import concurrent.futures
import re

import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

BUDGET = "48MiB"
DTYPES = ("f16", "q8_0", "fp8_e5m2")


@pytest.fixture(scope="module")
def servers():
    """One server per dtype, all with the same KV budget, started one after the other."""
    started = {}
    try:
        for dt in DTYPES:
            started[dt] = SpateServer("--kv-cache-memory", BUDGET, "--kv-cache-dtype", dt, "--max-model-len", "512")
            started[dt].wait_ready()
        yield started
    finally:
        for s in started.values():
            assert s.stop() == 0, s.log_text()[-3000:]


def logged_blocks(server) -> int:
    m = re.search(r"# CPU blocks: (\d+)", server.log_text())
    assert m, server.log_text()[-3000:]
    return int(m.group(1))


def cache_info(server) -> dict:
    """The labels of spate:cache_config_info."""
    keys = [k for k in server.metrics() if k.startswith("spate:cache_config_info{")]
    assert len(keys) == 1, keys
    return dict(re.findall(r'(\w+)="([^"]*)"', keys[0]))


def chat(server, content, max_tokens=24):
    st, body, _ = post_json(server.base_url, "/v1/chat/completions",
                            {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}],
                             "max_tokens": max_tokens, "temperature": 0})
    assert st == 200, body
    return body["choices"][0]["message"]["content"]


def test_more_blocks_at_the_same_budget(servers):
    blocks = {dt: logged_blocks(s) for dt, s in servers.items()}
    for dt, s in servers.items():
        info = cache_info(s)
        assert info["cache_dtype"] == dt, info
        assert int(info["num_cpu_blocks"]) == blocks[dt], (info, blocks)
        assert re.search(r"KV cache: .* per block of 16 tokens .*\b" + dt + r"\)", s.log_text()), s.log_text()[-3000:]
    # SmolLM2 (head_dim 64): f16 368640 bytes per block, q8_0 195840, fp8_e5m2 184320.
    assert 1.87 < blocks["q8_0"] / blocks["f16"] < 1.89, blocks
    assert abs(blocks["fp8_e5m2"] - 2 * blocks["f16"]) <= 1, blocks
    mem = {dt: int(cache_info(s)["kv_cache_memory_bytes"]) for dt, s in servers.items()}
    assert mem["q8_0"] == blocks["q8_0"] * 195840 and mem["fp8_e5m2"] == blocks["fp8_e5m2"] * 184320, mem


@pytest.mark.parametrize("dt", DTYPES)
def test_greedy_chat_produces_text(servers, dt):
    text = chat(servers[dt], "What is the capital of France? Answer in one sentence.")
    assert len(text.strip()) > 0
    assert "paris" in text.lower(), text


def test_q8_0_alone_equals_batched(servers):
    s = servers["q8_0"]
    prompts = ["Write a haiku about the sea.", "List three prime numbers.", "What is 12 times 12?",
               "Name a color of the rainbow.", "Say hello in French."]
    alone = [chat(s, p, 32) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        for _ in range(2):
            batched = list(pool.map(lambda p: chat(s, p, 32), prompts))
            assert batched == alone
    assert all(t.strip() for t in alone), alone
