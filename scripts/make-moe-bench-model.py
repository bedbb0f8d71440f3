#!/usr/bin/env python3
"""Writes a random-weight Qwen3-MoE model of a realistic shape, for speed
measurements only (its text is noise): by default 12 layers, d_model 2048,
16 query and 4 KV heads of 128, 32 experts of 768 with 4 used per token,
Q4_K matrices (the router and norms F32), SmolLM2's vocabulary taken from
the repository's qwen3 fixture, output tied to the embeddings. That is
about 2.0 B parameters, 0.35 B of them active per token, 1.1 GB on disk:
Qwen3-30B-A3B's layer shape with fewer layers and experts.

usage: make-moe-bench-model.py OUT.gguf [--layers N] [--experts N]
                               [--used N] [--ff N] [--seed N]
                               [--expert-type Q4_K|MXFP4]

Q4_K blocks are random bytes with their two f16 scales (`d`, `dmin`) set
so that weights stay near +-0.05: the kernels' speed does not depend on
the values, and the router's seeded normal weights spread tokens over the
experts as a trained router roughly does. `--expert-type MXFP4` stores
the experts as gpt-oss does (random nibbles, scale 2^-10). Not committed (1.1 GB); the
seed makes reruns identical. Needs ``pip install gguf==0.19.0``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

from fixture_gguf import add_field, finish, open_source, random_bytes, row_bytes
ARCH = "qwen3moe"
D, N_HEAD, N_HEAD_KV, HEAD = 2048, 16, 4, 128


def q4k(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random Q4_K blocks for a tensor of ggml shape reversed (`shape` is
    numpy order, the last dimension the row length in values)."""
    raw = random_bytes(rng, Q.Q4_K, int(np.prod(shape)))
    raw[:, 0:2] = np.frombuffer(np.float16(1e-4).tobytes(), dtype=np.uint8)
    raw[:, 2:4] = np.frombuffer(np.float16(5e-5).tobytes(), dtype=np.uint8)
    return raw.reshape(*shape[:-1], row_bytes(Q.Q4_K, shape[-1]))


def mxfp4(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random MXFP4 blocks (as `q4k`), every E8M0 scale 118: values up
    to 12 x 2^-11, near +-0.006."""
    raw = random_bytes(rng, Q.MXFP4, int(np.prod(shape)))
    raw[:, 0] = 118
    return raw.reshape(*shape[:-1], row_bytes(Q.MXFP4, shape[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--used", type=int, default=4)
    ap.add_argument("--ff", type=int, default=768)
    ap.add_argument("--seed", type=int, default=0x30B3)
    ap.add_argument("--expert-type", choices=["Q4_K", "MXFP4"], default="Q4_K")
    a = ap.parse_args()
    exp_ty = Q[a.expert_type]
    experts = mxfp4 if exp_ty == Q.MXFP4 else q4k
    rng = np.random.default_rng(a.seed)
    reader, w = open_source(Path(a.out), ARCH)
    for field in reader.fields.values():
        key = field.name
        # Everything of the source's architecture is set below; the
        # tokenizer and the chat template carry over.
        if key.startswith(("general.architecture", "GGUF.", "qwen3.")):
            continue
        add_field(w, key, field, field.contents())
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    for key, val in [
        ("block_count", a.layers),
        ("context_length", 40960),
        ("embedding_length", D),
        ("feed_forward_length", 6144),
        ("attention.head_count", N_HEAD),
        ("attention.head_count_kv", N_HEAD_KV),
        ("attention.key_length", HEAD),
        ("attention.value_length", HEAD),
        ("rope.dimension_count", HEAD),
        ("expert_count", a.experts),
        ("expert_used_count", a.used),
        ("expert_feed_forward_length", a.ff),
    ]:
        w.add_uint32(f"{ARCH}.{key}", val)
    w.add_float32(f"{ARCH}.rope.freq_base", 1e6)
    w.add_float32(f"{ARCH}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_tensor("token_embd.weight", q4k(rng, n_vocab, D), raw_dtype=Q.Q4_K)
    ones = np.ones(D, dtype=np.float32)
    for l in range(a.layers):
        b = f"blk.{l}"
        w.add_tensor(f"{b}.attn_norm.weight", ones)
        w.add_tensor(f"{b}.attn_q.weight", q4k(rng, N_HEAD * HEAD, D), raw_dtype=Q.Q4_K)
        w.add_tensor(f"{b}.attn_k.weight", q4k(rng, N_HEAD_KV * HEAD, D), raw_dtype=Q.Q4_K)
        w.add_tensor(f"{b}.attn_v.weight", q4k(rng, N_HEAD_KV * HEAD, D), raw_dtype=Q.Q4_K)
        w.add_tensor(f"{b}.attn_q_norm.weight", np.ones(HEAD, dtype=np.float32))
        w.add_tensor(f"{b}.attn_k_norm.weight", np.ones(HEAD, dtype=np.float32))
        w.add_tensor(f"{b}.attn_output.weight", q4k(rng, D, N_HEAD * HEAD), raw_dtype=Q.Q4_K)
        w.add_tensor(f"{b}.ffn_norm.weight", ones)
        router = rng.standard_normal((a.experts, D)).astype(np.float32) * np.float32(1.5 / np.sqrt(D))
        w.add_tensor(f"{b}.ffn_gate_inp.weight", router)
        w.add_tensor(f"{b}.ffn_gate_exps.weight", experts(rng, a.experts, a.ff, D), raw_dtype=exp_ty)
        w.add_tensor(f"{b}.ffn_up_exps.weight", experts(rng, a.experts, a.ff, D), raw_dtype=exp_ty)
        w.add_tensor(f"{b}.ffn_down_exps.weight", experts(rng, a.experts, D, a.ff), raw_dtype=exp_ty)
    w.add_tensor("output_norm.weight", ones)
    finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
