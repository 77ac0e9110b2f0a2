"""Fixtures shared by the integration tests: a module's default `spate serve`
(the default model, no extra flags) and an openai client for it. A test file
that needs other flags defines its own `server` fixture, which overrides this
one for that file."""

import openai
import pytest

from spate_server import SpateServer


@pytest.fixture(scope="module")
def server():
    s = SpateServer().wait_ready()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
