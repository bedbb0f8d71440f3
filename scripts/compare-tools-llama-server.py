#!/usr/bin/env python3
"""The same tool-calling and n > 1 requests to llama-server (--jinja) and
minfer serve, side by side, with the official openai client.

usage: compare-tools-llama-server.py LLAMA_URL MINFER_URL
(both serving the same GGUF; e.g. Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
"""

import json
import sys
from pathlib import Path

import openai

# The tool-calling tests' weather tool, so that both compare the same call.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "crates/server/tests/python"))
from weather_tool import WEATHER  # noqa: E402
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CASES = [
    ("tools, tool_choice=auto", dict(messages=ASK, tools=[WEATHER])),
    ("tools, tool_choice=required", dict(messages=ASK, tools=[WEATHER], tool_choice="required",
                                         parallel_tool_calls=False)),
    ("tools, named function", dict(messages=ASK, tools=[WEATHER],
                                   tool_choice={"type": "function", "function": {"name": "get_weather"}})),
    ("n=3, temperature 0", dict(messages=[{"role": "user", "content": "Name a colour."}], n=3)),
    ("n=3, temperature 0.9, seed 7",
     dict(messages=[{"role": "user", "content": "Name a colour."}], n=3, temperature=0.9, seed=7)),
]


def show(r):
    out = []
    for c in r.choices:
        calls = [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls or []]
        out.append({"finish": c.finish_reason, "content": c.message.content, "tool_calls": calls})
    return {"choices": out, "usage": [r.usage.prompt_tokens, r.usage.completion_tokens]}


def main():
    servers = [("llama-server", sys.argv[1]), ("minfer", sys.argv[2])]
    for name, kw in CASES:
        kw = {"temperature": 0, "max_tokens": 40, **kw}
        print(f"## {name}")
        for who, url in servers:
            c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)
            try:
                print(f"{who}: {json.dumps(show(c.chat.completions.create(model='m', **kw)))}")
            except openai.APIError as e:
                print(f"{who}: error {e}")
        print()


if __name__ == "__main__":
    main()
