"""Engine refusals reach HTTP clients in the command line's words: the engine
names its configuration fields (kv_cache_bytes), `spate serve` maps them to
the flags that set them (--kv-cache-memory), as `spate generate` does."""

import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)


def test_kv_cache_refusal_names_the_flag():
    # 400 KiB holds one 16-token KV block of SmolLM2-135M: ~11 prompt tokens + 30 never fit.
    s = SpateServer("--kv-cache-memory", "400KiB", env={"SPATE_SKIP_WARMUP": "1"})
    try:
        s.wait_ready()
        st, body, _ = post_json(s.base_url, "/v1/completions", {"model": MODEL_NAME, "prompt": "hello " * 10, "max_tokens": 30})
        assert st == 400, body
        assert body["error"]["code"] == "context_length_exceeded"
        assert "cannot hold request" in body["error"]["message"]
        assert "increase --kv-cache-memory" in body["error"]["message"]
        assert "kv_cache_bytes" not in body["error"]["message"]
        # The server keeps serving a request that fits.
        st, body, _ = post_json(s.base_url, "/v1/completions", {"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2})
        assert st == 200, body
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]
