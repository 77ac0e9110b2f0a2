"""Batch invariance of constrained decoding: a constrained request's output is
the same alone and sharing its steps with other requests (constrained with
other grammars, or not), greedy and sampled with a seed."""

from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
    "required": ["name", "age", "tags"], "additionalProperties": False}


@pytest.fixture(scope="module")
def client():
    s = SpateServer().wait_ready()
    yield openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    s.stop()


def target(client, temperature):
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "Describe a fictional person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
        temperature=temperature, seed=42, max_tokens=200, logprobs=True)
    return r.choices[0].message.content, [t.token for t in r.choices[0].logprobs.content]


def neighbour(client, i):
    extra = [{}, {"extra_body": {"structured_outputs": {"regex": "[a-z]{3,20}( [a-z]{2,10}){0,4}"}}},
             {"response_format": {"type": "json_object"}}, {"extra_body": {"guided_choice": ["red", "green", "blue"]}}][i % 4]
    return client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": f"Say something, {i}."}],
                                          temperature=0.8, seed=i, max_tokens=60, **extra)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_constrained_output_is_the_same_alone_and_batched(client, temperature):
    alone = target(client, temperature)
    with ThreadPoolExecutor(8) as pool:
        others = [pool.submit(neighbour, client, i) for i in range(7)]
        batched = pool.submit(target, client, temperature)
        for f in others:
            f.result()
        assert batched.result() == alone
