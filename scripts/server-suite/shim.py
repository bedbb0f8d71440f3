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
rest (GPU layers, the micro-batch size, flash attention, ...) are dropped and named
on stderr, so a test that depends on one fails visibly rather than
silently passing.

A start with no model at all is llama-server's router mode. Its tests
name three Hugging Face models, which the shim maps to SUITE_MODEL in a
preset file (`--models-preset`, understood by both servers) unless the
test brings a preset of its own.
"""

import os
import sys
import tempfile

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
    "--models-max": "--models-max",
    "--models-preset": "--models-preset",
    "--models-dir": "--models-dir",
    "--slot-save-path": "--slot-save-path",
    "--reasoning": "--reasoning",
    "--reasoning-budget": "--reasoning-budget",
    "--batch-size": "--batch-size",
    "-b": "--batch-size",
}

# Switches both servers spell alike.
SAME_SWITCHES = {"--no-ui", "--no-slots", "--no-webui", "--no-models-autoload"}

# The models the router tests name.
ROUTER_MODELS = [
    "ggml-org/tinygemma3-GGUF:Q8_0",
    "ggml-org/test-model-stories260K:F32",
    "ggml-org/test-model-stories260K-infill:F32",
]


def router_preset(model):
    """A preset naming each router test model, all of them MODEL."""
    fd, path = tempfile.mkstemp(prefix="suite-router-", suffix=".ini")
    with os.fdopen(fd, "w") as f:
        for name in ROUTER_MODELS:
            f.write(f"[{name}]\nmodel = {model}\n\n")
    return path


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
    flags = {flag for flag, _ in pairs(args)}
    router = not flags & MODEL_FLAGS
    if router and "--models-preset" not in flags:
        args += ["--models-preset", router_preset(model)]
    if engine == "llama":
        out = [] if router else ["--model", model]
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
        elif flag in SAME_SWITCHES:
            out.append(flag)
        elif flag in RENAMED and value is not None:
            out += [RENAMED[flag], value]
        else:
            dropped.append(flag if value is None else f"{flag} {value}")
    if dropped:
        print(f"shim: no minfer counterpart, dropped: {' '.join(dropped)}", file=sys.stderr)
    os.execv(binary, [binary, "serve", *([] if router else [model]), *out])


if __name__ == "__main__":
    main()
