"""The chunked-prefill budget measured after warmup (engine/engine_warmup.cpp,
measure_prefill_budget): logged as "Chunked prefill budget: N prompt tokens
per step", N a multiple of 8 in [40, 512] (40 = k_min_auto_prefill_budget);
not measured with --no-enable-chunked-prefill or an explicit
--max-num-batched-tokens. Real model, real server; a sanitized binary skips
warmup (spate_server.process_env), so these tests skip there."""
import re

import pytest

from spate_server import SANITIZED, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)
if SANITIZED:
    pytest.skip("a sanitized server skips warmup, which measures the budget", allow_module_level=True)

# Few warmup buckets so the server is ready quickly.
SMALL_BUCKETS = {"SPATE_PROMPT_SEQ_BUCKET_MAX": "64", "SPATE_DECODE_BS_BUCKET_MAX": "4",
                 "SPATE_DECODE_BLOCK_BUCKET_MAX": "16"}
BUDGET_RE = re.compile(r"Chunked prefill budget: (\d+) prompt tokens per step")


def serve(*args) -> str:
    """Starts a server, runs one completion through it, stops it; returns its log."""
    srv = SpateServer(*args, env=SMALL_BUCKETS)
    try:
        srv.wait_ready()
        status, body, _ = post_json(srv.base_url, "/v1/completions", {"model": srv.model_name, "prompt": "Once upon a time",
                                                                       "max_tokens": 4, "temperature": 0})
        assert status == 200 and body["usage"]["completion_tokens"] == 4, body
    finally:
        assert srv.stop() == 0, srv.log_text()[-3000:]
    return srv.log_text()


def test_auto_budget_is_logged_within_its_bounds():
    log = serve()
    budgets = [int(m) for m in BUDGET_RE.findall(log)]
    assert len(budgets) == 1, log[-3000:]
    assert 40 <= budgets[0] <= 512 and budgets[0] % 8 == 0, budgets


@pytest.mark.parametrize("args", [("--no-enable-chunked-prefill",), ("--max-num-batched-tokens", "64")])
def test_no_auto_budget_when_not_chunked_or_set(args):
    log = serve(*args)
    assert not BUDGET_RE.search(log), log[-3000:]
