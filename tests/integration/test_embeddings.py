"""/v1/embeddings on the real server with the official openai SDK: the OpenAI
shape (float and base64), both poolings against llama.cpp's embeddings
(fixtures/smollm2_embeddings.json, made by
tests/reference/make_embedding_fixtures.py), batching through the engine, and
clear errors for bad input.

Tolerance, stated once, and it must hold at every kernel level (scripts/test.sh
runs this file again under SPATE_MAX_ISA=avx2): each vector's cosine similarity
to llama.cpp's is at least 0.999, and no component differs by more than 0.025.
Both engines quantize activations to 8 bits per 32-block before each matmul,
at different points (llama.cpp also rounds attention to f16), and each kernel
level rounds its sums in its own order. For unit vectors the cosine bound
alone allows a component error up to sqrt(2 * 0.001) = 0.045; the max bound
says that the error is spread over the 576 components, not concentrated in
one (a component at 0.025 would hold a third of the squared error the cosine
allows). Measured on 2026-11-27 with the same build on one AVX-512 VNNI
machine, per level (SPATE_MAX_ISA):
                  max |component - llama.cpp|   min cosine
  last  scalar    0.0110                        0.99965
        avx2      0.0156                        0.99941
        avx512    0.0129                        0.99961
  mean  scalar    0.0069                        0.99978
        avx2      0.0057                        0.99983
        avx512    0.0057                        0.99983
The worst text is the same at every level (the accented one with an emoji,
last pooling: one position's state, where mean pooling averages the rounding
out), and the levels differ from each other there by up to 0.0046; 0.025 is
1.6 times the worst level's figure. 0.015, the bound before, was tuned on one
machine and failed on an AVX2-only one with the 0.0156 above."""
import base64
import json
import math
import struct
import threading
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

from spate_server import MODEL_NAME, SpateServer

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "smollm2_embeddings.json").read_text())


def server(pooling):
    s = SpateServer("--pooling", pooling, "--strict-model-names")
    s.wait_ready()
    return s


@pytest.fixture(scope="module")
def servers():
    started = {p: server(p) for p in ("last", "mean")}
    try:
        yield started
    finally:
        for s in started.values():
            s.stop()


def client(s):
    return openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_matches_llama_cpp(servers, pooling):
    r = client(servers[pooling]).embeddings.create(model=MODEL_NAME, input=FIXTURE["texts"], encoding_format="float")
    assert r.object == "list" and r.model == MODEL_NAME
    assert [d.index for d in r.data] == list(range(len(FIXTURE["texts"])))
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens
    for got, want in zip(r.data, FIXTURE["vectors"][pooling]):
        v = got.embedding
        assert len(v) == len(want) == 576
        assert abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-4  # normalized
        assert cosine(v, want) >= 0.999
        assert max(abs(x - y) for x, y in zip(v, want)) <= 0.025


def test_base64_is_the_same_vector(servers):
    c = client(servers["last"])
    f = c.embeddings.create(model=MODEL_NAME, input="same text", encoding_format="float").data[0].embedding
    raw = urllib.request.urlopen(urllib.request.Request(
        servers["last"].base_url + "/v1/embeddings", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"input": "same text", "encoding_format": "base64"}).encode()), timeout=60).read()
    b64 = json.loads(raw)["data"][0]["embedding"]
    decoded = struct.unpack(f"<{len(f)}f", base64.b64decode(b64))
    assert list(decoded) == pytest.approx(f, abs=1e-7)
    # The SDK's default asks for base64 and decodes it itself.
    assert c.embeddings.create(model=MODEL_NAME, input="same text").data[0].embedding == pytest.approx(f, abs=1e-7)


def test_token_inputs_and_batching_are_invariant(servers):
    c = client(servers["mean"])
    alone = c.embeddings.create(model=MODEL_NAME, input=FIXTURE["texts"][0], encoding_format="float").data[0].embedding
    results = []

    def many():
        results.append(c.embeddings.create(model=MODEL_NAME, input=FIXTURE["texts"], encoding_format="float"))

    threads = [threading.Thread(target=many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert r.data[0].embedding == alone  # bitwise, whatever shared the steps
    ids = json.loads(urllib.request.urlopen(urllib.request.Request(
        servers["mean"].base_url + "/tokenize", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"prompt": FIXTURE["texts"][0]}).encode()), timeout=60).read())["tokens"]
    by_ids = c.embeddings.create(model=MODEL_NAME, input=[ids], encoding_format="float").data[0].embedding
    assert by_ids == alone


@pytest.mark.parametrize("body,param", [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": 5}, "input"),
    ({"input": ["a", 5]}, "input[1]"),
    ({"input": [[1, 2], [-3]]}, "input[1][0]"),
    ({"input": [[999999]]}, "input[0][0]"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "x", "dimensions": 3}, "dimensions"),
    ({}, "input"),
])
def test_bad_input_gets_a_clear_400(servers, body, param):
    req = urllib.request.Request(servers["last"].base_url + "/v1/embeddings", method="POST",
                                 headers={"Content-Type": "application/json"}, data=json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=60)
    assert e.value.code == 400
    err = json.loads(e.value.read())["error"]
    assert err["param"] == param and err["message"]


def test_over_long_input_and_unknown_model(servers):
    c = client(servers["last"])
    with pytest.raises(openai.BadRequestError) as e:
        c.embeddings.create(model=MODEL_NAME, input="word " * 9000)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        c.embeddings.create(model="nope", input="x")
    # Still serving.
    assert len(c.embeddings.create(model=MODEL_NAME, input="ok", encoding_format="float").data[0].embedding) == 576
