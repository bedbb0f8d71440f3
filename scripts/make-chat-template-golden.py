#!/usr/bin/env python3
"""Renders chat templates that no test model carries (Phi-3.5-mini's) on a
few conversations, the way Hugging Face transformers renders them, into
tests/golden/chat-templates-extra.json.

usage: make-chat-template-golden.py [--llama-cpp DIR] [--out FILE]

DIR is a llama.cpp source tree at the golden commit (0c1e570); the
templates are read from its `models/templates/` folder and stored in the
output next to their renders, so the test needs no llama.cpp tree.

The environment is transformers' (`_compile_jinja_template`): jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension; `tojson` is json.dumps(ensure_ascii=False);
`raise_exception` raises; `strftime_now` is fixed to 2026-11-29. The
AssistantTracker extension (`{% generation %}`) is left out: no template
here uses it. Variables: messages, tools (None), add_generation_prompt and
the model's bos_token / eos_token as its tokenizer_config.json names them.
"""

import argparse
import datetime
import json
import sys
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from golden_json import write_golden

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LLAMA_CPP = "/tmp/lsrc/llama_cpp_python-0.3.36/vendor/llama.cpp"
NOW = datetime.datetime(2026, 11, 29)

# name -> (template file under models/templates, bos_token, eos_token)
TEMPLATES = {
    "phi-3.5-mini-instruct": ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is 2+2?"}
ASSISTANT = {"role": "assistant", "content": "2 + 2 = 4."}
USER2 = {"role": "user", "content": "And  3*3?\nShow your work."}

# (name, messages, add_generation_prompt)
CONVERSATIONS = [
    ("user-only", [USER], True),
    ("user-only-no-prompt", [USER], False),
    ("system-user", [SYSTEM, USER], True),
    ("system-user-no-prompt", [SYSTEM, USER], False),
    ("multi-turn", [SYSTEM, USER, ASSISTANT, USER2], True),
    ("ends-with-assistant", [USER, ASSISTANT], False),
    ("empty-system", [{"role": "system", "content": ""}, USER], True),
    ("unicode", [{"role": "user", "content": "Привет 👋 <b>&amp;</b>"}], True),
]


def environment() -> jinja2.Environment:
    """transformers' chat-template environment."""

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", default=DEFAULT_LLAMA_CPP)
    ap.add_argument("--out", default=str(ROOT / "tests/golden/chat-templates-extra.json"))
    a = ap.parse_args()
    env = environment()
    templates = {}
    for name, (file, bos, eos) in TEMPLATES.items():
        source = (Path(a.llama_cpp) / "models/templates" / file).read_text(encoding="utf-8")
        compiled = env.from_string(source)
        cases = []
        for case_name, messages, add_gen in CONVERSATIONS:
            rendered = compiled.render(
                messages=messages,
                tools=None,
                add_generation_prompt=add_gen,
                bos_token=bos,
                eos_token=eos,
            )
            cases.append(
                {
                    "name": case_name,
                    "messages": messages,
                    "tools": None,
                    "add_generation_prompt": add_gen,
                    "rendered": rendered,
                }
            )
        templates[name] = {
            "source": f"llama.cpp models/templates/{file} (commit 0c1e570, MIT)",
            "template": source,
            "bos_token": bos,
            "eos_token": eos,
            "cases": cases,
        }
    doc = {
        "reference": f"Python jinja2 {jinja2.__version__} ImmutableSandboxedEnvironment("
        "trim_blocks=True, lstrip_blocks=True, loopcontrols) as Hugging Face transformers "
        "renders chat templates; tojson = json.dumps(ensure_ascii=False); bos_token/eos_token "
        "per template; strftime_now fixed to 2026-11-29",
        "templates": templates,
    }
    return write_golden(a.out, doc, 1, f"{sum(len(t['cases']) for t in templates.values())} cases")


if __name__ == "__main__":
    sys.exit(main())
