#!/usr/bin/env python3
"""Reference dequantization with gguf-py, for minfer's bit-exactness tests.

Usage:
    gguf_dequant_ref.py TYPE IN OUT [TYPE IN OUT ...]
    gguf_dequant_ref.py --check

Each triple names a ggml type as gguf-py spells it (Q4_K, IQ4_XS, BF16, ...),
a file of raw block bytes, and the file to write: the dequantized values as
little-endian float32, produced by ``gguf.quants.dequantize``. A type written
``q:TYPE`` goes the other way: IN holds little-endian float32 values and OUT
receives the raw bytes of ``gguf.quants.quantize``. Several triples per call
keep the interpreter start-up (numpy import) to one.

``--check`` exits 0 when gguf and numpy import, and prints gguf's version;
tests use it to decide whether they can run.

Needs ``pip install gguf==0.19.0`` (which brings numpy).
"""

import sys


def main(argv: list[str]) -> int:
    try:
        import numpy as np
        import gguf  # noqa: F401
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize, quantize
    except ImportError as e:
        print(f"gguf_dequant_ref.py: cannot import gguf/numpy: {e}", file=sys.stderr)
        return 3

    if argv == ["--check"]:
        try:
            from importlib.metadata import version

            print(version("gguf"))
        except Exception:  # the version is informational only
            print("unknown")
        return 0

    if not argv or len(argv) % 3 != 0:
        print(__doc__, file=sys.stderr)
        return 2

    for i in range(0, len(argv), 3):
        name, src, dst = argv[i : i + 3]
        to_quant = name.startswith("q:")
        if to_quant:
            name = name[2:]
        try:
            qtype = GGMLQuantizationType[name]
        except KeyError:
            print(f"gguf_dequant_ref.py: unknown type {name}", file=sys.stderr)
            return 2
        with open(src, "rb") as f:
            data = f.read()
        if to_quant:
            values = np.frombuffer(data, dtype="<f4")
            out_bytes = np.ascontiguousarray(quantize(values, qtype)).tobytes()
        else:
            raw = np.frombuffer(data, dtype=np.uint8)
            out = dequantize(raw, qtype)
            out_bytes = np.ascontiguousarray(out, dtype="<f4").reshape(-1).tobytes()
        with open(dst, "wb") as f:
            f.write(out_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
