"""Fixtures for the OpenAI-client tests of `minfer serve`.

The Rust harness (crates/cli/tests/serve_openai.rs) starts the servers on
loopback ports and passes their addresses in the environment:

- MINFER_BASE_URL: a server of SmolLM2 without an API key (-np 4);
- MINFER_KEYED_URL: one with --api-key MINFER_KEY, -np 2, --queue 1,
  --n-ctx 512 and speculative decoding (SmolLM2 drafting for itself, every
  guess checked, and prompt lookup);
- MINFER_MODEL_ID: the model id both serve;
- MINFER_BIN and MINFER_MODEL_PATH: the `minfer` binary and the model file,
  for `minfer tokenize`;
- MINFER_TOOLS_URL, MINFER_TOOLS_MODEL: a server of Qwen2.5-Coder-0.5B
  (its template takes tools), -np 4, with adaptive prompt lookup and
  keep-alive events every second;
- MINFER_THINK_URL, MINFER_THINK_MODEL: a server of the reasoning fixture
  (the tiny qwen3 model with Qwen3's template and thinking tokens), -np 2.
"""

import os

import openai
import pytest

# Re-exported: the tests take the weather tool from here.
from weather_tool import WEATHER, WEATHER_FUNCTION  # noqa: F401

# The schema the structured-output tests of several APIs ask for: a city
# and its country, nothing else.
CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through `cargo test` (serve_openai)")
    return value


@pytest.fixture(scope="session")
def base_url():
    return env("MINFER_BASE_URL")


@pytest.fixture(scope="session")
def keyed_url():
    return env("MINFER_KEYED_URL")


@pytest.fixture(scope="session")
def api_key():
    return env("MINFER_KEY")


@pytest.fixture(scope="session")
def model():
    return env("MINFER_MODEL_ID")


@pytest.fixture(scope="session")
def client(base_url):
    # No retries: a 503 must reach the test, not be retried away.
    return openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def minfer_tokenize():
    import json
    import subprocess

    binary = env("MINFER_BIN")
    path = env("MINFER_MODEL_PATH")

    def tokenize(text):
        out = subprocess.run(
            [binary, "tokenize", path, text, "--json"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return json.loads(out.stdout)

    return tokenize


@pytest.fixture(scope="session")
def tools_url():
    return env("MINFER_TOOLS_URL")


@pytest.fixture(scope="session")
def tools_model():
    return env("MINFER_TOOLS_MODEL")


@pytest.fixture(scope="session")
def tools_client(tools_url):
    return openai.OpenAI(base_url=tools_url + "/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="session")
def think_url():
    return env("MINFER_THINK_URL")


@pytest.fixture(scope="session")
def think_model():
    return env("MINFER_THINK_MODEL")


@pytest.fixture(scope="session")
def think_client(think_url):
    return openai.OpenAI(base_url=think_url + "/v1", api_key="unused", max_retries=0, timeout=120)
