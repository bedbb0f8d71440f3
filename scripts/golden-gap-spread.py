#!/usr/bin/env python3
"""How far llama.cpp's own top-2 gaps move between builds: replays a golden
greedy file (tests/golden/greedy-*.json) through a running llama-server of
another build, teacher-forced as the golden protocol is (prompt, then
llama.cpp's greedy tokens of the file), and compares at every step the gap
between the file's top-1 and top-2 tokens with the server's gap between
the same two tokens.

usage: golden-gap-spread.py GOLDEN.json [--port 8080]

Start the server first on the file's model, one slot, the golden context:
    llama-server -m MODEL.gguf -t 2 -c 4096 -np 1 --port 8080

The server keeps the prompt cached, so each step evaluates the new token
(and the few tokens its cache re-reads) rather than the whole prefix. The
report gives the steps where the server's argmax differs from the file's
(with the file's gap there) and the largest gap changes: the golden tests
compare the argmax only above a gap, and that gap has to be above what a
rebuild of llama.cpp itself moves.
"""

import argparse
import json
import urllib.request


def complete(port, ids):
    body = {
        "prompt": ids,
        "n_predict": 1,
        "n_probs": 5,
        "temperature": 0,
        "cache_prompt": True,
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        top = json.load(r)["completion_probabilities"][0]["top_logprobs"]
    # Log-probabilities differ by exactly the logits' differences.
    return [(t["id"], t["logprob"]) for t in top]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("golden")
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args()
    cases = json.load(open(args.golden))["cases"]
    rows = []
    for c in cases:
        for step, gold in enumerate(c["top_logits"][: len(c["greedy_ids"])]):
            top = complete(args.port, c["prompt_ids"] + c["greedy_ids"][:step])
            theirs = dict(top)
            (a, la), (b, lb) = gold[0], gold[1]
            gap = la - lb
            moved = theirs[a] - theirs[b] if a in theirs and b in theirs else None
            rows.append((c["name"], step, gap, moved, top[0][0] == a))
    flips = [r for r in rows if not r[4]]
    print(f"{len(rows)} steps; the server's argmax differs from the file's at {len(flips)}")
    for name, step, gap, moved, _ in sorted(flips, key=lambda r: -r[2]):
        got = "n/a" if moved is None else f"{moved:.3f}"
        print(f"  {name} step {step}: file's gap {gap:.3f}, server's {got}")
    moves = sorted(
        ((abs(r[2] - r[3]), r) for r in rows if r[3] is not None), reverse=True
    )
    print("largest gap changes:")
    for d, (name, step, gap, moved, _) in moves[:5]:
        print(f"  {d:.3f}: {name} step {step}, file's gap {gap:.3f}, server's {moved:.3f}")


if __name__ == "__main__":
    main()
