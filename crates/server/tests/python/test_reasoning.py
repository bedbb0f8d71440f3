"""Reasoning output and lazy constraints, on a fixture: the tiny
random-weight qwen3 model rewritten with Qwen3's published chat template
and single `<think>`, `</think>`, `<tool_call>`, `</tool_call>` tokens
(scripts/make-think-fixture.py). No real thinking model ships here, so
the random model is steered with logit biases and a strong repeat
penalty: each biased token wins once, in order of its bias, then the
end token."""

import json

import openai

from test_openai_api import http

Q = [{"role": "user", "content": "What is the capital of France?"}]


def token(url, text):
    status, r = http(url + "/tokenize", json.dumps({"content": text, "add_special": False}))
    assert status == 200 and len(r["tokens"]) == 1, (text, r)
    return r["tokens"][0]


def steer(url, *texts, end=True):
    """Biases that make the model say `texts` in order (each once)."""
    bias = {str(token(url, t)): 100 - 5 * i for i, t in enumerate(texts)}
    if end:
        bias[str(token(url, "<|im_end|>"))] = 100 - 5 * len(texts)
    return {"logit_bias": bias, "repeat_penalty": 1000}


def ask(client, model, url, **kw):
    extra = kw.pop("extra_body", {})
    extra.update(steer(url, "<think>", "Paris", "</think>", " Rome"))
    return client.chat.completions.create(
        model=model, messages=Q, temperature=0, max_tokens=12, extra_body=extra, **kw
    )


def test_reasoning_content_is_apart_from_the_answer(think_client, think_model, think_url):
    r = ask(think_client, think_model, think_url)
    m = r.choices[0].message
    reasoning = m.model_extra["reasoning_content"]
    assert "Paris" in reasoning
    assert "<think>" not in m.content and "</think>" not in m.content
    assert "<think>" not in reasoning and "</think>" not in reasoning
    # Streamed: the same split, as delta.reasoning_content then delta.content.
    got = {"reasoning_content": "", "content": ""}
    order = []
    for chunk in ask(think_client, think_model, think_url, stream=True):
        for ch in chunk.choices:
            d = ch.delta.model_dump()
            for k in got:
                if d.get(k):
                    got[k] += d[k]
                    if not order or order[-1] != k:
                        order.append(k)
    assert got == {"reasoning_content": reasoning, "content": m.content}
    assert order[0] == "reasoning_content"


def test_reasoning_format_none_keeps_the_block_in_the_content(think_client, think_model, think_url):
    r = ask(think_client, think_model, think_url, extra_body={"reasoning_format": "none"})
    m = r.choices[0].message
    assert m.content.startswith("<think>Paris")
    assert "</think>" in m.content
    assert "reasoning_content" not in (m.model_extra or {})
    bad = openai.OpenAI(base_url=think_url + "/v1", api_key="x", max_retries=0)
    try:
        ask(bad, think_model, think_url, extra_body={"reasoning_format": "sometimes"})
        raise AssertionError("an unknown reasoning_format is refused")
    except openai.BadRequestError as e:
        assert e.body["param"] == "reasoning_format"


def test_enable_thinking_false_closes_the_block_in_the_prompt(think_client, think_model, think_url):
    on = ask(think_client, think_model, think_url)
    off = ask(
        think_client,
        think_model,
        think_url,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    # `<think>\n\n</think>\n\n` is added to the prompt.
    assert off.usage.prompt_tokens >= on.usage.prompt_tokens + 3


def test_a_json_schema_constrains_the_answer_after_the_thinking(think_client, think_model, think_url):
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": {"type": "string", "enum": ["yes", "no"]}},
    }
    for stream in (False, True):
        if stream:
            reasoning, content = "", ""
            for chunk in ask(think_client, think_model, think_url, response_format=fmt, stream=True):
                for ch in chunk.choices:
                    d = ch.delta.model_dump()
                    reasoning += d.get("reasoning_content") or ""
                    content += d.get("content") or ""
        else:
            m = ask(think_client, think_model, think_url, response_format=fmt).choices[0].message
            reasoning, content = m.model_extra["reasoning_content"], m.content
        # The thinking was free (the biased words), the answer follows the schema.
        assert "Paris" in reasoning
        assert json.loads(content) in ("yes", "no"), content


def test_auto_tool_calls_are_constrained_from_the_tag_on(think_client, think_model, think_url):
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                "required": ["city"],
            },
        },
    }
    kw = dict(model=think_model, messages=Q, temperature=0, max_tokens=40, tools=[tool],
              parallel_tool_calls=False)
    # Steered to open a call (no repeat penalty: the tag is in the
    # prompt's tool instructions): the grammar takes over at the tag.
    r = think_client.chat.completions.create(
        extra_body={"logit_bias": {str(token(think_url, "<tool_call>")): 100}}, **kw
    )
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.content is None, "the call is the whole answer"
    assert [t.function.name for t in c.message.tool_calls] == ["get_weather"]
    assert json.loads(c.message.tool_calls[0].function.arguments)["city"] in ("Paris", "Rome")
    # Left alone the random model writes text, and nothing forces a call.
    r = think_client.chat.completions.create(max_tokens=8, **{k: v for k, v in kw.items() if k != "max_tokens"})
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "length"
