"""Structured outputs end to end: the real model behind a real `spate serve`,
driven with the official `openai` SDK.

- JSON schemas: every schema of the corpus in `schemas/` (one
  {"prompt", "schema"} per file) is sent as OpenAI's
  `response_format: {"type": "json_schema", "json_schema": {name, schema, strict: true}}`
  at temperature 0.7 with several seeds; every output must finish ("stop",
  not "length") and validate against its schema with the `jsonschema`
  package (Draft 2020-12, with strict checks of the formats date, time,
  date-time, uuid, email, duration and the base64 ones; see
  STRICT_FORMATS). Numbers are compared exactly (decimal.Decimal, in the
  output and the schema): as floats 0.07 is no multiple of 0.01.
- Regexes and choices (`structured_cases.json`): vLLM's
  `structured_outputs: {"regex" | "choice": ...}` and the older
  `guided_regex` / `guided_choice`; a regex output must `re.fullmatch`, a
  choice output must be one of the choices.
- GBNF grammars: `structured_outputs: {"grammar": ...}`.
- The SDK's `chat.completions.parse(response_format=<pydantic model>)` and
  `responses.parse(text_format=<pydantic model>)` return parsed objects.
- Bad input: an invalid schema, an unsupported keyword, an invalid regex and
  an invalid grammar are each a 400 whose `param` names the field.

Requests run concurrently (a pool of WORKERS threads): one module fixture
sends the whole corpus at once and each test checks its own outputs.

STRUCTURED_OUTPUTS_BASE_URL=http://host:port runs the module against a server
that is already running instead of starting spate (used to check this
harness against llama.cpp's llama-server, which honours `response_format`
json_schema on /v1/chat/completions but not the vLLM-style fields).
"""

import base64
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Literal

import openai
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from pydantic import Base64Bytes, BaseModel, Field

from spate_server import MODEL_NAME, SpateServer, post_json

HERE = Path(__file__).resolve().parent
SCHEMA_DIR = HERE / "schemas"
CASES_FILE = HERE / "structured_cases.json"
EXTERNAL_URL = os.environ.get("STRUCTURED_OUTPUTS_BASE_URL")

SEEDS = (101, 202)
TEMPERATURE = 0.7
MAX_TOKENS = 1200    # above the longest output any corpus schema allows in practice (recursion is unrolled to 5 levels)
WORKERS = 8


# ---------------------------------------------------------------- the corpus

@dataclass(frozen=True)
class SchemaCase:
    name: str
    prompt: str
    schema: dict


def load_schema_cases():
    cases = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        cases.append(SchemaCase(path.stem, doc["prompt"], doc["schema"]))
    return cases


def load_regex_and_choice_cases():
    doc = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    return doc["regex"], doc["choice"]


SCHEMA_CASES = load_schema_cases()
REGEX_CASES, CHOICE_CASES = load_regex_and_choice_cases()


# ---------------------------------------------------------------- validation

DATE_RE = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])")
TIME_RE = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_RE = re.compile(rf"{ATOM}(\.{ATOM})*@{LABEL}(\.{LABEL})*")


def is_strict_date(value):
    """RFC 3339 full-date: the shape and a real calendar day (no 2025-02-30)."""
    if not DATE_RE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def is_strict_time(value):
    """RFC 3339 full-time: HH:MM:SS, optional fraction, mandatory offset."""
    return TIME_RE.fullmatch(value) is not None


def is_strict_date_time(value):
    day, sep, clock = value.partition("T") if "T" in value else value.partition("t")
    return bool(sep) and is_strict_date(day) and is_strict_time(clock)


def is_strict_uuid(value):
    return UUID_RE.fullmatch(value) is not None


def is_strict_email(value):
    """A dot-atom mailbox (RFC 5322 without quoted local parts or address literals)."""
    local, _, domain = value.rpartition("@")
    return len(local) <= 64 and len(domain) <= 253 and EMAIL_RE.fullmatch(value) is not None


# RFC 3339 appendix A, which JSON Schema's "duration" is: no fractions, no sign.
DUR_N = r"[0-9]+"
DUR_TIME = rf"T(?:{DUR_N}H(?:{DUR_N}M(?:{DUR_N}S)?)?|{DUR_N}M(?:{DUR_N}S)?|{DUR_N}S)"
DUR_DATE = rf"(?:{DUR_N}Y(?:{DUR_N}M(?:{DUR_N}D)?)?|{DUR_N}M(?:{DUR_N}D)?|{DUR_N}D)"
DURATION_RE = re.compile(rf"P(?:{DUR_DATE}(?:{DUR_TIME})?|{DUR_TIME}|{DUR_N}W)")


def is_strict_duration(value):
    return DURATION_RE.fullmatch(value) is not None


def is_canonical_base64(value, altchars=None):
    """RFC 4648 base64 with padding, in canonical form: decoding and encoding
    again gives the same text (so no stray characters, unused bits 0)."""
    try:
        raw = base64.b64decode(value, altchars=altchars, validate=True)
    except ValueError:
        return False
    return base64.b64encode(raw, altchars=altchars).decode() == value


STRICT_FORMATS = {"date": is_strict_date, "time": is_strict_time, "date-time": is_strict_date_time,
                  "uuid": is_strict_uuid, "email": is_strict_email, "duration": is_strict_duration,
                  "byte": is_canonical_base64, "base64": is_canonical_base64,
                  "base64url": lambda v: is_canonical_base64(v, altchars=b"-_")}


def strict_format_checker():
    """Draft 2020-12's format checker with our strict checks for the formats above
    (its own accept any string with an '@' as an email, for one). Not a bare
    FormatChecker(): that one mixes all drafts and its "time" is draft 3's."""
    checker = FormatChecker()
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    for name, check in STRICT_FORMATS.items():
        checker.checks(name)(lambda v, check=check: not isinstance(v, str) or check(v))
    return checker


def schema_errors(schema, instance):
    """Messages of every way `instance` fails `schema` (empty when it is valid)."""
    validator = Draft202012Validator(schema, format_checker=strict_format_checker())
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(instance)]


def exact(schema):
    """The schema with its non-integer numbers as Decimal (as instances are read)."""
    return json.loads(json.dumps(schema), parse_float=Decimal)


def assert_valid_json_output(schema, content, finish_reason):
    assert finish_reason == "stop", f"finish_reason {finish_reason!r} (truncated?): {content!r}"
    try:
        instance = json.loads(content, parse_float=Decimal)
    except ValueError as e:
        pytest.fail(f"not JSON ({e}): {content!r}")
    errors = schema_errors(exact(schema), instance)
    assert not errors, f"{content!r} fails its schema: {errors}"


# ---------------------------------------------------------------- server and requests

@pytest.fixture(scope="module")
def base_url():
    if EXTERNAL_URL:
        yield EXTERNAL_URL.rstrip("/")
        return
    s = SpateServer()
    try:
        yield s.wait_ready().base_url
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=600)


def user_message(prompt):
    return [{"role": "user", "content": prompt}]


def json_schema_format(case):
    return {"type": "json_schema", "json_schema": {"name": case.name, "schema": case.schema, "strict": True}}


@dataclass
class Output:
    content: str
    finish_reason: str


def chat(client, prompt, seed, **kwargs):
    r = client.chat.completions.create(model=MODEL_NAME, messages=user_message(prompt), temperature=TEMPERATURE,
                                       seed=seed, max_tokens=MAX_TOKENS, **kwargs)
    choice = r.choices[0]
    return Output(choice.message.content, choice.finish_reason)


def selected_params(request, test_name):
    """callspec params of the collected (after -k / -m selection) tests named `test_name`."""
    return [item.callspec.params for item in request.session.items if getattr(item, "originalname", None) == test_name]


def run_all(jobs):
    """Runs {key: zero-argument callable} on the thread pool; returns {key: Future}."""
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    futures = {key: pool.submit(job) for key, job in jobs.items()}
    pool.shutdown(wait=True)
    return futures


# ---------------------------------------------------------------- the corpus is what it claims

REQUIRED_KEYWORDS = {"properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
                     "maxItems", "enum", "const", "$ref", "$defs", "anyOf", "oneOf", "allOf", "pattern", "format",
                     "minLength", "maxLength", "minimum", "maximum", "multipleOf"}
REQUIRED_FORMATS = {"date", "time", "date-time", "uuid", "email", "duration", "byte", "base64", "base64url", "binary"}


def walk_subschemas(schema):
    """Yields every (sub)schema object of `schema`."""
    if isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    yield from walk_subschemas(sub)
            elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "additionalProperties"):
                yield from walk_subschemas(value)
    elif isinstance(schema, list):
        for sub in schema:
            yield from walk_subschemas(sub)


def is_recursive(schema):
    defs = schema.get("$defs", {})
    return any(f'"#/$defs/{name}"' in json.dumps(body) for name, body in defs.items())


def test_corpus_size_and_schemas_are_valid():
    assert len(SCHEMA_CASES) >= 60
    assert len({c.name for c in SCHEMA_CASES}) == len(SCHEMA_CASES)
    for case in SCHEMA_CASES:
        assert case.prompt.strip(), case.name
        Draft202012Validator.check_schema(case.schema)


def test_corpus_covers_the_keywords():
    subs = [sub for case in SCHEMA_CASES for sub in walk_subschemas(case.schema)]
    keywords = {key for sub in subs for key in sub}
    formats = {sub["format"] for sub in subs if "format" in sub}
    assert REQUIRED_KEYWORDS <= keywords, REQUIRED_KEYWORDS - keywords
    assert REQUIRED_FORMATS <= formats, REQUIRED_FORMATS - formats
    assert any(isinstance(sub.get("type"), list) and "null" in sub["type"] for sub in subs)
    assert any(sub.get("minimum", 0) < 0 for sub in subs)
    assert any(sub.get("required") is not None and set(sub["required"]) < set(sub.get("properties", {}))
               for sub in subs), "no object with a required subset"
    assert sum(is_recursive(c.schema) for c in SCHEMA_CASES) >= 2


def test_regex_and_choice_cases_are_well_formed():
    assert len(REGEX_CASES) >= 8 and len(CHOICE_CASES) >= 6
    for case in REGEX_CASES:
        re.compile(case["regex"])
    for case in CHOICE_CASES:
        assert len(set(case["choices"])) == len(case["choices"]) >= 2


# ---------------------------------------------------------------- the checks themselves

@pytest.mark.parametrize("fmt, good, bad", [
    ("date", ["2025-02-28", "2024-02-29", "1999-12-31"], ["2025-02-30", "2023-02-29", "2025-1-05", "20250105", "2025-13-01"]),
    ("time", ["09:30:00Z", "23:59:59.123+05:30", "00:00:00-08:00"], ["09:30:00", "9:30:00Z", "24:00:00Z", "09:30Z"]),
    ("date-time", ["2025-01-20T08:15:00Z", "2025-01-20T08:15:00.5+01:00"],
     ["2025-01-20 08:15:00Z", "2025-01-20T08:15:00", "2025-02-30T08:15:00Z", "2025-01-20"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"],
     ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"]),
    ("email", ["maria.lopez@example.com", "a+b@x.io", "root@localhost"],
     ["@example.com", "maria@", "maria lopez@example.com", "a..b@example.com", "a@-example.com", "a@b@c.com"]),
    ("duration", ["P4DT12H30M5S", "PT36H", "P3W", "P1Y2M", "PT0S", "P01D"],
     ["PT0.5S", "-P1D", "P1Y2D", "PT1H2S", "P1WT1H", "P", "PT", "P1D2H", "P\u09e8Y"]),
    ("base64", ["", "aGk=", "aA==", "+/8="], ["aGk", "aB==", "-_8=", "aGk=\n", "a==="]),
    ("base64url", ["", "aGk=", "-_8="], ["+/8=", "aGk"]),
])
def test_strict_format_checks(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    for value in good:
        assert schema_errors(schema, value) == [], (fmt, value)
    for value in bad:
        assert schema_errors(schema, value), (fmt, value)


def test_validation_rejects_what_the_corpus_forbids():
    by_name = {c.name: c.schema for c in SCHEMA_CASES}
    assert schema_errors(by_name["01_weather_report"], {"city": "Lisbon", "temperature_c": 23, "conditions": "sunny"})
    assert schema_errors(by_name["06_rgb_color"], [255, 128, 0, 1])
    assert schema_errors(by_name["06_rgb_color"], [256, 128, 0])
    assert schema_errors(by_name["16_shape"], {"kind": "circle", "radius": 5, "width": 1})
    assert schema_errors(by_name["19_linked_steps"], {"action": "boil", "then": {"action": "eat"}})
    assert not schema_errors(by_name["19_linked_steps"], {"action": "boil", "then": {"action": "peel", "then": "eat"}})
    assert schema_errors(by_name["08_sensor_reading"], {"sensor": "F-2", "celsius": -41, "delta": -3})
    assert not schema_errors(by_name["08_sensor_reading"], {"sensor": "F-2", "celsius": -18, "delta": -3})
    # As floats 0.29 / 0.01 and 40.3 / 0.05 are not integers: the check must be exact.
    order = '{"eggs": 42, "egg_price_eur": 0.29, "flour_kg": 12.5, "total_eur": 40.3, "boxes": 7}'
    assert schema_errors(by_name["77_bulk_order"], json.loads(order))
    assert_valid_json_output(by_name["77_bulk_order"], order, "stop")
    for bad in ('"eggs": 40', '"egg_price_eur": 0.355', '"flour_kg": 12', '"total_eur": 46.22', '"boxes": 8'):
        key = bad.split(":")[0]
        changed = re.sub(key + r": [0-9.]+", bad, order)
        assert schema_errors(exact(by_name["77_bulk_order"]), json.loads(changed, parse_float=Decimal)), changed
    assert schema_errors(by_name["78_task_durations"], {"bread": "PT3.5H", "starter": "P5D", "project": "P1Y2M", "reminders": []})
    attachment = {"filename": "a", "content": "aGVsbG8gd29ybGQ=", "checksum": "", "token": "-_8=", "note": "x"}
    assert not schema_errors(by_name["79_file_attachment"], attachment)
    assert schema_errors(by_name["79_file_attachment"], {**attachment, "content": "aGVsbG8gd29ybGQ"})
    assert schema_errors(by_name["79_file_attachment"], {**attachment, "token": "+/8="})
    with pytest.raises(AssertionError, match="finish_reason"):
        assert_valid_json_output({"type": "object"}, '{"a": ', "length")
    with pytest.raises(pytest.fail.Exception, match="not JSON"):
        assert_valid_json_output({"type": "object"}, '{"a": }', "stop")


# ---------------------------------------------------------------- JSON schema outputs

@pytest.fixture(scope="module")
def schema_outputs(request, client):
    """All selected (case, seed) requests at once; {(name, seed): Future of Output}."""
    jobs = {}
    for p in selected_params(request, "test_json_schema_output_validates"):
        case, seed = p["case"], p["seed"]
        jobs[(case.name, seed)] = (lambda case=case, seed=seed: chat(client, case.prompt, seed,
                                                                      response_format=json_schema_format(case)))
    return run_all(jobs)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", SCHEMA_CASES, ids=lambda c: c.name)
def test_json_schema_output_validates(schema_outputs, case, seed):
    out = schema_outputs[(case.name, seed)].result()
    assert_valid_json_output(case.schema, out.content, out.finish_reason)


# ---------------------------------------------------------------- regexes and choices

REGEX_STYLES = {
    "structured_outputs": lambda regex: {"structured_outputs": {"regex": regex}},
    "guided_regex": lambda regex: {"guided_regex": regex},
}
CHOICE_STYLES = {
    "structured_outputs": lambda choices: {"structured_outputs": {"choice": choices}},
    "guided_choice": lambda choices: {"guided_choice": choices},
}


@pytest.fixture(scope="module")
def regex_and_choice_outputs(request, client):
    """All selected regex and choice requests at once; {(kind, name, style, seed): Future of Output}."""
    jobs = {}
    for p in selected_params(request, "test_regex_output_fullmatches"):
        case, style, seed = p["case"], p["style"], p["seed"]
        body = REGEX_STYLES[style](case["regex"])
        jobs[("regex", case["name"], style, seed)] = (
            lambda case=case, body=body, seed=seed: chat(client, case["prompt"], seed, extra_body=body))
    for p in selected_params(request, "test_choice_output_is_a_choice"):
        case, style, seed = p["case"], p["style"], p["seed"]
        body = CHOICE_STYLES[style](case["choices"])
        jobs[("choice", case["name"], style, seed)] = (
            lambda case=case, body=body, seed=seed: chat(client, case["prompt"], seed, extra_body=body))
    return run_all(jobs)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("style", sorted(REGEX_STYLES))
@pytest.mark.parametrize("case", REGEX_CASES, ids=lambda c: c["name"])
def test_regex_output_fullmatches(regex_and_choice_outputs, case, style, seed):
    out = regex_and_choice_outputs[("regex", case["name"], style, seed)].result()
    assert out.finish_reason == "stop", out
    assert re.fullmatch(case["regex"], out.content), f"{out.content!r} does not fullmatch {case['regex']!r}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("style", sorted(CHOICE_STYLES))
@pytest.mark.parametrize("case", CHOICE_CASES, ids=lambda c: c["name"])
def test_choice_output_is_a_choice(regex_and_choice_outputs, case, style, seed):
    out = regex_and_choice_outputs[("choice", case["name"], style, seed)].result()
    assert out.finish_reason == "stop", out
    assert out.content in case["choices"], f"{out.content!r} is not one of {case['choices']}"


TINY_GRAMMAR = 'root ::= "The answer is " ("yes" | "no") "."'


@pytest.mark.parametrize("seed", SEEDS)
def test_gbnf_grammar_output_matches(client, seed):
    out = chat(client, "Is the Pacific the largest ocean?", seed, extra_body={"structured_outputs": {"grammar": TINY_GRAMMAR}})
    assert out.finish_reason == "stop", out
    assert re.fullmatch(r"The answer is (yes|no)\.", out.content), out.content


# ---------------------------------------------------------------- the SDK's parse()

class Attendee(BaseModel):
    name: str = Field(max_length=30)
    role: Literal["host", "guest", "speaker"]


class Meeting(BaseModel):
    title: str = Field(max_length=60)
    day: date
    duration_minutes: int = Field(ge=5, le=240)
    priority: Literal["low", "normal", "high"]
    attendees: list[Attendee] = Field(max_length=3)


MEETING_PROMPT = ("Plan a one-hour project kickoff meeting on 2025-09-15 with high priority, "
                  "hosted by Lena with Omar as a guest.")


def assert_meeting_content_valid(content):
    assert not schema_errors(Meeting.model_json_schema(), json.loads(content)), content


@pytest.mark.parametrize("seed", SEEDS)
def test_sdk_chat_completions_parse(client, seed):
    completion = client.chat.completions.parse(model=MODEL_NAME, messages=user_message(MEETING_PROMPT),
                                               response_format=Meeting, temperature=TEMPERATURE, seed=seed,
                                               max_tokens=MAX_TOKENS)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, Meeting), message
    assert_meeting_content_valid(message.content)


@pytest.mark.parametrize("seed", SEEDS)
def test_sdk_responses_parse(client, seed):
    response = client.responses.parse(model=MODEL_NAME, input=MEETING_PROMPT, text_format=Meeting,
                                      temperature=TEMPERATURE, max_output_tokens=MAX_TOKENS,
                                      extra_body={"seed": seed})
    assert response.status == "completed", response
    assert isinstance(response.output_parsed, Meeting), response
    assert_meeting_content_valid(response.output_text)


class Shipment(BaseModel):
    """Fields for which pydantic writes multipleOf, format duration and format base64."""
    packs: int = Field(multiple_of=6, ge=6, le=60)
    price_eur: float = Field(multiple_of=0.01, ge=0, le=500)
    transit: timedelta
    label: Base64Bytes = Field(max_length=24)


SHIPMENT_PROMPT = ("Ship 24 jars of honey in packs of 6 for 18.50 euros; transit takes 2 days and 4 hours; "
                   "the label is the word 'honey', base64 encoded.")


@pytest.mark.parametrize("seed", SEEDS)
def test_sdk_parse_pydantic_multiple_of_duration_base64(client, seed):
    completion = client.chat.completions.parse(model=MODEL_NAME, messages=user_message(SHIPMENT_PROMPT),
                                               response_format=Shipment, temperature=TEMPERATURE, seed=seed,
                                               max_tokens=MAX_TOKENS)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, Shipment), message
    assert message.parsed.packs % 6 == 0 and isinstance(message.parsed.transit, timedelta), message.parsed
    errors = schema_errors(exact(Shipment.model_json_schema()), json.loads(message.content, parse_float=Decimal))
    assert not errors, (message.content, errors)


# ---------------------------------------------------------------- bad input

def assert_400(status, body, param_prefix, mentions=None):
    """A 400 in OpenAI's error shape whose `param` starts with `param_prefix`
    and whose message contains the regex `mentions`."""
    assert status == 400, body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err.get("message"), str) and err["message"], err
    assert isinstance(err.get("param"), str) and err["param"].startswith(param_prefix), err
    if mentions is not None:
        assert re.search(mentions, err["message"]), err


def post_chat(base_url, prompt, **fields):
    body = {"model": MODEL_NAME, "messages": user_message(prompt), "max_tokens": 8, **fields}
    status, payload, _ = post_json(base_url, "/v1/chat/completions", body)
    return status, payload


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "bad", "schema": schema, "strict": True}}


def assert_still_serving(base_url):
    status, payload = post_chat(base_url, "Say hi.")
    assert status == 200, payload


QUOTED_NOT = r"""['"`]not['"`]"""


def test_invalid_schema_type_is_400(base_url):
    status, body = post_chat(base_url, "x", response_format=schema_format({"type": "nonsense"}))
    assert_400(status, body, "response_format", mentions="nonsense")
    assert_still_serving(base_url)


def test_unsupported_keyword_is_400_naming_it(base_url):
    schema = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}, "required": ["a"]}
    status, body = post_chat(base_url, "x", response_format=schema_format(schema))
    assert_400(status, body, "response_format", mentions=QUOTED_NOT)
    assert_still_serving(base_url)


def test_unsupported_keyword_in_responses_text_format_is_400(base_url):
    schema = {"not": {"type": "null"}}
    body = {"model": MODEL_NAME, "input": "x", "max_output_tokens": 8,
            "text": {"format": {"type": "json_schema", "name": "bad", "schema": schema, "strict": True}}}
    status, payload, _ = post_json(base_url, "/v1/responses", body)
    assert_400(status, payload, "text.format", mentions=QUOTED_NOT)
    assert_still_serving(base_url)


@pytest.mark.parametrize("fields, param", [
    ({"structured_outputs": {"regex": "[a-"}}, "structured_outputs"),
    ({"structured_outputs": {"regex": "(ab"}}, "structured_outputs"),
    ({"guided_regex": "a{3,1}"}, "guided_regex"),
])
def test_invalid_regex_is_400(base_url, fields, param):
    status, body = post_chat(base_url, "x", **fields)
    assert_400(status, body, param)
    assert_still_serving(base_url)


def test_invalid_grammar_is_400(base_url):
    status, body = post_chat(base_url, "x", structured_outputs={"grammar": "root ::= ("})
    assert_400(status, body, "structured_outputs")
    assert_still_serving(base_url)
