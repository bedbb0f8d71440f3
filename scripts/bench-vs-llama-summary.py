"""The tables of scripts/bench-vs-llama.sh from its raw per-round figures.

    python3 scripts/bench-vs-llama-summary.py RAW PROBE ROUNDS BUSY

RAW: lines `engine model threads test tokens_per_second` (tab-separated),
one per engine, round and test. PROBE: lines `model threads weight_bytes
read_bandwidth` (bytes a decode token reads, bytes per second the probe of
`minfer bench` measured). Prints the medians and their ratio per test,
each engine's decode share of the read bandwidth, the time to the first
token where a test has both a prompt and a generation, and the aggregate
decode of several streams over one.
"""

import re
import statistics
import sys
from collections import defaultdict


def order(key):
    """Model, threads, then depth and stream count as numbers."""
    model, threads, test = key
    depth = re.search(r"@ d(\d+)", test)
    streams = re.search(r"x(\d+) streams", test)
    return (
        model,
        threads,
        int(depth.group(1)) if depth else 0,
        int(streams.group(1)) if streams else 0,
        test,
    )


def main(raw, probe_file, rounds, busy):
    runs = defaultdict(list)
    for line in open(raw):
        engine, model, t, test, ts = line.rstrip("\n").split("\t")
        runs[(model, int(t), test, engine)].append(float(ts))
    probe = {}
    for line in open(probe_file):
        model, t, weights, bw = line.rstrip("\n").split("\t")
        probe[(model, int(t))] = (float(weights), float(bw))

    busy_note = ", one busy process beside" if busy == "1" else ""
    print(f"rounds: {rounds} (interleaved), medians in tokens/s{busy_note}")
    print("| model | threads | test | llama.cpp | minfer | minfer / llama.cpp |")
    print("|---|---:|---|---:|---:|---:|")
    med = {}
    for model, t, test in sorted({k[:3] for k in runs}, key=order):
        a = runs.get((model, t, test, "llama.cpp"), [])
        b = runs.get((model, t, test, "minfer"), [])
        ma = statistics.median(a) if a else float("nan")
        mb = statistics.median(b) if b else float("nan")
        med[(model, t, test)] = (ma, mb)
        print(f"| {model} | {t} | {test} | {ma:.2f} | {mb:.2f} | {mb / ma:.2f}x |")

    decode = {
        (m, t): v
        for (m, t, test), v in med.items()
        if test.startswith("tg") and "@" not in test and "streams" not in test
    }
    if probe and decode:
        print()
        print("Decode of one sequence without context, as a share of the read bandwidth")
        print("(weights a token reads x tokens/s, over the streaming probe):")
        print("| model | threads | probe GB/s | llama.cpp | minfer |")
        print("|---|---:|---:|---:|---:|")
        for (model, t), (weights, bw) in sorted(probe.items()):
            ma, mb = decode.get((model, t), (float("nan"), float("nan")))
            print(
                f"| {model} | {t} | {bw / 1e9:.1f} "
                f"| {100 * weights * ma / bw:.0f} % | {100 * weights * mb / bw:.0f} % |"
            )

    first = []
    for (model, t, test), (pa, pb) in med.items():
        m = re.fullmatch(r"pp(\d+)( @ d\d+)?", test)
        tg = m and next(
            (v for (m2, t2, k), v in med.items()
             if (m2, t2) == (model, t) and re.fullmatch(r"tg\d+" + re.escape(m.group(2) or ""), k)),
            None,
        )
        if tg:
            n = int(m.group(1))
            first.append((order((model, t, test)), model, t, test, n / pa + 1 / tg[0], n / pb + 1 / tg[1]))
    if first:
        print()
        print("Time to the first token: the prompt at the pp rate, then one decode step at the tg rate:")
        print("| model | threads | prompt | llama.cpp s | minfer s |")
        print("|---|---:|---|---:|---:|")
        for _, model, t, test, a, b in sorted(first):
            print(f"| {model} | {t} | {test} | {a:.2f} | {b:.2f} |")

    streams = defaultdict(dict)
    for (model, t, test), v in med.items():
        s = re.search(r"x(\d+) streams", test)
        if s:
            streams[(model, t)][int(s.group(1))] = v
    for (model, t), by_n in sorted(streams.items()):
        if 1 not in by_n:
            continue
        a1, b1 = by_n[1]
        gains = ", ".join(
            f"{n} streams {ma / a1:.2f}x / {mb / b1:.2f}x"
            for n, (ma, mb) in sorted(by_n.items())
            if n > 1
        )
        print(f"\n{model}, {t} threads, aggregate decode over one stream (llama.cpp / minfer): {gains}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
