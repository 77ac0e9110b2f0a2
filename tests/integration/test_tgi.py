"""TGI's native API (issue 54) with the official clients, unmodified, against the real server:
`text_generation.Client` (pip text-generation) and huggingface_hub's
`InferenceClient(base_url=...).text_generation`, streamed and not, details=True; POST /generate,
/generate_stream, / and GET /info; parameters (stop, seed, top_n_tokens, grammar, truncate,
return_full_text); bad inputs answered in TGI's error shape while the server keeps serving; and the
watermark's z-scores (scripts/watermark_detect.py) on sampled text with and without it."""

import json
import math
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import text_generation
from huggingface_hub import InferenceClient
from huggingface_hub.errors import ValidationError as HubValidationError

from spate_server import SpateServer, post_json

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import watermark_detect  # noqa: E402

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--kv-cache-memory", "256MiB")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def tgi(s):
    return text_generation.Client(s.base_url, timeout=300)


def hub(s):
    return InferenceClient(base_url=s.base_url, timeout=300)


def completion(s, prompt, n):
    st, body, _ = post_json(s.base_url, "/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})
    assert st == 200, body
    return body["choices"][0]["text"]


def tokenize(s, text):
    st, body, _ = post_json(s.base_url, "/tokenize", {"prompt": text})
    assert st == 200, body
    return body["tokens"]


def test_generate_with_the_text_generation_client(server):
    r = tgi(server).generate(PROMPT, max_new_tokens=12)
    assert r.generated_text == completion(server, PROMPT, 12), "the same greedy text as /v1/completions"
    d = r.details
    assert d.finish_reason in (text_generation.types.FinishReason.Length, text_generation.types.FinishReason.EndOfSequenceToken)
    assert d.generated_tokens == len(d.tokens) and 1 <= d.generated_tokens <= 12
    assert d.seed is None and d.prefill == []
    assert all(t.logprob is not None and t.logprob <= 0 for t in d.tokens)
    assert "".join(t.text for t in d.tokens if not t.special) == r.generated_text


def test_stream_with_the_text_generation_client(server):
    c = tgi(server)
    parts = list(c.generate_stream(PROMPT, max_new_tokens=12))
    assert parts and parts[-1].details is not None and parts[-1].generated_text is not None
    assert all(p.generated_text is None and p.details is None for p in parts[:-1])
    assert "".join(p.token.text for p in parts if not p.token.special) == parts[-1].generated_text
    assert parts[-1].generated_text == c.generate(PROMPT, max_new_tokens=12).generated_text
    assert parts[-1].details.generated_tokens == len(parts)


def test_huggingface_hub_text_generation(server):
    h = hub(server)
    text = h.text_generation(PROMPT, max_new_tokens=12)
    assert isinstance(text, str) and text == completion(server, PROMPT, 12)
    out = h.text_generation(PROMPT, max_new_tokens=12, details=True)
    assert out.generated_text == text
    assert out.details.finish_reason in ("length", "eos_token") and out.details.generated_tokens == len(out.details.tokens)
    assert all(isinstance(t.id, int) and isinstance(t.logprob, float) for t in out.details.tokens)
    chunks = list(h.text_generation(PROMPT, max_new_tokens=12, stream=True, details=True))
    assert chunks[-1].generated_text == text and chunks[-1].details.generated_tokens == len(chunks)
    assert chunks[-1].details.input_length == len(tokenize(server, PROMPT))
    assert "".join(h.text_generation(PROMPT, max_new_tokens=12, stream=True)) == text


def test_routes_and_their_shapes(server):
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 5}}
    st, g, _ = post_json(server.base_url, "/generate", body)
    assert st == 200 and set(g) == {"generated_text"}, g
    st, compat, _ = post_json(server.base_url, "/", body)
    assert st == 200 and compat == [g], "POST / answers an array"
    req = urllib.request.Request(server.base_url + "/generate_stream", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in r.read().decode().splitlines() if line.startswith("data:")]
    assert len(events) == 5 and events[-1]["generated_text"] == g["generated_text"]
    assert all(set(e) == {"index", "token", "top_tokens", "generated_text", "details"} for e in events)
    with urllib.request.urlopen(server.base_url + "/info", timeout=30) as r:
        info = json.load(r)
    assert info["model_id"] == server.model_name and info["max_total_tokens"] > info["max_input_tokens"] > 0
    assert info["max_best_of"] == 1 and info["max_stop_sequences"] == 4 and info["version"]
    assert server.metrics()['spate:api_requests_total{api="tgi"}'] >= 3


def test_parameters(server):
    c = tgi(server)
    whole = c.generate(PROMPT, max_new_tokens=12).generated_text
    words = whole.split()
    assert len(words) >= 2
    stop = words[1]
    r = c.generate(PROMPT, max_new_tokens=12, stop_sequences=[stop])
    assert r.details.finish_reason == text_generation.types.FinishReason.StopSequence, (whole, stop, r)
    assert r.generated_text == whole[:whole.find(stop)], "cut before the stop sequence"
    full = c.generate(PROMPT, max_new_tokens=4, return_full_text=True).generated_text
    assert full.startswith(PROMPT) and full[len(PROMPT):] == c.generate(PROMPT, max_new_tokens=4).generated_text
    top = c.generate(PROMPT, max_new_tokens=4, top_n_tokens=3)
    assert len(top.details.top_tokens) == len(top.details.tokens)
    for tok, alts in zip(top.details.tokens, top.details.top_tokens):
        assert len(alts) == 3 and alts[0].logprob >= alts[1].logprob >= alts[2].logprob
        assert tok.id != alts[0].id or math.isclose(tok.logprob, alts[0].logprob, abs_tol=1e-5)
    a = c.generate(PROMPT, max_new_tokens=10, do_sample=True, seed=1234, temperature=0.9, top_k=40, top_p=0.95, typical_p=0.95,
                   repetition_penalty=1.1, frequency_penalty=0.2)
    b = c.generate(PROMPT, max_new_tokens=10, do_sample=True, seed=1234, temperature=0.9, top_k=40, top_p=0.95, typical_p=0.95,
                   repetition_penalty=1.1, frequency_penalty=0.2)
    assert a.generated_text == b.generated_text and a.details.seed == 1234
    drawn = c.generate(PROMPT, max_new_tokens=2, do_sample=True)
    assert isinstance(drawn.details.seed, int), "a seed drawn for a sampled request is reported"
    long_prompt = "one two three four five six seven eight nine ten " * 4
    cut = c.generate(long_prompt, max_new_tokens=3, truncate=5)
    last5 = tokenize(server, long_prompt)[-5:]
    assert cut.generated_text == completion(server, last5, 3), "generated from the input's last 5 tokens"
    st, cut_stream, _ = post_json(server.base_url, "/generate_stream", {"inputs": long_prompt, "parameters": {"max_new_tokens": 1,
                                                                                                              "truncate": 5, "details": True}})
    assert st == 200 and '"input_length":5' in cut_stream


def test_grammar(server):
    c = tgi(server)
    r = c.generate("My phone number is", max_new_tokens=12,
                   grammar=text_generation.types.Grammar(type="regex", value="[0-9]{3}-[0-9]{4}"))
    assert re.fullmatch("[0-9]{3}-[0-9]{4}", r.generated_text), r.generated_text
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}
    out = hub(server).text_generation("Name a city as JSON:", max_new_tokens=40, grammar={"type": "json", "value": schema})
    assert set(json.loads(out)) == {"city"}


@pytest.mark.parametrize("params,needle", [
    ({"max_new_tokens": 0}, "`max_new_tokens` must be strictly positive"),
    ({"max_new_tokens": 10 ** 9}, "`inputs` tokens + `max_new_tokens` must be <="),
    ({"max_new_tokens": "ten"}, "invalid type"),
    ({"temperature": -1.0}, "`temperature` must be strictly positive"),
    ({"top_p": 1.0}, "`top_p` must be > 0.0 and < 1.0"),
    ({"top_n_tokens": 50}, "`top_n_tokens` must be >= 0 and <= 5"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "up to 4 stop sequences"),
    ({"grammar": {"type": "regex", "value": "(unclosed"}}, "grammar"),
    ({"grammar": {"type": "json", "value": "{not json"}}, "not valid JSON"),
    ({"decoder_input_details": True}, "not supported"),
    ({"best_of": 2}, "`best_of` must be > 0 and <= 1"),
])
def test_bad_parameters_get_tgis_error_shape(server, params, needle):
    for path in ("/generate", "/generate_stream", "/"):
        st, body, _ = post_json(server.base_url, path, {"inputs": PROMPT, "parameters": params})
        assert st == 422, (path, body)
        assert set(body) == {"error", "error_type"} and body["error_type"] == "validation", body
        assert needle in body["error"], body
    assert tgi(server).generate(PROMPT, max_new_tokens=2).generated_text, "the server keeps serving"


def test_bad_bodies_and_client_errors(server):
    for raw in (b"{nope", b"[1]", b'{"inputs": 5}', b'{"parameters": {}}', b'{"inputs": ""}', b'{"inputs": "x", "parameters": 3}'):
        st, body, _ = post_json(server.base_url, "/generate", None, raw=raw)
        assert st == 422 and body["error_type"] == "validation", (raw, body)
    with pytest.raises(text_generation.errors.ValidationError, match="strictly positive"):
        tgi(server).generate(PROMPT, max_new_tokens=0)
    with pytest.raises(text_generation.errors.ValidationError):
        list(tgi(server).generate_stream(PROMPT, max_new_tokens=10 ** 9))
    with pytest.raises(HubValidationError):
        hub(server).text_generation(PROMPT, max_new_tokens=10 ** 9)
    assert hub(server).text_generation(PROMPT, max_new_tokens=2)


WATERMARK_PROMPTS = ["Once upon a time, in a small village,", "The history of the printing press",
                     "My favourite recipe for dinner is", "Scientists recently discovered that"]


def sampled_ids(s, prompt, watermark, seed):
    st, body, _ = post_json(s.base_url, "/generate", {"inputs": prompt, "parameters": {
        "max_new_tokens": 100, "do_sample": True, "temperature": 1.0, "seed": seed, "details": True, "watermark": watermark}})
    assert st == 200, body
    return [t["id"] for t in body["details"]["tokens"] if not t["special"]], body["generated_text"]


def test_watermark_z_scores(server, capsys):
    marked, plain = [], []
    for i, prompt in enumerate(WATERMARK_PROMPTS):
        prev = tokenize(server, prompt)[-1]
        for watermark, out in ((True, marked), (False, plain)):
            # The instruct model may end early: the first of a few seeds whose text is long enough to score.
            for k in range(8):
                ids, _ = sampled_ids(server, prompt, watermark, seed=100 + 10 * i + k)
                if len(ids) >= 60:
                    break
            assert len(ids) >= 60, "long enough to score"
            out.append(watermark_detect.score(ids, 0.5, prev))
    zm = [r["z"] for r in marked]
    zp = [r["z"] for r in plain]
    with capsys.disabled():
        print(f"\nwatermark z (gamma 0.5, delta 2): marked {[round(z, 2) for z in zm]}, plain {[round(z, 2) for z in zp]}")
    assert sum(zm) / len(zm) > 4 and min(zm) > 2.5, zm
    assert all(abs(z) < 3 for z in zp) and abs(sum(zp) / len(zp)) < 2, zp
    # The script from the command line, on the text (tokenized by the server's /tokenize).
    for seed in range(7, 15):
        ids, text = sampled_ids(server, WATERMARK_PROMPTS[0], True, seed=seed)
        if len(ids) >= 60:
            break
    cli = subprocess.run([sys.executable, str(ROOT / "scripts" / "watermark_detect.py"), "--url", server.base_url, "--text", text,
                          "--prompt", WATERMARK_PROMPTS[0]], capture_output=True, text=True, timeout=60, check=True)
    z_text = json.loads(cli.stdout)["z"]
    with capsys.disabled():
        print(f"watermark z from the text (re-tokenized): {z_text:.2f}; from the ids: "
              f"{watermark_detect.score(ids, 0.5, tokenize(server, WATERMARK_PROMPTS[0])[-1])['z']:.2f}")
    assert z_text > 2.5


def test_post_root_with_an_api_key_beside_the_public_chat_page():
    """GET / (the chat page) is public; TGI's POST / needs the key and takes a body (it was refused as a public route's upload)."""
    s = SpateServer("--kv-cache-memory", "128MiB", api_key="k-tgi")
    try:
        s.wait_ready()
        with urllib.request.urlopen(s.base_url + "/", timeout=30) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/html")
        st, body, _ = post_json(s.base_url, "/", {"inputs": PROMPT, "parameters": {"max_new_tokens": 3}})
        assert st == 401, body
        c = text_generation.Client(s.base_url, headers={"Authorization": "Bearer k-tgi"}, timeout=300)
        assert c.generate(PROMPT, max_new_tokens=3).details.generated_tokens == 3
        assert [p.token.id for p in c.generate_stream(PROMPT, max_new_tokens=3)]
        h = InferenceClient(base_url=s.base_url, api_key="k-tgi", timeout=300)
        assert h.text_generation(PROMPT, max_new_tokens=3)
    finally:
        s.stop()
