"""llama-cpp-python's ``LlamaGrammar``: a GBNF grammar (or a JSON schema)
that constrains an answer."""

from __future__ import annotations


class LlamaGrammar:
    """A GBNF grammar, as llama-cpp-python's ``LlamaGrammar``."""

    def __init__(self, text: str, schema: "str | None" = None) -> None:
        self._grammar = text
        self._schema = schema

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        """The grammar of GBNF text."""
        return cls(grammar)

    @classmethod
    def from_file(cls, file: str, verbose: bool = True) -> "LlamaGrammar":
        """The grammar of a GBNF file."""
        with open(file, encoding="utf-8") as f:
            return cls(f.read())

    @classmethod
    def from_json_schema(cls, json_schema: str, verbose: bool = True) -> "LlamaGrammar":
        """The grammar of a JSON schema (text), compiled by the server."""
        return cls("", schema=json_schema)
