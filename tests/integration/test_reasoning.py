"""Reasoning output end to end: the default model behind a real `spate serve`
with reasoning chat templates, driven with the official `openai` SDK and a
WebSocket client.

- DeepSeek-R1's template (its generation prompt opens "<think>") is detected
  as deepseek_r1: everything before "</think>" is message.reasoning_content,
  the rest content; checked against the raw output of the same prompt on
  /v1/completions, so no sampled text is pinned;
- streamed delta.reasoning_content / delta.content add up to the non-streamed
  message, and no reasoning delta ends in a partial "</think>";
- thinking_token_budget forces "</think>"; a response_format or tool grammar
  then constrains the content only (valid JSON after free reasoning);
- Qwen3's template with --reasoning-parser qwen3: chat_template_kwargs
  enable_thinking=false changes the prompt (usage.prompt_tokens) and makes the
  output content; a continued "<think>" message makes it reasoning; a
  wrongly typed kwarg is a 400;
- the Responses API: a reasoning item with reasoning_text before the message,
  and response.reasoning_text.delta / .done events, over SSE (the SDK's
  stream accumulator accepts them) and in WebSocket mode, the same output as
  the non-streamed response;
- --reasoning-parser none, include_reasoning false, and an unknown parser name;
- gpt-oss's template (harmony) detected, reasoning_effort / reasoning.effort
  accepted (a real gpt-oss model is not part of the test data: the harmony
  parsing itself is covered by tests/protocol/test_harmony*.cpp).

The model is tiny and its text depends on the kernel level (scripts/test.sh
runs this file again under SPATE_MAX_ISA=avx2): assertions compare outputs of
the same server with each other, never with fixed text; greedy requests
(temperature 0) are the same whatever else runs (batch invariance).
"""

import json
import subprocess
from pathlib import Path

import openai
import pytest
import websockets.sync.client as ws_client
from jsonschema import Draft202012Validator

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, post_json

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

TESTDATA = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "chat-templates"
R1 = TESTDATA / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
QWEN3 = TESTDATA / "Qwen-Qwen3-0.6B.jinja"
GPT_OSS = TESTDATA / "openai-gpt-oss-120b.jinja"

CLOSE = "</think>"
ASK = [{"role": "user", "content": "What is 2+2? Think first."}]
CITY = {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20}},
        "required": ["city"], "additionalProperties": False}


@pytest.fixture(scope="module")
def server():
    if not R1.is_file():
        pytest.fail(f"missing {R1}")
    s = SpateServer("--chat-template", R1).wait_ready()
    yield s
    s.stop()


def client_of(s):
    return openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)


def raw_output(s, messages, max_tokens, **chat_fields):
    """The text the model writes after the chat prompt of messages: the same
    prompt ids through /v1/completions, greedy."""
    status, tok, _ = post_json(s.base_url, "/tokenize", {"messages": messages, **chat_fields})
    assert status == 200, tok
    status, body, _ = post_json(s.base_url, "/v1/completions",
                                {"prompt": tok["tokens"], "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, body
    return body["choices"][0]["text"]


def expected_split(raw, opened):
    """reasoning.h's split of a whole output: (reasoning or None, content)."""
    lead = raw.lstrip(" \t\r\n")
    if lead.startswith("<think>"):
        raw, opened = lead[len("<think>"):], True
    if not opened:
        return None, raw
    reasoning, sep, content = raw.partition(CLOSE)
    return reasoning, content


def stream_message(client, **kw):
    """Streams a chat completion; returns (reasoning pieces, content, finish_reason, usage)."""
    pieces, content, finish, usage = [], "", None, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage:
            usage = chunk.usage
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        r = getattr(d, "reasoning_content", None)
        assert getattr(d, "reasoning", None) == r  # vLLM's current name, the same text
        if r is not None:
            pieces.append(r)
        content += d.content or ""
        finish = chunk.choices[0].finish_reason or finish
    return pieces, content, finish, usage


def test_parser_detected_from_the_template(server):
    assert ("Reasoning: deepseek_r1 parser, reasoning_content split from <think>...</think> "
            "(the chat template opens <think> in its generation prompt)") in server.log_text()


def test_everything_before_the_end_tag_is_reasoning(server):
    client = client_of(server)
    r = client.chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=48, temperature=0)
    msg = r.choices[0].message
    reasoning, content = expected_split(raw_output(server, ASK, 48), opened=True)
    assert msg.reasoning_content == reasoning
    assert msg.reasoning == reasoning  # vLLM's current name for it
    assert msg.content == content
    assert r.usage.completion_tokens == 48 or r.choices[0].finish_reason == "stop"


def test_streamed_equals_non_streamed(server):
    client = client_of(server)
    kw = dict(model=MODEL_NAME, messages=ASK, max_tokens=40, temperature=0)
    whole = client.chat.completions.create(**kw)
    pieces, content, finish, usage = stream_message(client, **kw)
    assert "".join(pieces) == whole.choices[0].message.reasoning_content
    assert content == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    # A piece of "</think>" is held back until it resolves: no reasoning
    # delta but the last ends in a proper prefix of the tag.
    for p in pieces[:-1]:
        assert all(not p.endswith(CLOSE[:k]) for k in range(1, len(CLOSE))), pieces


def test_budget_then_schema_constrains_the_content_only(server):
    """thinking_token_budget ends the reasoning (min_tokens keeps the model from
    stopping before); the json_schema grammar starts after "</think>". No
    max_tokens: the schema bounds the answer."""
    client = client_of(server)
    _, tok, _ = post_json(server.base_url, "/tokenize", {"prompt": CLOSE, "add_special_tokens": False})
    budget = 6
    kw = dict(model=MODEL_NAME, temperature=0.8, seed=11,
              messages=[{"role": "user", "content": "Name a big city, as JSON."}],
              response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}},
              extra_body={"thinking_token_budget": budget, "min_tokens": budget + tok["count"]})
    r = client.chat.completions.create(**kw)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(msg.reasoning_content, str) and CLOSE not in msg.reasoning_content
    assert not list(Draft202012Validator(CITY).iter_errors(json.loads(msg.content)))
    # The budget bounds the reasoning: budget tokens, the forced tag, then the answer.
    assert r.usage.completion_tokens >= budget + tok["count"]
    pieces, content, finish, _ = stream_message(client, **kw)
    assert ("".join(pieces), content, finish) == (msg.reasoning_content, msg.content, "stop")


def test_budget_zero_then_tool_call(server):
    client = client_of(server)
    tool = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"], "additionalProperties": False}}}
    r = client.chat.completions.create(model=MODEL_NAME, messages=ASK, tools=[tool], tool_choice="required", temperature=0,
                                       extra_body={"thinking_token_budget": 0})
    msg = r.choices[0].message
    assert msg.reasoning_content == ""  # the template opened <think>, the budget closed it at once
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls and msg.tool_calls[0].function.name == "add"
    args = json.loads(msg.tool_calls[0].function.arguments)
    assert isinstance(args["a"], int) and isinstance(args["b"], int)


def test_include_reasoning_false(server):
    client = client_of(server)
    kw = dict(model=MODEL_NAME, messages=ASK, max_tokens=12, temperature=0)
    on = client.chat.completions.create(**kw).choices[0].message
    off = client.chat.completions.create(**kw, extra_body={"include_reasoning": False}).choices[0].message
    assert on.reasoning_content is not None
    assert "reasoning_content" not in off.model_dump() and "reasoning" not in off.model_dump()
    assert off.content == on.content
    pieces, content, _, _ = stream_message(client, **kw, extra_body={"include_reasoning": False})
    assert pieces == [] and content == on.content


def test_responses_reasoning_item_and_events(server):
    client = client_of(server)
    kw = dict(model=MODEL_NAME, input="What is 2+2? Think first.", max_output_tokens=24, temperature=0)
    whole = client.responses.create(**kw)
    assert [o.type for o in whole.output] == ["reasoning", "message"]
    reasoning, content = expected_split(raw_output(server, [{"role": "user", "content": kw["input"]}], 24), True)
    assert whole.output[0].content[0].type == "reasoning_text"
    assert whole.output[0].content[0].text == reasoning
    assert whole.output_text == content
    assert 0 < whole.usage.output_tokens_details.reasoning_tokens <= whole.usage.output_tokens

    events = list(client.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    first_message = types.index("response.output_item.added", types.index("response.output_item.done"))
    assert types[:5] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added", "response.reasoning_text.delta"]
    assert types[first_message - 3:first_message] == ["response.reasoning_text.done", "response.content_part.done",
                                                      "response.output_item.done"]
    assert "response.reasoning_text.delta" not in types[first_message:]
    assert events[2].item.type == "reasoning" and events[first_message].output_index == 1
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == reasoning
    done = events[-1]
    assert done.type in ("response.completed", "response.incomplete")
    # The same output as the non-streamed response (but for the items' fresh ids).
    strip_ids = lambda out: [{k: v for k, v in o.model_dump().items() if k != "id"} for o in out]
    assert strip_ids(done.response.output) == strip_ids(whole.output)
    assert [e.sequence_number for e in events] == list(range(len(events)))

    # The SDK's stream accumulator checks each event against the items added so far
    # (and raises on an inconsistency); max_output_tokens ends this one incomplete.
    with client.responses.stream(**kw) as s:
        accumulated = list(s)
    assert accumulated[-1].type == done.type
    assert [e.type for e in accumulated] == types


def test_responses_over_websocket(server):
    client = client_of(server)
    body = dict(model=MODEL_NAME, input="What is 2+2? Think first.", max_output_tokens=20, temperature=0)
    sse = [e.model_dump() for e in client.responses.create(stream=True, **body)]
    with ws_client.connect(server.base_url.replace("http", "ws", 1) + "/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", **body}))
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "response.incomplete", "response.failed", "error"):
            events.append(json.loads(ws.recv(timeout=120)))
    assert [e["type"] for e in events] == [e["type"] for e in sse]
    deltas = lambda evs: [e["delta"] for e in evs if e["type"] == "response.reasoning_text.delta"]
    assert deltas(events) == deltas(sse) and deltas(events)
    assert events[-1]["response"]["output"][0]["type"] == "reasoning"


def test_qwen3_enable_thinking_and_continued_think():
    if not QWEN3.is_file():
        pytest.fail(f"missing {QWEN3}")
    s = SpateServer("--chat-template", QWEN3, "--reasoning-parser", "qwen3").wait_ready()
    try:
        assert "Reasoning: qwen3 parser, reasoning_content split from <think>...</think> (--reasoning-parser)" in s.log_text()
        client = client_of(s)
        kw = dict(model=MODEL_NAME, messages=ASK, max_tokens=16, temperature=0)
        on = client.chat.completions.create(**kw)
        off = client.chat.completions.create(**kw, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        # enable_thinking=false renders "<think>\n\n</think>\n\n" into the prompt, on both routes.
        _, tok, _ = post_json(s.base_url, "/tokenize", {"messages": ASK, "chat_template_kwargs": {"enable_thinking": False}})
        _, text, _ = post_json(s.base_url, "/detokenize", {"tokens": tok["tokens"]})
        assert text["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert off.usage.prompt_tokens == tok["count"] > on.usage.prompt_tokens
        # Thinking off: the output is content, whatever it says.
        assert off.choices[0].message.reasoning_content is None
        assert off.choices[0].message.content == raw_output(s, ASK, 16, chat_template_kwargs={"enable_thinking": False})
        # Thinking on, the template leaves <think> to the model: reasoning only if it opens it.
        reasoning, content = expected_split(raw_output(s, ASK, 16), opened=False)
        assert (on.choices[0].message.reasoning_content, on.choices[0].message.content) == (reasoning, content)
        # Continuing an assistant message that opened <think>: the output is reasoning until </think>.
        cont = ASK + [{"role": "assistant", "content": "<think>\nFirst,"}]
        r = client.chat.completions.create(model=MODEL_NAME, messages=cont, max_tokens=16, temperature=0,
                                           extra_body={"continue_final_message": True, "add_generation_prompt": False})
        reasoning, content = expected_split(raw_output(s, cont, 16, continue_final_message=True, add_generation_prompt=False), True)
        assert (r.choices[0].message.reasoning_content, r.choices[0].message.content) == (reasoning, content)
        # (/tokenize renders the continuation as chat does.)
        _, tok, _ = post_json(s.base_url, "/tokenize", {"messages": cont, "continue_final_message": True, "add_generation_prompt": False})
        assert tok["count"] == r.usage.prompt_tokens
        # A kwarg the parser reads, wrongly typed: a 400 in OpenAI's shape.
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(**kw, extra_body={"chat_template_kwargs": {"enable_thinking": "no"}})
        err = e.value.body
        assert err["param"] == "chat_template_kwargs.enable_thinking" and err["type"] == "invalid_request_error"
        assert "must be a boolean" in err["message"]
    finally:
        s.stop()


def test_parser_none_and_unknown_name():
    s = SpateServer("--chat-template", R1, "--reasoning-parser", "none").wait_ready()
    try:
        assert "Reasoning: not split (no reasoning parser: --reasoning-parser)" in s.log_text()
        msg = client_of(s).chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=8, temperature=0).choices[0].message
        assert "reasoning_content" not in msg.model_dump()
        with pytest.raises(openai.BadRequestError) as e:
            client_of(s).chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=8,
                                                 extra_body={"thinking_token_budget": 4})
        assert e.value.body["param"] == "thinking_token_budget"
    finally:
        s.stop()
    p = subprocess.run([str(SPATE_BIN), "serve", "--model", str(SPATE_MODEL), "--reasoning-parser", "deepseek-r1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "--reasoning-parser must be one of qwen3, deepseek_r1, openai_gptoss, none; got 'deepseek-r1'" in p.stderr


def test_harmony_template_detected_and_reasoning_effort():
    """gpt-oss's template on the default model (which does not write harmony):
    openai_gptoss and openai are detected, reasoning_effort goes to the
    template, and an output that is not harmony is content."""
    if not GPT_OSS.is_file():
        pytest.fail(f"missing {GPT_OSS}")
    s = SpateServer("--chat-template", GPT_OSS).wait_ready()
    try:
        log = s.log_text()
        assert "Reasoning: openai_gptoss parser" in log and "Tool calls: openai format (from the chat template)" in log
        assert "Harmony: " in log  # SmolLM2's vocabulary has no harmony tokens: a warning, not a failure
        c = client_of(s)
        for effort in ("low", "high"):
            msg = c.chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=12, temperature=0,
                                            reasoning_effort=effort).choices[0].message
            raw = raw_output(s, ASK, 12, chat_template_kwargs={"reasoning_effort": effort})
            assert msg.model_dump().get("reasoning_content") is None
            if "<|" not in raw and not raw.startswith(" t"):
                assert msg.content == raw.rstrip(" \t\r\n")
        _, low, _ = post_json(s.base_url, "/tokenize", {"messages": ASK, "chat_template_kwargs": {"reasoning_effort": "low"}})
        _, text, _ = post_json(s.base_url, "/detokenize", {"tokens": low["tokens"]})
        assert "Reasoning: low" in text["prompt"]
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=4, extra_body={"reasoning_effort": "max"})
        assert e.value.body["param"] == "reasoning_effort"
        r = c.responses.create(model=MODEL_NAME, input="What is 2+2?", max_output_tokens=8, temperature=0,
                               reasoning={"effort": "medium", "summary": "auto"})
        assert r.reasoning.effort == "medium" and r.status in ("completed", "incomplete")
    finally:
        s.stop()
