#!/usr/bin/env python3
"""Records llama-server's renders of its named chat templates
(`--chat-template NAME --no-jinja`: the names are C++ code there, not
Jinja) into crates/server/tests/fixtures/named_templates.json,
which the server's tests compare minfer's renders with.

    python3 scripts/record_named_templates.py LLAMA_SERVER MODEL.gguf

LLAMA_SERVER is llama-server built from the llama-cpp-python==0.3.36 sdist
(scripts/bench-vs-llama.sh builds it); any model works, the render does not
depend on it. Each name gets one server and one POST /apply-template of the
same conversation (whitespace around contents shows which templates trim).
"""

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

NAMES = [
    "llama3", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
    "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken",
    "phi3", "phi4", "falcon3", "zephyr", "gemma", "vicuna", "vicuna-orca",
    "deepseek", "command-r", "openchat",
]
MESSAGES = [
    {"role": "system", "content": "You are helpful. "},
    {"role": "user", "content": " Hello"},
    {"role": "assistant", "content": " Hi there!\n"},
    {"role": "user", "content": "How are you?"},
]
PORT = 8191


def render(server, model, name):
    proc = subprocess.Popen([server, "-m", model, "--port", str(PORT), "-c", "256",
                             "--chat-template", name, "--no-jinja"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{PORT}/apply-template",
                    data=json.dumps({"messages": MESSAGES}).encode(),
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req) as r:
                    return json.load(r)["prompt"]
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"llama-server with --chat-template {name} did not answer")
    finally:
        proc.terminate()
        proc.wait()


def main():
    server, model = sys.argv[1], sys.argv[2]
    out = {"messages": MESSAGES, "renders": {n: render(server, model, n) for n in NAMES}}
    path = Path(__file__).resolve().parent.parent / "crates/server/tests/fixtures/named_templates.json"
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
