"""gpt-oss's harmony output end to end (issue 36) with the official openai
SDK: reasoning_content, tool calls and a final answer, streamed and not, on
chat completions and the Responses API, through `spate serve` on a gpt-oss
GGUF with the real chat template and a forward pass of every layer.

No real gpt-oss model fits here and a random one never writes harmony, so the
model is scripted (tests/reference/make_harmony_model.py): its greedy output
is a known harmony text,

  <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

or, where tool_choice "required" masks the final channel, a call
"commentary to=functions.get_weather <|constrain|>json<|message|>ARGS<|call|>".
The module writes the model into a temporary directory (a few seconds).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from spate_server import SPATE_MODEL, SpateServer

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO.parent / "shared" / "testdata" / "chat-templates" / "openai-gpt-oss-120b.jinja"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY = {"temperature": 0, "max_tokens": 120}


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    if not TEMPLATE.is_file():
        if os.environ.get("SPATE_REQUIRE_TESTDATA") == "1":
            pytest.fail(f"missing {TEMPLATE} (SPATE_REQUIRE_TESTDATA)")
        pytest.skip(f"missing {TEMPLATE}")
    out = tmp_path_factory.mktemp("harmony") / "harmony-gpt-oss.gguf"
    p = subprocess.run([sys.executable, str(REPO / "tests" / "reference" / "make_harmony_model.py"), "--out", str(out),
                        "--vocab-model", str(SPATE_MODEL), "--template", str(TEMPLATE)],
                       capture_output=True, text=True, timeout=300, check=True)
    s = json.loads(p.stdout)
    s["path"] = out
    return s


@pytest.fixture(scope="module")
def server(script):
    s = SpateServer(model=script["path"]).wait_ready()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)


def model_id(client):
    return client.models.list().data[0].id


def test_parsers_are_detected_from_the_template(server):
    log = server.log_text()
    assert "Reasoning: openai_gptoss parser" in log
    assert "Tool calls: openai format (from the chat template)" in log


def test_reasoning_and_final_answer(client, script):
    r = client.chat.completions.create(model=model_id(client), messages=ASK, **GREEDY)
    msg = r.choices[0].message
    assert msg.content == script["answer"]
    assert msg.model_extra["reasoning_content"] == script["reasoning"]
    assert not msg.tool_calls
    assert r.choices[0].finish_reason == "stop"


def test_reasoning_and_final_answer_streamed(client, script):
    chunks = list(client.chat.completions.create(model=model_id(client), messages=ASK, stream=True, **GREEDY))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    assert reasoning == script["reasoning"]
    assert content == script["answer"]
    # The reasoning comes first, in several deltas; no marker leaks into either.
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not (d.model_extra or {}).get("reasoning_content") for d in deltas[first_content:])
    assert sum(1 for d in deltas if (d.model_extra or {}).get("reasoning_content")) > 3
    assert "<|" not in reasoning + content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_required_tool_call_with_reasoning(client, script):
    r = client.chat.completions.create(model=model_id(client), messages=ASK, tools=TOOLS, tool_choice="required", **GREEDY)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.model_extra["reasoning_content"] == script["reasoning"]
    assert not msg.content
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.function.name == script["tool"]
    assert json.loads(call.function.arguments) == json.loads(script["arguments"])
    assert call.id.startswith("call_")


def test_required_tool_call_streamed(client, script):
    chunks = list(client.chat.completions.create(model=model_id(client), messages=ASK, tools=TOOLS,
                                                 tool_choice="required", stream=True, **GREEDY))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert calls and calls[0].function.name == script["tool"] and calls[0].id
    assert {tc.index for tc in calls} == {0}
    assert "".join(tc.function.arguments or "" for tc in calls) == script["arguments"]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == script["reasoning"]
    assert not "".join(d.content or "" for d in deltas)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_result_round_trip(client, script):
    """The agent loop: the call and its result go back (with the reasoning) and the answer comes."""
    mid = model_id(client)
    first = client.chat.completions.create(model=mid, messages=ASK, tools=TOOLS, tool_choice="required", **GREEDY)
    msg = first.choices[0].message
    history = ASK + [msg.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": '{"sky": "sunny"}'}]
    r = client.chat.completions.create(model=mid, messages=history, tools=TOOLS, **GREEDY)
    assert r.choices[0].message.content == script["answer"]
    assert r.choices[0].finish_reason == "stop"


def test_max_tokens_inside_the_analysis(client, script):
    r = client.chat.completions.create(model=model_id(client), messages=ASK, temperature=0, max_tokens=6)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "length"
    assert script["reasoning"].startswith(msg.model_extra["reasoning_content"])
    assert 0 < len(msg.model_extra["reasoning_content"]) < len(script["reasoning"])
    assert not msg.content


def test_thinking_token_budget_closes_the_analysis(client, script):
    r = client.chat.completions.create(model=model_id(client), messages=ASK, extra_body={"thinking_token_budget": 3},
                                       **GREEDY)
    msg = r.choices[0].message
    reasoning = msg.model_extra["reasoning_content"]
    # Three tokens of the script's reasoning, then the final message was forced open.
    assert script["reasoning"].startswith(reasoning) and 0 < len(reasoning) < 20
    # The scripted model then goes on from the forced "<|message|>" along its script: its answer comes last.
    assert msg.content.endswith(script["answer"])
    assert r.choices[0].finish_reason == "stop"


def test_include_reasoning_false_and_reasoning_effort(client, script):
    mid = model_id(client)
    r = client.chat.completions.create(model=mid, messages=ASK, reasoning_effort="high",
                                       extra_body={"include_reasoning": False}, **GREEDY)
    assert r.choices[0].message.content == script["answer"]
    assert not (r.choices[0].message.model_extra or {}).get("reasoning_content")


def test_responses_reasoning_and_function_call_items(client, script):
    mid = model_id(client)
    tools = [{"type": "function", **TOOLS[0]["function"]}]
    r = client.responses.create(model=mid, input="What is the weather in Paris?", tools=tools, tool_choice="required",
                                temperature=0, max_output_tokens=120)
    assert [o.type for o in r.output] == ["reasoning", "function_call"]
    assert r.output[0].content[0].text == script["reasoning"]
    call = r.output[1]
    assert call.name == script["tool"] and json.loads(call.arguments) == json.loads(script["arguments"])
    # The reasoning and call go back as input items with the result; the answer follows.
    follow = client.responses.create(
        model=mid, tools=tools, temperature=0, max_output_tokens=120,
        input=[{"role": "user", "content": "What is the weather in Paris?"},
               r.output[0].model_dump(exclude_none=True), r.output[1].model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}])
    assert follow.output_text == script["answer"]
    assert follow.output[0].type == "reasoning"


def test_responses_streamed(client, script):
    events = list(client.responses.create(model=model_id(client), input="Weather in Paris?", temperature=0,
                                          max_output_tokens=120, stream=True, reasoning={"effort": "low"}))
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert reasoning == script["reasoning"] and text == script["answer"]
    assert events[-1].type == "response.completed"
    assert [o.type for o in events[-1].response.output] == ["reasoning", "message"]
