"""Anthropic's Messages API (issue 39) with the official `anthropic` Python SDK,
unmodified, against the real server: create, stream, a tool round trip,
count_tokens, stop sequences, errors as the SDK's exceptions, x-api-key, and
the same greedy text as the OpenAI chat endpoint."""

import json
from pathlib import Path

import anthropic
import openai
import pytest

from spate_server import MODEL_NAME, SpateServer, post_json

KEY = "sk-ant-test-key"
# The 2026 SDK has no sampling parameters in create(); the API still takes them (extra_body).
GREEDY = {"temperature": 0}
WEATHER = {"name": "get_weather", "description": "Get the current weather of a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def server():
    s = SpateServer("--kv-cache-memory", "256MiB", "--tool-call-parser", "hermes", "--strict-model-names", api_key=KEY)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def client(s, key=KEY):
    return anthropic.Anthropic(base_url=s.base_url, api_key=key, max_retries=0, timeout=300)


def test_create_matches_the_openai_chat_endpoint(server):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    m = client(server).messages.create(model=MODEL_NAME, max_tokens=24, extra_body=GREEDY, system="Answer briefly.", messages=msgs)
    assert m.type == "message" and m.role == "assistant" and m.model == MODEL_NAME
    assert m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"]
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= 24
    oa = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
    r = oa.chat.completions.create(model=MODEL_NAME, max_tokens=24, temperature=0,
                                   messages=[{"role": "system", "content": "Answer briefly."}, *msgs])
    assert m.content[0].text == r.choices[0].message.content
    assert m.usage.input_tokens == r.usage.prompt_tokens


def test_stream_sends_anthropics_event_sequence(server):
    c = client(server)
    kwargs = dict(model=MODEL_NAME, max_tokens=12, extra_body=GREEDY, messages=[{"role": "user", "content": "Count to five."}])
    with c.messages.stream(**kwargs) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_start" in events and "content_block_stop" in events and "message_delta" in events
    assert final.content[0].text == c.messages.create(**kwargs).content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 12


def test_stop_sequences(server):
    c = client(server)
    base = c.messages.create(model=MODEL_NAME, max_tokens=32, extra_body=GREEDY, messages=[{"role": "user", "content": "Count from 1 to 10."}])
    text = base.content[0].text
    stop = next(w for w in ("5", "4", "3", "2", " ") if w in text)
    m = c.messages.create(model=MODEL_NAME, max_tokens=32, extra_body=GREEDY, stop_sequences=[stop],
                          messages=[{"role": "user", "content": "Count from 1 to 10."}])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    assert m.content[0].text == text[:text.index(stop)]


def test_tool_round_trip(server):
    c = client(server)
    msgs = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
    first = c.messages.create(model=MODEL_NAME, max_tokens=128, extra_body=GREEDY, tools=[WEATHER],
                              tool_choice={"type": "tool", "name": "get_weather"}, messages=msgs)
    uses = [b for b in first.content if b.type == "tool_use"]
    assert first.stop_reason == "tool_use" and len(uses) >= 1
    assert uses[0].name == "get_weather" and isinstance(uses[0].input.get("city"), str)
    msgs += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "Sunny, 24 C"}]}]
    final = c.messages.create(model=MODEL_NAME, max_tokens=32, extra_body=GREEDY, tools=[WEATHER],
                              tool_choice={"type": "none"}, messages=msgs)
    assert final.content and final.content[0].type == "text" and final.content[0].text
    assert final.stop_reason in ("end_turn", "max_tokens")


def test_streamed_tool_use_carries_its_input_json(server):
    c = client(server)
    with c.messages.stream(model=MODEL_NAME, max_tokens=128, extra_body=GREEDY, tools=[WEATHER],
                           tool_choice={"type": "any", "disable_parallel_tool_use": True},
                           messages=[{"role": "user", "content": "Weather in Rome?"}]) as stream:
        types = [e.type for e in stream]
        final = stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather" and "city" in uses[0].input
    assert final.stop_reason == "tool_use" and "content_block_start" in types


def test_count_tokens(server):
    c = client(server)
    kwargs = dict(model=MODEL_NAME, system="Answer briefly.", messages=[{"role": "user", "content": "Hello there"}])
    n = c.messages.count_tokens(**kwargs).input_tokens
    assert n == c.messages.create(max_tokens=1, **kwargs).usage.input_tokens


def test_errors_are_sdk_exceptions_and_the_server_keeps_serving(server):
    c = client(server)
    with pytest.raises(anthropic.AuthenticationError):
        client(server, key="wrong").messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.NotFoundError):
        c.messages.create(model="nope", max_tokens=4, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model=MODEL_NAME, max_tokens=4,
                          messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                                           "data": "AAAA"}}]}])
    assert "image" in str(e.value)
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_missing", "content": "x"}]}])
    assert "toolu_missing" in str(e.value)
    with pytest.raises(anthropic.BadRequestError):
        c.messages.create(model=MODEL_NAME, max_tokens=4, extra_body={"temperature": "hot"}, messages=[{"role": "user", "content": "x"}])
    assert c.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "Hi"}]).content


def test_raw_error_shape(server):
    h = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    st, body, _ = post_json(server.base_url, "/v1/messages", {"messages": [{"role": "user", "content": "x"}]}, headers=h)
    assert st == 400 and body == {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}
    st, body, _ = post_json(server.base_url, "/v1/messages", None, headers=h, raw=b"{not json")
    assert st == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    st, body, _ = post_json(server.base_url, "/v1/messages", {"max_tokens": 4, "messages": []}, headers={"x-api-key": "bad"})
    assert st == 401 and body["type"] == "error" and body["error"]["type"] == "authentication_error"
    st, body, _ = post_json(server.base_url, "/v1/messages",
                            {"max_tokens": 4, "metadata": {"user_id": "u1"}, "messages": [{"role": "user", "content": "Hi"}]}, headers=h)
    assert st == 200 and body["type"] == "message", json.dumps(body)


def test_requests_are_counted_by_api(server):
    before = server.metrics()
    c = client(server)
    c.messages.create(model=MODEL_NAME, max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
        model=MODEL_NAME, max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    after = server.metrics()
    assert after['spate:api_requests_total{api="anthropic"}'] == before['spate:api_requests_total{api="anthropic"}'] + 1
    assert after['spate:api_requests_total{api="openai"}'] == before['spate:api_requests_total{api="openai"}'] + 1


ONE = [{"role": "user", "content": "x"}]
BAD_BODIES = [  # (body, a word the message must name)
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}, "type"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "text"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [5]}]}, "content[0]"),
    ({"max_tokens": 4, "messages": [{"role": "robot", "content": "x"}]}, "robot"),
    ({"max_tokens": 4, "messages": [{"role": "user"}]}, "content"),
    ({"max_tokens": "4", "messages": ONE}, "max_tokens"),
    ({"max_tokens": 0, "messages": ONE}, "max_tokens"),
    ({"max_tokens": 4, "messages": "hi"}, "messages"),
    ({"max_tokens": 4, "messages": ONE, "system": 5}, "system"),
    ({"max_tokens": 4, "messages": ONE, "stop_sequences": "x"}, "stop_sequences"),
    ({"max_tokens": 4, "messages": ONE, "top_k": "x"}, "top_k"),
    ({"max_tokens": 4, "messages": ONE, "stream": "yes"}, "stream"),
    ({"max_tokens": 4, "messages": ONE, "tools": [{"name": "f", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "g"}}, "'g'"),
    ({"max_tokens": 4, "messages": ONE, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "web_search_20250305"),
    ({"max_tokens": 4, "messages": ONE, "tools": [{"name": "f"}]}, "input_schema"),
    ({"max_tokens": 4, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "g", "input": "{}"}]}]},
     "input"),
    ({"max_tokens": 4, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "g", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x"}]}]}, "t2"),
    ({"max_tokens": 4, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "g", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "image"}]}]}]}, "image"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "document"),
    ({"max_tokens": 4, "messages": ONE, "thinking": {"type": "sometimes"}}, "thinking.type"),
    # Errors name the client's field, never the chat field it is translated into.
    ({"max_tokens": 4, "messages": ONE, "thinking": {"type": "enabled", "budget_tokens": "many"}}, "thinking.budget_tokens"),
    ({"max_tokens": 4, "messages": ONE, "thinking": {"type": "enabled", "budget_tokens": -1}}, "thinking.budget_tokens"),
    # SmolLM2's template has no reasoning: a budget cannot be kept.
    ({"max_tokens": 4, "messages": ONE, "thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking.budget_tokens"),
    ({"max_tokens": 4, "messages": ONE, "stop_sequences": ["a", 5]}, "stop_sequences[1]"),
    ({"max_tokens": 4, "messages": ONE, "metadata": "u1"}, "metadata"),
]


@pytest.mark.parametrize("body,names", BAD_BODIES, ids=[f"bad{i}" for i in range(len(BAD_BODIES))])
def test_bad_input_gets_a_400_in_anthropics_shape_naming_the_field(server, body, names):
    h = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    st, out, _ = post_json(server.base_url, "/v1/messages", body, headers=h)
    assert st == 400, json.dumps(out)
    assert out["type"] == "error" and out["error"]["type"] == "invalid_request_error", json.dumps(out)
    assert names in out["error"]["message"], out["error"]["message"]
    assert "thinking_token_budget" not in out["error"]["message"] and "'stop'" not in out["error"]["message"]
    if names != "max_tokens":  # count_tokens checks the same blocks
        st, out, _ = post_json(server.base_url, "/v1/messages/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"}, headers=h)
        assert st == 400 and names in out["error"]["message"], json.dumps(out)
    st, ok, _ = post_json(server.base_url, "/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}, headers=h)
    assert st == 200 and ok["type"] == "message"


R1 = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "chat-templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"


def test_reasoning_comes_back_as_thinking_blocks_streamed_or_not():
    # DeepSeek-R1's template opens "<think>": the output up to "</think>" is reasoning.
    s = SpateServer("--kv-cache-memory", "128MiB", "--chat-template", str(R1)).wait_ready()
    try:
        ask = [{"role": "user", "content": "What is 2+2? Think first."}]
        oa = openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)
        ref = oa.chat.completions.create(model=MODEL_NAME, max_tokens=12, temperature=0, messages=ask).choices[0].message
        reasoning = ref.model_extra.get("reasoning_content") or ref.model_extra.get("reasoning")
        assert reasoning
        c = anthropic.Anthropic(base_url=s.base_url, api_key="unused", max_retries=0, timeout=300)
        m = c.messages.create(model=MODEL_NAME, max_tokens=12, messages=ask, extra_body=GREEDY)
        assert m.content[0].type == "thinking" and m.content[0].thinking == reasoning
        assert "".join(b.text for b in m.content if b.type == "text") == (ref.content or "")
        with c.messages.stream(model=MODEL_NAME, max_tokens=12, messages=ask, extra_body=GREEDY) as st:
            types = [e.type for e in st]
            final = st.get_final_message()
        assert final.content[0].type == "thinking" and final.content[0].thinking == reasoning
        assert types[0] == "message_start" and types[-1] == "message_stop" and "thinking" in types
    finally:
        s.stop()
