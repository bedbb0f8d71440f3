#!/usr/bin/env bash
# Speculative decoding side by side: `minfer bench --draft` (plain and
# speculative, alternated) and llama.cpp's `llama-speculative` on the same
# GGUF files and the same prompts (bench/spec-prompts, rendered with the
# Qwen2.5 chat template), greedy, the same thread count and draft length.
# Rounds alternate the two engines; medians are printed.
#
#   scripts/bench-spec-vs-llama.sh [--rounds N] [--n-gen N] [--draft-max K] [--threads T]
#
# LLAMA_BIN: the directory holding llama-speculative (default: the build
# scripts/bench-vs-llama.sh makes, ../llama.cpp-build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 N_GEN=128 DRAFT_MAX=3 THREADS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --n-gen) N_GEN=$2; shift 2 ;;
    --draft-max) DRAFT_MAX=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
MODELS=${MINFER_HOME:-$HOME/.cache/minfer}/models
TARGET=${TARGET:-$MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
DRAFT=${DRAFT:-$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
LLAMA_BIN=${LLAMA_BIN:-$(cd .. && pwd)/llama.cpp-build/bin}
SPEC=$LLAMA_BIN/llama-speculative
[ -x "$SPEC" ] || { echo "no $SPEC (build llama.cpp's llama-speculative target)" >&2; exit 1; }
export LD_LIBRARY_PATH=$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cargo build --release -q -p minfer-cli
MINFER=target/release/minfer
OUT=$(mktemp -d)
grep -m1 'model name' /proc/cpuinfo | sed 's/^/cpu: /'
echo "target $(basename "$TARGET"), draft $(basename "$DRAFT"), $THREADS threads, -n $N_GEN, draft-max $DRAFT_MAX, $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
  for f in bench/spec-prompts/*.txt; do
    name=$(basename "$f" .txt)
    chat=$(printf '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$(cat "$f")")
    "$SPEC" -m "$TARGET" -md "$DRAFT" -p "$chat" -n "$N_GEN" --temp 0 -t "$THREADS" -c 4096 \
      --spec-draft-n-max "$DRAFT_MAX" > "$OUT/llama-$name-$r.txt" 2>&1 || { tail -5 "$OUT/llama-$name-$r.txt"; exit 1; }
  done
  "$MINFER" bench "$TARGET" --draft "$DRAFT" --draft-max "$DRAFT_MAX" -n "$N_GEN" -r 1 -t "$THREADS" -o json \
    > "$OUT/minfer-$r.json"
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, re, statistics, sys, glob, os
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for r in range(1, rounds + 1):
    for e in json.load(open(f"{out}/minfer-{r}.json")):
        d = rows.setdefault(e["prompt"], {"plain": [], "spec": [], "llama": [], "acc": [], "lacc": []})
        d["plain"].append(e["plain_ts"]); d["spec"].append(e["spec_ts"]); d["acc"].append(e["acceptance"])
    for p in rows:
        t = open(f"{out}/llama-{p}-{r}.txt").read()
        m = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", t)
        a = re.search(r"accept\s+=\s+([\d.]+)%", t)
        rows[p]["llama"].append(float(m.group(1)) if m else float("nan"))
        rows[p]["lacc"].append(float(a.group(1)) / 100 if a else float("nan"))
med = statistics.median
print("| prompt | minfer plain t/s | minfer draft t/s | accepted | speed-up | llama-speculative t/s | accepted | minfer / llama |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for p, d in rows.items():
    mp, ms, ml = med(d["plain"]), med(d["spec"]), med(d["llama"])
    print(f"| {p} | {mp:.2f} | {ms:.2f} | {med(d['acc']):.0%} | {ms / mp:.2f} | {ml:.2f} | {med(d['lacc']):.0%} | {ms / ml:.2f} |")
PY
