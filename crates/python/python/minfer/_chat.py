"""``minfer.Chat``: a conversation that prefills only each new message."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Union

from ._minfer import MinferError
from ._model import Message, Model

FORMAT = "minfer-chat/1"


class Chat:
    """A multi-turn conversation with ``model``. Each :meth:`send` adds the
    user's message and the answer to :attr:`messages`; the turns before
    it are in the model's prefix cache, so only the new message is
    computed (:attr:`usage` says how many prompt tokens were cached).
    ``fields`` (``max_tokens``, ``temperature``, ``tools``…) go with every
    turn. :meth:`save` writes the conversation to a file and
    :meth:`load` continues it, in this process or another."""

    def __init__(self, model: Model, system: Optional[str] = None, **fields: Any) -> None:
        self.model = model
        self.messages: List[Message] = []
        if system is not None:
            self.messages.append({"role": "system", "content": system})
        self.fields = fields
        #: The last turn's ``usage`` (``prompt_tokens``,
        #: ``prompt_tokens_details.cached_tokens``, ``completion_tokens``).
        self.usage: Optional[Dict[str, Any]] = None

    def send(self, text: str, *, stream: bool = False, **fields: Any) -> Union[str, Iterator[str]]:
        """Sends a user message; returns the answer's text, or with
        ``stream=True`` an iterator of its pieces (the answer joins the
        conversation when the iterator ends, as far as it got)."""
        body = dict(self.fields, **fields)
        msgs = self.messages + [{"role": "user", "content": text}]
        if not stream:
            out = self.model.chat_completion(messages=msgs, **body)
            self.usage = out.get("usage")
            answer = out["choices"][0]["message"]
            self.messages = msgs + [{k: v for k, v in answer.items() if v is not None}]
            return answer.get("content") or ""
        return self._stream(msgs, body)

    def _stream(self, msgs: List[Message], body: Dict[str, Any]) -> Iterator[str]:
        parts: List[str] = []
        try:
            for c in self.model.chat_completion(messages=msgs, stream=True,
                                                stream_options={"include_usage": True}, **body):
                if c.get("usage"):
                    self.usage = c["usage"]
                if not c["choices"]:
                    continue
                piece = c["choices"][0]["delta"].get("content")
                if piece:
                    parts.append(piece)
                    yield piece
        finally:
            self.messages = msgs + [{"role": "assistant", "content": "".join(parts)}]

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the conversation to ``path`` (whole or not at all)."""
        data = {"format": FORMAT, "model": self.model.id, "messages": self.messages,
                "fields": self.fields}
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".chat-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, model: Model, path: Union[str, "os.PathLike[str]"]) -> "Chat":
        """The conversation :meth:`save` wrote, to continue with ``model``.

        Raises ``MinferError`` for a file that is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {FORMAT!r}")
            messages = data["messages"]
            if not isinstance(messages, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
                raise ValueError("`messages` is not a list of messages")
            fields = data.get("fields") or {}
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:
            raise MinferError(f"{path} is not a saved minfer chat: {e}") from None
        chat = cls(model, **fields)
        chat.messages = messages
        return chat
