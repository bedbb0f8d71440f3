#!/usr/bin/env python3
"""Records llama.cpp's greedy runs of a model on the golden prompts, in the
format of tests/golden/greedy-*.json: per prompt its ids, the greedy ids
and, at every step, the top 5 `[id, logit]` pairs of the raw logits.

usage: golden-greedy.py MODEL.gguf OUT.json [--steps N] [--prompts FILE]
                        [--reference TEXT]

The protocol of the golden README: the prompt is tokenized with
`add_special=true, parse_special=true` and evaluated in one batch, then one
token at a time, each the argmax of the raw logits, stopping after an
end-of-generation token or N steps (32 by default). llama.cpp runs with
its context defaults as the golden files were made: f16 K and V, flash
attention on, micro-batches of 512, n_ctx 4096, 2 threads.

Needs llama-cpp-python==0.3.36 built from its sdist (llama.cpp commit
0c1e570, the golden data's), for example:
    CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TOOLS=OFF" \\
        pip install --no-binary llama-cpp-python llama-cpp-python==0.3.36
The output names the CPU level it ran at; run it on the machine type the
test compares against.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import llama_cpp

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--prompts", default=str(ROOT / "tests/golden/prompts.json"))
    ap.add_argument("--reference", default="")
    a = ap.parse_args()
    llm = llama_cpp.Llama(
        a.model,
        n_ctx=4096,
        n_batch=512,
        n_ubatch=512,
        n_threads=2,
        n_threads_batch=2,
        flash_attn=True,
        type_k=llama_cpp.GGML_TYPE_F16,
        type_v=llama_cpp.GGML_TYPE_F16,
        logits_all=False,
        verbose=False,
    )
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    features = llama_cpp.llama_print_system_info().decode()
    level = "AVX-512" if "AVX512 = 1" in features else "AVX2 (no AVX-512)" if "AVX2 = 1" in features else "scalar"
    reference = a.reference or f"llama.cpp (llama-cpp-python 0.3.36), CPU {level}, 2 threads"
    cases = []
    for p in json.loads(Path(a.prompts).read_text()):
        ids = llm.tokenize(p["prompt"].encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        greedy, tops = [], []
        for _ in range(a.steps):
            # Only the last position's logits were asked for: row -1.
            row = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            logits = np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).astype(np.float32)
            order = np.argsort(-logits, kind="stable")[:5]
            tops.append([[int(i), round(float(logits[i]), 5)] for i in order])
            tok = int(order[0])
            greedy.append(tok)
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                break
            llm.eval([tok])
        cases.append({"name": p["name"], "prompt": p["prompt"], "prompt_ids": ids, "greedy_ids": greedy, "top_logits": tops})
        print(f"{p['name']}: {len(ids)} prompt ids, {len(greedy)} steps", file=sys.stderr)
    out = {"model": Path(a.model).name, "reference": reference, "cases": cases}
    Path(a.out).write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
