"""``minfer.Model``: a model served in this process."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _api
from ._minfer import Server

Message = Dict[str, Any]


class Model:
    """A model loaded in this process: a GGUF path, a name the store knows
    (pulled on first use, with a progress bar on a terminal) or
    ``hf:OWNER/REPO/FILE.gguf``.

    Generation goes through the same code as ``minfer serve``: the same
    tokens, tool calls, grammars and JSON schemas. The object is safe to
    share between threads; threads that generate at once (up to
    ``n_parallel``) share each forward pass.

    Arguments: ``n_ctx`` (context window in tokens), ``threads`` (compute
    threads; default every core), ``n_parallel`` (generations batched
    together; more wait), ``batch_size`` (most tokens of one forward
    pass), ``device`` (``auto``, ``cpu``, ``gpu`` or ``gpu:N``),
    ``kv_type`` (``f16``, ``f32`` or ``q8_0``), ``seed`` (the seed of a
    request that sets none; default a fresh one per request),
    ``chat_template`` (a built-in name or Jinja text in place of the
    model's own), ``home`` (the store's folder; default
    ``$MINFER_HOME`` or ``~/.cache/minfer``); speculative decoding with
    ``draft`` (a small model of the same vocabulary) and/or ``lookup``
    (prompt lookup: the longest n-gram matched), ``draft_max`` guesses a
    step at most: the same tokens, sooner.
    """

    def __init__(
        self,
        model: str,
        *,
        n_ctx: int = 4096,
        threads: Optional[int] = None,
        n_parallel: int = 4,
        batch_size: int = 512,
        device: str = "auto",
        kv_type: str = "f16",
        seed: Optional[int] = None,
        chat_template: Optional[str] = None,
        home: Optional[str] = None,
        draft: Optional[str] = None,
        lookup: int = 0,
        draft_max: Optional[int] = None,
    ) -> None:
        self._server = Server(
            model,
            n_ctx=n_ctx,
            threads=threads,
            n_parallel=n_parallel,
            batch_size=batch_size,
            device=device,
            kv_type=kv_type,
            seed=seed,
            chat_template=chat_template,
            home=home,
            draft=draft,
            lookup=lookup,
            draft_max=draft_max,
        )
        self.id: str = self._server.model or model
        self.n_ctx = n_ctx

    # The OpenAI-shaped calls every helper below goes through.

    def chat_completion(self, **request: Any) -> Any:
        """An OpenAI chat completion: ``request`` is the body of ``POST
        /v1/chat/completions`` (``messages``, ``tools``, ``tool_choice``,
        ``response_format``, ``logprobs``, ``n``, llama-server's sampler
        fields…). Returns the response dict, or with ``stream=True`` an
        iterator of chunk dicts."""
        return self._openai("/v1/chat/completions", request)

    def completion(self, **request: Any) -> Any:
        """An OpenAI text completion (``POST /v1/completions``): the
        response dict, or with ``stream=True`` an iterator of chunks."""
        return self._openai("/v1/completions", request)

    def _openai(self, path: str, request: Dict[str, Any]) -> Any:
        request.setdefault("model", self.id)
        if request.get("stream"):
            return _api.stream(self._server, path, request)
        return _api.call(self._server, path, request)

    def request(self, path: str, body: Optional[Dict[str, Any]] = None, method: str = "POST") -> Any:
        """Any other endpoint of ``minfer serve`` (``/tokenize``,
        ``/v1/responses``, ``/v1/messages``, ``/props``…): its JSON
        answer."""
        return _api.call(self._server, path, body, method)

    # Plain Python helpers.

    def generate(
        self,
        prompt: str,
        *,
        max_tokens: Optional[int] = 256,
        stream: bool = False,
        **sampling: Any,
    ) -> Union[str, Iterator[str]]:
        """Continues ``prompt`` as it is (no chat template). Returns the
        text, or with ``stream=True`` an iterator of its pieces.
        ``sampling``: ``temperature``, ``top_p``, ``top_k``, ``min_p``,
        ``seed``, ``stop``, ``grammar`` (GBNF), ``json_schema``,
        ``repeat_penalty``… as the server takes them."""
        body = dict(sampling, prompt=prompt, max_tokens=max_tokens, stream=stream)
        if stream:
            return (c["choices"][0]["text"] for c in self.completion(**body) if c["choices"])
        return self.completion(**body)["choices"][0]["text"]

    def chat(
        self,
        messages: Union[str, Sequence[Message]],
        *,
        system: Optional[str] = None,
        max_tokens: Optional[int] = None,
        stream: bool = False,
        **fields: Any,
    ) -> Union[str, Iterator[str]]:
        """Answers ``messages`` (a list of ``{"role", "content"}``, or one
        user message as a string) through the model's chat template.
        Returns the answer's text, or with ``stream=True`` an iterator of
        its pieces. For tool calls and everything else of the response,
        use :meth:`chat_completion`."""
        msgs: List[Message] = (
            [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        )
        if system is not None:
            msgs.insert(0, {"role": "system", "content": system})
        body = dict(fields, messages=msgs, stream=stream)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stream:
            return (
                c["choices"][0]["delta"].get("content") or ""
                for c in self.chat_completion(**body)
                if c["choices"] and c["choices"][0]["delta"].get("content")
            )
        return self.chat_completion(**body)["choices"][0]["message"].get("content") or ""

    def tokenize(self, text: str, *, add_special: bool = True) -> List[int]:
        """The token ids of ``text`` (with the model's BOS rule unless
        ``add_special=False``)."""
        body = {"content": text, "add_special": add_special, "model": self.id}
        return list(_api.call(self._server, "/tokenize", body)["tokens"])

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``."""
        body = {"tokens": list(tokens), "model": self.id}
        return str(_api.call(self._server, "/detokenize", body)["content"])

    def embed(self, input: Union[str, Sequence[str]]) -> Union[List[float], List[List[float]]]:
        """The embedding of ``input`` (one vector), or of each string of a
        list (a list of vectors), normalized to unit length as the
        server's ``/v1/embeddings`` gives them."""
        one = isinstance(input, str)
        body = {"input": [input] if one else list(input), "model": self.id}
        data = _api.call(self._server, "/v1/embeddings", body)["data"]
        vecs = [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]
        return vecs[0] if one else vecs

    def close(self) -> None:
        """Stops the model's threads and frees its memory now (also done
        when the object is collected)."""
        self._server = None  # type: ignore[assignment]

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
