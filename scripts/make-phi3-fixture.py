#!/usr/bin/env python3
"""Writes tests/models/phi3-tiny-q8_0.gguf, a random-weight Phi-3 model
for architecture tests, from the repository's random-weight qwen3 model
(tests/models/qwen3-tiny-q8_0.gguf).

usage: make-phi3-fixture.py OUT.gguf

What a Phi-3.5 / Phi-4-mini file has and the qwen3 one does not:

- fused tensors: `attn_qkv.weight` [128 -> 128 + 64 + 64] (Q, then K, then
  V) and `ffn_up.weight` [128 -> 2 x 384] (gate rows first, then up), Q8_0;
- 4 query heads and 2 KV heads of 32 (the width is `n_head x head_dim`, as
  llama.cpp's phi3 requires), no Q/K norms;
- partial rotary: `rope.dimension_count` 24 of 32, as Phi-4-mini's 0.75;
- LongRoPE: `rope_factors_short.weight` and `rope_factors_long.weight`
  (F32 [12]), `rope.scaling.original_context_length` 2048 with
  `context_length` 65536, and `rope.scaling.attn_factor`
  sqrt(1 + ln(32) / ln(2048)), the converter's formula. A context of 4096
  (the golden runs') is past the original window, so the long factors and
  the attention factor are both in play;
- `sliding_window` 2047, which llama.cpp ignores for this architecture;
- Phi-3.5-mini's chat template;
- the name `tiny-random-phi`: llama.cpp gives every special token of a
  model whose name contains "phi3" or "phi-3" a right-strip attribute and
  looks up `</s>`, which SmolLM2's vocabulary lacks.

The vocabulary (SmolLM2's), the norms, embeddings, `ffn_down` and the
gate/up values are the qwen3 model's; Q/K/V and the output projection
are seeded normals of the RMS of the matrices they replace. The seed is
fixed: reruns give the same file. Needs ``pip install gguf==0.19.0``.
"""

import math
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

from fixture_gguf import copy_keys, copy_tensor, rms_of, run_fixture

ARCH = "phi3"
N_HEAD, N_HEAD_KV, HEAD_DIM, N_ROT = 4, 2, 32, 24
N_CTX_ORIG, N_CTX_TRAIN = 2048, 65536
# Phi-3.5-mini-instruct's template.
TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)
DROPPED_KEYS = ("attention.key_length", "attention.value_length", "context_length")


def q8(rng: np.random.Generator, rows: int, cols: int, rms: float) -> np.ndarray:
    values = rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(rms)
    return quantize(values, Q.Q8_0)


def write_keys(reader: gguf.GGUFReader, w: gguf.GGUFWriter) -> None:
    def replace(key, val):
        if key == gguf.Keys.General.NAME:
            return "tiny-random-phi"
        if key == gguf.Keys.Tokenizer.CHAT_TEMPLATE:
            return TEMPLATE
        return val

    copy_keys(reader, w, ARCH, DROPPED_KEYS, replace)
    w.add_uint32(f"{ARCH}.context_length", N_CTX_TRAIN)
    w.add_uint32(f"{ARCH}.rope.dimension_count", N_ROT)
    w.add_uint32(f"{ARCH}.rope.scaling.original_context_length", N_CTX_ORIG)
    scale = N_CTX_TRAIN / N_CTX_ORIG
    w.add_float32(f"{ARCH}.rope.scaling.attn_factor", math.sqrt(1 + math.log(scale) / math.log(N_CTX_ORIG)))
    w.add_uint32(f"{ARCH}.attention.sliding_window", N_CTX_ORIG - 1)


def rope_factors(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Increasing factors as LongRoPE's are: near 1 to ~2 (short), 1 to
    ~40 (long)."""
    u = np.sort(rng.random(N_ROT // 2))
    short = (1.0 + u).astype(np.float32)
    long = (1.0 + 39.0 * u * u).astype(np.float32)
    return short, long


def fill(reader: gguf.GGUFReader, w: gguf.GGUFWriter, rng: np.random.Generator) -> None:
    write_keys(reader, w)

    short, long = rope_factors(rng)
    w.add_tensor("rope_factors_long.weight", long)
    w.add_tensor("rope_factors_short.weight", short)
    by_name = {t.name: t for t in reader.tensors}
    q_width, kv_width = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for t in reader.tensors:
        parts = t.name.split(".")
        kind = parts[2] if t.name.startswith("blk.") else None
        blk = ".".join(parts[:2])
        if kind in ("attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "ffn_gate"):
            continue
        if kind == "attn_output":
            n_embd = int(t.shape[1])
            qkv = [
                q8(rng, rows, n_embd, rms_of(by_name[f"{blk}.{name}.weight"]))
                for name, rows in (("attn_q", q_width), ("attn_k", kv_width), ("attn_v", kv_width))
            ]
            w.add_tensor(f"{blk}.attn_qkv.weight", np.concatenate(qkv), raw_dtype=Q.Q8_0)
            wo = q8(rng, n_embd, q_width, rms_of(t) * math.sqrt(int(t.shape[0]) / q_width))
            w.add_tensor(t.name, wo, raw_dtype=Q.Q8_0)
            continue
        if kind == "ffn_up":
            gate = by_name[f"{blk}.ffn_gate.weight"]
            w.add_tensor(t.name, np.concatenate([gate.data, t.data]), raw_dtype=Q.Q8_0)
            continue
        copy_tensor(w, t)


if __name__ == "__main__":
    sys.exit(run_fixture(sys.argv[1:], __doc__, ARCH, 0xF13, fill))
