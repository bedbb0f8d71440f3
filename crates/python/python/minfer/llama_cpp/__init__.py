"""llama-cpp-python's high-level API on minfer: change ``from llama_cpp
import Llama`` to ``from minfer.llama_cpp import Llama`` (and
``llama_cpp.llama_speculative``/``llama_grammar`` likewise). See
``minfer.llama_cpp._llama`` for what is covered and which parameters are
accepted without effect."""

from ._llama import CHAT_FORMATS, LLAMA_DEFAULT_SEED, Llama
from .llama_grammar import LlamaGrammar
from .llama_speculative import LlamaPromptLookupDecoding

__all__ = ["Llama", "LlamaGrammar", "LlamaPromptLookupDecoding", "LLAMA_DEFAULT_SEED", "CHAT_FORMATS"]
