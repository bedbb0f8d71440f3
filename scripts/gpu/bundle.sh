#!/usr/bin/env bash
# Prepares, on this machine, everything `scripts/gpu/check.sh` needs on a
# machine with a GPU that has neither network nor Rust: one archive,
# .gpu/bundle.tar.xz (ignored by git; add `/.gpu/` to .git/info/exclude),
# plus the Vulkan loader packages in .gl/ as the device notes ask.
#
#   scripts/gpu/bundle.sh [--llama]
#
# It holds the release `minfer` and the GPU test binaries (stripped), a
# manifest, skeletons of the known models in the store (their headers and
# 4 KiB of each tensor, scripts/gpu/skeleton.py) and, when built,
# llama.cpp's Vulkan `llama-bench`. `--llama` builds that first, from the
# same llama-cpp-python sdist as scripts/bench-vs-llama.sh, statically and
# without -march=native (the GPU machine's CPU is another). llama.cpp finds
# its cooperative-matrix shaders (the tensor cores) only with a glslc newer
# than Debian 12's; `GLSLC=/path/to/glslc VULKAN_INCLUDE=/path/to/include`
# name newer ones (Debian 13's packages run here through their own loader).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
STAGE=$ROOT/.gpu/stage
LLAMA_SRC=$ROOT/target/llama.cpp/llama_cpp_python-0.3.36/vendor/llama.cpp
LLAMA_BUILD=$ROOT/target/llama.cpp/build-vk
MODELS_DIR=${MINFER_HOME:-$HOME/.cache/minfer}/models
MODELS="qwen2.5-coder-0.5b-instruct-q4_k_m qwen2.5-coder-1.5b-instruct-q4_k_m smollm2-135m-instruct-q4_1 gemma-3-270m-q4_k_m"

if [ "${1:-}" = "--llama" ]; then
    [ -d "$LLAMA_SRC" ] || { echo "run scripts/bench-vs-llama.sh once: it unpacks the sdist"; exit 1; }
    extra=()
    [ -n "${GLSLC:-}" ] && extra+=("-DVulkan_GLSLC_EXECUTABLE=$GLSLC")
    [ -n "${VULKAN_INCLUDE:-}" ] && extra+=("-DVulkan_INCLUDE_DIR=$VULKAN_INCLUDE")
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
        -DGGML_F16C=ON -DGGML_BMI2=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF "${extra[@]}"
    ninja -C "$LLAMA_BUILD" llama-bench
fi

rm -rf "$STAGE" && mkdir -p "$STAGE/bin" "$STAGE/skel"
cargo build --release -p minfer-cli
strip -o "$STAGE/bin/minfer" target/release/minfer
tests=(ops_elementwise ops_matmul ops_attention gpu_golden no_alloc_gpu)
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
cargo test --release -p minfer-gpu -p minfer-engine "${args[@]}" --no-run \
    --message-format=json 2> /dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do strip -o "$STAGE/bin/$name" "$exe"; done
if [ -x "$LLAMA_BUILD/bin/llama-bench" ]; then
    strip -o "$STAGE/bin/llama-bench" "$LLAMA_BUILD/bin/llama-bench"
    # Its libraries beyond libc and libstdc++, which the GPU machine's image
    # need not have.
    mkdir -p "$STAGE/bin/lib"
    ldd "$LLAMA_BUILD/bin/llama-bench" | awk '/libssl|libcrypto|libgomp/ {print $3}' \
        | xargs -r cp -L -t "$STAGE/bin/lib"
else
    echo "no llama.cpp Vulkan build (scripts/gpu/bundle.sh --llama makes one): minfer alone"
fi

{
    echo "workspace=$ROOT"
    for m in $MODELS; do echo "model=$m"; done
} > "$STAGE/bin/manifest"

for m in $MODELS; do
    if [ -f "$MODELS_DIR/$m.gguf" ]; then
        python3 scripts/gpu/skeleton.py pack "$MODELS_DIR/$m.gguf" "$STAGE/skel/$m.skel"
    else
        echo "$m is not in the store ($MODELS_DIR): run \`minfer pull\`"
    fi
done

# One stream with a dictionary wide enough that the two Qwen skeletons share
# their tokenizer.
tar -C "$STAGE" -cf - bin skel | xz -T2 -9 > "$ROOT/.gpu/bundle.tar.xz"
rm -rf "$STAGE"

mkdir -p .gl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
if ! ls .gl/libvulkan1_*.deb > /dev/null 2>&1; then
    apt-get $o update > /dev/null
    (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
ls -la .gpu/bundle.tar.xz .gl
