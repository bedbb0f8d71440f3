#!/usr/bin/env python3
"""Writes tests/golden/tokenize-gpt4o-pretok.json: llama.cpp's token ids for
the tokenization corpus plus strings aimed at the `gpt-4o` pre-tokenizer
(gpt-oss's o200k vocabulary uses it), produced through a vocabulary that
llama.cpp will split with that pre-tokenizer.

usage: make-pretok-golden.py [--vocab OUT.gguf]

There is no gpt-oss vocabulary in the repository, but the pre-tokenizer is
independent of the vocabulary: any byte-level BPE vocabulary exercises it.
So the vocabulary is the random-weight fixture's (SmolLM2's BPE vocabulary,
tests/models/qwen3-tiny-q8_0.gguf) with only `tokenizer.ggml.pre` changed
from `smollm` to `gpt-4o`. Every metadata key is copied (the architecture
keys too, so that llama.cpp sees a complete qwen3 header; whether a
vocab-only load needs them was not tried) and no tensor is (a vocab-only
load does not read them). At 1.8 MB it is kept as
tests/models/gpt4o-pretok-vocab.gguf (pass --vocab with that path to
rewrite it; reruns give the same bytes); minfer's test checks that its
metadata is the fixture's but for the pre key.

The reference is llama-cpp-python's vendored llama.cpp (commit 0c1e570);
run it with that venv's Python, which must also import gguf-py 0.19.0:
  /tmp/lcp/venv/bin/python scripts/make-pretok-golden.py \
    --vocab tests/models/gpt4o-pretok-vocab.gguf
Ids are `llama_tokenize(add_special=true, parse_special=true)`, as for the
other tokenize-*.json files.
"""

import argparse
import json
import os
import sys
import tempfile

import gguf
import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests/models/qwen3-tiny-q8_0.gguf")
CORPUS = os.path.join(ROOT, "tests/golden/tokenize-corpus.json")
OUT = os.path.join(ROOT, "tests/golden/tokenize-gpt4o-pretok.json")
PRE = "gpt-4o"

# Corners of llama.cpp's GPT-4o regex: its letter runs are "letters that
# are not a-z" then "letters that are not A-Z" (so every non-ASCII letter
# is both, and combining marks are not letters), contractions are ASCII
# case-insensitive, numbers go in threes, punctuation takes trailing
# \r, \n and /, and whitespace splits before the last line break and before
# the last space ahead of a word.
EXTRA = [
    "HELLOworld",
    "helloWORLD",
    "McDonald's",
    "DON'T",
    "don't",
    "Don'T",
    "I'M here, YOU'RE there, we'Ve, THEY'LL, she'D",
    "it's IT'S It'S iT's",
    "'s 'S x's X'S",
    "ÀB ÀBc àB ÉCOLE école Ñandú",
    "ĀĀāā ǅa ǈX",
    "ß SS ẞ",
    "1234567",
    "12 345 6789 0.5 ١٢٣٤ ½¾",
    "abc123def",
    "中文English混合テキスト",
    "e\u0301 e\u0301x cafe\u0301 CAFE\u0301S",
    "\u0301abc",
    "नमस्ते दुनिया",
    "🚀 rocket🚀launch 👍🏽 👨\u200d👩\u200d👧",
    "a\r\nb\r\n\r\nc\n\rd",
    "x \r\n y",
    "a/b\n/",
    "path/to/file.txt\n//comment/\n",
    "end.\n\n",
    "?!\n/\r\n",
    "trailing   ",
    "trailing \t",
    "\ttab\t\ttabs\t",
    "  \n\n  x",
    " \u3000x\u00a0y\u2003 z",
    "x\u0085y \u0085 z",
    "\u000bvt\u000cff\u001cfs",
    "  (paren) [bracket] {brace}",
    ".Hello ,World _under_score",
    "ʰmodifier ˈstress ʻokina",
    "ΑΒΓ αβγ ΣΊΣΥΦΟΣ",
    "Ǆemal ǅemal ǆemal",
    "",
]

# SmolLM2's merges were learnt on GPT-2-style pieces, so they rarely cross
# the boundaries where llama.cpp's GPT-4o rewrite differs from nearby
# readings of the regex; these strings put a boundary where it changes the
# merges (an attached contraction leaves the next word without its capital,
# a mark that is not a letter keeps `'s` from being a contraction, and so
# on), so that a wrong split shows up as different ids.
EXTRA += [
    "DON'Tell I'Mage WE'REad YOU'VEry SHE'Dog IT'Sold THEY'LLama",
    "CAN'Table Won'Tell WHO'Sthere",
    "cafe\u0301's nai\u0308ve's re\u0301sume\u0301's",
    "e\u0301'll a\u0300'd",
    ".\n/* x\n/*\n// y;\r\n/= z",
    "}\n/**\n * doc\n */",
    "ÜBER MÜNCHEN ÉCOLE ÉTAT ÇA FRANÇAIS ESPAÑOL ÉLÉGANT STRAßE",
    "CAFÉS NAÏVE RÉSUMÉ SÃO ZÜRICH DÜSSELDORF ÅLAND ØRESUND",
    "ÀBOUT ÉVERY ÖTHER ÍNDEX",
]


def vocab_only_copy(dst: str) -> None:
    """Writes the fixture's metadata, with the pre key replaced, and no
    tensors."""
    r = gguf.GGUFReader(FIXTURE)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = PRE if name == "tokenizer.ggml.pre" else field.contents()
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", help="where to keep the vocab-only GGUF")
    args = ap.parse_args()
    path = args.vocab or os.path.join(tempfile.mkdtemp(), "gpt4o-vocab.gguf")
    vocab_only_copy(path)
    llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    with open(CORPUS) as f:
        texts = json.load(f) + EXTRA
    cases = [
        {"text": t, "ids": llm.tokenize(t.encode(), add_bos=True, special=True)}
        for t in texts
    ]
    doc = {
        "model": "tests/models/qwen3-tiny-q8_0.gguf vocabulary, "
        f"tokenizer.ggml.pre = {PRE!r} (scripts/make-pretok-golden.py)",
        "reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__} "
        "(vendored commit 0c1e570)",
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{OUT}: {len(cases)} cases; vocabulary {path} "
          f"({os.path.getsize(path)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
