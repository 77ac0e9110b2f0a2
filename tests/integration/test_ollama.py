"""Ollama's API (issue 39) with the official `ollama` Python client, unmodified,
against the real server: chat, generate, streaming, format with a schema,
tools, embed, list, show, ps, version, 501 for pulls, errors as the client's
ResponseError, and the same greedy text as the OpenAI chat endpoint."""

import json
import time

import ollama
import openai
import pytest

from spate_server import MODEL_NAME, SpateServer, post_json

GREEDY = {"temperature": 0, "num_predict": 16}


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--kv-cache-memory", "256MiB", "--tool-call-parser", "hermes", "--strict-model-names")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def client(s):
    return ollama.Client(host=s.base_url, timeout=300)


def test_chat_matches_the_openai_chat_endpoint(server):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    r = client(server).chat(model=MODEL_NAME, messages=msgs, options=GREEDY)
    assert r.done and r.done_reason in ("stop", "length") and r.message.role == "assistant"
    oa = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    ref = oa.chat.completions.create(model=MODEL_NAME, max_tokens=16, temperature=0, messages=msgs)
    assert r.message.content == ref.choices[0].message.content
    assert r.prompt_eval_count == ref.usage.prompt_tokens and r.eval_count == ref.usage.completion_tokens
    assert r.total_duration > 0 and r.eval_duration > 0 and r.prompt_eval_duration >= 0


def test_streamed_chat_and_generate(server):
    c = client(server)
    msgs = [{"role": "user", "content": "Count to five."}]
    parts = list(c.chat(model=MODEL_NAME, messages=msgs, options=GREEDY, stream=True))
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts) == c.chat(model=MODEL_NAME, messages=msgs, options=GREEDY).message.content
    gen = list(c.generate(model=MODEL_NAME, prompt="Count to five.", options=GREEDY, stream=True))
    whole = c.generate(model=MODEL_NAME, prompt="Count to five.", options=GREEDY)
    assert "".join(p.response for p in gen) == whole.response and gen[-1].done
    assert whole.response == parts[-1].message.content or whole.response  # generate renders the prompt as one user turn
    raw = c.generate(model=MODEL_NAME, prompt="1, 2, 3,", raw=True, options={"temperature": 0, "num_predict": 4})
    assert raw.response and raw.eval_count == 4 and raw.done_reason == "length"


def test_format_with_a_schema(server):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}, "population": {"type": "integer"}},
              "required": ["city", "population"]}
    r = client(server).chat(model=MODEL_NAME, messages=[{"role": "user", "content": "Name a city and its population as JSON."}],
                            format=schema, options={"temperature": 0, "num_predict": 256})
    data = json.loads(r.message.content)
    assert isinstance(data["city"], str) and isinstance(data["population"], int)
    # "json": constrained to a JSON object (which may run to num_predict: then it is cut, not invalid so far).
    j = client(server).generate(model=MODEL_NAME, prompt="Give me a JSON object.", format="json", options={"temperature": 0, "num_predict": 32})
    assert j.response.lstrip().startswith("{")


def test_tools(server):
    def get_weather(city: str) -> str:
        """Get the current weather of a city.

        Args:
          city: the city
        """
        return "sunny"

    # SmolLM2 does not call tools on its own: the client's tools are accepted and rendered ...
    c = client(server)
    r = c.chat(model=MODEL_NAME, messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=[get_weather],
               options={"temperature": 0, "num_predict": 16})
    assert r.done and r.message.tool_calls is None
    # ... and a forced call (spate's tool_choice extension) comes back as Ollama's tool_calls, arguments an object.
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    st, body, _ = post_json(server.base_url, "/api/chat", {"model": MODEL_NAME, "stream": False, "tools": [tool], "tool_choice": "required",
                                                         "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                                                         "options": {"temperature": 0, "num_predict": 96}})
    assert st == 200, body
    calls = body["message"]["tool_calls"]
    assert calls[0]["function"]["name"] == "get_weather" and isinstance(calls[0]["function"]["arguments"]["city"], str)
    follow = c.chat(model=MODEL_NAME, tools=[get_weather], options=GREEDY, messages=[
        {"role": "user", "content": "What is the weather in Paris?"}, body["message"],
        {"role": "tool", "content": "sunny, 24 C", "tool_name": "get_weather"}])
    assert follow.done


def test_embed_list_show_ps_version(server):
    c = client(server)
    e = c.embed(model=MODEL_NAME, input=["a cat", "a dog"])
    assert len(e.embeddings) == 2 and len(e.embeddings[0]) == 576
    legacy = c.embeddings(model=MODEL_NAME, prompt="a cat")
    assert legacy.embedding == pytest.approx(e.embeddings[0], abs=1e-6)
    models = c.list().models
    assert [m.model for m in models] == [MODEL_NAME] and models[0].details.format == "gguf"
    assert models[0].details.family == "llama" and models[0].size > 0
    show = c.show(MODEL_NAME)
    assert "im_start" in show.template and "completion" in show.capabilities
    assert [m.model for m in c.ps().models] == [MODEL_NAME]
    st, body, _ = post_json(server.base_url, "/api/version", None, raw=b"")
    assert st == 405 or st == 200  # GET only
    import urllib.request
    assert json.loads(urllib.request.urlopen(server.base_url + "/api/version").read())["version"]


def test_errors_are_response_errors_and_the_server_keeps_serving(server):
    c = client(server)
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model="nope", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404 and "nope" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("llama3")
    assert e.value.status_code == 501
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model=MODEL_NAME, messages=[{"role": "user", "content": "x"}], options={"num_ctx": 10_000_000})
    assert e.value.status_code == 400 and "num_ctx" in e.value.error
    st, body, _ = post_json(server.base_url, "/api/chat", {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}],
                                                         "options": {"temperature": "hot"}, "stream": False})
    assert st == 400 and set(body) == {"error"}
    st, body, _ = post_json(server.base_url, "/api/chat", None, raw=b"{nope")
    assert st == 400 and "malformed JSON" in body["error"]
    st, body, _ = post_json(server.base_url, "/api/generate", {"model": MODEL_NAME, "prompt": "x", "images": ["AAAA"], "stream": False})
    assert st == 400 and "images" in body["error"]
    assert c.chat(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 2}).done


def test_empty_prompt_loads_and_keep_alive_zero_unloads(server):
    st, body, _ = post_json(server.base_url, "/api/generate", {"model": MODEL_NAME})
    assert st == 200 and body["done"] and body["done_reason"] == "load"
    m = server.metrics()
    assert m['spate:api_requests_total{api="ollama"}'] >= 1


ONE = [{"role": "user", "content": "x"}]
BAD_BODIES = [  # (route, body, a word the message must name)
    ("/api/chat", {"messages": ONE}, "model"),
    ("/api/chat", {"messages": "x"}, "messages"),
    ("/api/chat", {"messages": [{"role": "user", "content": 5}]}, "content"),
    ("/api/chat", {"messages": ONE, "stream": "no"}, "stream"),
    ("/api/chat", {"messages": ONE, "options": "hot"}, "options"),
    ("/api/chat", {"messages": ONE, "options": {"temperature": "hot"}}, "temperature"),
    ("/api/chat", {"messages": ONE, "options": {"num_predict": "many"}}, "num_predict"),
    ("/api/chat", {"messages": ONE, "options": {"stop": 5}}, "stop"),
    ("/api/chat", {"messages": ONE, "options": {"seed": 1.5}}, "seed"),
    ("/api/chat", {"messages": ONE, "options": {"top_k": [1]}}, "top_k"),
    ("/api/chat", {"messages": ONE, "format": "yaml"}, "format"),
    ("/api/chat", {"messages": ONE, "format": {"type": "bogus"}}, "bogus"),
    ("/api/chat", {"messages": ONE, "tools": [{"type": "function"}]}, "function"),
    ("/api/chat", {"messages": ONE, "keep_alive": "soon"}, "keep_alive"),
    ("/api/chat", {"messages": ONE, "think": "very"}, "think"),
    ("/api/chat", {"messages": ONE, "logprobs": "yes"}, "logprobs"),
    ("/api/chat", {"messages": ONE, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/api/generate", {"prompt": 5}, "prompt"),
    ("/api/generate", {"prompt": "x", "template": "{{ .Prompt }}"}, "template"),
    ("/api/embed", {"input": 5}, "input"),
    ("/api/show", {}, "model"),
]


@pytest.mark.parametrize("route,body,names", BAD_BODIES, ids=[f"bad{i}" for i in range(len(BAD_BODIES))])
def test_bad_input_gets_a_400_in_ollamas_shape_naming_the_field(server, route, body, names):
    full = dict(body, stream=body.get("stream", False))
    if names != "model":
        full["model"] = MODEL_NAME
    st, out, _ = post_json(server.base_url, route, full)
    assert st == 400 and set(out) == {"error"}, json.dumps(out)
    assert names in out["error"], out["error"]
    assert client(server).chat(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 2}).done


def test_logprobs_match_the_openai_chat_endpoint_streamed_or_not(server):
    msgs = [{"role": "user", "content": "Name a colour."}]
    r = client(server).chat(model=MODEL_NAME, messages=msgs, options=dict(GREEDY, num_predict=8), logprobs=True, top_logprobs=2)
    assert len(r.logprobs) == r.eval_count
    oa = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    ref = oa.chat.completions.create(model=MODEL_NAME, max_tokens=8, temperature=0, messages=msgs, logprobs=True, top_logprobs=2)
    want = [(t.token, round(t.logprob, 4), [(a.token, round(a.logprob, 4)) for a in t.top_logprobs]) for t in ref.choices[0].logprobs.content]
    got = [(t.token, round(t.logprob, 4), [(a.token, round(a.logprob, 4)) for a in t.top_logprobs]) for t in r.logprobs]
    assert got == want
    streamed = []
    for part in client(server).chat(model=MODEL_NAME, messages=msgs, options=dict(GREEDY, num_predict=8), logprobs=True, top_logprobs=2,
                                    stream=True):
        streamed += [(t.token, round(t.logprob, 4), [(a.token, round(a.logprob, 4)) for a in t.top_logprobs]) for t in part.logprobs or []]
    assert streamed == want
    assert client(server).chat(model=MODEL_NAME, messages=msgs, options=dict(GREEDY, num_predict=2)).logprobs is None


def test_keep_alive_drives_loading_in_a_model_directory(tmp_path):
    """Ollama's keep_alive per request: 0 unloads after the answer, a duration
    unloads after that much idle time, -1 keeps the model; an empty prompt loads."""
    from spate_server import SPATE_MODEL
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.gguf").symlink_to(SPATE_MODEL)
    s = SpateServer("--models-dir", tmp_path, "--kv-cache-memory", "128MiB", single=False).wait_ready()
    try:
        c = client(s)
        loaded = lambda: {m.model for m in c.ps().models}  # noqa: E731
        assert loaded() == set()
        r = c.generate(model="a", prompt="", keep_alive=-1)
        assert r.done_reason == "load" and loaded() == {"a"}
        c.chat(model="b", messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 2}, keep_alive="1s")
        c.chat(model="c", messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 2}, keep_alive=0)
        deadline = time.time() + 30
        while loaded() != {"a"}:
            assert time.time() < deadline, f"still loaded: {loaded()}"
            time.sleep(0.1)
        time.sleep(1.5)
        assert loaded() == {"a"}  # -1: until evicted or unloaded
        assert c.generate(model="a", prompt="", keep_alive=0).done_reason == "unload"
        deadline = time.time() + 30
        while loaded():
            assert time.time() < deadline
            time.sleep(0.1)
    finally:
        s.stop()


def _health_s(s, timeout=5.0):
    """Seconds /health takes to answer 200 (fails past timeout)."""
    import urllib.request
    t0 = time.monotonic()
    with urllib.request.urlopen(s.base_url + "/health", timeout=timeout) as r:
        assert r.status == 200
    return time.monotonic() - t0


def test_a_huge_keep_alive_is_refused_and_the_server_keeps_serving(tmp_path):
    """Issue 54: keep_alive 1e300 (or 1e10, "3000000h") on a server with
    unpinned models overflowed when converted to nanoseconds: the registry
    thread spun at a full core, /health stopped answering, SIGTERM was ignored.
    Above 1e9 s it is a 400 naming keep_alive; 1e9 itself and -1 keep the
    model; /health stays fast and SIGTERM stops the server in seconds."""
    import signal
    from spate_server import SPATE_MODEL
    for name in ("a", "b"):
        (tmp_path / f"{name}.gguf").symlink_to(SPATE_MODEL)
    s = SpateServer("--model", tmp_path / "a.gguf", "--model", tmp_path / "b.gguf", "--kv-cache-memory", "128MiB",
                    single=False).wait_ready()
    try:
        c = client(s)
        hi = [{"role": "user", "content": "Hi"}]
        for huge in (1e300, 1e10, "3000000h"):
            with pytest.raises(ollama.ResponseError) as e:
                c.chat(model="a", messages=hi, options={"num_predict": 2}, keep_alive=huge)
            assert e.value.status_code == 400 and "keep_alive" in e.value.error, (huge, e.value.error)
        for route, body in (("/api/chat", {"messages": hi}), ("/api/generate", {"prompt": "Hi"}), ("/api/generate", {})):
            st, out, _ = post_json(s.base_url, route, dict(body, model="b", stream=False, keep_alive=1e300), timeout=30)
            assert st == 400 and set(out) == {"error"} and "keep_alive" in out["error"], (route, st, out)
        # The largest accepted value and "forever" load and keep the model; the server stays responsive.
        assert c.chat(model="a", messages=hi, options={"num_predict": 2}, keep_alive=1e9).done
        assert c.generate(model="b", prompt="", keep_alive=-1e300).done_reason == "load"
        time.sleep(0.5)
        for _ in range(3):
            assert _health_s(s) < 2.0
        assert {m.model for m in c.ps().models} == {"a", "b"}
        assert c.chat(model="b", messages=hi, options={"num_predict": 2}).done
        t0 = time.monotonic()
        rc = s.stop(sig=signal.SIGTERM, timeout=20)
        assert rc == 0 and time.monotonic() - t0 < 10, (rc, time.monotonic() - t0)
    finally:
        s.stop()


def test_latest_tag_names_the_model_and_show_lists_tools(server):
    """Ollama clients name models NAME:latest: accepted wherever the Ollama API
    names a model. /api/show lists the tools capability (tool calls work with
    every chat template here) besides completion."""
    c = client(server)
    tagged = MODEL_NAME + ":latest"
    r = c.chat(model=tagged, messages=[{"role": "user", "content": "Hi"}], options=GREEDY)
    assert r.done and r.message.content == c.chat(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], options=GREEDY).message.content
    assert c.generate(model=tagged, prompt="Hi", options={"num_predict": 2}).done
    assert c.generate(model=tagged, prompt="").done_reason == "load"
    assert len(c.embed(model=tagged, input="a cat").embeddings[0]) == 576
    assert len(c.embeddings(model=tagged, prompt="a cat").embedding) == 576
    show = c.show(tagged)
    assert {"completion", "tools"} <= set(show.capabilities), show.capabilities
    assert "tools" in c.show(MODEL_NAME).capabilities
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model="nope:latest", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404 and "nope:latest" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model=MODEL_NAME + ":7b", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 404  # only :latest is the untagged name


GENERATE_TYPES = [  # (field, a value of the wrong type)
    ("raw", "yes"), ("system", 5), ("context", "x"), ("suffix", 5), ("images", "AAAA"), ("template", 5), ("options", [1]),
]


@pytest.mark.parametrize("field,value", GENERATE_TYPES, ids=[f for f, _ in GENERATE_TYPES])
def test_generate_fields_of_the_wrong_type_are_400s_naming_them(server, field, value):
    st, out, _ = post_json(server.base_url, "/api/generate", {"model": MODEL_NAME, "prompt": "Hi", "stream": False, field: value})
    assert st == 400 and set(out) == {"error"} and field in out["error"], (st, out)


def test_chat_and_embed_fields_of_the_wrong_type_are_400s_naming_them(server):
    for route, body, field in (("/api/chat", {"messages": ONE, "tools": "x"}, "tools"),
                               ("/api/chat", {"messages": ONE, "keep_alive": [1]}, "keep_alive"),
                               ("/api/embed", {"input": "x", "keep_alive": 1e300}, "keep_alive"),
                               ("/api/embed", {"input": "x", "truncate": "yes"}, "truncate")):
        st, out, _ = post_json(server.base_url, route, dict(body, model=MODEL_NAME, stream=False))
        assert st == 400 and set(out) == {"error"} and field in out["error"], (route, st, out)
