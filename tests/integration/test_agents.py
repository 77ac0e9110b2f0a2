"""Agent frameworks, unmodified, against a real `spate serve` on the default
model: openai-agents (Chat Completions and Responses models), pydantic-ai
(tool output and NativeOutput) and LangChain (a manual tool loop,
with_structured_output, create_agent). instructor is in test_agents_instructor.py
(it cannot share an environment with these: see tests/requirements-instructor.txt).

The default model (SmolLM2-135M-Instruct) is tiny: what is tested is the
protocol the frameworks speak, not the model's judgement. So:
- every run ENDS: each agent loop has an explicit bound (openai-agents
  max_turns, pydantic-ai UsageLimits(request_limit), LangGraph recursion_limit)
  and the test asserts that the run ended with a final output of the right
  pydantic type, or with the framework's own clean error ("limit reached",
  or "the answer was cut" when max_tokens cuts it on purpose) within that
  bound, never with an HTTP error, a parse failure or raw JSON as text;
- where a fixed outcome is asserted, a constraint makes it so, not the model:
  tool_choice "required" or a named tool forces the call, and the weather tool
  disables itself after one call (openai-agents `is_enabled`, pydantic-ai
  `prepare`, a LangChain `wrap_model_call` middleware), so the next turn has only the output schema left and must
  produce it. Each test's docstring says which constraint it leans on;
- every call that reached a tool had arguments the tool's schema accepts (the
  frameworks validate them; a test fails on a retry prompt or a tool error);
- greedy decoding (temperature 0) and short prompts; each answer is bounded by
  the grammar (a city of at most 40 characters, an integer in [-90, 60],
  bounded whitespace) and by max_tokens=MAX_TOKENS, above any such answer, so
  no call is cut by max_tokens but in the *_cut_by_max_tokens tests, whose
  limit is below any call;
- nothing leaves loopback: `loopback_only` (spate_server.py) fails a test that opens a
  connection elsewhere (tiktoken fetching an encoding, tracing, telemetry).

Which branch a run takes (call the tool again or answer) can differ between
kernel levels, so assertions that allow either branch hold at both
(scripts/test.sh runs this file again under SPATE_MAX_ISA=avx2).
"""

import asyncio
import json
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, loopback_only

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)

import agents  # noqa: E402  (openai-agents)
import pydantic_ai  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy  # noqa: E402
from langchain.agents.middleware import wrap_model_call  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool as lc_tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIResponsesModel as PaiResponsesModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

MAX_TOKENS = 300  # above any grammar-bounded call or Weather object here (module docstring)
CUT_TOKENS = 8  # below any call: '{"tool_calls": [{"name": "get_weather"' alone is 14 tokens
PROMPT = "What is the weather in Paris?"
INSTRUCTIONS = "Call get_weather for the city, then report the weather."
City = Annotated[str, Field(min_length=1, max_length=40)]


class Weather(BaseModel):
    """A weather report."""
    city: str = Field(min_length=1, max_length=40)
    temperature_c: int = Field(ge=-90, le=60)


def weather_text(city: str) -> str:
    return f"Sunny, 21 C in {city}"


def assert_calls_valid(calls):
    """calls: the cities the tool body received (only after the framework
    validated the arguments against the tool's schema)."""
    for city in calls:
        assert isinstance(city, str) and 1 <= len(city) <= 40, city


@pytest.fixture(scope="module", autouse=True)
def no_network():
    with loopback_only():
        yield


@pytest.fixture(scope="module")
def v1(server):
    return server.base_url + "/v1"


# ---------------------------------------------------------------- openai-agents

agents.set_tracing_disabled(True)


def oa_weather_tool(calls, once):
    """get_weather for openai-agents; with once, it is disabled after its first call."""
    @agents.function_tool(is_enabled=lambda ctx, agent: not (once and calls))
    def get_weather(city: City) -> str:
        """Current weather in a city."""
        calls.append(city)
        return weather_text(city)
    return get_weather


def oa_run(v1, api, max_turns, **agent_kw):
    """Runs Agent(**agent_kw) on the Chat Completions or the Responses model; returns
    (final_output or the MaxTurnsExceeded, raw model responses). The client is
    closed on the run's own event loop."""
    async def go():
        client = AsyncOpenAI(base_url=v1, api_key="unused", max_retries=0, timeout=120)
        model_cls = agents.OpenAIChatCompletionsModel if api == "chat" else agents.OpenAIResponsesModel
        agent = agents.Agent(name="weather", model=model_cls(model=MODEL_NAME, openai_client=client), **agent_kw)
        try:
            r = await agents.Runner.run(agent, PROMPT, max_turns=max_turns)
            return r.final_output, r.raw_responses
        except agents.MaxTurnsExceeded as e:
            return e, e.run_data.raw_responses
        finally:
            await client.close()
    return asyncio.run(go())


def oa_function_calls(responses):
    return [item for r in responses for item in r.output if item.type == "function_call"]


def oa_settings(**kw):
    return agents.ModelSettings(temperature=0, max_tokens=MAX_TOKENS, **kw)


def test_openai_agents_output_type_alone(v1):
    """output_type without tools: response_format json_schema constrains the answer to a Weather."""
    out, responses = oa_run(v1, "chat", 1, instructions="Report the weather in Paris.", output_type=Weather,
                            model_settings=oa_settings())
    assert isinstance(out, Weather) and len(responses) == 1


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_agents_required_tool_then_output_type(v1, api):
    """tool_choice "required" with tools and output_type: turn 1 must be a
    get_weather call (response_format / text.format with tool_choice required
    is accepted, the output is tool calls); the tool then disables itself, so
    turn 2 (openai-agents resets tool_choice after a tool call) has only the
    Weather schema left: exactly 2 requests, a Weather at the end."""
    calls = []
    out, responses = oa_run(v1, api, 3, instructions=INSTRUCTIONS, tools=[oa_weather_tool(calls, once=True)],
                            output_type=Weather,
                            model_settings=oa_settings(tool_choice="required", parallel_tool_calls=False))
    assert isinstance(out, Weather), out
    assert len(responses) == 2
    fcs = oa_function_calls(responses)
    assert [fc.name for fc in fcs] == ["get_weather"] and len(calls) == 1
    assert_calls_valid(calls)
    assert json.loads(fcs[0].arguments) == {"city": calls[0]}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_agents_auto_tools_with_output_type(v1, api):
    """tools and output_type under tool_choice auto: each answer is tool calls
    or a Weather message. The tool stays enabled, so the model may call it on
    every turn: the run ends with a Weather or with MaxTurnsExceeded after
    max_turns requests (which one depends on the model, so both are allowed)."""
    calls = []
    out, responses = oa_run(v1, api, 3, instructions=INSTRUCTIONS, tools=[oa_weather_tool(calls, once=False)],
                            output_type=Weather, model_settings=oa_settings(parallel_tool_calls=False))
    assert isinstance(out, (Weather, agents.MaxTurnsExceeded)), out
    assert 1 <= len(responses) <= 3
    assert len(oa_function_calls(responses)) == len(calls)  # every call was valid and ran
    assert_calls_valid(calls)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_agents_stop_on_first_tool(v1, api):
    """tool_choice "required" and tool_use_behavior stop_on_first_tool: one
    request, one get_weather call, whose result is the final output."""
    calls = []
    out, responses = oa_run(v1, api, 2, instructions=INSTRUCTIONS, tools=[oa_weather_tool(calls, once=False)],
                            tool_use_behavior="stop_on_first_tool",
                            model_settings=oa_settings(tool_choice="required", parallel_tool_calls=False))
    assert len(responses) == 1 and len(calls) == 1
    assert_calls_valid(calls)
    assert out == weather_text(calls[0])


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_agents_call_cut_by_max_tokens(v1, api):
    """tool_choice "required" and max_tokens=CUT_TOKENS, fewer than any call
    takes: the answer is a cut call (finish_reason "length" / an incomplete
    response), never the call's raw JSON as text, which openai-agents would
    return as the final output. The run ends at once with ModelBehaviorError."""
    calls = []
    with pytest.raises(agents.ModelBehaviorError):
        oa_run(v1, api, 2, instructions=INSTRUCTIONS, tools=[oa_weather_tool(calls, once=False)],
               model_settings=agents.ModelSettings(temperature=0, max_tokens=CUT_TOKENS, tool_choice="required"))
    assert calls == []


# ---------------------------------------------------------------- pydantic-ai

def pai_model(v1, api):
    provider = OpenAIProvider(base_url=v1, api_key="unused")
    return OpenAIChatModel(MODEL_NAME, provider=provider) if api == "chat" else PaiResponsesModel(MODEL_NAME, provider=provider)


def pai_agent(v1, api, calls, once, output_type, max_tokens=MAX_TOKENS, parallel=False):
    """A pydantic-ai Agent with get_weather (dropped after its first call if once);
    parallel: leave parallel_tool_calls unset (the framework's default, allowed)
    instead of False."""
    def get_weather(city: City) -> str:
        """Current weather in a city."""
        calls.append(city)
        return weather_text(city)

    async def prepare(ctx, tool_def):  # None drops the tool from this step's request
        return None if once and calls else tool_def

    return pydantic_ai.Agent(
        pai_model(v1, api), output_type=output_type, instructions=INSTRUCTIONS,
        tools=[pydantic_ai.Tool(get_weather, prepare=prepare)], retries=1,
        model_settings=pydantic_ai.ModelSettings(temperature=0, max_tokens=max_tokens,
                                                 **({} if parallel else {"parallel_tool_calls": False})))


def pai_tool_calls(messages, name=None):
    """The tool calls of each model response in messages, as (name, args dict) lists."""
    out = []
    for m in messages:
        if isinstance(m, pydantic_ai.ModelResponse):
            out.append([(p.tool_name, p.args_as_dict()) for p in m.parts
                        if isinstance(p, pydantic_ai.ToolCallPart) and name in (None, p.tool_name)])
    return out


def assert_no_retry_prompts(messages):
    for m in messages:
        if isinstance(m, pydantic_ai.ModelRequest):
            retries = [p for p in m.parts if isinstance(p, pydantic_ai.RetryPromptPart)]
            assert not retries, f"the framework rejected an answer: {retries[0].content}"


@pytest.mark.parametrize("native", [False, True], ids=["tool_output", "native_output"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_pydantic_ai_output_type(v1, api, native):
    """The default output mode (tool_output): Weather is a final_result tool
    and text is not allowed, so pydantic-ai sends tool_choice "required".
    NativeOutput(Weather) with a tool: response_format json_schema (Responses:
    text.format) together with tools under tool_choice auto; the answer is
    tool calls or a Weather message. Either way get_weather disables itself
    after one call, so turn 2 has only the output: a Weather within 2 requests."""
    calls = []
    output_type = pydantic_ai.NativeOutput(Weather) if native else Weather
    agent = pai_agent(v1, api, calls, once=True, output_type=output_type)
    r = agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=3))
    assert isinstance(r.output, Weather)
    assert 1 <= r.usage.requests <= 2
    assert_no_retry_prompts(r.all_messages())
    assert_calls_valid(calls)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_pydantic_ai_call_cut_by_max_tokens(v1, api):
    """Tool output (so tool_choice "required") and max_tokens=CUT_TOKENS: the
    answer is a cut call, not text (raw JSON as text would get a retry prompt
    and another request). The run ends after 1 request with pydantic-ai's
    UnexpectedModelBehavior (OutputTokenLimitExceeded)."""
    calls = []
    agent = pai_agent(v1, api, calls, once=False, output_type=Weather, max_tokens=CUT_TOKENS)
    with pydantic_ai.capture_run_messages() as messages, pytest.raises(pydantic_ai.UnexpectedModelBehavior):
        agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=3))
    responses = [m for m in messages if isinstance(m, pydantic_ai.ModelResponse)]
    assert len(responses) == 1 and responses[0].finish_reason == "length"
    assert not any(isinstance(p, pydantic_ai.TextPart) and p.content.strip() for p in responses[0].parts)
    assert calls == []


def test_pydantic_ai_parallel_calls_are_distinct(v1):
    """The tool stays enabled and parallel calls are allowed (pydantic-ai's
    default): no answer may repeat an identical call (same name, same
    arguments) — identical duplicates are what make such loops run away. The
    run ends with a Weather or UsageLimitExceeded at request_limit."""
    calls = []
    agent = pai_agent(v1, "chat", calls, once=False, output_type=Weather, max_tokens=1000, parallel=True)
    with pydantic_ai.capture_run_messages() as messages:
        try:
            out = agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=3)).output
        except pydantic_ai.UsageLimitExceeded as e:
            out = e
    assert isinstance(out, (Weather, pydantic_ai.UsageLimitExceeded)), out
    per_response = pai_tool_calls(messages)
    assert 1 <= len(per_response) <= 3
    for answer in per_response:
        keys = [(name, json.dumps(args, sort_keys=True)) for name, args in answer]
        assert len(keys) == len(set(keys)), f"identical parallel calls in one answer: {keys}"
    assert_no_retry_prompts(messages)
    assert_calls_valid(calls)


# ---------------------------------------------------------------- LangChain

def lc_llm(v1, max_tokens=MAX_TOKENS):
    return ChatOpenAI(model=MODEL_NAME, base_url=v1, api_key="unused", temperature=0, max_tokens=max_tokens,
                      max_retries=0, timeout=120)


def lc_weather_tool(calls):
    @lc_tool
    def get_weather(city: City) -> str:
        """Current weather in a city."""
        calls.append(city)
        return weather_text(city)
    return get_weather


def test_langchain_manual_tool_loop(v1):
    """bind_tools with tool_choice "required" and parallel_tool_calls False: one
    valid get_weather call; its result goes back as a ToolMessage, then
    with_structured_output (json_schema) reads the history into a Weather."""
    calls = []
    get_weather = lc_weather_tool(calls)
    llm = lc_llm(v1)
    history = [HumanMessage(PROMPT)]
    ai = llm.bind_tools([get_weather], tool_choice="required", parallel_tool_calls=False).invoke(history)
    assert len(ai.tool_calls) == 1 and ai.tool_calls[0]["name"] == "get_weather"
    assert ai.response_metadata["finish_reason"] == "tool_calls"
    history += [ai, get_weather.invoke(ai.tool_calls[0])]
    assert isinstance(history[-1], ToolMessage) and calls == [ai.tool_calls[0]["args"]["city"]]
    assert_calls_valid(calls)
    report = llm.with_structured_output(Weather, method="json_schema").invoke(history)
    assert isinstance(report, Weather)


@pytest.mark.parametrize("tool_choice,max_tokens", [("required", CUT_TOKENS), ("auto", 2)])
def test_langchain_call_cut_by_max_tokens(v1, tool_choice, max_tokens):
    """bind_tools with an answer cut by max_tokens: finish_reason "length", no
    tool call, and the generic format's raw JSON never leaks into content.
    Under "auto" the model may begin a call or a text answer
    ('{"response": "...'); 2 tokens cut either inside its JSON wrapper
    ('{"response":"' alone is 3 tokens), so the content is empty on both."""
    ai = lc_llm(v1, max_tokens=max_tokens).bind_tools([lc_weather_tool([])], tool_choice=tool_choice).invoke(PROMPT)
    assert ai.response_metadata["finish_reason"] == "length"
    assert ai.tool_calls == [] and ai.content == "", ai.content


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output(v1, method):
    """json_schema: response_format; function_calling: a Weather tool forced
    by a named tool_choice. Both constrain the answer to a Weather."""
    r = lc_llm(v1).with_structured_output(Weather, method=method, include_raw=True).invoke(
        "It is 21 C in Paris. Report the weather.")
    assert r["parsing_error"] is None
    assert isinstance(r["parsed"], Weather)


@pytest.mark.parametrize("strategy", [ToolStrategy, ProviderStrategy], ids=["tool", "provider"])
def test_langchain_create_agent(v1, strategy):
    """create_agent with a tool and a Weather response_format. ToolStrategy:
    a Weather tool next to get_weather under tool_choice "any" (required);
    ProviderStrategy: response_format json_schema with the tools under
    tool_choice auto (tool calls or a Weather message). A middleware (LangChain's
    wrap_model_call) sets parallel_tool_calls False and drops get_weather once
    it has run, so the next model call has only the Weather schema left: a
    structured Weather within 2 model calls (recursion_limit bounds the graph)."""
    calls = []

    @wrap_model_call
    def weather_once(request, handler):
        tools = [t for t in request.tools if not (calls and getattr(t, "name", None) == "get_weather")]
        return handler(request.override(tools=tools, model_settings={**request.model_settings,
                                                                     "parallel_tool_calls": False}))

    graph = create_agent(lc_llm(v1), tools=[lc_weather_tool(calls)], response_format=strategy(Weather),
                         system_prompt=INSTRUCTIONS, middleware=[weather_once])
    state = graph.invoke({"messages": [HumanMessage(PROMPT)]}, config={"recursion_limit": 8})
    assert isinstance(state["structured_response"], Weather)
    errors = [m.content for m in state["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert not errors, errors  # e.g. arguments the tool's schema rejects
    assert 1 <= sum(isinstance(m, AIMessage) for m in state["messages"]) <= 2
    assert len(calls) <= 1
    assert_calls_valid(calls)
