"""Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`)
with the official `anthropic` client: whole and streamed answers, tool
use and tool results on Qwen2.5-Coder-0.5B (whose template takes tools),
`x-api-key` on the keyed server, and errors in Anthropic's shape."""

import json

import anthropic
import pytest

from conftest import CITY_SCHEMA, WEATHER_FUNCTION
from test_openai_api import http

# Anthropic names the parameters' schema `input_schema`.
WEATHER = {
    "name": WEATHER_FUNCTION["name"],
    "description": WEATHER_FUNCTION["description"],
    "input_schema": WEATHER_FUNCTION["parameters"],
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# The client (2.x) no longer has sampling arguments; the API still takes
# them, and this server honours them.
GREEDY = {"extra_body": {"temperature": 0}}
HELLO = dict(
    system="You are a French teacher.",
    messages=[{"role": "user", "content": "Say hello in French."}],
    max_tokens=40,
    **GREEDY,
)



def prompt_tokens(usage):
    """All the prompt's tokens: Anthropic's `input_tokens` counts only those
    the prefix cache did not hold, `cache_read_input_tokens` the others."""
    return usage.input_tokens + (usage.cache_read_input_tokens or 0)

def client_for(url, key="unused"):
    # No retries: an error must reach the test, not be retried away.
    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def claude(tools_url):
    return client_for(tools_url)


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def test_a_message_is_answered_and_counted(claude, tools_model):
    m = claude.messages.create(model=tools_model, **HELLO)
    assert m.type == "message" and m.role == "assistant"
    assert m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"]
    assert "bonjour" in text_of(m).lower(), m
    assert m.stop_reason == "end_turn" and m.stop_sequence is None
    assert m.usage.output_tokens > 0
    counted = claude.messages.count_tokens(
        model=tools_model, system=HELLO["system"], messages=HELLO["messages"]
    )
    assert counted.input_tokens == prompt_tokens(m.usage)
    # The system prompt is in the prompt.
    longer = claude.messages.count_tokens(
        model=tools_model, system=HELLO["system"] + " Be kind.", messages=HELLO["messages"]
    )
    assert longer.input_tokens > counted.input_tokens
    # A cut-off answer says so.
    short = claude.messages.create(model=tools_model, **{**HELLO, "max_tokens": 2})
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 2


def test_a_stop_sequence_ends_the_answer(claude, tools_model):
    full = text_of(claude.messages.create(model=tools_model, **HELLO))
    words = full.split()
    assert len(words) >= 2, full
    word = words[1]
    m = claude.messages.create(model=tools_model, stop_sequences=[word], **HELLO)
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == word
    assert full.startswith(text_of(m)) and word not in text_of(m)


def test_streamed_equals_sync(claude, tools_model):
    sync = claude.messages.create(model=tools_model, **HELLO)
    with claude.messages.stream(model=tools_model, **HELLO) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == text_of(sync)
    assert text_of(final) == text_of(sync)
    assert (final.stop_reason, final.usage.output_tokens, prompt_tokens(final.usage)) == (
        sync.stop_reason,
        sync.usage.output_tokens,
        prompt_tokens(sync.usage),
    )
    # The raw events, in Anthropic's order (the client drops `ping`).
    events = list(claude.messages.create(model=tools_model, stream=True, **HELLO))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and kinds[-3] == "content_block_stop"
    assert set(kinds[2:-3]) == {"content_block_delta"}
    assert events[-2].delta.stop_reason == "end_turn"


def test_the_stream_names_its_events(tools_url, tools_model):
    import urllib.request

    body = '{"model": "%s", "max_tokens": 3, "stream": true, "messages": [{"role": "user", "content": "Hi"}]}'
    req = urllib.request.Request(
        tools_url + "/v1/messages",
        data=(body % tools_model).encode(),
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        text = r.read().decode()
    names = [line[len("event: "):] for line in text.splitlines() if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"], names
    assert names[-2:] == ["message_delta", "message_stop"], names


def test_tool_use_round_trip(claude, tools_model):
    first = claude.messages.create(
        model=tools_model,
        messages=ASK,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
        max_tokens=48,
        **GREEDY,
    )
    assert first.stop_reason == "tool_use", first
    uses = [b for b in first.content if b.type == "tool_use"]
    assert len(uses) == 1
    use = uses[0]
    assert use.name == "get_weather" and use.id.startswith("toolu_")
    assert set(use.input) == {"city"} and "Paris" in use.input["city"]
    # Streamed, the call is the same.
    with claude.messages.stream(
        model=tools_model,
        messages=ASK,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
        max_tokens=48,
        **GREEDY,
    ) as s:
        final = s.get_final_message()
    assert [(b.type, b.name, b.input) for b in final.content] == [("tool_use", use.name, use.input)]
    history = ASK + [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny and 24 degrees Celsius."}
            ],
        },
    ]
    second = claude.messages.create(
        model=tools_model,
        messages=history,
        tools=[WEATHER],
        tool_choice={"type": "none"},
        max_tokens=40,
        **GREEDY,
    )
    assert second.stop_reason in ("end_turn", "max_tokens")
    assert all(b.type == "text" for b in second.content)
    answer = text_of(second).lower()
    assert "24" in answer or "sunny" in answer, answer
    # The call and its result are in the prompt (with `none` the tools
    # themselves are not).
    alone = claude.messages.create(
        model=tools_model, messages=ASK, tools=[WEATHER], tool_choice={"type": "none"}, max_tokens=1
    )
    assert prompt_tokens(second.usage) > prompt_tokens(alone.usage) + 10


def test_any_tool_choice_forces_a_call(claude, tools_model):
    m = claude.messages.create(
        model=tools_model,
        messages=[{"role": "user", "content": "Hello!"}],
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        max_tokens=48,
        **GREEDY,
    )
    assert m.stop_reason == "tool_use"
    assert [b.type for b in m.content] == ["tool_use"]
    assert isinstance(m.content[0].input["city"], str)


def test_an_output_format_constrains_the_text(claude, tools_model):
    m = claude.messages.create(
        model=tools_model,
        messages=[{"role": "user", "content": "Name a city and its country."}],
        output_config={"format": {"type": "json_schema", "schema": CITY_SCHEMA}},
        max_tokens=60,
        **GREEDY,
    )
    v = json.loads(text_of(m))
    assert set(v) == {"city", "country"} and all(isinstance(x, str) for x in v.values())


def test_x_api_key_on_the_keyed_server(keyed_url, api_key, model):
    m = client_for(keyed_url, api_key).messages.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert m.usage.output_tokens > 0
    with pytest.raises(anthropic.AuthenticationError) as e:
        client_for(keyed_url, "wrong").messages.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
    assert e.value.status_code == 401
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "authentication_error"
    # --strict-model: another model is not found, in Anthropic's shape.
    with pytest.raises(anthropic.NotFoundError) as e:
        client_for(keyed_url, api_key).messages.create(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
    assert e.value.body["error"]["type"] == "not_found_error"


def test_errors_take_anthropics_shape(claude, tools_model, tools_url):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=tools_model, messages=ASK, max_tokens=anthropic.NOT_GIVEN)
    assert e.value.status_code == 400
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in e.value.body["error"]["message"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(
            model=tools_model, messages=[{"role": "user", "content": [image]}], max_tokens=4
        )
    assert "image" in e.value.body["error"]["message"]
    assert "messages[0].content[0]" in e.value.body["error"]["message"]
    status, body = http(tools_url + "/v1/messages", "{not json")
    assert status == 400 and body["type"] == "error", body


def test_thinking_switches_the_templates_thinking(think_url, think_model):
    c = client_for(think_url)

    def count(**kw):
        return c.messages.count_tokens(
            model=think_model, messages=[{"role": "user", "content": "Hi"}], **kw
        ).input_tokens

    on = count(thinking={"type": "enabled", "budget_tokens": 1024})
    off = count(thinking={"type": "disabled"})
    # Qwen3's template closes an empty thinking block in the prompt when off.
    assert off >= on + 3
    assert count() == on
