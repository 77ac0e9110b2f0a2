"""A list of prompts on /v1/completions (issue 13), with the official openai
SDK on the real server: choices are indexed per prompt x n, each prompt's
output is what it gets alone, usage counts every prompt."""

import openai
import pytest

from spate_server import MODEL_NAME, SpateServer


@pytest.fixture(scope="module")
def client():
    s = SpateServer()
    try:
        s.wait_ready()
        yield openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    finally:
        s.stop()


PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "Once upon a time"]


def test_list_of_prompts_matches_single_requests(client):
    alone = [client.completions.create(model=MODEL_NAME, prompt=p, max_tokens=8, temperature=0) for p in PROMPTS]
    both = client.completions.create(model=MODEL_NAME, prompt=PROMPTS, max_tokens=8, temperature=0)
    assert [c.index for c in both.choices] == [0, 1, 2]
    assert [c.text for c in both.choices] == [a.choices[0].text for a in alone]
    assert both.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone)
    assert both.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)


def test_prompts_times_n_with_echo_and_token_ids(client):
    ids = client.completions.create(model=MODEL_NAME, prompt=PROMPTS[1], max_tokens=1, echo=True, logprobs=0)
    r = client.completions.create(model=MODEL_NAME, prompt=[PROMPTS[0], PROMPTS[2]], n=2, max_tokens=4,
                                  temperature=0.8, seed=7, echo=True)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text.startswith(PROMPTS[0]) and r.choices[1].text.startswith(PROMPTS[0])
    assert r.choices[2].text.startswith(PROMPTS[2]) and r.choices[3].text.startswith(PROMPTS[2])
    # Each prompt's samples use seed, seed + 1: the second prompt's first choice is that prompt alone with the seed.
    alone = client.completions.create(model=MODEL_NAME, prompt=PROMPTS[2], max_tokens=4, temperature=0.8, seed=7, echo=True)
    assert r.choices[2].text == alone.choices[0].text
    tok = client.completions.create(model=MODEL_NAME, prompt=[[1, 2, 3], [4, 5]], max_tokens=2, temperature=0)
    assert len(tok.choices) == 2 and tok.usage.prompt_tokens == 5
    assert ids.choices[0].text


def test_streamed_list_of_prompts(client):
    stream = client.completions.create(model=MODEL_NAME, prompt=PROMPTS, max_tokens=6, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    texts = {}
    finished = set()
    usage = None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finished.add(c.index)
    assert finished == {0, 1, 2}
    whole = client.completions.create(model=MODEL_NAME, prompt=PROMPTS, max_tokens=6, temperature=0)
    assert [texts[i] for i in range(3)] == [c.text for c in whole.choices]
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_bad_prompt_lists_are_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt=["ok", ""], max_tokens=2)
    assert e.value.body["param"] == "prompt[1]"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt=["ok", "x " * 9000], max_tokens=2)
    assert e.value.body["param"] == "prompt[1]" and e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt=["a"] * 20, n=16, max_tokens=2)
    assert e.value.body["param"] == "n"
