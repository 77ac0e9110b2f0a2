"""instructor, unmodified, against a real `spate serve` on the default model:
`instructor.from_openai` in Mode.TOOLS (the response model as a function tool,
forced by a named tool_choice) and Mode.JSON_SCHEMA (response_format
json_schema), each with a pydantic response_model and max_retries=1.

instructor 1.17.0 (its newest) pins jiter<0.15, and every openai release that
accepts that jiter (3.3.0 and older) is older than pydantic-ai's minimum
(3.31.0), so instructor cannot share tests/requirements.txt with
test_agents.py. This file runs in a virtualenv of its own, made from
tests/requirements-instructor.txt (scripts/test.sh); under the main
environment it skips, unless SPATE_REQUIRE_INSTRUCTOR=1 makes the missing
package a failure (scripts/test.sh sets it in the virtualenv's run).

Both modes constrain the answer to the response model's schema (a named tool
or response_format), so each call returns a valid instance on the first try
whatever the tiny model samples; the tests count requests to prove that no
retry was needed, and a retry budget of 1 keeps the worst case bounded.
Nothing leaves loopback (`loopback_only`, spate_server.py).
"""

import os
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, loopback_only

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing (set SPATE_BIN / SPATE_MODEL)", allow_module_level=True)
if os.environ.get("SPATE_REQUIRE_INSTRUCTOR") == "1":
    import instructor
else:
    instructor = pytest.importorskip("instructor", reason="runs in its own virtualenv (module docstring)")
import openai  # noqa: E402


class Weather(BaseModel):
    """A weather report."""
    city: str = Field(min_length=1, max_length=40)
    temperature_c: int = Field(ge=-90, le=60)


class Person(BaseModel):
    """A person named in the text."""
    name: str = Field(min_length=1, max_length=40)
    age: int = Field(ge=0, le=150)
    languages: list[Annotated[str, Field(min_length=1, max_length=20)]] = Field(min_length=1, max_length=3)


@pytest.fixture(scope="module", autouse=True)
def no_network():
    with loopback_only():
        yield


def patched(server, mode, seen):
    """An instructor client over an OpenAI client that appends each request's path to seen."""
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    real_post = client.post

    def post(path, *a, **kw):  # counts each request (instructor retries would send more)
        seen.append(path)
        return real_post(path, *a, **kw)

    client.post = post
    return instructor.from_openai(client, mode=mode)


@pytest.mark.parametrize("mode", ["TOOLS", "JSON_SCHEMA"])
@pytest.mark.parametrize("model,prompt", [
    (Weather, "It is 21 C and sunny in Paris. Report the weather."),
    (Person, "Ada is 36 and speaks English and French. Extract the person."),
], ids=["weather", "person"])
def test_instructor_response_model(server, mode, model, prompt):
    seen = []
    client = patched(server, getattr(instructor.Mode, mode), seen)
    out, completion = client.chat.completions.create_with_completion(
        model=MODEL_NAME, response_model=model, max_retries=1, temperature=0, max_tokens=300,
        messages=[{"role": "user", "content": prompt}])
    assert isinstance(out, model)
    assert seen == ["/chat/completions"], seen  # valid on the first try: no retry request
    choice = completion.choices[0]
    if mode == "TOOLS":
        assert choice.finish_reason == "tool_calls"
        assert [c.function.name for c in choice.message.tool_calls] == [model.__name__]
    else:
        assert choice.finish_reason == "stop" and choice.message.tool_calls is None
