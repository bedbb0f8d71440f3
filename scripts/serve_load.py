#!/usr/bin/env python3
"""Load test of `minfer serve`: 1, 2, 4 and 8 concurrent greedy streaming
clients of 128 tokens each; prints aggregate tokens/s and time to first
token (p50/p99) per client count, as a Markdown table. The decode
column is each stream's rate after its first token times the clients,
the figure `minfer bench --parallel` reports as S_TG.

By default it starts the server itself on a free loopback port:

    python3 scripts/serve_load.py                      # Qwen2.5-Coder-0.5B, -t 2
    python3 scripts/serve_load.py --model smollm2-135m-instruct --threads 2
    python3 scripts/serve_load.py --url http://127.0.0.1:8080 --model NAME
    python3 scripts/serve_load.py --serve-arg=--lookup --serve-arg=0   # no prompt lookup

Only the standard library is used. Loopback only; every wait is bounded.
"""

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

TOPICS = [
    "a binary search tree with insert, delete and in-order traversal",
    "an LRU cache with a hash map and a doubly linked list",
    "a tokenizer for arithmetic expressions and a recursive-descent parser",
    "a thread pool with a work queue and graceful shutdown",
    "a JSON pretty-printer that handles nested objects and arrays",
    "a priority queue on a binary heap with decrease-key",
    "a rate limiter using the token bucket algorithm",
    "a trie with prefix search and deletion",
    "Dijkstra's shortest paths on an adjacency list",
    "a ring buffer with blocking push and pop",
]


def one_request(host, port, model, prompt, max_tokens, timeout):
    """Streams one chat completion; returns (ttft seconds, completion
    tokens, seconds from the first token to the last)."""
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    ttft, tokens = None, 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if ttft is None and chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
            ttft = time.perf_counter() - t0
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    t_end = time.perf_counter() - t0
    conn.close()
    ttft = ttft if ttft is not None else t_end
    return ttft, tokens, t_end - ttft


def percentile(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def run_phase(host, port, model, clients, rounds, max_tokens, timeout):
    results, errors = [], []
    lock = threading.Lock()

    def client(c):
        for r in range(rounds):
            prompt = f"Write a complete, well-commented Python implementation of {TOPICS[(c * rounds + r) % len(TOPICS)]}."
            try:
                res = one_request(host, port, model, prompt, max_tokens, timeout)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(repr(e))
                return
            with lock:
                results.append(res)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    wall = time.perf_counter() - t0
    if errors or any(t.is_alive() for t in threads):
        raise RuntimeError(f"{clients} clients: {errors[:3] or 'a client hung'}")
    tokens = sum(n for _, n, _ in results)
    ttfts = [t for t, _, _ in results]
    # Each stream's rate after its first token, times the streams: what
    # `minfer bench --parallel` reports as S_TG (decode only, no prefill,
    # no wait for the other clients' prompts).
    rates = [(n - 1) / d for _, n, d in results if n > 1 and d > 0]
    return {
        "clients": clients,
        "requests": len(results),
        "tokens": tokens,
        "wall": wall,
        "tps": tokens / wall,
        "decode_tps": statistics.mean(rates) * clients if rates else 0.0,
        "ttft_p50": percentile(ttfts, 50),
        "ttft_p99": percentile(ttfts, 99),
    }


def start_server(args):
    cmd = [
        args.bin, "serve", args.model, "--host", "127.0.0.1", "--port", "0",
        "-np", str(max(args.clients)), "--n-ctx", str(args.n_ctx), "-t", str(args.threads),
    ] + args.serve_arg
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # the ready line, once the model is loaded
    if "http://" not in line:
        proc.kill()
        sys.exit(f"minfer serve did not start: {line!r}")
    words = line.split("http://", 1)[1].split()
    return proc, "http://" + words[0], words[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="an already running server (default: start one)")
    ap.add_argument("--bin", default=str(Path(__file__).resolve().parent.parent / "target/release/minfer"))
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2, help="requests per client in each phase")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument(
        "--serve-arg", action="append", default=[],
        help="one more argument for `minfer serve` (repeatable; e.g. --serve-arg=--lookup --serve-arg=0)",
    )
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]

    proc = None
    if args.url:
        url, model = args.url, args.model
    else:
        proc, url, model = start_server(args)
    u = urllib.parse.urlparse(url)
    try:
        # Warm-up: the first steps build the graphs.
        one_request(u.hostname, u.port, model, "Say hi.", 8, args.timeout)
        rows = []
        for c in args.clients:
            r = run_phase(u.hostname, u.port, model, c, args.rounds, args.tokens, args.timeout)
            rows.append(r)
            print(f"# {c} clients: {r['tokens']} tokens in {r['wall']:.1f} s", file=sys.stderr, flush=True)
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    base = rows[0]["tps"]
    print(f"\nminfer serve, {model}, -t {args.threads}, greedy, {args.tokens} tokens per request, {args.rounds} requests per client\n")
    print("| clients | requests | tokens | aggregate t/s | × 1 client | decode t/s | TTFT p50 (s) | TTFT p99 (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['clients']} | {r['requests']} | {r['tokens']} | {r['tps']:.1f} | {r['tps'] / base:.2f} "
            f"| {r['decode_tps']:.1f} | {r['ttft_p50']:.2f} | {r['ttft_p99']:.2f} |"
        )


if __name__ == "__main__":
    main()
