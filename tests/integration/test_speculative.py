"""Speculative decoding (prompt lookup) through the real server and the
official openai SDK: greedy and seeded-sampled outputs, streamed and not, are
the same with speculation on (the default for every request) and off
(speculative_decoding: false); the spec_decode counters move; bad settings are
refused at start-up and a bad per-request field gets a 400."""
import subprocess

import openai
import pytest

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
GROUNDED = ("Repeat this text exactly: The quick brown fox jumps over the lazy dog while the cat sleeps "
            "on the warm mat by the door, and the dog barks at the moon.")


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--speculative-config", SPEC)
    s.wait_ready()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def chat(client, speculative, stream=False, **kw):
    args = dict(model=MODEL_NAME, messages=[{"role": "user", "content": GROUNDED}], max_tokens=48,
                extra_body={"speculative_decoding": speculative}, **kw)
    if not stream:
        r = client.chat.completions.create(**args)
        return r.choices[0].message.content, r.choices[0].finish_reason, r.usage.completion_tokens
    text, reason = "", None
    for chunk in client.chat.completions.create(stream=True, **args):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            reason = chunk.choices[0].finish_reason or reason
    return text, reason, None


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.9, seed=11)])
def test_output_is_the_same_with_and_without_speculation(server, client, sampling):
    before = server.metrics()
    off = chat(client, False, **sampling)
    on = chat(client, True, **sampling)
    assert on == off
    assert chat(client, True, stream=True, **sampling)[:2] == off[:2]
    after = server.metrics()
    assert after["spate:spec_decode_num_drafts_total"] > before["spate:spec_decode_num_drafts_total"]
    if sampling["temperature"] == 0:
        # Repeating the prompt: prompt lookup's drafts are mostly right.
        assert after["spate:spec_decode_num_accepted_tokens_total"] > before["spate:spec_decode_num_accepted_tokens_total"]
    per_pos = [after[f'spate:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}}'] for i in range(4)]
    assert per_pos == sorted(per_pos, reverse=True)  # a draft is kept only after every one before it
    assert sum(per_pos) == after["spate:spec_decode_num_accepted_tokens_total"]


def test_completions_with_stop_and_logprobs_match(client):
    args = dict(model=MODEL_NAME, prompt="one two three four one two three four one two three", max_tokens=24,
                temperature=0, stop=["four one"], logprobs=2)
    off = client.completions.create(extra_body={"speculative_decoding": False}, **args).choices[0]
    on = client.completions.create(**args).choices[0]
    assert on.text == off.text and on.finish_reason == off.finish_reason
    assert on.logprobs.tokens == off.logprobs.tokens
    assert on.logprobs.token_logprobs == pytest.approx(off.logprobs.token_logprobs, abs=0)


def test_bad_per_request_field_is_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                       extra_body={"speculative_decoding": "yes"})
    assert "speculative_decoding" in str(e.value)


@pytest.mark.parametrize("config, needle", [
    ("{nope", "not valid JSON"),
    ('{"method": "ngram"}', 'needs "num_speculative_tokens"'),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "must be in [1, 16]"),
    ('{"method": "ngram", "num_speculative_tokens": 17}', "must be in [1, 16]"),
    ('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 4, "prompt_lookup_max": 2}',
     '"prompt_lookup_max" (2) must be >= "prompt_lookup_min" (4)'),
    ('{"method": "ngram", "num_speculative_tokens": "4"}', "must be an integer"),
    ('{"method": "eagle", "num_speculative_tokens": 4}', 'unsupported method "eagle"'),
    ('{"method": "ngram", "num_speculative_tokens": 4, "k": 1}', 'unknown key "k"'),
    ('[1]', "must be a JSON object"),
    ('{"method": "ngram", "num_speculative_tokens": 4, "adaptive_k": 1}', '"adaptive_k" must be true or false'),
])
def test_bad_speculative_config_is_refused_at_start(config, needle):
    p = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--port", "1",
                        "--speculative-config", config], capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, err
    assert "--speculative-config" in err and needle in err, err
