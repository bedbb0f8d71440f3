"""OpenAI's Responses API (`/v1/responses`, stateless) with the official
`openai` client on Qwen2.5-Coder-0.5B: output text equal to the chat
endpoint's, streamed events in order, function calls and their outputs,
`text.format` schemas, and the stateful fields refused by name."""

import json

import openai
import pytest

from conftest import CITY_SCHEMA, WEATHER_FUNCTION

WEATHER = {"type": "function", **WEATHER_FUNCTION}
ASK = "What is the weather in Paris?"
HELLO = dict(
    instructions="You are a French teacher.",
    input="Say hello in French.",
    max_output_tokens=40,
    temperature=0,
)


def test_output_text_equals_the_chat_answer(tools_client, tools_model):
    r = tools_client.responses.create(model=tools_model, **HELLO)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status == "completed" and r.incomplete_details is None
    assert [o.type for o in r.output] == ["message"]
    msg = r.output[0]
    assert msg.role == "assistant" and msg.status == "completed"
    assert [c.type for c in msg.content] == ["output_text"]
    assert r.output_text.strip(), r
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    chat = tools_client.chat.completions.create(
        model=tools_model,
        messages=[
            {"role": "system", "content": HELLO["instructions"]},
            {"role": "user", "content": HELLO["input"]},
        ],
        max_tokens=40,
        temperature=0,
    )
    assert r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    # A list of input items reads the same as the string.
    items = tools_client.responses.create(
        model=tools_model,
        **{**HELLO, "input": [{"role": "user", "content": [{"type": "input_text", "text": HELLO["input"]}]}]},
    )
    assert items.output_text == r.output_text
    short = tools_client.responses.create(model=tools_model, **{**HELLO, "max_output_tokens": 2})
    assert short.status == "incomplete"
    assert short.incomplete_details.reason == "max_output_tokens"
    assert short.usage.output_tokens == 2


def test_streamed_events_in_order(tools_client, tools_model):
    sync = tools_client.responses.create(model=tools_model, **HELLO)
    events = list(tools_client.responses.create(model=tools_model, stream=True, **HELLO))
    kinds = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == sync.output_text
    assert events[-4].text == sync.output_text
    done = events[-1].response
    assert done.status == "completed" and done.output_text == sync.output_text
    assert done.usage.output_tokens == sync.usage.output_tokens
    item_ids = {e.item_id for e in events if hasattr(e, "item_id")}
    assert item_ids == {done.output[0].id}
    # The client's own accumulation of the events gives the same response.
    with tools_client.responses.stream(model=tools_model, **HELLO) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert text == final.output_text == sync.output_text


def call(client, model, **kw):
    kw.setdefault("input", ASK)
    kw.setdefault("tools", [WEATHER])
    kw.setdefault("max_output_tokens", 48)
    return client.responses.create(model=model, temperature=0, **kw)


def test_required_function_call_parses(tools_client, tools_model):
    r = call(tools_client, tools_model, tool_choice="required", parallel_tool_calls=False)
    assert [o.type for o in r.output] == ["function_call"], r.output
    fc = r.output[0]
    assert fc.name == "get_weather" and fc.status == "completed"
    assert fc.call_id and fc.id and fc.call_id != fc.id
    args = json.loads(fc.arguments)
    assert set(args) == {"city"} and "Paris" in args["city"]
    assert r.output_text == ""
    assert r.tool_choice == "required" and r.tools[0].name == "get_weather"
    events = list(
        call(tools_client, tools_model, tool_choice="required", parallel_tool_calls=False, stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[2:6] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert json.loads(events[4].arguments) == args
    assert events[-1].response.output[0].call_id == events[5].item.call_id


def test_a_function_call_output_is_carried_into_the_next_turn(tools_client, tools_model):
    choice = {"type": "function", "name": "get_weather"}
    first = call(tools_client, tools_model, tool_choice=choice)
    fc = first.output[0]
    assert fc.type == "function_call"
    # As clients do: the previous output items, then the call's output.
    history = [{"role": "user", "content": ASK}]
    history += [o.model_dump(exclude_none=True) for o in first.output]
    history.append(
        {"type": "function_call_output", "call_id": fc.call_id, "output": "Sunny and 24 degrees Celsius."}
    )
    second = call(tools_client, tools_model, input=history, tool_choice="none", max_output_tokens=40)
    assert [o.type for o in second.output] == ["message"]
    answer = second.output_text.lower()
    assert "24" in answer or "sunny" in answer, answer
    alone = call(tools_client, tools_model, tool_choice="none", max_output_tokens=1)
    assert second.usage.input_tokens > alone.usage.input_tokens + 10


def test_a_json_schema_format_constrains_the_text(tools_client, tools_model):
    r = tools_client.responses.create(
        model=tools_model,
        input="Name a city and its country.",
        text={"format": {"type": "json_schema", "name": "place", "schema": CITY_SCHEMA, "strict": True}},
        max_output_tokens=60,
        temperature=0,
    )
    v = json.loads(r.output_text)
    assert set(v) == {"city", "country"} and all(isinstance(x, str) for x in v.values())
    assert r.text.format.type == "json_schema"


def test_stateful_fields_are_refused_by_name(tools_client, tools_model):
    for kw, param in [
        ({"store": True}, "store"),
        ({"previous_response_id": "resp_0000000000000001"}, "previous_response_id"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
         "input[0].content[0].type"),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            tools_client.responses.create(model=tools_model, **{"input": "Hi", "max_output_tokens": 4, **kw})
        assert e.value.body["param"] == param
    # `store: false` is what a stateless server does anyway.
    r = tools_client.responses.create(model=tools_model, input="Hi", max_output_tokens=4, store=False)
    assert r.store is False


def test_reasoning_effort_switches_the_templates_thinking(think_client, think_model):
    def prompt_tokens(**kw):
        r = think_client.responses.create(model=think_model, input="Hi", max_output_tokens=1, **kw)
        return r.usage.input_tokens

    on = prompt_tokens(reasoning={"effort": "low"})
    off = prompt_tokens(reasoning={"effort": "none"})
    # Qwen3's template closes an empty thinking block in the prompt when off.
    assert off >= on + 3
    assert prompt_tokens() == on
