#!/usr/bin/env python3
"""Writes tests/models/qwen3moe-tiny-q8_0.gguf, a random-weight Qwen3-MoE
model for architecture tests, from the repository's random-weight qwen3
model (tests/models/qwen3-tiny-q8_0.gguf).

usage: make-moe-fixture.py OUT.gguf [--experts Q8_0|MXFP4]

Everything but the FFN is the qwen3 model's: SmolLM2's vocabulary and chat
template, 4 layers, d_model 128, 4 query and 2 KV heads of 64, Q/K RMS
norms, output tied to the embeddings. Each block's dense FFN is replaced by
a routed one, as Qwen3-30B-A3B stores it:

- `ffn_gate_inp.weight` [128 -> 8], F32: the router;
- `ffn_gate_exps.weight`, `ffn_up_exps.weight` [8 experts x 64 x 128] and
  `ffn_down_exps.weight` [8 x 128 x 64], Q8_0;
- `qwen3moe.expert_count` 8, `expert_used_count` 2,
  `expert_feed_forward_length` 64.

Expert values are seeded normals with the RMS of the dense matrix they
replace (scaled for the shorter rows of `down`); the router's give logits
of a standard deviation near 1.5, so that rows spread over the experts.
`--experts MXFP4` stores the experts as gpt-oss does, in MXFP4 blocks,
and routes every row to all eight (tests/models/qwen3moe-mxfp4-tiny.gguf):
a comparison with llama.cpp then checks the MXFP4 arithmetic alone. With
two of eight chosen, a last-bit difference flips a near-tied choice now
and then and moves a logit by whole units, in llama.cpp's own builds as
in minfer; the Q8_0 fixture covers the routing. The seed is fixed: reruns give
the same file. Needs ``pip install
gguf==0.19.0``.
"""

import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

from fixture_gguf import copy_keys, copy_tensor, finish, open_source, rms_of

ARCH = "qwen3moe"
N_EXPERT, N_USED, N_FF_EXP = 8, 2, 64


def experts(rng: np.random.Generator, rows: int, cols: int, rms: float, ty: Q) -> np.ndarray:
    """N_EXPERT stacked matrices of rows x cols in type `ty`, as gguf-py
    lays out a 3-D tensor (outermost dimension first)."""
    values = rng.standard_normal((N_EXPERT * rows, cols)).astype(np.float32) * np.float32(rms)
    blocks = quantize(values, ty)
    return blocks.reshape(N_EXPERT, rows, blocks.shape[-1])


def main(argv: list[str]) -> int:
    ty, n_used = Q.Q8_0, N_USED
    if len(argv) == 3 and argv[1] == "--experts" and argv[2] in ("Q8_0", "MXFP4"):
        ty = Q[argv[2]]
        n_used = N_EXPERT if ty == Q.MXFP4 else N_USED
    elif len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    rng = np.random.default_rng(0x3E0E)
    reader, w = open_source(out, ARCH)
    copy_keys(reader, w, ARCH, replace=lambda k, v: f"{v}-moe" if k == gguf.Keys.General.NAME else v)
    w.add_uint32(f"{ARCH}.expert_count", N_EXPERT)
    w.add_uint32(f"{ARCH}.expert_used_count", n_used)
    w.add_uint32(f"{ARCH}.expert_feed_forward_length", N_FF_EXP)

    dense = {t.name: t for t in reader.tensors}
    for t in reader.tensors:
        parts = t.name.split(".")
        if t.name.startswith("blk.") and parts[2] in ("ffn_gate", "ffn_up"):
            continue
        if t.name.startswith("blk.") and parts[2] == "ffn_down":
            blk = f"blk.{parts[1]}"
            n_embd = int(t.shape[1])
            router = rng.standard_normal((N_EXPERT, n_embd)).astype(np.float32)
            w.add_tensor(f"{blk}.ffn_gate_inp.weight", router * np.float32(1.5 / np.sqrt(n_embd)))
            for kind in ("ffn_gate", "ffn_up"):
                rms = rms_of(dense[f"{blk}.{kind}.weight"])
                w.add_tensor(f"{blk}.{kind}_exps.weight", experts(rng, N_FF_EXP, n_embd, rms, ty), raw_dtype=ty)
            # `down` sums N_FF_EXP products instead of the dense width: keep
            # its output's RMS.
            rms = rms_of(t) * (int(t.shape[0]) / N_FF_EXP) ** 0.5
            w.add_tensor(f"{blk}.ffn_down_exps.weight", experts(rng, n_embd, N_FF_EXP, rms, ty), raw_dtype=ty)
            continue
        copy_tensor(w, t)
    finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
