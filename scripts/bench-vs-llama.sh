#!/usr/bin/env bash
# minfer against llama.cpp on the same GGUF files, interleaved: for each
# model, depth, round and thread count, llama-bench then `minfer bench`,
# same tests; then the median of each engine's per-round figures and their
# ratio, each engine's decode as a share of the machine's read bandwidth
# (the streaming probe of `minfer bench`), and with --parallel the
# aggregate decode of several streams.
#
#   scripts/bench-vs-llama.sh [--rounds N] [--threads "1 2"] [--pp 512] [--tg 128]
#                             [--depth "0 8192 16384"] [--parallel 1,2,4,8]
#                             [--kv-type f16|q8_0|f32] [--busy] [MODEL...]
#
# MODEL: files or names known to `minfer pull` (default: the Qwen2.5 and
# SmolLM2 test models). --depth: tokens already in the cache (llama-bench's
# -d), one run per value. --pp/--tg: the prompt and generation lengths (0
# skips that test). --parallel: aggregate decode at each number of
# sequences, llama-batched-bench (-npp 128 -ntg 128 -npl LIST) against
# `minfer bench --parallel LIST`. --kv-type: the KV cache format of both
# (llama-bench's -ctk/-ctv, minfer's --kv-type; default f16). --busy runs one competing busy process (a
# shell loop) for the whole run, the "server or build beside the engine"
# case.
#
# llama-bench: $LLAMA_BENCH, else target/llama.cpp/build/bin/llama-bench,
# else it is built there from the llama-cpp-python==0.3.36 sdist (llama.cpp
# 0c1e570, -DGGML_NATIVE=ON; about 20 minutes on 2 cores), with
# llama-batched-bench beside it.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
threads="1 2"
depths=0
pp=512
tg=128
parallel=
busy=0
kv=f16
models=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --depth) depths=$2; shift 2 ;;
        --pp) pp=$2; shift 2 ;;
        --tg) tg=$2; shift 2 ;;
        --parallel) parallel=$2; shift 2 ;;
        --kv-type) kv=$2; shift 2 ;;
        --busy) busy=1; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=(qwen2.5-coder-0.5b-instruct smollm2-135m-instruct)

minfer=target/release/minfer
cargo build --release --bin minfer -q

llama_bench=${LLAMA_BENCH:-target/llama.cpp/build/bin/llama-bench}
if [ ! -x "$llama_bench" ]; then
    echo "building llama-bench in target/llama.cpp (about 20 minutes)..." >&2
    mkdir -p target/llama.cpp
    (
        cd target/llama.cpp
        # pip prepares the sdist's metadata while downloading it, which needs
        # its build backend and cmake at hand.
        python3 -m pip install -q cmake ninja scikit-build-core
        python3 -m pip download --no-deps --no-binary llama-cpp-python --no-build-isolation \
            llama-cpp-python==0.3.36 -d . -q 2>/dev/null || true
        sdist=$(ls llama_cpp_python-0.3.36.tar.gz 2>/dev/null || true)
        [ -n "$sdist" ] || { echo "cannot download the llama-cpp-python sdist; set LLAMA_BENCH" >&2; exit 1; }
        tar xzf "$sdist"
        cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B build -G Ninja \
            -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF > cmake.log
        ninja -C build llama-bench llama-batched-bench > build.log
    )
    llama_bench=target/llama.cpp/build/bin/llama-bench
fi
batched_bench=$(dirname "$llama_bench")/llama-batched-bench
if [ -n "$parallel" ] && [ ! -x "$batched_bench" ]; then
    echo "no llama-batched-bench beside $llama_bench (ninja -C target/llama.cpp/build llama-batched-bench)" >&2
    exit 1
fi

busy_pid=
if [ "$busy" = 1 ]; then
    (while :; do :; done) &
    busy_pid=$!
    trap 'kill $busy_pid 2>/dev/null || true' EXIT
fi

# One row per engine, model, threads and test: `engine model t test t/s`.
llama_rows() {
    python3 -c "
import csv, sys
for row in csv.DictReader(sys.stdin):
    p, g, d = int(row['n_prompt']), int(row['n_gen']), int(row.get('n_depth') or 0)
    test = (f'pp{p}' if p else f'tg{g}') + (f' @ d{d}' if d else '')
    print('llama.cpp', sys.argv[1], sys.argv[2], test, row['avg_ts'], sep='\t')" "$@"
}
minfer_rows() {
    python3 -c "
import json, sys
for row in json.load(sys.stdin):
    print('minfer', sys.argv[1], sys.argv[2], row['test'], row['avg_ts'], sep='\t')" "$@"
}
# Aggregate decode rates of several streams, from llama-batched-bench's
# JSON lines or `minfer bench --parallel -o json`.
stream_rows() {
    python3 -c "
import json, sys
text = sys.stdin.read()
rows = json.loads(text) if text.lstrip().startswith('[') else [
    json.loads(l) for l in text.splitlines() if l.startswith('{')]
for row in rows:
    print(sys.argv[1], sys.argv[2], sys.argv[3], f\"tg128 x{row['pl']} streams\", row['speed_tg'], sep='\t')" "$@"
}

# --pp 0 --tg 0: only the streams of --parallel.
[ "$pp" -eq 0 ] && [ "$tg" -eq 0 ] && depths=""
raw=$(mktemp)
probe=$(mktemp)
for m in "${models[@]}"; do
    path=$($minfer pull "$m" >/dev/null 2>&1; $minfer list --json | python3 -c "
import json, sys
name = sys.argv[1]
for e in json.load(sys.stdin):
    if name in (e.get('name'), e.get('file')) and e.get('path'):
        print(e['path']); break
else:
    print(name)" "$m")
    name=$(basename "$path")
    # The bytes a decode token reads and the machine's read bandwidth on
    # each thread count: the streaming probe printed under `minfer bench`.
    for t in $threads; do
        $minfer bench "$path" -p 0 -n 8 -r 1 -t "$t" 2>/dev/null | python3 -c "
import re, sys
text = sys.stdin.read()
w = re.search(r'weights read per token: ([0-9.]+) GiB', text)
bw = re.search(r'\(([0-9.]+) GB/s on', text)
if w and bw:
    print(sys.argv[1], sys.argv[2], float(w.group(1)) * 2**30, float(bw.group(1)) * 1e9, sep='\t')" "$name" "$t" >> "$probe"
    done
    for d in $depths; do
        d_args=()
        [ "$d" -gt 0 ] && d_args=(-d "$d")
        for r in $(seq "$rounds"); do
            for t in $threads; do
                "$llama_bench" -m "$path" -p "$pp" -n "$tg" -r 1 -t "$t" "${d_args[@]}" \
                    -ctk "$kv" -ctv "$kv" -o csv 2>/dev/null |
                    llama_rows "$name" "$t" >> "$raw"
                $minfer bench "$path" -p "$pp" -n "$tg" -r 1 -t "$t" "${d_args[@]}" \
                    --kv-type "$kv" -o json 2>/dev/null |
                    minfer_rows "$name" "$t" >> "$raw"
            done
        done
    done
    [ -n "$parallel" ] || continue
    for r in $(seq "$rounds"); do
        for t in $threads; do
            "$batched_bench" -m "$path" -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl "$parallel" \
                -t "$t" --output-format jsonl 2>/dev/null | stream_rows llama.cpp "$name" "$t" >> "$raw"
            $minfer bench "$path" -p 128 -n 128 -r 1 -t "$t" --parallel "$parallel" -o json 2>/dev/null |
                stream_rows minfer "$name" "$t" >> "$raw"
        done
    done
done

python3 scripts/bench-vs-llama-summary.py "$raw" "$probe" "$rounds" "$busy"
rm -f "$raw" "$probe"
