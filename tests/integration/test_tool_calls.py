"""Tool calling end to end: the real model behind a real `spate serve`, driven
with the official `openai` SDK and a WebSocket client.

- tool_choice "required" and a named function: the output is always a valid
  call (a known name, arguments that validate against the function's
  `parameters` with `jsonschema`), finish_reason "tool_calls";
- streamed calls: `delta.tool_calls` reassemble (by index) into the same calls
  as the non-streamed answer with the same seed;
- "auto": the model chooses; whatever it chooses is well-formed;
- multi-turn: assistant tool_calls and tool results go back in;
- the Responses API: function_call output items, and the
  response.function_call_arguments.delta / .done events over SSE and over
  WebSocket mode;
- formats: the default model's template has no tool format (generic JSON);
  --tool-call-parser hermes makes the model write <tool_call> blocks, and a
  Hermes template given with --chat-template is detected as hermes.

Every assertion must hold at every kernel level (scripts/test.sh runs this file
again under SPATE_MAX_ISA=avx2): each level rounds its sums its own way, so the
same seed can sample a different call on each. So the tests pin no sampled text,
and requests whose answer the tool grammar constrains set no output limit (chat
and responses then allow the rest of the context). That grammar bounds the
answer: at most 8 calls (k_max_parallel_tool_calls), each with bounded strings
(maxLength counts characters, each at most 6 bytes, as a JSON unicode escape)
and bounded whitespace (one space, or a newline and up to 20 spaces, between
JSON tokens). With these tools a call is at most 502 bytes in the hermes format,
the longest here (get_weather: the opening tag and its newline, the name, an
object of 2 keys, a city of 40 characters, "fahrenheit", 8 whitespace runs of 21
bytes, a newline and the closing tag), so an answer is at most 4,023 bytes,
hence tokens, well inside SmolLM2's 8,192. A fixed max_tokens of 500 made
finish_reason depend on the sample: with seed 4 and --tool-call-parser hermes,
the AVX2 kernels sampled 7 calls and hit "length", the AVX-512 ones 1 call.
"""

import json
import os
from pathlib import Path

import openai
import pytest
import websockets.sync.client as ws_client
from jsonschema import Draft202012Validator

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

TESTDATA = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "chat-templates"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 30}},
                   "required": ["zone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def assert_valid_calls(calls, allowed=None):
    assert calls, "no tool calls"
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_")
        assert c.function.name in (allowed or PARAMS)
        args = json.loads(c.function.arguments)
        errors = list(Draft202012Validator(PARAMS[c.function.name]).iter_errors(args))
        assert not errors, f"{c.function.arguments}: {errors[0].message}"


def create(client, **kw):
    """A sampled chat completion with TOOLS; no max_tokens unless given (module docstring)."""
    base = dict(model=MODEL_NAME, messages=ASK, tools=TOOLS, temperature=0.7)
    base.update(kw)
    return client.chat.completions.create(**base)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_required_gives_valid_calls(client, seed):
    r = create(client, tool_choice="required", seed=seed)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert_valid_calls(choice.message.tool_calls)


def test_named_choice_calls_that_function_once(client):
    r = create(client, tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False, seed=5)
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_time"
    assert_valid_calls(calls, allowed={"get_time"})


def reassemble(stream):
    calls, content, finish = {}, "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        content += ch.delta.content or ""
        for d in ch.delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            c["id"] = d.id or c["id"]
            if d.function:
                c["name"] += d.function.name or ""
                c["arguments"] += d.function.arguments or ""
        finish = ch.finish_reason or finish
    return [calls[i] for i in sorted(calls)], content, finish


def test_streamed_calls_reassemble_to_the_same_calls(client):
    whole = create(client, tool_choice="required", seed=7).choices[0].message.tool_calls
    parts, content, finish = reassemble(create(client, tool_choice="required", seed=7, stream=True))
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in parts] == \
           [(c.function.name, json.loads(c.function.arguments)) for c in whole]
    assert all(c["id"].startswith("call_") for c in parts)


def test_sdk_stream_helper_collects_the_calls(client):
    with client.chat.completions.stream(model=MODEL_NAME, messages=ASK, tools=TOOLS, tool_choice="required",
                                        temperature=0.7, seed=3) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "tool_calls"
    assert_valid_calls(final.choices[0].message.tool_calls)


@pytest.mark.parametrize("seed", [11, 12])
def test_auto_is_well_formed_either_way(client, seed):
    choice = create(client, tool_choice="auto", seed=seed, max_tokens=200).choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        assert_valid_calls(choice.message.tool_calls)
    else:
        assert isinstance(choice.message.content, str)
        assert choice.finish_reason in ("stop", "length")


def test_multi_turn_with_tool_results(client):
    first = create(client, tool_choice="required", parallel_tool_calls=False, seed=21).choices[0].message
    call = first.tool_calls[0]
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 18, "sky": "clear"})},
    ]
    second = create(client, messages=messages, tool_choice="none", seed=22, max_tokens=40).choices[0]
    assert second.message.tool_calls is None and second.message.content
    again = create(client, messages=messages, tool_choice="required", seed=23).choices[0]
    assert_valid_calls(again.message.tool_calls)


def responses_tools():
    return [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
             "parameters": t["function"]["parameters"]} for t in TOOLS]


def assert_function_call_items(output):
    calls = [o for o in output if o.type == "function_call"]
    assert calls
    for c in calls:
        assert c.call_id.startswith("call_") and c.id.startswith("fc_") and c.status == "completed"
        assert not list(Draft202012Validator(PARAMS[c.name]).iter_errors(json.loads(c.arguments)))
    return calls


def test_responses_function_calls(client):
    r = client.responses.create(model=MODEL_NAME, input="What is the weather in Rome?", tools=responses_tools(),
                                tool_choice="required", temperature=0)  # greedy: no seed here
    calls = assert_function_call_items(r.output)
    # The result goes back in as function_call + function_call_output items.
    follow = client.responses.create(model=MODEL_NAME, tools=responses_tools(), tool_choice="none", max_output_tokens=30,
                                     input=[{"role": "user", "content": "What is the weather in Rome?"},
                                            {"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name,
                                             "arguments": calls[0].arguments},
                                            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}])
    assert follow.status in ("completed", "incomplete") and follow.output_text


def check_call_events(events):
    types = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    deltas = {}
    for e in events:
        if e["type"] == "response.function_call_arguments.delta":
            deltas[e["item_id"]] = deltas.get(e["item_id"], "") + e["delta"]
    for d in done:
        assert deltas[d["item_id"]] == d["arguments"]
        json.loads(d["arguments"])
    final = events[-1]["response"]
    assert [o["type"] for o in final["output"]].count("function_call") == len(done)


def test_responses_streamed_call_events_over_sse(client):
    events = []
    with client.responses.create(model=MODEL_NAME, input="What time is it in Tokyo?", tools=responses_tools(),
                                 tool_choice={"type": "function", "name": "get_time"}, temperature=0,
                                 stream=True) as stream:
        for ev in stream:
            events.append(ev.model_dump())
    check_call_events(events)


def test_responses_streamed_required_has_the_unstreamed_shape(client):
    """tool_choice "required", streamed: no (empty) message item is opened, the
    items are numbered 0, 1, ... as they are added, and response.completed's
    output has the same items as the unstreamed answer (greedy, so the same calls)."""
    kw = dict(model=MODEL_NAME, input="What is the weather in Rome?", tools=responses_tools(), tool_choice="required",
              temperature=0)
    whole = client.responses.create(**kw)
    assert_function_call_items(whole.output)
    assert [o.type for o in whole.output] == ["function_call"] * len(whole.output)
    events = [ev.model_dump() for ev in client.responses.create(stream=True, **kw)]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["item"]["type"] for e in added] == ["function_call"] * len(added), added
    assert [e["output_index"] for e in added] == list(range(len(added)))
    for e in events:
        if "output_index" in e:
            assert e["output_index"] < len(added), e
    assert not [e for e in events if e["type"].startswith(("response.content_part.", "response.output_text."))]
    final = events[-1]
    assert final["type"] == "response.completed"
    assert [(o["type"], o["name"], o["arguments"]) for o in final["response"]["output"]] == \
        [(o.type, o.name, o.arguments) for o in whole.output]


def test_responses_streamed_call_events_over_websocket(server):
    url = server.base_url.replace("http", "ws", 1) + "/v1/responses"
    with ws_client.connect(url) as ws:
        # Greedy, as over SSE (the Responses API has no seed), and no output limit
        # (module docstring): with max_output_tokens 200, a CI run once sampled a
        # zone name that ran past it inside the string.
        ws.send(json.dumps({"type": "response.create", "model": MODEL_NAME, "input": "What time is it in Tokyo?",
                            "tools": responses_tools(), "tool_choice": {"type": "function", "name": "get_time"},
                            "temperature": 0}))
        events = []
        while True:
            ev = json.loads(ws.recv(timeout=120))
            events.append(ev)
            if ev["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
                break
    check_call_events(events)


def test_bad_tool_requests_are_400(client):
    for kw, param in [(dict(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
                      (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
                            tool_choice="required"), "tools")]:
        with pytest.raises(openai.BadRequestError) as e:
            create(client, **kw)
        assert e.value.body["param"] == param, e.value.body


def test_hermes_parser_writes_tool_call_blocks():
    s = SpateServer("--tool-call-parser", "hermes").wait_ready()
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)
        r = create(c, tool_choice="required", seed=4)
        assert r.choices[0].finish_reason == "tool_calls"
        assert_valid_calls(r.choices[0].message.tool_calls)
        assert "Tool calls: hermes format (--tool-call-parser)" in s.log_text()
    finally:
        s.stop()


def test_hermes_template_is_detected():
    template = TESTDATA / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
    if not template.exists():
        if os.environ.get("SPATE_REQUIRE_TESTDATA"):
            pytest.fail(f"missing {template}")
        pytest.skip(f"missing {template}")
    s = SpateServer("--chat-template", template).wait_ready()
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="unused", max_retries=0)
        r = create(c, tool_choice="required", seed=6)
        assert_valid_calls(r.choices[0].message.tool_calls)
        assert "Tool calls: hermes format (from the chat template)" in s.log_text()
    finally:
        s.stop()


# ---------------------------------------------------------------- the tool prompt and the prefix cache (issue 54, item 5)

def many_tools(n=30):
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Looks up record {i} of the archive by its key",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}}
        for i in range(n)]


def tokenize_count(server, body):
    import urllib.request
    req = urllib.request.Request(server.base_url + "/tokenize", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["count"]


def test_tool_prompt_comes_before_a_changing_system_message(server, client):
    """Without a tool template the tools are described before the caller's own
    system text, so a system message that changes per turn (memory, retrieved
    context) still finds the tools' prefill in the prefix cache."""
    tools = many_tools()
    def ask(system):
        return [{"role": "system", "content": system}, {"role": "user", "content": "Find record 7."}]
    with_tools = tokenize_count(server, {"model": MODEL_NAME, "messages": ask("Memory: the user likes tea."), "tools": tools})
    without = tokenize_count(server, {"model": MODEL_NAME, "messages": ask("Memory: the user likes tea.")})
    n_tool_prompt = with_tools - without
    assert n_tool_prompt > 500, (with_tools, without)
    first = client.chat.completions.create(model=MODEL_NAME, messages=ask("Memory: the user likes tea."), tools=tools,
                                           max_tokens=1, temperature=0)
    second = client.chat.completions.create(model=MODEL_NAME, messages=ask("Retrieved: the archive opens at nine."),
                                            tools=tools, max_tokens=1, temperature=0)
    assert first.usage.prompt_tokens == with_tools, "the chat bills what /tokenize counts"
    cached = second.usage.prompt_tokens_details.cached_tokens
    block = 16  # --block-size: the cache keeps whole blocks
    assert cached >= n_tool_prompt - block, (cached, n_tool_prompt, second.usage)


def test_tokenize_counts_the_tool_prompt(server, client):
    """/tokenize on chat messages with tools renders what the chat renders."""
    for choice in ("auto", "required", "none"):
        body = {"model": MODEL_NAME, "messages": ASK, "tools": TOOLS, "tool_choice": choice}
        n = tokenize_count(server, body)
        r = client.chat.completions.create(model=MODEL_NAME, messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=1)
        assert n == r.usage.prompt_tokens, (choice, n, r.usage)
    assert tokenize_count(server, {"model": MODEL_NAME, "messages": ASK, "tools": TOOLS}) > \
        tokenize_count(server, {"model": MODEL_NAME, "messages": ASK}) + 100


# ---------------------------------------------------------------- a repeat ends the list (issue 54, item 6)

REPEAT_ASK = [{"role": "user", "content": "What is the weather in Paris? Answer in celsius."}]


def assert_no_invented_calls(calls):
    """The calls made before the model repeated one: valid, distinct, and only about Paris."""
    assert_valid_calls(calls)
    seen = [(c.function.name, json.loads(c.function.arguments)) for c in calls]
    assert len({json.dumps(s, sort_keys=True) for s in seen}) == len(seen), f"a repeated call: {seen}"
    for name, args in seen:
        if name == "get_weather":
            assert args["city"] == "Paris", f"an invented city: {seen}"


def test_a_repeated_call_ends_the_list(client):
    """Greedy SmolLM2 repeats its Paris call; the repeat ends the list (it was
    steered into Paris_M2, León, ... until max_tokens cut a call)."""
    r = client.chat.completions.create(model=MODEL_NAME, messages=REPEAT_ASK, tools=TOOLS, tool_choice="required",
                                       temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", (choice.finish_reason, choice.message)
    assert_no_invented_calls(choice.message.tool_calls)
    # The SDK's stream helper completes (no LengthFinishReasonError) with the same calls.
    with client.chat.completions.stream(model=MODEL_NAME, messages=REPEAT_ASK, tools=TOOLS, tool_choice="required",
                                        temperature=0) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in final.choices[0].message.tool_calls] == \
           [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
