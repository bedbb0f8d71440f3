"""What coding agents send and need, against the tools server (Qwen2.5-Coder,
`--sse-keepalive 1`): system entries between the turns, hosted tools beside
function tools, tool schemas with keywords no grammar enforces, the prefix
cache reported as cached tokens in each API's field, and keep-alive events
while a long prompt is prefilled. The recorded bodies of the real clients
are replayed in test_client_recordings.py; the clients themselves run in
crates/cli/tests/agents.rs.
"""

import json
import time

import httpx
import pytest

from conftest import WEATHER_FUNCTION

# Claude Code's TaskCreate input schema, as Zod writes it: `propertyNames`
# and `$schema`, which no output grammar enforces.
TASK_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "subject": {"type": "string"},
        "metadata": {
            "type": "object",
            "propertyNames": {"type": "string"},
            "additionalProperties": {},
        },
    },
    "required": ["subject"],
    "additionalProperties": False,
}


def post(url, path, body, **headers):
    r = httpx.post(url + path, json=body, headers=headers, timeout=300)
    return r.status_code, r.json()


def long_text(seed, words):
    # Distinct per test so no other test's cache serves it.
    return " ".join(f"{seed}-{i % 97} item" for i in range(words))


def test_system_entries_between_turns_are_answered(tools_url, tools_model):
    status, body = post(
        tools_url,
        "/v1/messages",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 8,
            "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=9.9.9; cc_entrypoint=cli;"},
                {"type": "text", "text": "You are terse."},
            ],
            "messages": [
                {"role": "user", "content": "Say hi."},
                {"role": "system", "content": "Answer in English."},
                {"role": "user", "content": "Now."},
            ],
        },
        **{"anthropic-beta": "mid-conversation-system-2026-04-07"},
    )
    assert status == 200, body
    assert body["type"] == "message"


def test_hosted_tools_and_zod_schemas_never_400(tools_url, tools_model):
    tools = [
        {"name": "TaskCreate", "description": "Create a task.", "input_schema": TASK_SCHEMA},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    ]
    status, body = post(
        tools_url,
        "/v1/messages",
        {
            "model": tools_model,
            "max_tokens": 160,
            "tools": tools,
            "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "Make a task to buy milk."}],
        },
    )
    assert status == 200, body
    calls = [b for b in body["content"] if b["type"] == "tool_use"]
    # A call was required: the grammar kept the parts it can enforce.
    assert calls and calls[0]["name"] == "TaskCreate", body
    assert isinstance(calls[0]["input"]["subject"], str)
    status, body = post(
        tools_url,
        "/v1/responses",
        {
            "model": tools_model,
            "max_output_tokens": 8,
            "include": ["reasoning.encrypted_content"],
            "tools": [
                {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
                {"type": "namespace", "name": "collaboration", "description": "Agents.", "tools": [
                    {"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {}}}]},
                {"type": "web_search"},
            ],
            "input": "Say hi.",
        },
    )
    assert status == 200, body


def test_grammar_errors_are_short(tools_url, tools_model):
    # A tool schema that no relaxation makes satisfiable (a value both a
    # string and an integer): the error says why in a sentence, never by
    # dumping the grammar it was part of.
    broken = {"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["a"]}
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": broken}} for i in range(20)]
    status, body = post(
        tools_url,
        "/v1/chat/completions",
        {
            "model": tools_model,
            "max_tokens": 4,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": tools,
            "tool_choice": "required",
        },
    )
    assert status == 400, body
    assert len(json.dumps(body)) < 1000, body
    assert "unsatisfiable" in body["error"]["message"].lower(), body


def test_cached_tokens_in_each_api(tools_url, tools_model):
    system = long_text("cache", 150)
    chat = {
        "model": tools_model,
        "max_tokens": 1,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi."}],
    }
    status, first = post(tools_url, "/v1/chat/completions", chat)
    assert status == 200, first
    status, second = post(tools_url, "/v1/chat/completions", chat)
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= second["usage"]["prompt_tokens"] - 8, second["usage"]
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] < cached

    # Claude Code's attribution line changes every session: it must not
    # cost the cache.
    def anthropic(version):
        return post(
            tools_url,
            "/v1/messages",
            {
                "model": tools_model,
                "max_tokens": 1,
                "system": [
                    {"type": "text", "text": f"x-anthropic-billing-header: cc_version={version}; cch=abc;"},
                    {"type": "text", "text": system},
                ],
                "messages": [{"role": "user", "content": "Hi."}],
            },
        )

    status, a = anthropic("1.0.0")
    assert status == 200, a
    status, b = anthropic("2.0.0")
    assert status == 200, b
    usage = b["usage"]
    assert usage["cache_read_input_tokens"] > 100, usage
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == a["usage"]["input_tokens"] + a["usage"]["cache_read_input_tokens"]

    status, r = post(
        tools_url,
        "/v1/responses",
        {"model": tools_model, "max_output_tokens": 1, "instructions": system, "input": "Hi."},
    )
    assert status == 200, r
    assert r["usage"]["input_tokens_details"]["cached_tokens"] > 100, r["usage"]


def sse_events(url, path, body):
    """(seconds since the request, event name or ':' for a comment, data)
    for each event of a streamed answer."""
    out = []
    start = time.monotonic()
    with httpx.stream("POST", url + path, json=body, timeout=300) as r:
        assert r.status_code == 200, r.read()
        name = None
        for line in r.iter_lines():
            now = time.monotonic() - start
            if line.startswith(":"):
                out.append((now, ":", line))
            elif line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                out.append((now, name or "data", line[5:].strip()))
                name = None
    return out


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_keep_alive_events_while_a_long_prompt_prefills(tools_url, tools_model, api):
    prompt = long_text(f"ka-{api}", 400) + "\nSay OK."
    if api == "anthropic":
        path, body = "/v1/messages", {"model": tools_model, "max_tokens": 2, "stream": True,
                                       "messages": [{"role": "user", "content": prompt}]}
        is_alive = lambda name, data: name == "ping"
        is_answer = lambda name, data: name == "content_block_start"
    elif api == "responses":
        path, body = "/v1/responses", {"model": tools_model, "max_output_tokens": 2, "stream": True, "input": prompt}
        is_alive = lambda name, data: name == "response.in_progress"
        is_answer = lambda name, data: name == "response.output_item.added"
    else:
        path, body = "/v1/chat/completions", {"model": tools_model, "max_tokens": 2, "stream": True,
                                              "messages": [{"role": "user", "content": prompt}]}
        is_alive = lambda name, data: name == ":"
        is_answer = lambda name, data: data != "[DONE]" and name == "data" and json.loads(data)["choices"] and json.loads(data)["choices"][0]["delta"].get("content")
    events = sse_events(tools_url, path, body)
    first = next(i for i, (_, n, d) in enumerate(events) if is_answer(n, d))
    t_first = events[first][0]
    alive = [t for t, n, d in events[:first] if is_alive(n, d)]
    # The prompt takes seconds to prefill; with --sse-keepalive 1 no gap
    # before the answer is much longer than a second.
    assert t_first > 2, f"the prompt was prefilled in {t_first:.1f} s: too short to test"
    assert len(alive) >= int(t_first) - 2, (t_first, alive)
    stamps = [0.0] + alive + [t_first]
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert max(gaps) < 2.5, gaps
