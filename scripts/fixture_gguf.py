"""What the fixture scripts (make-*-fixture.py) share: the RMS of a
quantized tensor, and the copy of a GGUF file's metadata under another
architecture."""

import numpy as np

import gguf
from gguf.quants import dequantize


def rms_of(t) -> float:
    """The root mean square of tensor `t`'s values."""
    values = dequantize(t.data, t.tensor_type).astype(np.float64)
    return float(np.sqrt(np.mean(np.square(values))))


def source_arch(reader: gguf.GGUFReader) -> str:
    """`general.architecture` of the file `reader` reads."""
    field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    return bytes(field.parts[field.data[0]]).decode()


def copy_keys(reader: gguf.GGUFReader, w: gguf.GGUFWriter, arch: str, drop=(), replace=None) -> None:
    """Copies every key of `reader` into `w`, the source architecture's
    keys renamed to `arch`'s; keys of the source architecture whose suffix
    is in `drop` are left out, and `replace(key, value)` (keys already
    renamed) may give another value."""
    src = source_arch(reader)
    for field in reader.fields.values():
        key = field.name
        if key == gguf.Keys.General.ARCHITECTURE or key.startswith("GGUF."):
            continue
        if key.startswith(src + ".") and key[len(src) + 1 :] in drop:
            continue
        val = field.contents()
        if key.startswith(src + "."):
            key = arch + key[len(src) :]
        if replace is not None:
            val = replace(key, val)
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, val, vtype, sub_type=sub)
