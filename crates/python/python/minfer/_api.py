"""Requests to the in-process server and their answers: JSON bodies in,
dicts (or a stream of them) out, failures as exceptions."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, Optional

from ._minfer import MinferError, Response, Server


class APIError(MinferError):
    """The server refused a request (a bad field, an unknown model, a
    prompt longer than the context); ``status`` is its HTTP status and
    ``code`` its error code, when it has one."""

    def __init__(self, status: int, message: str, code: Optional[str] = None):
        super().__init__(message)
        self.status = status
        self.code = code


class InvalidRequestError(APIError, ValueError):
    """A request the server answered with 400: a field is not valid."""


def _error(status: int, body: bytes) -> APIError:
    try:
        err = json.loads(body)
        err = err.get("error", err)
        if isinstance(err, dict):
            message, code = err.get("message", str(err)), err.get("code")
        else:
            message, code = str(err), None
    except ValueError:
        message, code = body.decode("utf-8", "replace"), None
    kind = InvalidRequestError if status == 400 else APIError
    return kind(status, message, code if isinstance(code, str) else None)


def _read_all(resp: Response) -> bytes:
    out = bytearray()
    try:
        while True:
            piece = resp.read(0.1)
            if piece is None:
                return bytes(out)
            out += piece
    finally:
        resp.close()


def _send(server: Server, method: str, path: str, data: bytes) -> "tuple[Response, int]":
    """Sends a request and waits for its status, 0.1 s at a time, so that
    Ctrl-C is seen (and cancels it) while a whole answer is made."""
    resp = server.request(method, path, data)
    try:
        status = resp.head(0.1)
        while status is None:
            status = resp.head(0.1)
    except BaseException:
        resp.close()
        raise
    return resp, status


def call(server: Server, path: str, body: Optional[Dict[str, Any]] = None, method: str = "POST") -> Any:
    """Sends ``body`` to ``path`` and returns the JSON answer."""
    data = b"" if body is None else json.dumps(body).encode()
    resp, status = _send(server, method, path, data)
    raw = _read_all(resp)
    if status >= 400:
        raise _error(status, raw)
    return json.loads(raw) if raw else None


def stream(server: Server, path: str, body: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    """Sends ``body`` to ``path`` and yields each server-sent event's data
    as it comes (``[DONE]`` ends it). Closing the iterator, or Ctrl-C,
    cancels the generation."""
    resp, status = _send(server, "POST", path, json.dumps(body).encode())
    if status >= 400:
        raise _error(status, _read_all(resp))
    buf = b""
    try:
        while True:
            piece = resp.read(0.1)
            if piece is None:
                return
            buf += piece
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    data = line[6:]
                    if data == b"[DONE]":
                        return
                    obj = json.loads(data)
                    if isinstance(obj, dict) and "error" in obj and len(obj) == 1:
                        raise _error(500, data)
                    yield obj
    finally:
        resp.close()
