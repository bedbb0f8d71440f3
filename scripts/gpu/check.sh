#!/usr/bin/env bash
# One pass of the GPU checks on a machine with a real GPU and nothing else:
# no network, no Rust, no models. It runs from the repository root on what
# `scripts/gpu/bundle.sh` prepared here (BUNDLE, default .gpu/bundle.tar.xz:
# minfer and the GPU test binaries, llama.cpp's Vulkan llama-bench, and the
# models as skeletons) and writes its log and the bench tables into OUT.
#
#   scripts/gpu/check.sh OUT [BUNDLE]
#
# What it runs, each step bounded so that one slow step cannot eat the rest:
#   1. the adapters wgpu finds (`minfer devices`) and the driver;
#   2. `minfer bench --device gpu` against `llama-bench -ngl 99` (Vulkan),
#      model by model, interleaved: pp512 and tg128;
#   3. the GPU op tests (every kernel against the CPU reference) and the
#      golden replays of the tiny fixtures on the GPU.
# The models are skeletons (scripts/gpu/skeleton.py): the real headers and
# shapes with tiled weights, so the speeds are real and the tokens are not.
set -u
OUT=${1:?usage: scripts/gpu/check.sh OUT [BUNDLE]}
BUNDLE=${2:-.gpu/bundle.tar.xz}
REPS=${GPU_CHECK_REPS:-3}
# A dry run on a software driver: GPU_CHECK_TESTS=0 GPU_CHECK_MODELS=NAME.
TESTS=${GPU_CHECK_TESTS:-1}
mkdir -p "$OUT"
exec > >(tee "$OUT/check.log") 2>&1
W=/tmp/minfer-gpu-check
step() { echo; echo "== $(date +%T) $*"; }

step "Vulkan loader"
if ! ldconfig -p | grep -q libvulkan.so.1 && ls .gl/*.deb > /dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
    export VK_DRIVER_FILES=$icd
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" 2>&1

step "unpack the bundle"
rm -rf "$W" && mkdir -p "$W"
tar -C "$W" -xJf "$BUNDLE" || { echo "bundle $BUNDLE does not unpack"; exit 1; }
pids=()
for s in "$W"/skel/*.skel; do
    python3 scripts/gpu/skeleton.py unpack "$s" "${s%.skel}.gguf" &
    pids+=($!)
done
# Only these: a bare `wait` would also wait for the log's tee.
wait "${pids[@]}"
rm -f "$W"/skel/*.skel
export MINFER_HOME=$W/home
mkdir -p "$MINFER_HOME"
# The test binaries look for the repository where they were built.
root=$(sed -n 's/^workspace=//p' "$W/bin/manifest" 2>/dev/null)
if [ -n "$root" ] && [ ! -e "$root" ]; then
    mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
fi

step "adapters"
timeout 60 "$W/bin/minfer" devices
# llama.cpp's Vulkan backend skips software devices (Mesa's llvmpipe): with
# none listed here, its figures below are its CPU backend's.
[ -x "$W/bin/llama-bench" ] && LD_LIBRARY_PATH=$W/bin/lib timeout 60 "$W/bin/llama-bench" --list-devices

step "bench: llama.cpp Vulkan (-ngl 99) and minfer --device gpu, interleaved"
for m in ${GPU_CHECK_MODELS:-$(sed -n 's/^model=//p' "$W/bin/manifest")}; do
    g=$W/skel/$m.gguf
    [ -f "$g" ] || continue
    echo "-- $m"
    if [ -x "$W/bin/llama-bench" ]; then
        LD_LIBRARY_PATH=$W/bin/lib timeout 100 "$W/bin/llama-bench" -m "$g" -ngl 99 -p 512 -n 128 -r "$REPS" -o md 2>&1 \
            | grep -E "^\||ggml_vulkan: [0-9]|error|failed" | tee -a "$OUT/llama.md"
    fi
    timeout 100 "$W/bin/minfer" bench "$g" --device gpu -p 512 -n 128 -r "$REPS" -o md 2>&1 \
        | grep -vE "^\s*$" | tail -n 8 | tee -a "$OUT/minfer.md"
done
if [ "$TESTS" = 1 ]; then
    step "GPU op tests"
    for t in ops_elementwise ops_matmul ops_attention; do
        echo "-- $t"
        timeout 90 "$W/bin/$t" --test-threads 4 2>&1 \
            | grep -E "^test |test result|panicked|FAILED|error" | tail -n 60
    done

    step "golden replays on the GPU (the fixtures in tests/models; the real models do not travel)"
    skip=()
    for f in gpu_golden_qwen3_tiny:qwen3-tiny-q8_0.gguf \
        gpu_golden_qwen3_tiny_mixed_plan:qwen3-tiny-q8_0.gguf \
        gpu_golden_qwen3moe_tiny:qwen3moe-tiny-q8_0.gguf \
        gpu_golden_phi3_tiny:phi3-tiny-q8_0.gguf gpu_golden_gpt_oss_tiny:gpt-oss-tiny.gguf; do
        [ -f "tests/models/${f#*:}" ] || skip+=(--skip "${f%%:*}")
    done
    MINFER_REQUIRE_MODELS=0 timeout 120 "$W/bin/gpu_golden" --test-threads 2 "${skip[@]}" 2>&1 \
        | grep -E "^test |test result|panicked|FAILED|SKIPPED|error" | tail -n 60
    timeout 45 "$W/bin/no_alloc_gpu" 2>&1 | grep -E "^test |test result|panicked" | tail -n 5
fi

step "done"
