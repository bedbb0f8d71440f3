#!/usr/bin/env bash
# minfer against llama.cpp on the same GGUF files, interleaved: for each
# model, thread count and round, llama-bench then `minfer bench`, same
# tests; then the median of each engine's per-round figures and their ratio.
#
#   scripts/bench-vs-llama.sh [--rounds N] [--threads "1 2"] [--tests "pp512 tg128"]
#                             [--depth D] [--busy] [MODEL...]
#
# MODEL: files or names known to `minfer pull` (default: the Qwen2.5 and
# SmolLM2 test models). --busy runs one competing busy process (a shell
# loop) for the whole run, the "server or build beside the engine" case.
#
# llama-bench: $LLAMA_BENCH, else target/llama.cpp/build/bin/llama-bench,
# else it is built there from the llama-cpp-python==0.3.36 sdist (llama.cpp
# 0c1e570, -DGGML_NATIVE=ON; about 20 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
threads="1 2"
depth=0
busy=0
models=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --depth) depth=$2; shift 2 ;;
        --busy) busy=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
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
        ninja -C build llama-bench > build.log
    )
    llama_bench=target/llama.cpp/build/bin/llama-bench
fi

busy_pid=
if [ "$busy" = 1 ]; then
    (while :; do :; done) &
    busy_pid=$!
    trap 'kill $busy_pid 2>/dev/null || true' EXIT
fi

d_args=()
[ "$depth" -gt 0 ] && d_args=(-d "$depth")
raw=$(mktemp)
for m in "${models[@]}"; do
    path=$($minfer pull "$m" >/dev/null 2>&1; $minfer list --json | python3 -c "
import json, sys
name = sys.argv[1]
for e in json.load(sys.stdin):
    if name in (e.get('name'), e.get('file')) and e.get('path'):
        print(e['path']); break
else:
    print(name)" "$m")
    for r in $(seq "$rounds"); do
        for t in $threads; do
            "$llama_bench" -m "$path" -p 512 -n 128 -r 1 -t "$t" "${d_args[@]}" -o csv 2>/dev/null |
                python3 -c "
import csv, sys
for row in csv.DictReader(sys.stdin):
    p, g, d = int(row['n_prompt']), int(row['n_gen']), int(row.get('n_depth') or 0)
    test = (f'pp{p}' if p else f'tg{g}') + (f' @ d{d}' if d else '')
    print('llama.cpp', sys.argv[1], sys.argv[2], test, row['avg_ts'], sep='\t')" "$(basename "$path")" "$t" >> "$raw"
            $minfer bench "$path" -p 512 -n 128 -r 1 -t "$t" "${d_args[@]}" -o json 2>/dev/null |
                python3 -c "
import json, sys
for row in json.load(sys.stdin):
    print('minfer', sys.argv[1], sys.argv[2], row['test'], row['avg_ts'], sep='\t')" "$(basename "$path")" "$t" >> "$raw"
        done
    done
done

python3 - "$raw" "$rounds" "$busy" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    engine, model, t, test, ts = line.rstrip('\n').split('\t')
    runs[(model, int(t), test, engine)].append(float(ts))
keys = sorted({k[:3] for k in runs})
print(f"rounds: {sys.argv[2]} (interleaved), medians in tokens/s" + (", one busy process beside" if sys.argv[3] == "1" else ""))
print("| model | threads | test | llama.cpp | minfer | minfer / llama.cpp |")
print("|---|---:|---|---:|---:|---:|")
for model, t, test in keys:
    a = runs.get((model, t, test, 'llama.cpp'), [])
    b = runs.get((model, t, test, 'minfer'), [])
    ma = statistics.median(a) if a else float('nan')
    mb = statistics.median(b) if b else float('nan')
    print(f"| {model} | {t} | {test} | {ma:.2f} | {mb:.2f} | {mb / ma:.2f}x |")
EOF
rm -f "$raw"
