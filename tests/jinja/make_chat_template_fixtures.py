#!/usr/bin/env python3
"""Generates the reference data for spate's Jinja2 chat-template renderer.

  make_chat_template_fixtures.py [--out-dir DIR]
      Renders every chat template of ../shared/testdata/chat-templates/ (plus the default
      model's template, extracted from its GGUF) with Python's Jinja2 in the environment
      Hugging Face transformers uses, over a set of message lists and options, and writes
      the expected outputs (or error messages) as JSON under
      tests/jinja/fixtures/chat_templates/. Also renders the language-feature snippets
      of FEATURE_CASES into features.json. The C++ tests compare byte for byte.

The Unicode tables the engine needs for Python's str methods are generated separately, by
jinja/make_unicode_data.py.

Reference: Debian's python3-jinja2 (3.1.x) and python3-markupsafe. The environment matches
transformers' _compile_jinja_template: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[loopcontrols]), globals raise_exception / strftime_now, and a
tojson filter that is json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
sort_keys=sort_keys). strftime_now uses a pinned clock (NOW_UNIX_S) in UTC (TZ=UTC).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from datetime import datetime
from pathlib import Path

os.environ["TZ"] = "UTC"
time.tzset()

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT.parent / "shared" / "testdata" / "chat-templates"
DEFAULT_OUT = ROOT / "tests" / "jinja" / "fixtures" / "chat_templates"
DEFAULT_GGUF = Path.home() / ".cache" / "spate" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
NOW_UNIX_S = 1721990400 + 3600 * 13 + 61  # 2024-07-26 13:01:01 UTC


# ----------------------------------------------------------------------------------------------
# The reference environment (transformers' _compile_jinja_template)
# ----------------------------------------------------------------------------------------------

def make_env():
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.exceptions import TemplateError
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Raised(TemplateError):
        """raise_exception(...) from the template (so the fixture can tell it apart)."""

    class AssistantTracker(Extension):
        # transformers' {% generation %} tag; renders its body like a call block.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        def _generation_support(self, caller):
            return caller()

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(NOW_UNIX_S).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, Raised


class Renderer:
    def __init__(self):
        self.env, self.raised = make_env()
        self.cache = {}

    def render(self, source, messages, extra, add_generation_prompt, bos="", eos=""):
        """{"expected": text} or {"error_kind": "raise_exception"|"error", "error": message}."""
        # Round-trip through JSON: the C++ side receives exactly these values.
        messages = json.loads(json.dumps(messages))
        extra = json.loads(json.dumps(extra))
        try:
            if source not in self.cache:
                self.cache[source] = self.env.from_string(source)
            ctx = {"tools": None, "documents": None}
            ctx.update(extra)
            ctx.update(messages=messages, bos_token=bos, eos_token=eos, add_generation_prompt=add_generation_prompt)
            return {"expected": self.cache[source].render(**ctx)}
        except self.raised as e:
            return {"error_kind": "raise_exception", "error": str(e)}
        except Exception as e:  # noqa: BLE001 - any Python error is an expected error case
            return {"error_kind": "error", "error": f"{type(e).__name__}: {e}"}


# ----------------------------------------------------------------------------------------------
# The default model's template, from its GGUF
# ----------------------------------------------------------------------------------------------

def read_gguf_metadata(path: Path, wanted: set[str]) -> dict:
    """Reads selected metadata values from a GGUF v2/v3 file (format: magic, version, tensor
    count, KV count, then key / type / value triples)."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    out = {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        (version,) = struct.unpack("<I", f.read(4))
        if version < 2:
            raise ValueError("GGUF v1 is not supported")
        _n_tensors, n_kv = struct.unpack("<QQ", f.read(16))

        def read_str():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")

        def read_value(t):
            if t in scalar:
                fmt = scalar[t]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            if t == 8:
                return read_str()
            if t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                return [read_value(et) for _ in range(n)]
            raise ValueError(f"unknown GGUF value type {t}")

        for _ in range(n_kv):
            key = read_str()
            (t,) = struct.unpack("<I", f.read(4))
            v = read_value(t)
            if key in wanted:
                out[key] = v
    return out


def extract_smollm2(gguf: Path, out_dir: Path):
    meta = read_gguf_metadata(gguf, {"tokenizer.chat_template", "tokenizer.ggml.tokens",
                                     "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    tokens = meta["tokenizer.ggml.tokens"]
    bos = tokens[meta["tokenizer.ggml.bos_token_id"]]
    eos = tokens[meta["tokenizer.ggml.eos_token_id"]]
    (out_dir / "templates").mkdir(parents=True, exist_ok=True)
    path = out_dir / "templates" / "SmolLM2-135M-Instruct.jinja"
    path.write_text(meta["tokenizer.chat_template"], encoding="utf-8")
    return path, bos, eos


# ----------------------------------------------------------------------------------------------
# Inputs: message lists and extra template variables
# ----------------------------------------------------------------------------------------------

def _tool(name, description, properties, required, **extra):
    fn = {"name": name, "description": description,
          "parameters": {"type": "object", "properties": properties, "required": required}}
    fn.update(extra)
    return {"type": "function", "function": fn}


WEATHER_TOOL = _tool(
    "get_current_weather", "Get the current weather in a given location",
    {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
     "days": {"type": "integer", "description": "Number of days", "minimum": 1, "maximum": 7, "default": 1},
     "hourly": {"type": "boolean", "description": "Hourly forecast"},
     "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
     "options": {"type": "object", "description": "Extra options", "additionalProperties": {"type": "string"},
                 "properties": {"lang": {"type": "string", "description": "Language"}}}},
    ["location"], **{"return": {"type": "string", "description": "A sentence about the weather"}})
SEARCH_TOOL = _tool("web_search", "Search the web.",
                    {"query": {"type": "string", "description": "Query text"}}, ["query"])
NULLABLE_TOOL = _tool("lookup", "Look something up.",
                      {"id": {"type": ["integer", "null"], "description": "Identifier, or null"}}, [])
CODE_TOOL = {"type": "code_interpreter"}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
U2 = {"role": "user", "content": "What's the weather like in Paris?"}


def _call(id_, name, args, as_string):
    return {"id": id_, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}


def _tool_flow(as_string, n_calls=1, system=True):
    calls = [_call("call12345", "get_current_weather", {"location": "Paris, France", "unit": "celsius"}, as_string)]
    if n_calls > 1:
        calls.append(_call("call67890", "web_search", {"query": "Paris events"}, as_string))
    msgs = ([SYS] if system else []) + [U2, {"role": "assistant", "content": None, "tool_calls": calls}]
    msgs.append({"role": "tool", "tool_call_id": "call12345", "name": "get_current_weather",
                 "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"})
    if n_calls > 1:
        msgs.append({"role": "tool", "tool_call_id": "call67890", "name": "web_search",
                     "content": "Jazz festival tonight."})
    msgs.append({"role": "assistant", "content": "It is 22 °C in Paris."})
    msgs.append({"role": "user", "content": "Thanks!"})
    return msgs


def _long_conversation():
    msgs = []
    for i in range(8):
        msgs.append({"role": "user", "content": f"Question number {i}: what is {i} + {i}?"})
        msgs.append({"role": "assistant", "content": f"The answer is {i + i}."})
    msgs.append({"role": "user", "content": "And finally?"})
    return msgs


MESSAGE_SETS = {
    "system_user": [SYS, U1],
    "user_only": [U1],
    "multi_turn": [U1, A1, U2],
    "system_multi_turn": [SYS, U1, A1, U2],
    "ends_with_assistant": [SYS, U1, A1],
    "non_ascii": [
        {"role": "system", "content": "Réponds en français. Ωμέγα — “quotes” ‘single’ « guillemets » ∑∫√"},
        {"role": "user", "content": "  Привет! 你好，世界 🌍👋🏽 ñandú ß ǅ İstanbul\u00a0\u3000 "},
        {"role": "assistant", "content": "こんにちは！ 😀 \"quoted\" \\ back\\slash \t tab"},
        {"role": "user", "content": "Ünïcödé\ncontrol \x01\x1f and emoji 👨‍👩‍👧 end\n"}],
    "special_chars": [{"role": "user", "content": "Line1\nLine2\r\nLine3\n\n  {{ not a template }} {% raw %} </s> "
                                                   "<|im_end|> '''single''' \"double\""}],
    "long_conversation": _long_conversation(),
    "empty_content": [{"role": "user", "content": ""}],
    "whitespace_content": [{"role": "system", "content": "  padded system  "},
                           {"role": "user", "content": "\n\tpadded user \n"}],
    "think_in_assistant": [U1, {"role": "assistant", "content": "<think>\nreasoning...\n</think>\n\nFinal answer."}, U2],
    "tool_calls_dict_args": _tool_flow(False),
    "tool_calls_string_args": _tool_flow(True),
    "two_tool_calls_dict_args": _tool_flow(False, 2),
    "two_tool_calls_string_args": _tool_flow(True, 2, system=False),
    "tool_call_with_content": [
        U2, {"role": "assistant", "content": "Let me check.",
             "tool_calls": [_call("call12345", "get_current_weather", {"location": "Paris"}, False)]},
        {"role": "tool", "tool_call_id": "call12345", "content": "sunny"}],
    # Inputs some templates reject with raise_exception (or fail on).
    "not_alternating": [U1, U2],
    "system_only": [SYS],
    "assistant_first": [A1, U1],
    "invalid_role": [{"role": "wizard", "content": "abracadabra"}],
    "empty": [],
    "content_parts": [{"role": "user", "content": [{"type": "text", "text": "Describe this."},
                                                   {"type": "text", "text": "Please."}]}],
    "numeric_content": [{"role": "user", "content": 42}],
    "null_content": [{"role": "user", "content": None}],
    "missing_content": [{"role": "user"}],
    "bad_tool_call_id": [
        U2, {"role": "assistant", "tool_calls": [_call("short", "get_current_weather", {"location": "Paris"}, False)]},
        {"role": "tool", "tool_call_id": "short", "content": "sunny"}],
}

EXTRA_CONTEXTS = {
    "plain": {},
    "tools": {"tools": [WEATHER_TOOL, SEARCH_TOOL]},
    "tools_nullable": {"tools": [NULLABLE_TOOL]},
    "tools_code": {"tools": [WEATHER_TOOL, CODE_TOOL]},
    "documents": {"documents": [{"title": "Tall penguins", "text": "Emperor penguins are the tallest."},
                                {"title": "Penguin habitats", "text": "Emperor penguins only live in Antarctica."}]},
    "llama_options": {"tools": [WEATHER_TOOL], "tools_in_user_message": False, "date_string": "01 Jan 2025",
                      "builtin_tools": ["brave_search", "code_interpreter"]},
    "firefunction": {"functions": json.dumps([WEATHER_TOOL["function"]]), "datetime": "2024-07-26"},
    "flags": {"enable_thinking": False, "enable_citations": True, "custom_tools": [SEARCH_TOOL]},
}

# gpt-oss (harmony): conversations as spate passes them to the template (an assistant message's
# earlier reasoning in "thinking", "" for the content of one with tool calls), reasoning_effort,
# and tools whose parameters use every JSON type the template renders as TypeScript. Rendered
# for the templates of HARMONY_TEMPLATES only (names starting with "harmony_").
HARMONY_TEMPLATES = ["openai-gpt-oss-120b.jinja"]
_WEATHER_CALL = _call("call12345", "get_current_weather", {"location": "Paris, France", "unit": "celsius"}, False)
_TOOL_RESULT = {"role": "tool", "tool_call_id": "call12345", "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"}
_CALL_TURN = {"role": "assistant", "content": "", "thinking": "The user wants the weather; call the tool.",
              "tool_calls": [_WEATHER_CALL]}
HARMONY_MESSAGE_SETS = {
    "harmony_tool_call": [SYS, U2, _CALL_TURN],
    "harmony_tool_result": [SYS, U2, _CALL_TURN, _TOOL_RESULT],
    "harmony_tool_result_string_args": [U2, dict(_CALL_TURN, tool_calls=[
        _call("call12345", "get_current_weather", {"location": "Paris"}, True)]), _TOOL_RESULT],
    "harmony_multi_turn": [SYS, U2, _CALL_TURN, _TOOL_RESULT,
                           {"role": "assistant", "content": "It is 22 °C in Paris.", "thinking": "Report it."},
                           {"role": "user", "content": "And tomorrow?"},
                           dict(_CALL_TURN, thinking="Call again for tomorrow."), _TOOL_RESULT],
    "harmony_content_as_analysis": [U2, {"role": "assistant", "content": "Let me check the weather.",
                                         "tool_calls": [_WEATHER_CALL]}, _TOOL_RESULT],
    "harmony_thinking_last": [U1, {"role": "assistant", "content": "Fine, thanks.", "thinking": "A greeting."}],
    "harmony_content_and_thinking": [U2, {"role": "assistant", "content": "Checking.", "thinking": "Call it.",
                                          "tool_calls": [_WEATHER_CALL]}],
    "harmony_channel_in_content": [U1, {"role": "assistant", "content": "<|channel|>final<|message|>Hi"}, U2],
    "harmony_tool_without_call": [U1, {"role": "tool", "content": "orphan"}],
}
_TYPES_TOOL = _tool(
    "plan_trip", "Plan a trip.",
    {"city": {"type": "string", "description": "Destination"},
     "mode": {"type": "string", "enum": ["train", "plane"], "default": "train"},
     "days": {"type": "integer", "default": 3},
     "budget": {"type": "number", "nullable": True},
     "flexible": {"type": "boolean", "default": False},
     "stops": {"type": "array", "items": {"type": "string"}},
     "scores": {"type": "array", "items": {"type": "number"}},
     "legs": {"type": "array", "items": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                                         "required": ["from"]}},
     "any_list": {"type": "array"},
     "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
     "prefs": {"type": "object", "properties": {"seat": {"type": "string", "enum": ["aisle", "window"]},
                                                "meals": {"type": "integer"}}, "required": ["seat"]},
     "free": {"type": "object"},
     "note": {"type": ["string", "null"], "description": "A note, or null"},
     "id": {"oneOf": [{"type": "string", "description": "by name"}, {"type": "integer", "default": 0}]},
     "thing": {"oneOf": [{"type": "object"}, {"type": "string"}]},
     "anything": {}},
    ["city", "days"])
_NO_PARAMS_TOOL = {"type": "function", "function": {"name": "get_time", "description": "The time now."}}
HARMONY_CONTEXTS = {
    "harmony_effort_low": {"reasoning_effort": "low"},
    "harmony_effort_medium": {"reasoning_effort": "medium"},
    "harmony_effort_high": {"reasoning_effort": "high", "tools": [WEATHER_TOOL]},
    "harmony_tool_types": {"tools": [WEATHER_TOOL, _TYPES_TOOL, _NO_PARAMS_TOOL, NULLABLE_TOOL]},
    "harmony_identity_builtins": {"model_identity": "You are a test model.", "builtin_tools": ["browser", "python"],
                                  "reasoning_effort": "low", "tools": [SEARCH_TOOL]},
}
MESSAGE_SETS.update(HARMONY_MESSAGE_SETS)
EXTRA_CONTEXTS.update(HARMONY_CONTEXTS)

# Message sets rendered with every extra context (the others only with "plain").
TOOL_MESSAGE_SETS = ["system_user", "user_only", "multi_turn", "non_ascii", "tool_calls_dict_args",
                     "tool_calls_string_args", "two_tool_calls_dict_args", "two_tool_calls_string_args",
                     "tool_call_with_content", "empty"]

# bos / eos tokens per template family (by file-name prefix), as the models define them.
SPECIAL_TOKENS = [
    ("meta-llama", "<|begin_of_text|>", "<|eot_id|>"),
    ("fireworks", "<|begin_of_text|>", "<|eot_id|>"),
    ("meetkai", "<|begin_of_text|>", "<|eot_id|>"),
    ("NousResearch", "<|begin_of_text|>", "<|im_end|>"),
    ("Qwen", "", "<|im_end|>"),
    ("deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("llama-cpp-deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("google-gemma", "<bos>", "<eos>"),
    ("CohereForAI", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("microsoft-Phi", "<s>", "<|endoftext|>"),
    ("mistralai", "<s>", "</s>"),
]


def special_tokens_for(name):
    for prefix, bos, eos in SPECIAL_TOKENS:
        if name.startswith(prefix):
            return bos, eos
    return "<s>", "</s>"


def template_cases(renderer, name, source, bos, eos):
    """All (message set, extra context, add_generation_prompt) cases for one template, with
    the expected outputs de-duplicated into a table."""
    outputs, index, cases = [], {}, []
    harmony = name in HARMONY_TEMPLATES
    for mname, messages in MESSAGE_SETS.items():
        for cname, extra in EXTRA_CONTEXTS.items():
            if not harmony and (mname.startswith("harmony_") or cname.startswith("harmony_")):
                continue
            wide = mname in TOOL_MESSAGE_SETS or (harmony and mname.startswith("harmony_"))
            if cname != "plain" and not wide and not cname.startswith("harmony_"):
                continue
            for agp in (True, False):
                r = renderer.render(source, messages, extra, agp, bos, eos)
                case = {"name": f"{mname}/{cname}/{'gen' if agp else 'nogen'}", "messages": mname,
                        "extra_context": cname, "add_generation_prompt": agp}
                if "expected" in r:
                    if r["expected"] not in index:
                        index[r["expected"]] = len(outputs)
                        outputs.append(r["expected"])
                    case["output"] = index[r["expected"]]
                else:
                    case["error_kind"] = r["error_kind"]
                    case["error"] = r["error"]
                cases.append(case)
    return outputs, cases


# ----------------------------------------------------------------------------------------------
# Language-feature snippets (features.json): rendered with no messages, the keyword arguments
# as extra template variables.
# ----------------------------------------------------------------------------------------------

FEATURE_CASES = []


def add(name, template, **variables):
    FEATURE_CASES.append({"name": name, "template": template, "vars": variables})

# whitespace control / lexer
add('ws_trim_lstrip', "a\n  {% if true %}\n  x\n  {% endif %}\nb")
add('ws_raw', "{% raw %}\n  {{ x }}\n  {% endraw %}\nY")
add('ws_raw_lstrip', "  {% raw %}A{% endraw %}  ")
add('ws_comment', "a  {#- c -#}  b\n  {# c #}\nz")
add('ws_minus', "a {{- 'x' -}} b {%- if true -%} c {%- endif -%} d")
add('ws_plus', "  {%+ if true %}x{% endif +%}\n")
add('ws_trailing_newline', "x\n\n")
add('ws_crlf', "x\r\ny\rz\n")
add('ws_block_newline', "{% if true %}\nA\n{% endif %}\nB\n")
add('ws_var_no_trim', "{{ 'a' }}\nb")
add('ws_nested', "<\n{% for i in [1,2] %}\n  {% if i %}\n    [{{ i }}]\n  {% endif %}\n{% endfor %}\n>")
add('ws_tabs', "\t{% if true %}\tx{% endif %}")
add('ws_unicode_space', "a\u3000{%- if true %}x{% endif %}")
add('ws_comment_lstrip', "line\n    {# comment #}\nnext")
add('ws_minus_newlines', "a\n\n   {{- 'b' }}\n\n  c")
add('str_escapes', "{{ 'a\\nb' }}|{{ 'tab\\tq\\'' }}|{{ \"\\x41\\u00e9\\U0001F600\" }}|{{ '\\d' }}|{{ 'é\\é' }}")
add('str_adjacent', "{{ 'a' 'b' \"c\" }}")
add('str_octal', "{{ '\\101\\7' }}")
add('num_literals', "{{ 1_000 }} {{ 0x1F }} {{ 0b11 }} {{ 0o17 }} {{ 1.5e3 }} {{ 1_0.5 }} {{ 1E2 }} {{ .5 if false else 2.50 }}")
add('dict_literal_braces', "{{ {'a': 1}}}")
add('dot_int', "{{ foo.0 }}{{ x.1.2 }}", foo=[5], x=[[0, 0, [5]], [0, 0, 7]])

# values / repr
add('repr_basic', "{{ none }}|{{ true }}|{{ false }}|{{ 1.0 }}|{{ undefvar }}|{{ 'x'|safe }}|{{ True }}|{{ None }}")
add('repr_list', "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}")
add('repr_tuple', "{{ (1,) }}{{ (1,2) }}{{ () }}{{ ('a', 1) }}")
add('repr_quotes', "{{ ['it\\'s', 'q\"', 'both\\'\"', 'back\\\\slash'] }}")
add('repr_control', "{{ ['\\x00\\x7f\\x80\\xa0\\xad\u2028é😀\\t\\n\\r'] }}")
add('repr_markup', "{{ ['a', 'x'|safe] }}")
add('repr_nested_dict', "{{ x }}", x={'a': [1, {'b': None}], 'c': 'é'})
add('floats', "{{ 3.0 }} {{ 1e100 }} {{ -0.0 }} {{ 1/3 }} {{ 2.5e-5 }} {{ 123456789012345678.0 }} {{ 0.1+0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }}")
add('float_ops', "{{ 10 // 3 }} {{ 10.5 // 3 }} {{ -10.5 // 3 }} {{ 10 % 3.5 }} {{ -1 % 5.0 }} {{ 2 ** 0.5 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 2**3**2 }}")
add('int_div', "{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ 7.0/2 }} {{ 3 * 1.0 }}")
add('unary', "{{ -1|abs }} {{ - 2 ** 2 }} {{ -(2) }} {{ +3 }} {{ not true }} {{ not 0 }}")
add('bool_arith', "{{ true + 1 }} {{ true * 3 }} {{ 'ab' * true }}")
add('seq_mul', "{{ 'a' * 3 }}{{ [1] * 2 }}{{ 3 * 'b' }}{{ 'x' * -1 }}{{ (1,) * 2 }}")
add('concat_ops', "{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 1 + 1.5 }}{{ (1,) + (2,) }}")
add('tilde', "{{ 'a' ~ none ~ 1 ~ [1] ~ undefvar ~ 2.0 ~ true }}")
add('compare', "{{ 1 == 1.0 }}{{ [1] == (1,) }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ none == none }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'é' > 'z' }}{{ {'a':1} == {'a':1} }}{{ undefvar == undefvar2 }}")
add('in_ops', "{{ 'ab' in 'cabd' }}{{ 1 in [1,2] }}{{ 'a' in {'a':1} }}{{ 'z' not in 'abc' }}{{ 'x' in undefvar }}{{ 2 in range(3) }}{{ ('a', 1) in {'a': 1}.items() }}")
add('and_or_values', "{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ none or none }}|{{ [] or {} }}")
add('condexpr', "{{ 'x' if false }}|{{ 'y' if false else 'z' }}|{{ 'a' if 1 else 'b' if 2 else 'c' }}")
add('slicing', "{{ x[1:] }}{{ x[:-1] }}{{ x[::2] }}{{ x[-2:] }}{{ x[5:1:-1] }}{{ x[::-1] }}{{ 'abcdef'[1:4] }}{{ 'abc'[::-1] }}{{ 'héllo'[1:3] }}{{ 'abc'[5:] }}{{ x[-100:100] }}", x=[1,2,3,4])
add('indexing', "{{ 'héllo'|length }}{{ 'héllo'[1] }}{{ 'héllo'[-1] }}{{ x[-1] }}{{ x[10] }}|{{ x['a'] }}|{{ d[0] }}", x=[1,2,3], d={0: 'zero'})
add('str_iter', "{% for c in 'héllo' %}{{ c }},{% endfor %}")
add('getattr_dict_method', "{{ d['items'] }}|{{ d.get('items') }}|{{ d.keys is defined }}|{{ d.nokey is defined }}", d={'items': 5})

# statements
add('if_elif', "{% if x %}a{% elif y %}b{% else %}c{% endif %}", y=1)
add('for_else', "{% for x in [] %}{{ x }}{% else %}none{% endfor %}")
add('for_filter', "{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}")
add('loop_vars', "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }}-{{ loop.revindex0 }}-{{ loop.first }}-{{ loop.last }}-{{ loop.cycle('a','b') }}-{{ loop.index0 }}|{% endfor %}")
add('loop_controls', "{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %}")
add('loop_break_else', "{% for x in [1] %}{% break %}{% else %}E{% endfor %}done")
add('loop_nested', "{% for x in [1,2] %}{% for y in 'ab' %}{{ loop.index }}{{ x }}{{ y }}{% endfor %}{{ loop.index }}{% endfor %}")
add('loop_depth', "{% for x in [1] %}{% for y in [2] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}{% endfor %}")
add('loop_changed', "{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}")
add('loop_repr', "{% for x in [1, 2] %}{{ loop }}{% endfor %}")
add('loop_outside', "{{ loop }}")
add('loop_unpack', "{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}{% for (a, b) in [[1,2]] %}{{ a }}{{ b }}{% endfor %}")
add('loop_dict', "{% for k in d %}{{ k }}{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", d={'b': 1, 'a': 2})
add('loop_scope', "{% set x = 1 %}{% for i in [1] %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}")
add('loop_scope2', "{% for i in [1,2] %}[{{ y }}]{% set y = i %}{% endfor %}{{ y }}")
add('if_scope', "{% if true %}{% set x = 5 %}{% endif %}{{ x }}")
add('set_tuple', "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ c }}{{ d }}")
add('set_tuple_bad', "{% set a, b = [1] %}")
add('set_block', "{% set x %}  a  {% endset %}[{{ x }}]{% set y | trim | upper %}  b  {% endset %}[{{ y }}]")
add('set_block_scope', "{% set x %}{% set z = 1 %}{% endset %}{{ z }}")
add('filter_block', "{% filter upper %}{% set y = 1 %}{{ y }}abc{% endfilter %}[{{ y }}]")
add('with_block', "{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}", a=5)
add('namespace_basic', "{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{% set ns.b = 5 %}{{ ns.a }}{{ ns.b }}{{ ns.c }}")
add('namespace_repr', "{{ namespace(a=1) }} {{ namespace({'b': 2}, a=1) }}")
add('namespace_loop', "{% set ns = namespace(found=false) %}{% for x in [1,2,3] %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}")
add('namespace_bad', "{% set ns = 5 %}{% set ns.a = 1 %}")
add('namespace_item', "{% set ns = namespace(a=1) %}{{ ns['a'] }}{{ ns.a is defined }}{{ ns.zz is defined }}")
add('print_stmt', "{% print 1, 'a' %}")
add('generation', "{% generation %}gen{% set q = 1 %}{% endgeneration %}{{ q }}")

# macros
add('macro_defaults', "{% macro m(a, b='x') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(a=3, b=4) }}{{ m(b=5) }}")
add('macro_missing_arg', "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}")
add('macro_too_many', "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}")
add('macro_bad_kw', "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}")
add('macro_varargs', "{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, c=3) }}")
add('macro_late_binding', "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}")
add('macro_late_binding2', "{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% set x = 2 %}{{ m() }}")
add('macro_closure_loop', "{% for i in [1,2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}")
add('macro_scope', "{% macro m() %}{% set q = 1 %}{{ q }}{% endmacro %}{{ m() }}{{ q }}")
add('macro_shadow', "{% set x = 1 %}{% macro m() %}{{ x }}{% set x = 3 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}", x=9)
add('macro_before_def', "{{ m() }}{% macro m() %}hi{% endmacro %}")
add('macro_default_ref', "{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}")
add('macro_repr', "{{ m }}{% macro m() %}{% endmacro %}{{ m }}")
add('macro_recursive', "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}")
add('macro_returns_str', "{% macro m() %}  x  {% endmacro %}[{{ m()|trim }}]{{ m() is string }}")
add('macro_caller', "{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}X{% endcall %}")
add('macro_caller_args', "{% macro m() %}{{ caller(1, 2) }}{% endmacro %}{% call(a, b) m() %}{{ a + b }}{% endcall %}")
add('macro_namespace_param', "{% macro gen(functions, namespace='functions') %}{{ namespace }}{% endmacro %}{{ gen([]) }}")
add('not_callable', "{% set m = 5 %}{{ m() }}")

# filters
add('f_trim', "{{ '  abc  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ none|trim }}|{{ undefvar|trim }}|{{ '\u3000a\u00a0'|trim }}")
add('f_case', "{{ 'Hello World'|lower }}|{{ 'hello world'|upper }}|{{ 'hello wORLD'|capitalize }}|{{ 'hello-world (foo) [bar]'|title }}|{{ 'ßtraße ǆ'|upper }}|{{ 'ΣΑΣ ΟΔΟΣ'|lower }}|{{ 'ǆemal'|title }}")
add('f_tojson', "{{ x|tojson }}", x={'a': [1, 2.5, None, True, 'é"\n\\\x01'], 'b': {}})
add('f_tojson_indent', "{{ x|tojson(indent=2) }}", x={'a': [1, 2.5, None, True, 'é"\n'], 'b': {}, 'c': []})
add('f_tojson_ascii', "{{ x|tojson(2) }}|{{ x|tojson(ensure_ascii=true) }}", x={'a': 'é😀\x7f'})
add('f_tojson_sep', "{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(sort_keys=true) }}", x={'b': [1, 2], 'a': 2})
add('f_tojson_str_indent', "{{ x|tojson(indent='\\t') }}", x={'a': [1]})
add('f_tojson_nonserializable', "{{ x|items|tojson }}", x={'a': 1})
add('f_tojson_keys', "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}")
add('f_tojson_float', "{{ [1.0, 1e20, 0.1, -0.0]|tojson }}")
add('f_sort', "{{ [3,1,2]|sort }}{{ [3,1,2]|sort(reverse=true) }}{{ ['b','A','a']|sort }}{{ ['b','A','a']|sort(case_sensitive=true) }}{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}")
add('f_reverse', "{{ [1,2,3]|reverse|list }}{{ 'abc'|reverse }}{{ (1, 2)|reverse|join }}")
add('f_first_last', "{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ []|first }}{{ 'abc'|first }}{{ 'abc'|last }}{{ {'a': 1}|first }}")
add('f_unique', "{{ [1,2,1]|unique|list }}{{ ['a','A']|unique|list }}{{ ['a','A']|unique(case_sensitive=true)|list }}{{ [1, 1.0, true]|unique|list }}")
add('f_dictsort', "{{ {'b':1,'a':2}|dictsort }}{{ {'b':1,'a':2}|items|list }}{{ {'a': 1, 'b': 2}|dictsort(reverse=true) }}{{ {'a': 2, 'B': 1}|dictsort(by='value') }}")
add('f_join', "{{ [1,2]|join }}{{ [1,2]|join(', ') }}{{ [{'a':1},{'a':2}]|join(',', attribute='a') }}{{ ['x', none]|join('-') }}")
add('f_length', "{{ 'abc'|length }}{{ [1,2]|count }}{{ {'a':1}|length }}{{ undefvar|length }}{{ 'héllo'|length }}")
add('f_int_float', "{{ '42'|int }}{{ '42.7'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}{{ 4.9|int }}{{ '0x1A'|int(0, 16) }}{{ '3.5'|float }}{{ 'x'|float }}{{ 3|float }}{{ ' 7 '|int }}{{ '1_000'|int }}{{ '1e3'|int }}{{ none|int }}{{ true|int }}")
add('f_string', "{{ 5|string }}{{ none|string }}{{ [1,'a']|string }}{{ (5|string) is string }}")
add('f_indent', "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb\n\nc'|indent(2, true) }}|{{ 'a\nb\n\nc'|indent(2, blank=true) }}|{{ 'a\n'|indent(first=true) }}|{{ 'x\ny'|indent('> ') }}")
add('f_default', "{{ undefvar|default('d') }}{{ none|default('d') }}{{ ''|default('d', true) }}{{ 0|d('z', true) }}{{ undefvar|d }}")
add('f_select', "{{ [1,2,3,4]|select('odd')|list }}{{ [1,2,3,4]|reject('odd')|list }}{{ [0,1,'',None,'a']|select|list }}{{ [1,2,3]|select('divisibleby', 3)|list }}{{ ['a', 'b']|reject('equalto', 'a')|list }}")
add('f_selectattr', "{{ [{'a':1},{'b':2}]|selectattr('a')|list }}{{ [{'a':1},{'a':2}]|selectattr('a','equalto',2)|list }}{{ [{'a':1},{'b':2}]|rejectattr('a','defined')|list }}{{ none|selectattr('a')|list }}")
add('f_map', "{{ [{'a':1},{'b':2}]|map(attribute='a')|list }}{{ [{'a':1},{'b':2}]|map(attribute='a', default=0)|list }}{{ ['A','b']|map('lower')|list }}{{ [1,2,3]|map('string')|join('-') }}{{ [[1, 2]]|map(attribute='1')|list }}")
add('f_replace', "{{ 'a  b'|replace(' ', '_') }}{{ 'aaa'|replace('a','b',2) }}{{ 'ab'|replace('', '-') }}{{ 5|replace('5', 'five') }}")
add('f_misc', "{{ -3|abs }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 2.1|round(0, 'ceil') }}{{ 42|round }}{{ [1, 2]|sum }}{{ [1.5, 2]|sum }}{{ [3, 1]|max }}{{ ['b', 'A']|min }}{{ []|max }}")
add('f_center', "[{{ 'ab'|center(7) }}][{{ 'abc'|center(6) }}]")
add('f_wordcount', "{{ 'Hello World, foo_bar 42'|wordcount }}")
add('f_truncate', "{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, True) }}|{{ 'foo bar baz qux'|truncate(11) }}|{{ 'foo bar baz qux'|truncate(11, False, '...', 0) }}")
add('f_escape', "{{ '<a href=\"x\">&\\'</a>'|e }}|{{ '<b>'|safe|e }}|{{ '<b>'|forceescape }}|{{ ('<b>'|e) is escaped }}")
add('f_format', "{{ '%s-%d-%.2f'|format('a', 3, 1.5) }}|{{ '%(x)s'|format(x=1) }}|{{ '%5s|%-5s|%05d|%x|%r'|format('a', 'b', 42, 255, 'q') }}")
add('f_batch_slice', "{{ [1,2,3,4,5]|batch(2)|list }}{{ [1,2,3,4,5]|batch(2, 0)|list }}{{ [1,2,3,4,5]|slice(2)|list }}")
add('f_list', "{{ 'abc'|list }}{{ {'a': 1}|list }}{{ (1, 2)|list }}{{ range(3)|list }}")
add('f_attr', "{{ d|attr('items') is defined }}{{ d|attr('a') is defined }}", d={'a': 1})
add('f_unknown_soft', "{% if false %}{{ x|nofilter }}{% endif %}ok")
add('f_unknown', "{{ x|nofilter }}")
add('f_unknown_soft_runtime', "{% if true %}{{ x|nofilter }}{% endif %}ok")
add('t_unknown_soft', "{% if false %}{{ x is notest }}{% endif %}ok")

# tests
add('tests_types', "{{ 'x' is string }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [] is sequence }}{{ {} is sequence }}{{ 'a' is iterable }}{{ none is iterable }}{{ undefvar is iterable }}{{ none is none }}{{ true is boolean }}{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ 'Abc' is lower }}")
add('tests_cmp', "{{ 1 is in [1,2] }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 1 is lt 2 }}{{ 'a' is sameas 'a' }}{{ none is sameas none }}{{ range is callable }}{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ 1 is equalto 1.0 }}")
add('tests_num', "{{ x is divisibleby 3 }}{{ x is divisibleby(2) }}{{ x is odd }}{{ x is not even }}{{ 1.0 is odd }}", x=9)
add('tests_defined', "{{ x.y is defined }}{{ x.y is undefined }}{{ z is defined }}{{ n is defined }}", x={}, n=None)
add('tests_callable', "{{ x.get is callable }}{{ x is callable }}{{ 'a'.upper is callable }}", x={})
add('tests_filter_test', "{{ 'trim' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}")
add('tests_true_false', "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}")

# methods
add('m_str', "{{ 'hello world'.split() }}{{ 'a,b,c'.split(',', 1) }}{{ '  x  '.strip() }}{{ 'xxaxx'.strip('x') }}{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('c','d')) }}{{ ' a b '.rsplit(None, 1) }}{{ 'a\\nb\\r\\nc'.splitlines() }}")
add('m_str2', "{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'abc'.replace('b','x') }}{{ 'abc'.find('c') }}{{ 'abc'.rfind('z') }}{{ 'aXbX'.count('X') }}{{ 'abc'.index('b') }}")
add('m_str3', "{{ 'x'.ljust(3, '-') }}{{ 'x'.rjust(3) }}{{ '42'.zfill(5) }}{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }}{{ 'prefix_x'.removeprefix('prefix_') }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ '  '.isspace() }}")
add('m_format', "{{ '{} and {}'.format(1, 'a') }}{{ '{x}'.format(x=2) }}{{ '{0}{0}'.format('r') }}{{ '{:>5}|{:<4}|{:^6}'.format('a', 'b', 'c') }}{{ '{:.2f}|{:05d}|{:,}|{:x}|{!r}'.format(3.14159, 42, 1234567, 255, 'q') }}{{ '{a[0]}{b.c}'.format(a=[7], b={'c': 8}) }}")
add('m_join', "{{ ', '.join(['a','b']) }}{{ ''.join('xyz') }}")
add('m_join_bad', "{{ ', '.join([1, 2]) }}")
add('m_dict', "{{ {'a':1}.items() }}{{ {'a':1}.keys() }}{{ {'a':1}.values() }}{{ {'a':1}.get('a') }}{{ {'a':1}.get('b') }}{{ {'a':1}.get('b', 3) }}{{ {'a':1}.items()|list }}{{ {'a': 1}.items()|length }}")
add('m_list', "{{ [1,2,1].count(1) }}{{ [1,2].index(2) }}{% set l = [1,2,3] %}{{ l.pop() }}{{ l }}{{ l.pop(0) }}{{ l }}")
add('m_list_append_unsafe', "{% set l = [] %}{{ l.append }}|{{ l.append(1) }}")
add('m_dict_update_unsafe', "{% set d = {} %}{{ d.update({'a': 1}) }}")
add('m_unknown_attr', "{{ 'abc'.nope }}|{{ [1].nope is defined }}")

# globals
add('g_range', "{{ range(3) }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(2)|length }}")
add('g_range_big', "{{ range(200000)|length }}")
add('g_dict', "{{ dict(a=1, b=2) }} {{ dict() }} {{ dict([('x', 1)], y=2) }}")
add('g_strftime', "{{ strftime_now('%Y-%m-%d %H:%M:%S %d %b %Y %A %j') }}")
add('g_raise', "{{ raise_exception('custom message: ' ~ 42) }}")

# errors
add('e_undefined_attr', "{{ undefinedvar.attr }}")
add('e_dict_missing_chain', "{{ x.y.z }}", x={})
add('e_add_types', "{{ 'a' + 1 }}")
add('e_compare', "{{ 1 < 'a' }}")
add('e_in_str', "{{ 1 in 'abc' }}")
add('e_in_none', "{{ 1 in none }}")
add('e_iter_none', "{% for x in none %}{% endfor %}")
add('e_zero_div', "{{ 7 / 0 }}")
add('e_syntax_unclosed', "{% if x %}")
add('e_syntax_endtag', "{% for x in y %}{% endif %}")
add('e_syntax_unknown_tag', "{% foo %}")
add('e_syntax_filter', "{{ x | }}")
add('e_syntax_empty', "{{ }}")
add('e_syntax_default_order', "{% macro m(a=1, b) %}{% endmacro %}")
add('e_break_outside', "{% break %}")
add('e_syntax_assign_const', "{% set true = 1 %}")
add('e_unterminated_string', "{{ 'abc }}")
add('e_unterminated_comment', "{# abc")
add('e_markup_concat', "{{ 'a'|safe + '<b>' }}|{{ '<i>' + 'x'|safe }}|{{ ('a'|safe + '<b>') is escaped }}")
add('x_markup_tojson', "{{ 'Use '|safe + d.name + ': '|safe + d|tojson }}", d={'name': 'a<b>&"c"', 'x': "it's"})
add('x_percent', "{{ '%s=%d' % ('a', 3) }}|{{ '%5.1f%%' % 12.345 }}|{{ '%(k)s' % {'k': 'v'} }}|{{ '%s' % [1, 2] }}")
add('x_ns_recursive_repr', "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}")
add('x_loop_generator_length', "{% for x in [3, 1, 2]|select %}{{ loop.length }}{{ loop.last }}{% endfor %}")
add('x_loop_continue_else', "{% for x in [1, 2] %}{% continue %}{% else %}E{% endfor %}")
add('x_raw_minus', "a  {%- raw -%}  {{ x }}  {%- endraw -%}  b")
add('x_tools_none', "{{ tools is defined }}{{ tools is none }}{{ documents is none }}")
add('x_messages_pop', "{{ messages.pop() }}")
add('x_lipsum_undefined', "{{ lipsum is defined }}{{ cycler is defined }}")
add('x_set_loop_var', "{% for tool in tools2 %}{% set tool = tool.function %}{{ tool.name }};{% endfor %}",
    tools2=[{'function': {'name': 'a'}}, {'function': {'name': 'b'}}])
add('x_nested_macro_calls', "{% macro a(x) %}[{{ b(x) }}]{% endmacro %}{% macro b(x) %}{{ x|upper }}{% endmacro %}{{ a('q') }}")
add('x_const_slice_output', "{{ (0)[1:] }}|{{ (1)[1:] is sequence }}")
add('x_const_slice_error', "{{ (none)[::-1] == u }}")
add('x_undefined_callable_sequence', "{{ u is callable }}{{ u is sequence }}{{ u is iterable }}")
add('x_str_methods_unicode', "{{ 'ǅemal'.title() }}{{ 'ǆ'.capitalize() }}{{ 'ΣΑΣ ΟΔΟΣ.'.lower() }}{{ 'straße'.upper() }}{{ 'İ'.lower()|length }}")
add('x_strip_unicode', "[{{ '\\u3000\\u00a0 x \\u2028'.strip() }}][{{ '\\x1c a \\x85'.split() }}]")
add('x_indent_linebreaks', "{{ 'a\\x0bb\\x0cc\\u2028d'|indent(2) }}")
add('x_tojson_big_ints', "{{ [9007199254740993, -1, 0]|tojson }}{{ 1e300 * 1e300 }}")
add('x_cond_no_else', "[{{ 'a' if false }}]{{ ('a' if false) is defined }}")
add('x_dict_dup_keys', "{{ {'a': 1, 'b': 2, 'a': 3} }}{{ {1: 'x', true: 'y', 1.0: 'z'} }}")
add('x_with_loop', "{% for i in [1, 2] %}{% with j = i * 10 %}{{ j }}{{ loop.index }}{% endwith %}{% endfor %}")
add('x_call_block_kwargs', "{% macro m(a) %}{{ a }}:{{ caller(a) }}{% endmacro %}{% call(v) m(5) %}<{{ v * 2 }}>{% endcall %}")

# Jinja2's compile-time scoping: a name assigned later in a scope (and not read before in it)
# starts undefined there, unless only some if-branches assign it.
add('scope_later_set_root', "{% for m in [1] %}[{{ x }}]{% endfor %}{% set x = 1 %}", x=5)
add('scope_read_before_set', "{{ x }}{% set x = 1 %}|{% if true %}[{{ y }}]{% endif %}{% set y = 1 %}", x=5, y=6)
add('scope_later_set_loop', "{% for i in [1, 2] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = i %}{% endfor %}", x=5)
add('scope_later_set_alias', "{% set x = 9 %}{% for i in [1, 2] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = i %}{% endfor %}")
add('scope_branch_set', "{% if false %}{% set x = 1 %}{% endif %}{{ x }}|{% if true %}{% set z = 1 %}{% else %}{% set z = 2 %}{% endif %}{{ z }}", x=5)
add('scope_loop_filter', "{% for i in [1, 2] %}{% for j in [1] if x is defined %}B{% else %}E{% endfor %}{% set x = 3 %}{% endfor %}", x=5)
add('scope_macro_later_set', "{% macro m() %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = 3 %}{% endmacro %}{{ m() }}", x=5)
add('scope_blocks', "{% for i in [1] %}{% with %}[{{ x }}]{% endwith %}{% filter upper %}[{{ x }}]{% endfilter %}{% set x = 3 %}{% endfor %}", x=5)
add('x_percent_mapping_args', "{{ '3' % u }}|{{ '%s' % u }}|{{ '' % [] }}|{{ '%s' % none }}")
add('x_percent_not_all_converted', "{{ 'x' % 5 }}")

# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--testdata", type=Path, default=TESTDATA, help="directory of *.jinja chat templates")
    ap.add_argument("--gguf", type=Path, default=DEFAULT_GGUF, help="GGUF of the default model (SmolLM2)")
    args = ap.parse_args()

    import importlib.metadata

    import jinja2
    out = args.out_dir
    (out / "expected").mkdir(parents=True, exist_ok=True)
    renderer = Renderer()

    inputs = {
        "generator": "tests/jinja/make_chat_template_fixtures.py",
        "python": sys.version.split()[0],
        "jinja2": jinja2.__version__,
        "markupsafe": importlib.metadata.version("markupsafe"),
        "now_unix_s": NOW_UNIX_S,
        "timezone": "UTC",
        "message_sets": MESSAGE_SETS,
        "extra_contexts": EXTRA_CONTEXTS,
    }
    (out / "inputs.json").write_text(json.dumps(inputs, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    templates = []  # (name, location, source, bos, eos)
    for path in sorted(args.testdata.glob("*.jinja")):
        bos, eos = special_tokens_for(path.name)
        templates.append((path.name, "testdata", path.read_text(encoding="utf-8"), bos, eos))
    smol = out / "templates" / "SmolLM2-135M-Instruct.jinja"
    if args.gguf.exists():
        smol, smol_bos, smol_eos = extract_smollm2(args.gguf, out)
    else:
        print(f"warning: {args.gguf} not found, reusing {smol}", file=sys.stderr)
        smol_bos, smol_eos = "<|im_start|>", "<|im_end|>"
    templates.append((smol.name, "fixtures", smol.read_text(encoding="utf-8"), smol_bos, smol_eos))

    total = errors = raised = 0
    for name, location, source, bos, eos in templates:
        outputs, cases = template_cases(renderer, name, source, bos, eos)
        doc = {"template": name, "location": location, "bos_token": bos, "eos_token": eos,
               "outputs": outputs, "cases": cases}
        stem = name[: -len(".jinja")]
        (out / "expected" / f"{stem}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n",
                                                        encoding="utf-8")
        n_err = sum(1 for c in cases if c.get("error_kind") == "error")
        n_raise = sum(1 for c in cases if c.get("error_kind") == "raise_exception")
        total, errors, raised = total + len(cases), errors + n_err, raised + n_raise
        print(f"{name}: {len(cases)} cases ({len(outputs)} distinct outputs, {n_raise} raise_exception, "
              f"{n_err} errors)")

    features = []
    for f in FEATURE_CASES:
        r = renderer.render(f["template"], [], f["vars"], True)
        features.append({**f, **r})
    (out / "features.json").write_text(json.dumps(features, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(templates)} templates, {total} cases ({raised} raise_exception, {errors} errors); "
          f"{len(features)} feature cases")


if __name__ == "__main__":
    main()
