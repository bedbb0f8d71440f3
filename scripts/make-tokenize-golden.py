#!/usr/bin/env python3
"""Records llama.cpp's tokenization of the golden corpus with a model's
vocabulary, in the format of tests/golden/tokenize-*.json: per string its
`text` and the `ids` of `llama_tokenize(add_special=true,
parse_special=true)`.

usage: make-tokenize-golden.py MODEL.gguf OUT.json [--corpus FILE]
                               [--reference TEXT]

The model may be a vocabulary-only GGUF (llama.cpp's `ggml-vocab-*.gguf`
test files): it is loaded with `vocab_only=True`, so no weights are needed.
When llama.cpp's own test pair `MODEL.gguf.inp` / `MODEL.gguf.out` lies
beside the model, every one of its cases is tokenized as
`tests/test-tokenizer-0.cpp` does (add_special=false, parse_special=false)
and the script fails unless the ids equal the `.out` line: a check that the
llama.cpp in use is the one the pair was written for.

Needs llama-cpp-python==0.3.36 (llama.cpp commit 0c1e570, the golden
data's); tokenization does not depend on the CPU level.

Example (the Phi-3 golden):
    python scripts/make-tokenize-golden.py tests/models/ggml-vocab-phi-3.gguf \\
        tests/golden/tokenize-phi3.json
"""

import argparse
import json
import sys
from pathlib import Path

import llama_cpp

from golden_json import write_golden

ROOT = Path(__file__).resolve().parent.parent
SEPARATOR = "\n__ggml_vocab_test__\n"


def read_pair(model: Path):
    """llama.cpp's test pair beside `model` as (text, ids) cases, or None.

    Parsed as test-tokenizer-0.cpp's `read_tests` does: inputs split at the
    separator line, one stripped line of space-separated ids per input.
    """
    inp, out = Path(f"{model}.inp"), Path(f"{model}.out")
    if not (inp.exists() and out.exists()):
        return None
    raw = inp.read_bytes().decode("utf-8")
    texts = raw.split(SEPARATOR)
    if raw.endswith(SEPARATOR):
        texts.pop()  # read_tests stops at the end: no empty last input
    lines = out.read_text(encoding="utf-8").splitlines()
    if len(texts) != len(lines):
        raise SystemExit(f"{inp}: {len(texts)} inputs but {len(lines)} output lines")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


def check_pair(llm, model: Path) -> None:
    """Fails unless llama.cpp reproduces its own test pair for `model`."""
    pair = read_pair(model)
    if pair is None:
        return
    bad = 0
    for text, want in pair:
        got = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if got != want:
            bad += 1
            print(f"{model.name}: {text!r}: got {got}, want {want}", file=sys.stderr)
    if bad:
        raise SystemExit(f"{bad} of {len(pair)} cases of llama.cpp's own test pair differ")
    print(f"{model.name}: llama.cpp reproduces its {len(pair)} test-pair cases", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--corpus", default=str(ROOT / "tests/golden/tokenize-corpus.json"))
    ap.add_argument(
        "--reference",
        default="llama.cpp (llama-cpp-python 0.3.36, commit 0c1e570), vocab only",
    )
    a = ap.parse_args()
    model = Path(a.model)
    llm = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    check_pair(llm, model)
    corpus = json.loads(Path(a.corpus).read_text(encoding="utf-8"))
    cases = [
        {"text": text, "ids": llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)}
        for text in corpus
    ]
    doc = {"model": model.name, "reference": a.reference, "cases": cases}
    return write_golden(a.out, doc, 0, f"{len(cases)} strings")


if __name__ == "__main__":
    sys.exit(main())
