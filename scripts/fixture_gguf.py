"""What the fixture scripts (make-*-fixture.py, make-moe-bench-model.py)
share: the source model they start from, opening it with a writer for the
new file, copying its metadata and tensors, random quantized blocks, the
RMS of a quantized tensor, and writing the file out."""

import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parent.parent
# The repository's random-weight qwen3 model, which every fixture starts from.
SRC = ROOT / "tests/models/qwen3-tiny-q8_0.gguf"


def open_source(out: Path, arch: str | None = None) -> tuple[gguf.GGUFReader, gguf.GGUFWriter]:
    """A reader of SRC and a writer of `out` for `arch` (by default the
    source's architecture), in the source's byte order."""
    reader = gguf.GGUFReader(SRC)
    arch = source_arch(reader) if arch is None else arch
    return reader, gguf.GGUFWriter(out, arch=arch, endianess=reader.endianess)


def run_fixture(argv: list[str], doc: str, arch: str, seed: int, fill) -> int:
    """The main of a fixture script whose one argument is the file to
    write: `fill(reader, w, rng)` adds to the writer `w` for `arch` what it
    makes of the source that `reader` reads, `rng` seeded with `seed`; the
    file is then written out. Other arguments print `doc` and give 2."""
    if len(argv) != 1:
        print(doc, file=sys.stderr)
        return 2
    rng = np.random.default_rng(seed)
    reader, w = open_source(Path(argv[0]), arch)
    fill(reader, w, rng)
    finish(w)
    return 0


def finish(w: gguf.GGUFWriter) -> None:
    """Writes out and closes the file `w` was given."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rms_of(t) -> float:
    """The root mean square of tensor `t`'s values."""
    values = dequantize(t.data, t.tensor_type).astype(np.float64)
    return float(np.sqrt(np.mean(np.square(values))))


def random_bytes(rng: np.random.Generator, qtype: Q, n_values: int) -> np.ndarray:
    """Random bytes for the blocks of `n_values` values of `qtype`, a block
    a row; the caller sets the scale fields."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return rng.integers(0, 256, size=(n_values // block, size), dtype=np.uint8)


def row_bytes(qtype: Q, n_values: int) -> int:
    """The size in bytes of a row of `n_values` values of `qtype`."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return n_values // block * size


def source_arch(reader: gguf.GGUFReader) -> str:
    """`general.architecture` of the file `reader` reads."""
    field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    return bytes(field.parts[field.data[0]]).decode()


def add_field(w: gguf.GGUFWriter, key: str, field, val) -> None:
    """Adds `val` under `key` to `w`, typed as the reader's `field` is."""
    vtype = field.types[0]
    sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
    w.add_key_value(key, val, vtype, sub_type=sub)


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
        add_field(w, key, field, val)


def copy_tensor(w: gguf.GGUFWriter, t, name: str | None = None) -> None:
    """Adds the reader's tensor `t` to `w` (under `name`, by default its
    own) as the source stores it: F32 as values, other types as blocks."""
    raw = None if t.tensor_type == Q.F32 else t.tensor_type
    data = np.array(t.data, dtype=np.float32) if raw is None else t.data
    w.add_tensor(t.name if name is None else name, data, raw_dtype=raw)
