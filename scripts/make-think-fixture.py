#!/usr/bin/env python3
"""Writes a reasoning-model fixture: the tiny random-weight qwen3 model of
tests/models with Qwen3's published chat template
(tests/fixtures/qwen3-chat-template.jinja, as Qwen ships it with
Qwen3-0.6B) and `<think>`, `</think>`, `<tool_call>`, `</tool_call>` as
single user-defined tokens in place of four unused control tokens
(`<repo_name>`, `<reponame>`, `<file_sep>`, `<filename>`), so that a test
can steer the random model into a thinking block with logit biases.

usage: make-think-fixture.py OUT.gguf
"""

import sys
from pathlib import Path

import gguf

from fixture_gguf import ROOT, add_field, open_source

TEMPLATE = ROOT / "tests/fixtures/qwen3-chat-template.jinja"
# Token id -> new text; the ids are control tokens no merge produces.
RENAMED = {3: "<think>", 4: "</think>", 5: "<tool_call>", 6: "</tool_call>"}
USER_DEFINED = int(gguf.TokenType.USER_DEFINED)


def main() -> None:
    out = Path(sys.argv[1])
    tmp = out.with_suffix(".tmp")
    reader, writer = open_source(tmp)
    for field in reader.fields.values():
        name = field.name
        if name == gguf.Keys.General.ARCHITECTURE or name.startswith("GGUF."):
            continue
        if name == gguf.Keys.Tokenizer.CHAT_TEMPLATE:
            continue
        val = field.contents()
        if name == gguf.Keys.Tokenizer.LIST:
            val = [RENAMED.get(i, t) for i, t in enumerate(val)]
        elif name == gguf.Keys.Tokenizer.TOKEN_TYPE:
            val = [USER_DEFINED if i in RENAMED else t for i, t in enumerate(val)]
        add_field(writer, name, field, val)
    writer.add_chat_template(TEMPLATE.read_text())
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    tmp.replace(out)


if __name__ == "__main__":
    main()
