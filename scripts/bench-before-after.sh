#!/usr/bin/env bash
# Two minfer builds on the same models, interleaved: for each round, model
# and thread count, `minfer bench` of one build then the other (the order
# alternates between rounds, so a drift of the machine falls on both);
# then the median of each build's per-round figures and their ratio. The
# check that a refactor left the speed alone.
#
#   scripts/bench-before-after.sh BEFORE AFTER [--rounds N] [--threads "1 2"]
#                                 [--tests "-p 512 -n 128"] [--simd LEVEL] [MODEL...]
#
# BEFORE, AFTER: minfer binaries (build the old one from a worktree, or
# copy target/release/minfer aside before rebuilding). MODEL: files or
# names known to `minfer pull` (default: the Qwen2.5 and SmolLM2 test
# models). Run it with nothing else on the machine.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,15p' "$0"; exit 2; }
before=$1
after=$2
shift 2
rounds=3
threads="1 2"
tests="-p 512 -n 128"
simd=()
models=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        --simd) simd=(--simd "$2"); shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=(qwen2.5-coder-0.5b-instruct smollm2-135m-instruct)
for b in "$before" "$after"; do
    [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | grep -o 'avx512f\|avx2\|avx_vnni' | sort -u | tr '\n' ' ')
echo "CPU: $cpu ($(nproc) cores; $flags)" >&2

for r in $(seq 1 "$rounds"); do
    order=(before after)
    [ $((r % 2)) -eq 0 ] && order=(after before)
    for m in "${models[@]}"; do
        for t in $threads; do
            for which in "${order[@]}"; do
                bin=$before
                [ "$which" = after ] && bin=$after
                # shellcheck disable=SC2086
                "$bin" bench "$m" $tests -r 1 -t "$t" "${simd[@]}" -o json 2>/dev/null \
                    > "$out/$which.$r.$t.$(basename "$m").json"
                echo "round $r: $which $m t=$t" >&2
            done
        done
    done
done

python3 - "$out" <<'EOF'
import glob, json, os, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    which = os.path.basename(f).split(".")[0]
    for row in json.load(open(f)):
        runs[(row["model"], row["threads"], row["test"], which)].append(row["avg_ts"])
keys = sorted({k[:3] for k in runs})
print("| model | threads | test | before t/s | after t/s | after/before |")
print("|---|---:|---|---:|---:|---:|")
for m, t, test in keys:
    b = statistics.median(runs[(m, t, test, "before")])
    a = statistics.median(runs[(m, t, test, "after")])
    print(f"| {m} | {t} | {test} | {b:.2f} | {a:.2f} | {a / b:.3f} |")
EOF
