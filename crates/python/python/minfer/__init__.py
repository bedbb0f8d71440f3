"""minfer: local LLM inference on GGUF models, in process.

    >>> import minfer
    >>> m = minfer.Model("qwen2.5-coder-0.5b-instruct")
    >>> print(m.chat("Say hi."))

``Model`` generates, chats (tools, schemas, grammars), embeds and
tokenizes through the same code as ``minfer serve``; several threads that
generate at once share each forward pass. ``Chat`` is a conversation that
prefills only each new message, saved to a file and continued later. ``minfer.llama_cpp.Llama`` is
llama-cpp-python's class. Failures are exceptions: ``MinferError`` (a
model that cannot be loaded, a bad setting) and ``APIError`` (a request
the engine refused; ``InvalidRequestError``, also a ``ValueError``, for a
field that is not valid).
"""

from ._api import APIError, InvalidRequestError
from ._chat import Chat
from ._minfer import MinferError, __version__
from ._model import Model

__all__ = ["Model", "Chat", "MinferError", "APIError", "InvalidRequestError", "__version__"]
