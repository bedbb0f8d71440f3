#!/usr/bin/env python3
"""Starts a server for llama.cpp's own server test suite
(`tools/server/tests` of the llama-cpp-python==0.3.36 sdist), which
launches `$LLAMA_SERVER_BIN_PATH` with llama-server's flags.

    SUITE_ENGINE=minfer|llama  SUITE_MODEL=FILE  SUITE_BIN=BINARY  shim.py ARGS...

The suite names its models on Hugging Face (`--hf-repo`, `--hf-file`,
`--model-url`); this machine has no route there, so every model the suite
asks for is SUITE_MODEL, for both engines alike. With SUITE_ENGINE=llama
the flags go to llama-server unchanged but for that; with minfer they are
mapped to `minfer serve`'s: the ones with a counterpart are translated, the
rest (GPU layers, batch sizes, flash attention, ...) are dropped and named
on stderr, so a test that depends on one fails visibly rather than
silently passing.
"""

import os
import sys

MODEL_FLAGS = {"--model", "-m", "--hf-repo", "-hfr", "--hf-file", "-hff", "--model-url", "-mu"}

# llama-server flags that take no value.
SWITCHES = {
    "--cont-batching", "--embedding", "--embeddings", "--reranking", "--metrics",
    "--kv-unified", "--swa-full", "--slots", "--no-slots", "--jinja", "--no-jinja",
    "--offline", "--no-ui", "--verbose", "--context-shift", "--no-mmproj",
    "--no-models-autoload", "--ui-mcp-proxy", "--backend_sampling",
    "--no-cache-idle-slots", "--no-webui",
}

# llama-server flag -> minfer serve flag (both take a value).
RENAMED = {
    "--port": "--port",
    "--host": "--host",
    "--ctx-size": "-c",
    "-c": "-c",
    "--parallel": "--np",
    "-np": "--np",
    "--threads": "-t",
    "-t": "-t",
    "--n-predict": "-n",
    "-n": "-n",
    "--api-key": "--api-key",
    "--alias": "--alias",
    "--tags": "--tags",
    "--temp": "--temp",
    "--seed": "--seed",
    "--chat-template": "--chat-template",
    "--chat-template-file": "--chat-template-file",
    "--cors-origins": "--cors-origins",
    "--cache-ram": "--cache-ram",
    "--spec-draft-n-max": "--draft-max",
    "--spec-draft-n-min": "--draft-min",
}


def pairs(args):
    """(flag, value or None) in order."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in SWITCHES or i + 1 >= len(args):
            yield a, None
            i += 1
        else:
            yield a, args[i + 1]
            i += 2


def main():
    engine = os.environ.get("SUITE_ENGINE", "minfer")
    model = os.environ["SUITE_MODEL"]
    binary = os.environ["SUITE_BIN"]
    args = sys.argv[1:]
    if engine == "llama":
        out = ["--model", model]
        for flag, value in pairs(args):
            if flag in MODEL_FLAGS:
                continue
            if flag == "--model-draft":
                value = model
            out += [flag] if value is None else [flag, value]
        os.execv(binary, [binary, *out])
    out, dropped = [], []
    for flag, value in pairs(args):
        if flag in MODEL_FLAGS:
            continue
        if flag == "--model-draft":
            out += ["--draft", model]
        elif flag in ("--no-ui", "--no-slots", "--no-webui"):
            out.append(flag)
        elif flag in RENAMED and value is not None:
            out += [RENAMED[flag], value]
        else:
            dropped.append(flag if value is None else f"{flag} {value}")
    if dropped:
        print(f"shim: no minfer counterpart, dropped: {' '.join(dropped)}", file=sys.stderr)
    os.execv(binary, [binary, "serve", model, *out])


if __name__ == "__main__":
    main()
