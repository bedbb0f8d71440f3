"""Tool calling and `n > 1` on `/v1/chat/completions`, the rest of
`/v1/completions` (logprobs, echo, prompt lists, suffix), and request
validation, with the official `openai` client against Qwen2.5-Coder-0.5B
(whose chat template takes tools)."""

import json
import threading

import openai
import pytest

from conftest import WEATHER
from test_openai_api import http

TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def call(client, model, **kw):
    kw.setdefault("messages", ASK)
    kw.setdefault("tools", [WEATHER, TIME])
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 48)
    return client.chat.completions.create(model=model, **kw)


def streamed_calls(stream):
    """Assembles streamed `delta.tool_calls` pieces as clients do."""
    calls, finish, content = {}, None, ""
    for chunk in stream:
        for ch in chunk.choices:
            d = ch.delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    entry["id"] = tc.id
                if tc.function and tc.function.name:
                    entry["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    entry["arguments"] += tc.function.arguments
            finish = ch.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish, content


def test_required_tool_call_parses_and_follows_the_schema(tools_client, tools_model):
    r = call(tools_client, tools_model, tool_choice="required", parallel_tool_calls=False)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content is None
    assert len(c.message.tool_calls) == 1
    tc = c.message.tool_calls[0]
    assert tc.type == "function" and tc.id
    assert tc.function.name in ("get_weather", "get_time")
    args = json.loads(tc.function.arguments)
    key = "city" if tc.function.name == "get_weather" else "zone"
    assert set(args) == {key} and isinstance(args[key], str)


def test_named_tool_streamed_equals_sync(tools_client, tools_model):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    sync = call(tools_client, tools_model, tool_choice=choice)
    tc = sync.choices[0].message.tool_calls
    assert [t.function.name for t in tc] == ["get_weather"]
    assert "Paris" in json.loads(tc[0].function.arguments)["city"]
    calls, finish, content = streamed_calls(
        call(tools_client, tools_model, tool_choice=choice, stream=True)
    )
    assert finish == "tool_calls"
    assert content == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        (t.function.name, json.loads(t.function.arguments)) for t in tc
    ]
    assert all(c["id"] for c in calls)


def test_a_tool_result_is_carried_into_the_next_turn(tools_client, tools_model):
    first = call(
        tools_client,
        tools_model,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    tc = first.choices[0].message.tool_calls[0]
    history = ASK + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": tc.id, "content": "Sunny and 24 degrees Celsius."},
    ]
    second = call(tools_client, tools_model, messages=history, tool_choice="none", max_tokens=40)
    c = second.choices[0]
    assert c.message.tool_calls is None, c
    assert c.finish_reason in ("stop", "length")
    assert c.message.content.strip()
    # The call and its result are in the prompt (with `none` the tools
    # themselves are not).
    alone = call(tools_client, tools_model, tool_choice="none", max_tokens=1)
    assert second.usage.prompt_tokens > alone.usage.prompt_tokens + 10
    answer = c.message.content.lower()
    assert "24" in answer or "sunny" in answer, answer


def test_refused_fields_and_templates_without_tools(client, model, tools_client, tools_model):
    with pytest.raises(openai.BadRequestError) as e:
        tools_client.chat.completions.create(
            model=tools_model,
            messages=ASK,
            extra_body={"functions": [WEATHER["function"]]},
        )
    assert e.value.body["param"] == "functions"
    with pytest.raises(openai.BadRequestError) as e:
        call(tools_client, tools_model, tool_choice={"type": "function", "function": {"name": "nope"}})
    assert e.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError) as e:
        call(tools_client, tools_model, tools=[{"type": "function", "function": {"name": "a b"}}])
    assert e.value.body["param"] == "tools[0].function.name"
    # SmolLM2's template has no place for tools: they are described in the
    # system prompt instead (agents send tools to every model), so the
    # prompt grows by their description and the request is answered.
    plain = client.chat.completions.create(model=model, messages=ASK, max_tokens=1)
    with_tools = call(client, model, max_tokens=1)
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + 20


def test_n_choices_each_match_the_request_alone(tools_client, tools_model):
    kw = dict(
        messages=[{"role": "user", "content": "Write one short sentence about the sea."}],
        temperature=0.9,
        max_tokens=16,
    )
    r = tools_client.chat.completions.create(model=tools_model, n=3, seed=11, **kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    alone = [
        tools_client.chat.completions.create(model=tools_model, seed=11 + i, **kw)
        for i in range(3)
    ]
    for c, a in zip(r.choices, alone):
        assert c.message.content == a.choices[0].message.content
    # The prompt is counted once; the completions of every choice add up.
    assert r.usage.prompt_tokens == alone[0].usage.prompt_tokens
    assert r.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)
    assert len({c.message.content for c in r.choices}) > 1
    # Streamed: every choice by its index, the same texts.
    texts = {}
    for chunk in tools_client.chat.completions.create(
        model=tools_model, n=3, seed=11, stream=True, **kw
    ):
        for ch in chunk.choices:
            texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
    assert [texts[i] for i in range(3)] == [c.message.content for c in r.choices]
    with pytest.raises(openai.BadRequestError) as e:
        tools_client.chat.completions.create(model=tools_model, n=5, **kw)
    assert e.value.body["param"] == "n"


def test_tools_and_n_mixed_with_plain_requests_answer_as_alone(tools_client, tools_model):
    reqs = [
        dict(messages=ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False,
             temperature=0, max_tokens=40),
        dict(messages=[{"role": "user", "content": "Name a fruit."}], n=2, seed=3,
             temperature=0.8, max_tokens=12),
        dict(messages=[{"role": "user", "content": "Count to five."}], temperature=0, max_tokens=20),
    ]

    def key(r):
        return [
            (c.message.content, [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []])
            for c in r.choices
        ]

    alone = [key(tools_client.chat.completions.create(model=tools_model, **q)) for q in reqs]
    results = {}

    def run(i, q):
        results[i] = key(tools_client.chat.completions.create(model=tools_model, **q))

    threads = [threading.Thread(target=run, args=(i % 3, reqs[i % 3])) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(3)] == alone


def test_completions_logprobs_echo_lists_and_suffix(tools_client, tools_model):
    r = tools_client.completions.create(
        model=tools_model, prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=3
    )
    lp = r.choices[0].logprobs
    n = len(lp.tokens)
    assert n == r.usage.completion_tokens
    assert len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert all(x <= 0 for x in lp.token_logprobs)
    assert all(len(t) <= 3 for t in lp.top_logprobs)
    assert lp.text_offset == sorted(lp.text_offset)
    assert "".join(lp.tokens) == r.choices[0].text

    e = tools_client.completions.create(
        model=tools_model, prompt="The capital of France is", max_tokens=6, temperature=0, echo=True
    )
    assert e.choices[0].text == "The capital of France is" + r.choices[0].text

    # echo with logprobs: the prompt's own tokens first, from the prefill.
    both = tools_client.completions.create(
        model=tools_model, prompt="The capital of France is", max_tokens=6, temperature=0,
        echo=True, logprobs=2,
    )
    c = both.choices[0]
    n_prompt = both.usage.prompt_tokens
    assert len(c.logprobs.tokens) == n_prompt + both.usage.completion_tokens
    assert c.logprobs.token_logprobs[0] is None and c.logprobs.top_logprobs[0] is None
    assert all(x <= 0 for x in c.logprobs.token_logprobs[1:])
    assert "".join(c.logprobs.tokens) == c.text == e.choices[0].text
    assert c.logprobs.token_logprobs[n_prompt:] == lp.token_logprobs
    assert c.logprobs.text_offset == sorted(c.logprobs.text_offset)
    streamed_tokens, streamed_text = [], ""
    for chunk in tools_client.completions.create(
        model=tools_model, prompt="The capital of France is", max_tokens=6, temperature=0,
        echo=True, logprobs=2, stream=True,
    ):
        ch = chunk.choices[0]
        streamed_text += ch.text
        if ch.logprobs:
            streamed_tokens += ch.logprobs.tokens
    assert streamed_text == c.text and streamed_tokens == c.logprobs.tokens

    prompts = ["One, two,", "Red, green,"]
    many = tools_client.completions.create(model=tools_model, prompt=prompts, max_tokens=5, temperature=0)
    assert [c.index for c in many.choices] == [0, 1]
    for p, c in zip(prompts, many.choices):
        one = tools_client.completions.create(model=tools_model, prompt=p, max_tokens=5, temperature=0)
        assert c.text == one.choices[0].text

    fim = tools_client.completions.create(
        model=tools_model,
        prompt="def add(a, b):\n    ",
        suffix="\n\nprint(add(1, 2))\n",
        max_tokens=12,
        temperature=0,
    )
    assert "return" in fim.choices[0].text, fim.choices[0].text


def test_validation_names_and_routes(tools_url, tools_model):
    body = {"messages": [{"role": "system", "content": "x"}, {"role": "user"}]}
    status, err = http(tools_url + "/v1/chat/completions", json.dumps(body))
    assert status == 400 and err["error"]["param"] == "messages[1].content"
    # No model, or any name: the one model served answers, under its id.
    for extra in ({}, {"model": "gpt-4o"}):
        body = {"messages": ASK, "max_tokens": 2, **extra}
        status, r = http(tools_url + "/v1/chat/completions", json.dumps(body))
        assert status == 200 and r["model"] == tools_model
    # The OpenAI routes also without /v1, but for `/completions`, which is
    # llama-server's native completion there, as in llama-server.
    status, r = http(tools_url + "/chat/completions", json.dumps({"messages": ASK, "max_tokens": 2}))
    assert status == 200 and r["object"] == "chat.completion"
    status, r = http(tools_url + "/models")
    assert status == 200 and r["data"][0]["id"] == tools_model
    status, r = http(tools_url + "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 1}))
    assert status == 200 and r["object"] == "text_completion"
    status, r = http(tools_url + "/completions", json.dumps({"prompt": "a", "n_predict": 1}))
    assert status == 200 and r["stop"] is True and r["tokens_predicted"] == 1


def test_cors_alias_and_preflight(think_url, think_model, tools_url):
    assert think_model == "thinker"
    status, r = http(think_url + "/v1/models")
    assert [m["id"] for m in r["data"]] == ["thinker"]
    import urllib.request

    pre = urllib.request.Request(
        think_url + "/v1/chat/completions",
        method="OPTIONS",
        headers={
            "Origin": "http://page.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization",
        },
    )
    with urllib.request.urlopen(pre, timeout=30) as resp:
        assert resp.status == 200
        assert resp.headers["Access-Control-Allow-Origin"] == "http://page.example"
        assert "POST" in resp.headers["Access-Control-Allow-Methods"]
    req = urllib.request.Request(think_url + "/v1/models", headers={"Origin": "http://page.example"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["Access-Control-Allow-Origin"] == "http://page.example"
    # A server without --cors-origins sends no CORS headers.
    req = urllib.request.Request(tools_url + "/v1/models", headers={"Origin": "http://page.example"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers.get("Access-Control-Allow-Origin") is None
