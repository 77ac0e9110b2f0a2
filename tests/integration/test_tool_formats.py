"""Tools combined with the rest of the API, end to end on the real model with
the official `openai` SDK (issue 33): what agent frameworks send.

- tools plus a response format (chat `response_format`, Responses
  `text.format`) under tool_choice "auto": the answer is either valid calls or
  content valid against the format; under "required" the format is ignored
  and the answer is calls;
- an answer cut by max_tokens never leaks call syntax into `content` (chat,
  streamed chat, Responses): the complete calls come back, the cut one with
  its partial arguments (as OpenAI returns it), finish_reason "length" /
  status "incomplete";
- no two calls of one answer are identical (same name and arguments);
- JSON Schema uniqueItems, and no repeated key in a `json_object` answer.

The default model's template has no tool format, so it uses the generic JSON
one. Nothing here pins sampled text: every assertion holds for any output the
grammar allows, so it holds at every kernel level (scripts/test.sh reruns this
file under SPATE_MAX_ISA=avx2).
"""

import json

import openai
import pytest
from jsonschema import Draft202012Validator

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

WEATHER_PARAMS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                  "required": ["city"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                            "parameters": WEATHER_PARAMS}}
FINAL_PARAMS = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 80}},
                "required": ["answer"], "additionalProperties": False}
FINAL = {"type": "function", "function": {"name": "final_result", "description": "The final answer to the user",
                                          "parameters": FINAL_PARAMS}}
PARAMS = {"get_weather": WEATHER_PARAMS, "final_result": FINAL_PARAMS}
REPORT = {"type": "object", "properties": {"temperature": {"type": "integer", "minimum": -60, "maximum": 60},
                                           "sky": {"enum": ["clear", "cloudy", "rain"]}},
          "required": ["temperature", "sky"], "additionalProperties": False}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "report", "schema": REPORT, "strict": True}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# Markers of the generic format's syntax that must never reach content.
SYNTAX = ('"tool_calls"', '"arguments"', '{"name"', '"response"')


def chat(client, **kw):
    base = dict(model=MODEL_NAME, messages=ASK, tools=[WEATHER], temperature=0.7)
    base.update(kw)
    return client.chat.completions.create(**base)


def call_keys(calls):
    return [(c.function.name, json.dumps(json.loads(c.function.arguments), sort_keys=True)) for c in calls]


def assert_calls(calls):
    for c in calls:
        args = json.loads(c.function.arguments)
        assert not list(Draft202012Validator(PARAMS[c.function.name]).iter_errors(args)), c.function.arguments
    keys = call_keys(calls)
    assert len(keys) == len(set(keys)), f"identical calls in one answer: {keys}"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_auto_with_a_response_format_is_calls_or_the_format(client, seed):
    choice = chat(client, response_format=RESPONSE_FORMAT, tool_choice="auto", seed=seed).choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls" and not choice.message.content
        assert_calls(choice.message.tool_calls)
    else:
        assert choice.finish_reason == "stop"
        report = json.loads(choice.message.content)
        assert not list(Draft202012Validator(REPORT).iter_errors(report)), choice.message.content


def test_auto_with_a_response_format_streams_the_same(client):
    whole = chat(client, response_format=RESPONSE_FORMAT, seed=2, temperature=0).choices[0]
    content, calls = "", {}
    for chunk in chat(client, response_format=RESPONSE_FORMAT, seed=2, temperature=0, stream=True):
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
            for d in chunk.choices[0].delta.tool_calls or []:
                calls.setdefault(d.index, "")
                calls[d.index] += (d.function.arguments or "") if d.function else ""
    assert content == (whole.message.content or "")
    assert [json.loads(a) for _, a in sorted(calls.items())] == \
           [json.loads(c.function.arguments) for c in whole.message.tool_calls or []]


def test_required_with_a_response_format_is_calls(client):
    for kw in (dict(response_format=RESPONSE_FORMAT), dict(response_format={"type": "json_object"})):
        choice = chat(client, tool_choice="required", seed=1, **kw).choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        assert_calls(choice.message.tool_calls)


def test_responses_auto_with_text_format(client):
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER_PARAMS}]
    fmt = {"format": {"type": "json_schema", "name": "report", "schema": REPORT, "strict": True}}
    for seed in (1, 2):
        r = client.responses.create(model=MODEL_NAME, input="What is the weather in Paris?", tools=tools, text=fmt,
                                    temperature=0.7, extra_body={"seed": seed})
        assert r.status == "completed"
        calls = [o for o in r.output if o.type == "function_call"]
        if calls:
            for c in calls:
                json.loads(c.arguments)
        else:
            assert not list(Draft202012Validator(REPORT).iter_errors(json.loads(r.output_text))), r.output_text


def test_invalid_response_format_with_tools_names_its_field(client):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "not": {}}}}
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, response_format=bad, seed=1)
    assert e.value.body["param"] == "response_format.json_schema.schema", e.value.body


@pytest.mark.parametrize("max_tokens", [12, 20, 40, 60])
def test_calls_cut_by_max_tokens_leak_no_syntax(client, max_tokens):
    choice = chat(client, tool_choice="required", seed=1, max_tokens=max_tokens).choices[0]
    # A call that would repeat an earlier one ends the list (issue 54): the
    # answer may then end with its calls before max_tokens.
    assert choice.finish_reason in ("length", "tool_calls")
    assert not choice.message.content or not any(s in choice.message.content for s in SYNTAX), choice.message.content
    calls = choice.message.tool_calls or []
    for c in calls[:-1] if choice.finish_reason == "length" else calls:
        json.loads(c.function.arguments)  # only the last one can be cut
    # Streamed: no syntax in the content deltas either, and the same calls.
    content, streamed = "", {}
    for chunk in chat(client, tool_choice="required", seed=1, max_tokens=max_tokens, stream=True):
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
            for d in chunk.choices[0].delta.tool_calls or []:
                streamed.setdefault(d.index, "")
                streamed[d.index] += (d.function.arguments or "") if d.function else ""
    assert content == (choice.message.content or "")
    assert [a for _, a in sorted(streamed.items())] == [c.function.arguments for c in calls]


def test_responses_cut_by_max_output_tokens(client):
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER_PARAMS}]
    for n in (16, 40):
        r = client.responses.create(model=MODEL_NAME, input="What is the weather in Paris and in Rome?", tools=tools,
                                    tool_choice="required", max_output_tokens=n, temperature=0.7,
                                    extra_body={"seed": 3})
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
        assert not any(s in (r.output_text or "") for s in SYNTAX), r.output_text
        calls = [o for o in r.output if o.type == "function_call"]
        for c in calls:
            assert c.status in ("completed", "incomplete")
            if c.status == "completed":
                json.loads(c.arguments)
        assert [c.status for c in calls].count("incomplete") <= 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_identical_calls_in_one_answer(client, seed):
    # pydantic-ai's pattern: a tool and final_result, "required", greedy and sampled.
    for temperature in (0, 0.9):
        choice = chat(client, tools=[WEATHER, FINAL], tool_choice="required", temperature=temperature, seed=seed).choices[0]
        assert choice.finish_reason == "tool_calls"
        assert_calls(choice.message.tool_calls)


def test_unique_items_are_unique(client):
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                                        "uniqueItems": True, "minItems": 3, "maxItems": 6}},
              "required": ["tags"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "tags", "schema": schema, "strict": True}}
    for seed in (1, 2, 3):
        r = client.chat.completions.create(model=MODEL_NAME, temperature=0.9, seed=seed, response_format=fmt,
                                           messages=[{"role": "user", "content": "Give tags for a photo of a cat."}])
        tags = json.loads(r.choices[0].message.content)["tags"]
        assert len(tags) == len(set(tags)) and 3 <= len(tags) <= 6, tags


def test_json_object_has_no_repeated_key(client):
    def no_dup_keys(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), keys
        return dict(pairs)

    for seed in (1, 2, 5, 6):
        r = client.chat.completions.create(model=MODEL_NAME, temperature=0.7, seed=seed, max_tokens=200,
                                           response_format={"type": "json_object"},
                                           messages=[{"role": "user", "content": "Return a JSON object about a cat."}])
        choice = r.choices[0]
        if choice.finish_reason == "stop":
            json.loads(choice.message.content, object_pairs_hook=no_dup_keys)


def outside_strings(text):
    """The text with JSON strings removed."""
    out, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            esc, in_str = (not esc and ch == "\\"), (in_str if esc or ch != '"' else False)
        elif ch == '"':
            in_str = True
        else:
            out.append(ch)
    return "".join(out)


def test_compact_json_whitespace():
    s = SpateServer("--json-whitespace", "compact").wait_ready()
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)
        r = c.chat.completions.create(model=MODEL_NAME, temperature=0.7, seed=1, max_tokens=120,
                                      response_format={"type": "json_object"},
                                      messages=[{"role": "user", "content": "Return a JSON object about a cat."}])
        text = r.choices[0].message.content
        assert not any(ch in outside_strings(text) for ch in " \t\n\r"), text
        call = chat(c, tool_choice="required", seed=2, parallel_tool_calls=False).choices[0].message.tool_calls[0]
        assert not any(ch in outside_strings(call.function.arguments) for ch in " \t\n\r"), call.function.arguments
    finally:
        s.stop()


def test_hermes_auto_is_a_lazy_grammar():
    """--tool-call-parser hermes, tool_choice "auto": free text until <tool_call>,
    then the call grammar; whichever the model writes, calls are valid and no
    call syntax is left in content."""
    s = SpateServer("--tool-call-parser", "hermes").wait_ready()
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)
        for seed in (1, 2, 3, 4):
            choice = chat(c, tools=[WEATHER, FINAL], tool_choice="auto", seed=seed, max_tokens=150).choices[0]
            content = choice.message.content or ""
            assert "<tool_call>" not in content and "</tool_call>" not in content, content
            calls = choice.message.tool_calls or []
            if choice.finish_reason == "length":
                calls = calls[:-1]  # the last one may be cut
            else:
                assert choice.finish_reason == ("tool_calls" if calls else "stop")
            assert_calls(calls)
    finally:
        s.stop()
