#!/usr/bin/env python3
"""Carry a GGUF model's shape where its weights cannot travel.

`pack MODEL.gguf OUT.skel [--keep BYTES]` keeps the file's header
(metadata, tokenizer, tensor table) whole and, of each tensor, only its
first BYTES (default 4096, rounded down to whole quantization blocks).
`unpack IN.skel OUT.gguf` writes a file of the original size and layout in
which each tensor repeats its kept bytes to its full length.

The result has the real model's architecture, tensor shapes and types, so
an engine loads it and does exactly the work the real model costs; its
weights are a tiling of real blocks (finite scales, no NaN), so it decodes
garbage at the real speed. Use it for speed on machines the real weights
cannot reach, never for accuracy.

Only the standard library: the machine that unpacks may have nothing else.
"""

import json
import os
import struct
import sys

MAGIC = b"MINFER-SKELETON-1\n"

# ggml type id -> (bytes per block, elements per block), as ggml defines
# them (crates/gguf/src/types.rs). An unknown type keeps its tensor whole.
BLOCKS = {
    0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32),
    8: (34, 32), 9: (36, 32), 10: (84, 256), 11: (110, 256), 12: (144, 256),
    13: (176, 256), 14: (210, 256), 15: (292, 256), 16: (66, 256),
    17: (74, 256), 18: (98, 256), 19: (50, 256), 20: (18, 32), 21: (110, 256),
    22: (82, 256), 23: (136, 256), 24: (1, 1), 25: (2, 1), 26: (4, 1),
    27: (8, 1), 28: (8, 1), 29: (56, 256), 30: (2, 1), 34: (54, 256),
    35: (66, 256), 39: (17, 32),
}

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
          10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        size = struct.calcsize("<" + fmt)
        data = self.f.read(size)
        if len(data) != size:
            raise SystemExit("truncated GGUF header")
        return struct.unpack("<" + fmt, data)[0]

    def string(self):
        n = self.take("Q")
        return self.f.read(n).decode("utf-8", "replace")

    def value(self, vtype):
        if vtype in SCALAR:
            return self.take(SCALAR[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            inner = self.take("I")
            n = self.take("Q")
            if inner in SCALAR:
                size = struct.calcsize("<" + SCALAR[inner])
                self.f.seek(n * size, 1)
                return None
            return [self.value(inner) for _ in range(n)]
        raise SystemExit(f"unknown GGUF value type {vtype}")


def tensor_table(path):
    """(data start, file size, [(name, type, offset from data start)])."""
    with open(path, "rb") as f:
        r = Reader(f)
        if f.read(4) != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        version = r.take("I")
        if version < 2:
            raise SystemExit(f"{path}: GGUF version {version} is too old")
        n_tensors = r.take("Q")
        n_kv = r.take("Q")
        alignment = 32
        for _ in range(n_kv):
            key = r.string()
            val = r.value(r.take("I"))
            if key == "general.alignment":
                alignment = val
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.take("I")
            for _ in range(n_dims):
                r.take("Q")
            ttype = r.take("I")
            offset = r.take("Q")
            tensors.append((name, ttype, offset))
        end = f.tell()
        f.seek(0, 2)
        size = f.tell()
    start = (end + alignment - 1) // alignment * alignment
    return start, size, tensors


def pack(src, dst, keep):
    start, size, tensors = tensor_table(src)
    spans = sorted(tensors, key=lambda t: t[2])
    manifest = {"header": start, "size": size, "tensors": []}
    chunks = []
    with open(src, "rb") as f:
        header = f.read(start)
        for i, (name, ttype, off) in enumerate(spans):
            end = spans[i + 1][2] if i + 1 < len(spans) else size - start
            length = end - off
            block = BLOCKS.get(ttype, (length, 1))[0] or 1
            kept = min(length, max(block, keep // block * block))
            f.seek(start + off)
            chunks.append(f.read(kept))
            manifest["tensors"].append([off, length, kept])
    blob = json.dumps(manifest).encode()
    with open(dst, "wb") as out:
        out.write(MAGIC)
        out.write(struct.pack("<Q", len(blob)))
        out.write(blob)
        out.write(header)
        for c in chunks:
            out.write(c)
    kept_total = sum(len(c) for c in chunks)
    print(f"{src}: {size} bytes -> header {start} + {kept_total} kept "
          f"of {len(chunks)} tensors")


def unpack(src, dst):
    with open(src, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise SystemExit(f"{src}: not a skeleton")
        n = struct.unpack("<Q", f.read(8))[0]
        manifest = json.loads(f.read(n))
        header = f.read(manifest["header"])
        tmp = dst + ".part"
        with open(tmp, "wb") as out:
            out.write(header)
            for off, length, kept in manifest["tensors"]:
                chunk = f.read(kept)
                out.seek(manifest["header"] + off)
                whole, rest = divmod(length, kept)
                # Write in pieces of about 16 MiB: big tensors repeat a
                # small chunk thousands of times.
                reps = max(1, (16 << 20) // kept)
                piece = chunk * reps
                left = whole
                while left >= reps:
                    out.write(piece)
                    left -= reps
                out.write(chunk * left + chunk[:rest])
            out.truncate(manifest["size"])
    os.replace(tmp, dst)
    print(f"{dst}: {manifest['size']} bytes")


def main(argv):
    if len(argv) >= 3 and argv[0] == "pack":
        keep = 4096
        if len(argv) == 5 and argv[3] == "--keep":
            keep = int(argv[4])
        pack(argv[1], argv[2], keep)
    elif len(argv) == 3 and argv[0] == "unpack":
        unpack(argv[1], argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
