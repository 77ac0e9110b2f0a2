"""Anthropic's Messages API (issue 39) with the official `anthropic` Python SDK,
unmodified, against the real server: create, stream, a tool round trip,
count_tokens, stop sequences, errors as the SDK's exceptions, x-api-key, and
the same greedy text as the OpenAI chat endpoint."""

import json

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
    s = SpateServer("--kv-cache-memory", "256MiB", "--tool-call-parser", "hermes", api_key=KEY)
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
