#!/usr/bin/env python3
"""Records llama.cpp's embeddings of a few texts as golden data for
crates/engine/tests/embed_golden.rs: tests/fixtures/embeddings/MODEL.json.

    scripts/make-embedding-golden.py LLAMA_EMBEDDING MODEL.gguf...

LLAMA_EMBEDDING is llama.cpp's llama-embedding binary (built from the
llama-cpp-python 0.3.36 sdist, vendor/llama.cpp, commit 0c1e570). Per
model it runs it three times on the same texts: `--pooling mean`,
`--pooling last`, and without `--pooling` (the GGUF's own pooling type,
`none` for the project's models: one vector per token, recorded for the
first text only to keep the file small). Each run records the exact
command, the token ids llama.cpp fed (`--verbose-prompt`) and the
L2-normalized vectors (`--embd-normalize 2`, its default) rounded to six
significant digits, enough for the test's cosine bound.

Each run also records llama.cpp's own spread: the lowest cosine (per text,
per token without pooling) between that run and the same run with
`-fa off` and with `--no-repack`, two settings that change only rounding
(attention's, and the weight layout's kernels). These small models amplify
a last-bit difference through their layers, so the spread is the measure
of how close "the same computation" can be; the test's bound derives from
it.

For the Q8_0 test model, one more run caches K and V as f32 with flash
attention off (`exact: true`): there llama.cpp and minfer round the same
way, and the test holds the vectors to a cosine of 0.9999 without any
allowance.
"""

import json
import math
import os
import re
import subprocess
import sys

TEXTS = [
    "Hello, world!",
    "fn main() { println!(\"embeddings\"); }",
    "The quick brown fox jumps over the lazy dog near the riverbank.",
]
COMMON = ["-t", "2", "-c", "512", "--embd-normalize", "2",
          "--embd-output-format", "json", "--verbose-prompt", "--no-warmup"]
OUT_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "embeddings"))
EXACT_MODELS = {"qwen3-tiny-q8_0.gguf"}
EXACT_FLAGS = ["-ctk", "f32", "-ctv", "f32", "-fa", "off"]
TOKEN_LINE = re.compile(r"^\s*(\d+) -> '")


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def lowest_cosine(a, b):
    """Lowest cosine between the vectors (or token rows) of two runs."""
    flat = lambda v: [r for t in v for r in t] if v and isinstance(v[0][0], list) else v
    return min(cosine(x, y) for x, y in zip(flat(a), flat(b)))


def round6(x):
    return float(f"{x:.6g}")


def run(binary, model, texts, pooling, extra=()):
    requested = pooling
    args = [binary, "-m", model, "-p", "\n".join(texts)] + COMMON + list(extra)
    if pooling is not None:
        args += ["--pooling", pooling]
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    out = p.stdout
    start = out.index("\n{\n") + 1
    data = json.JSONDecoder().raw_decode(out[start:])[0]
    # --verbose-prompt lists each prompt's tokens, one per line, the
    # prompts separated by blank lines, before the JSON.
    ids, cur = [], []
    for line in out[:start].splitlines():
        m = TOKEN_LINE.match(line)
        if m:
            cur.append(int(m.group(1)))
        elif not line.strip() and cur:
            ids.append(cur)
            cur = []
    if cur:
        ids.append(cur)
    assert len(ids) == len(texts), (ids, texts)
    vectors = [d["embedding"] for d in data["data"]]
    if pooling == "none" or len(vectors) != len(texts):
        # One vector per token: regroup them per text.
        grouped, k = [], 0
        for t in ids:
            grouped.append(vectors[k:k + len(t)])
            k += len(t)
        assert k == len(vectors)
        vectors = grouped
        pooling = "none"
    shown = ["llama-embedding"] + [a if a != model else os.path.basename(model)
                                   for a in args[1:]]
    return {
        "pooling": pooling,
        "pooling_arg": requested,
        "command": shown,
        "texts": texts,
        "prompt_ids": ids,
        "embeddings": vectors,
    }


def recorded(binary, model, texts, pooling):
    r = run(binary, model, texts, pooling)
    r["llama_cpp_spread"] = {
        name: round(lowest_cosine(r["embeddings"],
                                  run(binary, model, texts, pooling, flags)["embeddings"]), 7)
        for name, flags in (("fa_off", ["-fa", "off"]), ("no_repack", ["--no-repack"]))
    }
    round_all = lambda v: [round_all(x) for x in v] if isinstance(v, list) else round6(v)
    r["embeddings"] = round_all(r["embeddings"])
    return r


def main():
    binary, models = sys.argv[1], sys.argv[2:]
    version = subprocess.run([binary, "--version"], capture_output=True,
                             text=True).stderr.strip()
    os.makedirs(OUT_DIR, exist_ok=True)
    for model in models:
        runs = [recorded(binary, model, TEXTS, "mean"),
                recorded(binary, model, TEXTS, "last"),
                recorded(binary, model, TEXTS[:1], None)]
        name = os.path.basename(model)
        if name in EXACT_MODELS:
            exact = run(binary, model, TEXTS, "mean", EXACT_FLAGS)
            exact["exact"] = True
            exact["embeddings"] = [[round6(x) for x in v] for v in exact["embeddings"]]
            runs.append(exact)
        doc = {
            "model": name,
            "llama_cpp": version,
            "source": "llama-cpp-python==0.3.36 sdist, vendor/llama.cpp; cmake -DGGML_NATIVE=ON "
                      "-DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release; target llama-embedding",
            "note": "vectors are L2-normalized and rounded to 6 significant digits; "
                    "pooling_arg null means no --pooling flag (the GGUF's own type)",
            "runs": runs,
        }
        path = os.path.join(OUT_DIR, name.removesuffix(".gguf") + ".json")
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print(f"{path}: {[(r['pooling'], r.get('llama_cpp_spread')) for r in runs]}")


if __name__ == "__main__":
    main()
