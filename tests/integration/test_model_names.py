"""Model names as clients send them (issue 54), against the real server with
the official clients:

- with exactly one model served, a request naming any model is answered by
  it, as llama-server and TGI do: Hugging Face's
  `InferenceClient(base_url=...)` sends `"model": "dummy"`. The answer names
  the served model; the log says which model answered;
- `--strict-model-names` and a server of two models keep 404 for such names;
- GET /v1/models/{id} percent-decodes the id (spaces, '/', non-ASCII), and
  refuses bad escapes and bad UTF-8 with 400."""

import json
import urllib.error
import urllib.request

import openai
import pytest
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError

from spate_server import MODEL_NAME, SPATE_MODEL, SpateServer, exchange, loopback_only, status_of

SKIP_WARMUP = {"SPATE_SKIP_WARMUP": "1"}
SMALL = ["--kv-cache-memory", "128MiB"]
NAME = "smol lm \u00fc/1"  # a space, a non-ASCII letter and a slash
ASK = [{"role": "user", "content": "Name a color."}]


def serve(*args, name=None):
    """A server of SmolLM2 named name (else args name the models), warmup skipped."""
    model = ["--model", SPATE_MODEL, "--served-model-name", name] if name else []
    return SpateServer(*model, *SMALL, *args, env=SKIP_WARMUP, single=False).wait_ready()


@pytest.fixture(scope="module")
def server():
    s = serve(name=NAME)
    try:
        yield s
    finally:
        s.stop()


def hf_chat(s, **kw):
    with loopback_only():  # the client must not reach the Hub
        return InferenceClient(base_url=s.base_url, timeout=120).chat_completion(messages=ASK, max_tokens=6, temperature=0, **kw)


def test_hf_inference_client_is_answered_by_the_only_model(server):
    out = hf_chat(server)
    assert out.model == NAME, "the answer names the model that answered"
    ref = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0).chat.completions.create(
        model=NAME, messages=ASK, max_tokens=6, temperature=0)
    assert out.choices[0].message.content == ref.choices[0].message.content and ref.choices[0].message.content
    with loopback_only():
        chunks = list(InferenceClient(base_url=server.base_url, timeout=120).chat_completion(
            messages=ASK, max_tokens=6, temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ref.choices[0].message.content
    assert all(c.model == NAME for c in chunks)
    log = server.log_text()
    assert f"model 'dummy' is not served; the only served model '{NAME}' answers" in log, log[-2000:]
    assert log.count("model 'dummy' is not served") == 1, "info once per name, debug afterwards"


def test_model_ids_are_percent_decoded(server):
    c = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    assert c.models.retrieve(NAME).id == NAME  # the SDK sends /v1/models/smol%20lm%20%C3%BC%2F1
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("smol lm")
    for bad in ("smol%20lm%2", "smol%zz", "smol%C3", "smol%FF", "%C0%AF"):
        r = exchange(server.port, f"GET /v1/models/{bad} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
        assert status_of(r) == 400, (bad, r[:300])
        err = json.loads(r.partition(b"\r\n\r\n")[2])["error"]
        assert err["param"] == "model" and "percent-encoded UTF-8" in err["message"], err
    with urllib.request.urlopen(server.base_url + "/v1/models/smol%20lm%20%C3%BC/1", timeout=30) as r:
        assert json.loads(r.read())["id"] == NAME, "a raw '/' in the id works too"


def test_strict_model_names_keep_404():
    s = serve("--strict-model-names", name=MODEL_NAME)
    try:
        with pytest.raises(HfHubHTTPError) as e:
            hf_chat(s)
        assert e.value.response.status_code == 404 and "dummy" in e.value.response.text
        assert hf_chat(s, model=MODEL_NAME).model == MODEL_NAME
        assert "is not served; the only served model" not in s.log_text()
    finally:
        s.stop()


def test_two_models_keep_404(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.gguf").symlink_to(SPATE_MODEL)
    s = serve("--models-dir", tmp_path)
    try:
        with pytest.raises(HfHubHTTPError) as e:
            hf_chat(s)
        assert e.value.response.status_code == 404 and "dummy" in e.value.response.text
        assert hf_chat(s, model="b").model == "b"
    finally:
        s.stop()
