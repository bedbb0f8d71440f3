#!/usr/bin/env python3
"""What Python costs per token: greedy decode of one stream, and the
aggregate of four threads, through

- the CLI (`minfer run` for one stream, `minfer bench --parallel 4` for
  four in lock-step),
- the Python package (`minfer.Model`, streamed; four Python threads),
- llama-cpp-python (`llama_cpp.Llama`, streamed; four threads, which must
  take turns on one `Llama`, as its users do with a lock),

interleaved, `--reps` rounds, medians. Decode rate is (tokens - 1) over
the time from the first token to the last, as llama-bench's tg.

    python3 scripts/python_overhead.py --model FILE --minfer target/release/minfer \\
        --minfer-python PY --llama-python PY [--reps 3] [-n 128]

Each `--*-python` is an interpreter with that package installed.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import textwrap

PROMPTS = [
    "def quicksort(arr):",
    "class LinkedList:\n    def __init__(self):",
    "// A function that parses a date in C\nint parse_date(const char *s",
    "# A script that counts the words of a file\nimport sys\n",
]

# Runs inside the interpreter under test; prints one JSON line.
WORKER = textwrap.dedent(r'''
    import json, sys, threading, time
    kind, model, n, prompts, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
    if kind == "minfer":
        import minfer
        m = minfer.Model(model, n_ctx=2048, threads=threads, n_parallel=4)
        def stream(p):
            for c in m.completion(prompt=p, max_tokens=n, temperature=0, stream=True,
                                  stream_options={"include_usage": True}):
                if c.get("usage"):
                    yield None, c["usage"]["completion_tokens"]
                elif c["choices"] and c["choices"][0]["text"]:
                    yield c["choices"][0]["text"], None
        lock = None
    else:
        import llama_cpp
        m = llama_cpp.Llama(model_path=model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False)
        def stream(p):
            k = 0
            for c in m(p, max_tokens=n, temperature=0, stream=True):
                k += 1
                yield c["choices"][0]["text"], None
            yield None, k
        lock = threading.Lock()

    def one(p, out):
        t0 = time.perf_counter(); first = last = None; count = 0
        if lock: lock.acquire()
        try:
            for text, total in stream(p):
                now = time.perf_counter()
                if total is not None:
                    count = total
                elif first is None:
                    first = now
                last = now
        finally:
            if lock: lock.release()
        out.append({"tokens": count, "first": first - t0, "decode": last - first, "start": t0, "end": last})

    # Warm-up (graphs, caches).
    one(prompts[0], [])
    single = []
    one(prompts[0], single)
    many = []
    ts = [threading.Thread(target=one, args=(p, many)) for p in prompts]
    t0 = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    wall = time.perf_counter() - t0
    s = single[0]
    print(json.dumps({"tg": (s["tokens"] - 1) / s["decode"], "tokens": s["tokens"],
                      "agg4": sum(r["tokens"] for r in many) / wall}))
''')


def cli_single(minfer, model, n, threads):
    err = subprocess.run([minfer, "run", model, PROMPTS[0], "--no-template", "-n", str(n), "--temp", "0",
                          "-c", "2048", "-t", str(threads)], capture_output=True, text=True, check=True).stderr
    m = re.search(r"decode: (\d+) tokens in ([\d.]+) s", err)
    k, secs = int(m.group(1)), float(m.group(2))
    return (k - 1) / secs


def cli_parallel(minfer, model, n, threads):
    out = subprocess.run([minfer, "bench", model, "--parallel", "4", "-p", "16", "-n", str(n), "-r", "1",
                          "-t", str(threads), "-c", "2048"], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    # The aggregate decode rate of the N=4 row.
    rows = [l for l in text.splitlines() if re.match(r"\s*\|?\s*4\s*\|", l)]
    nums = re.findall(r"[\d.]+", rows[-1]) if rows else []
    return text, nums


def worker(python, kind, model, n, threads):
    out = subprocess.run([python, "-c", WORKER, kind, model, str(n), json.dumps(PROMPTS), str(threads)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--minfer", required=True)
    ap.add_argument("--minfer-python", required=True)
    ap.add_argument("--llama-python")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    rows = {"cli": [], "minfer": [], "llama": []}
    par_text = None
    for _ in range(a.reps):
        rows["cli"].append({"tg": cli_single(a.minfer, a.model, a.n, a.threads)})
        rows["minfer"].append(worker(a.minfer_python, "minfer", a.model, a.n, a.threads))
        if a.llama_python:
            rows["llama"].append(worker(a.llama_python, "llama", a.model, a.n, a.threads))
    par_text, _ = cli_parallel(a.minfer, a.model, a.n, a.threads)
    med = lambda k, f: statistics.median(r[f] for r in rows[k]) if rows[k] else float("nan")
    cli = med("cli", "tg")
    print(f"model {a.model}, {a.threads} threads, {a.n} tokens, median of {a.reps}")
    print(f"| path | one stream t/s | ms/token | over the CLI | four threads, aggregate t/s |")
    print(f"|---|---:|---:|---:|---:|")
    print(f"| minfer run (CLI) | {cli:.1f} | {1000 / cli:.2f} | | see bench below |")
    for k, name in [("minfer", "minfer.Model (Python)"), ("llama", "llama_cpp.Llama (Python)")]:
        if rows[k]:
            tg = med(k, "tg")
            print(f"| {name} | {tg:.1f} | {1000 / tg:.2f} | {1000 / tg - 1000 / cli:+.2f} ms | {med(k, 'agg4'):.1f} |")
    print("\nminfer bench --parallel 4 (the CLI's four streams in lock-step):")
    print("\n".join(l for l in par_text.splitlines() if "|" in l))


if __name__ == "__main__":
    main()
