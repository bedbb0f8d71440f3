#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what the tests need
# (the Python gguf reference, tmux for the chat's terminal test, HAProxy
# for the router test, the coding agents of the live client test (npm
# and PyPI, pinned), Mesa's software Vulkan driver for the GPU backend's tests, a venv with the
# official openai client for the server's test, Selenium for its chat
# page's browser test and the offline validators of deploy/), fetches the models
# with minfer itself, runs every test, then lists any recorded skips.
# A missing model or reference fails a test unless MINFER_REQUIRE_MODELS=0.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq tmux
    else
        echo "tmux is missing: install it (e.g. apt-get install tmux) for the chat's terminal test" >&2
        exit 1
    fi
fi

# HAProxy is the router in front of three `minfer serve` replicas in the
# router test (crates/cli/tests/router_haproxy.rs).
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq haproxy
    else
        echo "haproxy is missing: install it (e.g. apt-get install haproxy) for the router test" >&2
        exit 1
    fi
fi

# Graphviz renders --dump-graph's DOT and headless Chromium loads the
# `minfer viz` page in the CLI's trace tests; chromedriver drives Chromium
# through the chat page of `minfer serve` in the server's Selenium test.
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq "${missing[@]}"
    else
        echo "missing ${missing[*]}: install them (apt-get install ${missing[*]}) for the trace viewer and chat page tests" >&2
        exit 1
    fi
fi

# The GPU backend's tests run on Mesa's software Vulkan driver (lavapipe),
# which wgpu finds through the Vulkan loader with no configuration.
if ! { [ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq mesa-vulkan-drivers libvulkan1
    else
        echo "Mesa's Vulkan drivers are missing: install them (apt-get install mesa-vulkan-drivers libvulkan1) for the GPU backend's tests" >&2
        exit 1
    fi
fi

python3 -m pip install -q gguf==0.19.0

python3 -m venv target/pyenv
target/pyenv/bin/pip install -q openai==1.109.1 anthropic==2.15.0 ollama==0.6.3 pytest==8.3.4 selenium==4.27.1 \
    kubernetes-validate==1.37.0 check-jsonschema==0.39.0
export MINFER_TEST_PYTHON="$PWD/target/pyenv/bin/python"

# The coding agents of the live client test (crates/cli/tests/agents.rs),
# from their registries at pinned versions: Claude Code, Codex CLI and
# Continue's CLI from npm, aider and llm from PyPI, each in its own venv
# (their pinned dependencies conflict).
# Node 18 or later runs the npm ones (Debian's nodejs when none is here).
if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq nodejs npm
    else
        echo "npm is missing: install Node.js (apt-get install nodejs npm) for the live agent test" >&2
        exit 1
    fi
fi
# Several GB of downloads (Open WebUI brings its ML stack, some 7 GB): they
# run while the workspace builds, and the live tests wait for the
# `installed` file (its exit status) before they start a client.
install_agents() {
    npm install --prefix target/agents --no-audit --no-fund --loglevel=error \
        @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @continuedev/cli@1.5.47 || return 1
    python3 -m venv target/agents/aider || return 1
    target/agents/aider/bin/pip install -q aider-chat==0.86.2 || return 1
    python3 -m venv target/agents/llm || return 1
    target/agents/llm/bin/pip install -q llm==0.36 || return 1
    # Open WebUI (crates/cli/tests/open_webui.rs).
    python3 -m venv target/agents/open-webui || return 1
    target/agents/open-webui/bin/pip install -q open-webui==0.12.4 || return 1
    # llama.cpp's own server test suite, from the llama-cpp-python sdist
    # (crates/cli/tests/server_suite.rs), in a venv with its requirements.
    # (&&: errexit does not hold inside a function called as a condition.)
    local suite=target/agents/llama-suite
    local tests=llama_cpp_python-0.3.36/vendor/llama.cpp/tools/server/tests
    mkdir -p "$suite" && python3 -m venv "$suite/venv" \
        && "$suite/venv/bin/pip" install -q scikit-build-core==1.1.2 cmake==4.4.5 ninja || return 1
    # pip prepares the sdist's metadata while downloading it, which needs
    # its build backend and cmake at hand.
    [ -f "$suite/llama_cpp_python-0.3.36.tar.gz" ] || "$suite/venv/bin/pip" download --no-deps \
        --no-binary llama-cpp-python --no-build-isolation llama-cpp-python==0.3.36 \
        -d "$suite" -q || return 1
    # The tests read chat templates from llama.cpp's models/templates.
    tar xzf "$suite/llama_cpp_python-0.3.36.tar.gz" -C "$suite" "$tests" \
        llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates \
        && "$suite/venv/bin/pip" install -q -r "$suite/$tests/requirements.txt" pytest-timeout==2.4.0
}
mkdir -p target/agents
rm -f target/agents/installed
{
    if install_agents > target/agents/install.log 2>&1; then
        echo 0 > target/agents/installed.tmp
    else
        echo 1 > target/agents/installed.tmp
    fi
    mv target/agents/installed.tmp target/agents/installed
} &
export MINFER_AGENTS_DIR="$PWD/target/agents"

rm -f target/minfer-skipped.txt
# Every known model: Qwen2.5-Coder 0.5B and 1.5B, SmolLM2-135M, Gemma 3
# 270M (the store keeps them between runs; a verified file is not fetched
# again).
cargo run --release --bin minfer -- pull qwen2.5-coder-0.5b-instruct smollm2-135m-instruct \
    qwen2.5-coder-1.5b-instruct gemma-3-270m
cargo test --workspace --release
scripts/test-summary.sh
