#!/usr/bin/env python3
"""Summarize the matvec criterion results as a markdown table of GB/s.

Reads target/criterion/matvec_*/<level>_t<n>/<shape>/new/{benchmark,estimates}.json
and prints one row per (type, shape) with a column per (level, threads),
using criterion's median time. GB/s = weight bytes / median time (10^9 B/s).
usage: bench_table.py [TARGET_DIR]
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target") / "criterion"
rows, cols = {}, set()
for bench in root.glob("matvec_*/*/*/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    est = json.loads((bench.parent / "estimates.json").read_text())
    ty = meta["group_id"].split("/")[1]
    col = meta["function_id"]
    gbps = meta["throughput"]["Bytes"] / est["median"]["point_estimate"]
    rows.setdefault((ty, meta["value_str"]), {})[col] = gbps
    cols.add(col)

order = ["scalar/t1", "scalar/t2", "avx2/t1", "avx2/t2", "avx512/t1", "avx512/t2"]
cols = [c for c in order if c in cols]
print("| type | shape (rows×cols) | " + " | ".join(cols) + " |")
print("|---|---|" + "---:|" * len(cols))
for (ty, shape) in sorted(rows, key=lambda k: (k[0], [int(v) for v in k[1].split("x")])):
    r = rows[(ty, shape)]
    print(f"| {ty} | {shape} | " + " | ".join(f"{r[c]:.1f}" if c in r else "-" for c in cols) + " |")
