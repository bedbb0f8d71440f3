#!/usr/bin/env python3
"""Writes tests/models/gpt-oss-tiny.gguf, a random-weight gpt-oss model for
architecture tests, from the repository's random-weight qwen3 model
(tests/models/qwen3-tiny-q8_0.gguf).

usage: make-gpt-oss-fixture.py OUT.gguf

What gpt-oss-20b has and the qwen3 model does not, at the qwen3 model's
size (4 layers, d_model 128, 4 query and 2 KV heads of 64):

- biases on Q, K, V and the output projection, and no Q/K norms;
- one attention sink per head (`attn_sinks.weight`, F32 [4]);
- sliding-window attention (128 positions) on the even layers, full
  attention on the odd ones (llama.cpp's default pattern of 2);
- YaRN: `rope.scaling.type` yarn, factor 32 over an original context of
  4096, base 150000;
- the FFN norm named `post_attention_norm`, and an untied `output.weight`
  (a copy of the embeddings);
- a routed FFN of 8 experts of 64 in MXFP4 with biases on the router and
  on every expert's up, gate and down products, gated by a softmax over
  the chosen logits and activated by the clamped SwiGLU (llama.cpp's
  `swiglu_oai`). Every row uses all 8 experts: with fewer, a last-bit
  difference flips a near-tied choice now and then (in llama.cpp's own
  builds too) and moves logits by whole units, so a comparison would test
  luck; the choice itself is covered by the qwen3moe fixture.

The vocabulary (SmolLM2's), chat template, norms and embeddings are the
qwen3 model's; everything new is seeded normals (biases and sinks at
about the scale of the values they join). The seed is fixed: reruns give
the same file. Needs ``pip install gguf==0.19.0``.
"""

import math
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

from fixture_gguf import copy_keys, copy_tensor, rms_of, run_fixture

ARCH = "gpt-oss"
N_EXPERT, N_USED, N_FF_EXP = 8, 8, 64
N_CTX_ORIG, YARN_FACTOR, WINDOW = 4096, 32.0, 128
DROPPED_KEYS = ("context_length", "rope.freq_base")


def normal(rng: np.random.Generator, shape, scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def stacked(rng: np.random.Generator, rows: int, cols: int, rms: float) -> np.ndarray:
    """N_EXPERT stacked MXFP4 matrices of rows x cols (outermost first)."""
    blocks = quantize(normal(rng, (N_EXPERT * rows, cols), rms), Q.MXFP4)
    return blocks.reshape(N_EXPERT, rows, blocks.shape[-1])


def write_keys(reader: gguf.GGUFReader, w: gguf.GGUFWriter) -> None:
    def replace(key, val):
        return "tiny-random-oss" if key == gguf.Keys.General.NAME else val

    copy_keys(reader, w, ARCH, DROPPED_KEYS, replace)
    w.add_uint32(f"{ARCH}.context_length", int(N_CTX_ORIG * YARN_FACTOR))
    w.add_float32(f"{ARCH}.rope.freq_base", 150000.0)
    w.add_string(f"{ARCH}.rope.scaling.type", "yarn")
    w.add_float32(f"{ARCH}.rope.scaling.factor", YARN_FACTOR)
    w.add_uint32(f"{ARCH}.rope.scaling.original_context_length", N_CTX_ORIG)
    w.add_uint32(f"{ARCH}.attention.sliding_window", WINDOW)
    w.add_uint32(f"{ARCH}.expert_count", N_EXPERT)
    w.add_uint32(f"{ARCH}.expert_used_count", N_USED)
    w.add_uint32(f"{ARCH}.expert_feed_forward_length", N_FF_EXP)


def add_ffn(w: gguf.GGUFWriter, rng: np.random.Generator, blk: str, by_name: dict, n_embd: int) -> None:
    """The routed FFN of one block, replacing the qwen3 block's dense one."""
    w.add_tensor(f"{blk}.ffn_gate_inp.weight", normal(rng, (N_EXPERT, n_embd), 1.5 / math.sqrt(n_embd)))
    w.add_tensor(f"{blk}.ffn_gate_inp.bias", normal(rng, (N_EXPERT,), 0.5))
    for kind in ("ffn_gate", "ffn_up"):
        rms = rms_of(by_name[f"{blk}.{kind}.weight"])
        w.add_tensor(f"{blk}.{kind}_exps.weight", stacked(rng, N_FF_EXP, n_embd, rms), raw_dtype=Q.MXFP4)
        w.add_tensor(f"{blk}.{kind}_exps.bias", normal(rng, (N_EXPERT, N_FF_EXP), 1.0))
    down = by_name[f"{blk}.ffn_down.weight"]
    rms = rms_of(down) * (int(down.shape[0]) / N_FF_EXP) ** 0.5
    w.add_tensor(f"{blk}.ffn_down_exps.weight", stacked(rng, n_embd, N_FF_EXP, rms), raw_dtype=Q.MXFP4)
    w.add_tensor(f"{blk}.ffn_down_exps.bias", normal(rng, (N_EXPERT, n_embd), 0.5))


def fill(reader: gguf.GGUFReader, w: gguf.GGUFWriter, rng: np.random.Generator) -> None:
    write_keys(reader, w)
    by_name = {t.name: t for t in reader.tensors}
    n_head = 4
    for t in reader.tensors:
        parts = t.name.split(".")
        kind = parts[2] if t.name.startswith("blk.") else None
        blk = ".".join(parts[:2])
        if kind in ("attn_q_norm", "attn_k_norm", "ffn_gate", "ffn_up"):
            continue
        if kind == "ffn_down":
            add_ffn(w, rng, blk, by_name, int(t.shape[1]))
            continue
        if kind == "ffn_norm":
            copy_tensor(w, t, f"{blk}.post_attention_norm.weight")
            continue
        copy_tensor(w, t)
        if kind in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(f"{blk}.{kind}.bias", normal(rng, (int(t.shape[1]),), 0.5))
        elif kind == "attn_output":
            w.add_tensor(f"{blk}.attn_output.bias", normal(rng, (int(t.shape[1]),), 0.2))
            w.add_tensor(f"{blk}.attn_sinks.weight", normal(rng, (n_head,), 1.0))
        elif t.name == "token_embd.weight":
            copy_tensor(w, t, "output.weight")


if __name__ == "__main__":
    sys.exit(run_fixture(sys.argv[1:], __doc__, ARCH, 0x055, fill))
