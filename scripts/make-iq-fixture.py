#!/usr/bin/env python3
"""Writes GGUF fixtures for the grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
IQ3_S, IQ1_S) and for IQ4_XS, Q3_K and Q2_K, which gguf-py can decode but
not encode.

usage: make-iq-fixture.py TYPE OUT.gguf OUT_F32.gguf

Starts from the repository's random-weight qwen3 model
(tests/models/qwen3-tiny-q8_0.gguf). Its rows are 128 wide, and the grid
types need rows of a multiple of 256, so the model is widened first:
embedding_length 128 -> 256 (each token-embedding row and each norm weight
repeated twice) and feed_forward_length 384 -> 512. Every 2-D weight matrix
(attention q/k/v/output, FFN gate/up/down; not the embeddings, not the
norms) is then replaced by random blocks of TYPE: random bytes are always
valid blocks of these types (every index field reaches exactly its grid), and
each block's f16 scale is set so that the matrix's products have the RMS of
those of the Q8_0 matrix it replaces (its RMS, times sqrt(old row length /
new row length)), give or take a random factor in [0.5, 1.5] per block.
The same holds for IQ4_XS, Q3_K and Q2_K (their f16 scale fields, `d` and
Q2_K's `dmin`, are set as above). TYPE may also be Q6_K, made the same
way, as a control.

OUT.gguf holds the blocks; OUT_F32.gguf is the same model with those
matrices stored as F32, gguf-py's dequantization of the very same blocks.
Everything else (metadata, tokenizer, token embeddings, norms) is identical
in the two files, so the only difference between running them is that the
quantized matrices dot with Q8_K-quantized activations.

The blocks depend on TYPE only (fixed seed), so reruns give the same files.
Needs ``pip install gguf==0.19.0``.
"""

import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

from fixture_gguf import add_field, finish, open_source, random_bytes, rms_of, row_bytes, source_arch

# The grid types and the file type llama.cpp records for a model of each.
TYPES = {
    "IQ2_XXS": gguf.LlamaFileType.MOSTLY_IQ2_XXS,
    "IQ2_XS": gguf.LlamaFileType.MOSTLY_IQ2_XS,
    "IQ2_S": gguf.LlamaFileType.MOSTLY_IQ2_S,
    "IQ3_XXS": gguf.LlamaFileType.MOSTLY_IQ3_XXS,
    "IQ3_S": gguf.LlamaFileType.MOSTLY_IQ3_S,
    "IQ1_S": gguf.LlamaFileType.MOSTLY_IQ1_S,
    # The types with Q8_K activations that the engine repacks into its
    # interleaved layout at load, run the same way.
    "IQ4_XS": gguf.LlamaFileType.MOSTLY_IQ4_XS,
    "Q3_K": gguf.LlamaFileType.MOSTLY_Q3_K_S,
    "Q2_K": gguf.LlamaFileType.MOSTLY_Q2_K,
    # The control: a type with long-established kernels and the same
    # activation format (Q8_K), made the same way, shows what quantizing
    # the activations alone costs this model.
    "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K,
}
# Byte offsets of the f16 scale fields in a block (all other bytes are
# random); the first field is `d`, Q2_K's second its `dmin`.
SCALES = {"Q6_K": (208,), "Q3_K": (108,), "Q2_K": (80, 82)}
N_EMBD, N_FF = 256, 512
MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def widened_shape(name: str, ne0: int, ne1: int) -> tuple[int, int]:
    """(ne0, ne1) of a matrix in the widened model."""
    kind = name.split(".")[2]
    if kind in ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"):
        ne0 = N_EMBD
    if kind in ("attn_output", "ffn_down"):
        ne1 = N_EMBD
    if kind == "ffn_down":
        ne0 = N_FF
    if kind in ("ffn_gate", "ffn_up"):
        ne1 = N_FF
    return ne0, ne1


def random_blocks(qtype: Q, rows: int, cols: int, rms: float, rng: np.random.Generator) -> np.ndarray:
    """rows x (bytes per row) of random blocks whose values have about `rms`."""
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    n_blocks = rows * cols // block
    raw = random_bytes(rng, qtype, rows * cols)
    offsets = SCALES.get(qtype.name, (0,))
    for o in offsets:
        raw[:, o : o + 2] = np.frombuffer(np.float16(1.0).tobytes(), dtype=np.uint8)
    unit = dequantize(raw.reshape(-1), qtype).reshape(n_blocks, block)
    unit_rms = np.sqrt(np.mean(np.square(unit.astype(np.float64))))
    # Block scales spread around the target so that they are not all alike
    # (every f16 field of a block scaled alike scales its values).
    d = (rms / unit_rms) * rng.uniform(0.5, 1.5, size=n_blocks)
    for o in offsets:
        raw[:, o : o + 2] = d.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(rows, row_bytes(qtype, cols))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in TYPES:
        print(__doc__, file=sys.stderr)
        print(f"TYPE is one of {', '.join(TYPES)}", file=sys.stderr)
        return 2
    name, out_q, out_f = argv[0], Path(argv[1]), Path(argv[2])
    qtype = Q[name]
    rng = np.random.default_rng(0x1C0DE + int(qtype))
    reader, w_q = open_source(out_q)
    arch = source_arch(reader)
    writers = {"q": w_q, "f": gguf.GGUFWriter(out_f, arch=arch, endianess=reader.endianess)}
    for field in reader.fields.values():
        key = field.name
        if key == gguf.Keys.General.ARCHITECTURE or key.startswith("GGUF."):
            continue
        val = field.contents()
        if key == f"{arch}.embedding_length":
            val = N_EMBD
        elif key == f"{arch}.feed_forward_length":
            val = N_FF
        for which, w in writers.items():
            v = val
            if key == gguf.Keys.General.FILE_TYPE:
                v = int(TYPES[name] if which == "q" else gguf.LlamaFileType.ALL_F32)
            elif key == gguf.Keys.General.NAME:
                v = f"{val}-{name.lower()}" + ("" if which == "q" else "-f32")
            add_field(w, key, field, v)

    for t in reader.tensors:
        kind = t.name.split(".")[-2] if t.name.startswith("blk.") else t.name.split(".")[0]
        if t.name.startswith("blk.") and kind in MATRICES:
            ne0, ne1 = (int(x) for x in t.shape)
            # RMS of the Q8_0 matrix this one replaces.
            rms = rms_of(t)
            old_cols = ne0
            ne0, ne1 = widened_shape(t.name, ne0, ne1)
            # Longer rows sum more products: scale by sqrt(old / new) to keep
            # the RMS of the matrix product's output.
            rms *= (old_cols / ne0) ** 0.5
            blocks = random_blocks(qtype, ne1, ne0, rms, rng)
            writers["q"].add_tensor(t.name, blocks, raw_dtype=qtype)
            values = dequantize(blocks, qtype).astype(np.float32).reshape(ne1, ne0)
            writers["f"].add_tensor(t.name, values)
        elif t.name == "token_embd.weight":
            # Each row (Q8_0 bytes) twice: the widened row repeats the old one.
            data = np.ascontiguousarray(np.concatenate([t.data, t.data], axis=1))
            for w in writers.values():
                w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
        elif t.tensor_type == Q.F32 and t.data.shape == (128,):
            # The 128-wide norm weights, repeated like the embeddings.
            data = np.concatenate([t.data, t.data]).astype(np.float32)
            for w in writers.values():
                w.add_tensor(t.name, data)
        elif t.tensor_type == Q.F32:
            for w in writers.values():
                w.add_tensor(t.name, np.array(t.data, dtype=np.float32))
        else:
            print(f"make-iq-fixture.py: unexpected tensor {t.name} ({t.tensor_type.name})", file=sys.stderr)
            return 1
    for w in writers.values():
        finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
