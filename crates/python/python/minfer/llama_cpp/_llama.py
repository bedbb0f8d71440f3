"""llama-cpp-python's ``Llama`` class on minfer: code written for
llama-cpp-python runs by changing its import to
``from minfer.llama_cpp import Llama``.

The subset applications use: the constructor, ``from_pretrained``,
``__call__``/``create_completion``, ``create_chat_completion`` (streamed
chunks, ``tools``/``tool_choice``, ``response_format`` with a schema,
``logprobs``), ``create_embedding``/``embed``, ``tokenize``/
``detokenize``, with llama-cpp-python's defaults and dict shapes.

Parameters that have no meaning here are accepted and change nothing:
``n_gpu_layers`` other than 0 (minfer places layers itself: ``0`` keeps
everything on the CPU, any other value lets minfer use a GPU when there
is one), ``use_mmap``, ``use_mlock``, ``n_threads_batch``, ``n_ubatch``,
``flash_attn``, ``offload_kqv``, ``logits_all``, ``last_n_tokens_size``,
``numa``, ``main_gpu``, ``tensor_split``, ``vocab_only``, ``rope_*``,
``yarn_*``, ``type_k``/``type_v``, ``verbose`` (minfer prints its own
one-line progress), ``mul_mat_q``, ``lora_*``. Any other keyword is a
``TypeError``, as for any Python function.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from .._api import APIError, InvalidRequestError
from .._model import Model
from .llama_grammar import LlamaGrammar
from .llama_speculative import LlamaPromptLookupDecoding

#: llama.cpp's "no seed": a fresh one per request.
LLAMA_DEFAULT_SEED = 0xFFFFFFFF

_ACCEPTED = {
    "use_mmap", "use_mlock", "n_threads_batch", "n_ubatch", "flash_attn", "offload_kqv",
    "logits_all", "last_n_tokens_size", "numa", "main_gpu", "tensor_split", "vocab_only",
    "rope_scaling_type", "rope_freq_base", "rope_freq_scale", "yarn_ext_factor",
    "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow", "yarn_orig_ctx", "type_k",
    "type_v", "mul_mat_q", "lora_base", "lora_path", "lora_scale", "split_mode",
    "kv_overrides", "rpc_servers", "pooling_type", "swa_full", "spm_infill", "draft_model",
    "tokenizer", "op_offload", "no_perf", "embedding",
}


#: llama-cpp-python's ``chat_format`` names, as minfer's chat templates.
CHAT_FORMATS = {
    "llama-2": "llama2", "llama-3": "llama3", "chatml": "chatml",
    "chatml-function-calling": "chatml", "qwen": "chatml", "gemma": "gemma",
    "mistral-instruct": "mistral-v1", "mistrallite": "mistral-v1", "zephyr": "zephyr",
    "vicuna": "vicuna", "openchat": "openchat", "phi3": "phi3", "saiga": None,
}


def _chat_template(chat_format: Optional[str]) -> Optional[str]:
    if chat_format is None:
        return None
    if chat_format not in CHAT_FORMATS or CHAT_FORMATS[chat_format] is None:
        known = ", ".join(k for k, v in CHAT_FORMATS.items() if v)
        raise ValueError(f"chat_format {chat_format!r} is not one minfer has ({known}); "
                         "leave it out to use the model's own template")
    return CHAT_FORMATS[chat_format]


def _seed(seed: Optional[int]) -> Optional[int]:
    return None if seed is None or seed < 0 or seed == LLAMA_DEFAULT_SEED else seed


def _stops(stop: Union[str, List[str], None]) -> Optional[List[str]]:
    if not stop:
        return None
    return [stop] if isinstance(stop, str) else list(stop)


def _limits(body: Dict[str, Any], max_tokens: Optional[int], stop: Union[str, List[str], None],
            seed: Optional[int], logit_bias: Optional[Dict[int, float]], grammar: Any) -> None:
    """The fields completions and chat share, in the server's terms:
    ``max_tokens`` None or <= 0 is no limit, llama.cpp's default seed is
    none, bias keys become strings."""
    if max_tokens is not None and max_tokens > 0:
        body["max_tokens"] = max_tokens
    if _stops(stop):
        body["stop"] = _stops(stop)
    if _seed(seed) is not None:
        body["seed"] = seed
    if logit_bias:
        body["logit_bias"] = {str(k): v for k, v in logit_bias.items()}
    _grammar(grammar, body)


def _grammar(grammar: Any, body: Dict[str, Any]) -> None:
    if grammar is None:
        return
    schema = getattr(grammar, "_schema", None)
    if schema is not None:
        import json

        body["json_schema"] = json.loads(schema) if isinstance(schema, str) else schema
    else:
        body["grammar"] = getattr(grammar, "_grammar", grammar)


class Llama:
    """A model, as llama-cpp-python's ``Llama`` (see the module's notes)."""

    def __init__(
        self,
        model_path: str,
        *,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_threads: Optional[int] = None,
        n_gpu_layers: int = 0,
        seed: int = LLAMA_DEFAULT_SEED,
        chat_format: Optional[str] = None,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - _ACCEPTED
        if unknown:
            raise TypeError(f"Llama() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        self.model_path = model_path
        self.verbose = verbose
        self._n_ctx = n_ctx if n_ctx > 0 else 4096
        draft = kwargs.get("draft_model")
        spec: Dict[str, Any] = {}
        if isinstance(draft, LlamaPromptLookupDecoding):
            spec = {"lookup": draft.max_ngram_size, "draft_max": draft.num_pred_tokens}
        elif draft is not None:
            raise TypeError("draft_model must be a LlamaPromptLookupDecoding")
        self._model = Model(
            model_path,
            n_ctx=self._n_ctx,
            threads=n_threads,
            batch_size=n_batch,
            device="cpu" if n_gpu_layers == 0 else "auto",
            seed=_seed(seed),
            chat_template=_chat_template(chat_format),
            **spec,
        )

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str] = None, **kwargs: Any) -> "Llama":
        """A model from Hugging Face: ``hf:repo_id/filename`` through
        minfer's store (a file already pulled is used as it is). The file
        is named exactly; a glob is refused, as the store cannot list a
        repository without the network."""
        if not filename or any(c in filename for c in "*?["):
            raise ValueError(
                f"minfer needs the exact file name in {repo_id} (got {filename!r}); "
                "a known model name also works, e.g. Llama('qwen2.5-coder-0.5b-instruct')"
            )
        return cls(f"hf:{repo_id}/{filename}", **kwargs)

    # Completions.

    def create_completion(
        self,
        prompt: Union[str, List[int]],
        suffix: Optional[str] = None,
        max_tokens: Optional[int] = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: Optional[int] = None,
        echo: bool = False,
        stop: Union[str, List[str], None] = None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        stream: bool = False,
        seed: Optional[int] = None,
        logit_bias: Optional[Dict[int, float]] = None,
        grammar: Any = None,
        **ignored: Any,
    ) -> Any:
        """A text completion of ``prompt`` in llama-cpp-python's dict shape
        (``object: text_completion``), or with ``stream=True`` an iterator
        of its chunks. ``max_tokens`` None or ≤ 0 generates until the
        model stops or the context is full. ``suffix`` asks for a fill in
        the middle, which goes through ``/infill``."""
        body: Dict[str, Any] = {
            "prompt": self.detokenize(prompt).decode("utf-8", "replace") if isinstance(prompt, list) else prompt,
            "temperature": temperature, "top_p": top_p, "min_p": min_p, "typical_p": typical_p,
            "echo": echo, "frequency_penalty": frequency_penalty,
            "presence_penalty": presence_penalty, "repeat_penalty": repeat_penalty,
            "top_k": top_k, "stream": stream,
        }
        _limits(body, max_tokens, stop, seed, logit_bias, grammar)
        if logprobs is not None:
            body["logprobs"] = logprobs
        if suffix is not None:
            return self._infill(body, suffix)
        return self._named(self._model.completion(**body))

    def __call__(self, prompt: Union[str, List[int]], *args: Any, **kwargs: Any) -> Any:
        """Same as :meth:`create_completion`."""
        return self.create_completion(prompt, *args, **kwargs)

    def _named(self, out: Any) -> Any:
        """``out`` (a dict, or an iterator of them) naming the model by
        the path it was given, as llama-cpp-python does."""
        if isinstance(out, dict):
            out["model"] = self.model_path
            return out

        def chunks() -> Iterator[Dict[str, Any]]:
            for c in out:
                c["model"] = self.model_path
                yield c

        return chunks()

    def _infill(self, body: Dict[str, Any], suffix: str) -> Any:
        native = {
            "input_prefix": body["prompt"], "input_suffix": suffix,
            "n_predict": body.get("max_tokens", -1), "temperature": body["temperature"],
            "top_k": body["top_k"], "top_p": body["top_p"], "min_p": body["min_p"],
        }
        if "seed" in body:
            native["seed"] = body["seed"]
        out = self._model.request("/infill", native)
        text = out["content"]
        finish = "length" if out.get("stop_type") == "limit" else "stop"
        return {
            "id": f"cmpl-{int(time.time() * 1000)}", "object": "text_completion",
            "created": int(time.time()), "model": self.model_path,
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": out.get("tokens_evaluated", 0),
                "completion_tokens": out.get("tokens_predicted", 0),
                "total_tokens": out.get("tokens_evaluated", 0) + out.get("tokens_predicted", 0),
            },
        }

    # Chat.

    def create_chat_completion(
        self,
        messages: Sequence[Dict[str, Any]],
        functions: Optional[List[Dict[str, Any]]] = None,
        function_call: Any = None,
        tools: Optional[List[Dict[str, Any]]] = None,
        tool_choice: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: Union[str, List[str], None] = None,
        seed: Optional[int] = None,
        response_format: Optional[Dict[str, Any]] = None,
        max_tokens: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        logit_bias: Optional[Dict[int, float]] = None,
        logprobs: Optional[bool] = None,
        top_logprobs: Optional[int] = None,
        grammar: Any = None,
        **ignored: Any,
    ) -> Any:
        """A chat completion in OpenAI's shape (what llama-cpp-python
        returns), or with ``stream=True`` an iterator of chunk dicts.
        ``functions``/``function_call`` (the old OpenAI form) become
        ``tools``/``tool_choice``; ``response_format`` ``{"type":
        "json_object", "schema": …}`` (llama-cpp-python's form) constrains
        the answer to the schema."""
        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, dict):
                tool_choice = {"type": "function", "function": function_call}
            elif function_call is not None:
                tool_choice = function_call
        body: Dict[str, Any] = {
            "messages": list(messages), "temperature": temperature, "top_p": top_p,
            "top_k": top_k, "min_p": min_p, "typical_p": typical_p, "stream": stream,
            "presence_penalty": presence_penalty, "frequency_penalty": frequency_penalty,
            "repeat_penalty": repeat_penalty,
        }
        if tools:
            body["tools"] = tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        _limits(body, max_tokens, stop, seed, logit_bias, grammar)
        if logprobs:
            body["logprobs"] = True
            if top_logprobs is not None:
                body["top_logprobs"] = top_logprobs
        if response_format:
            rf = dict(response_format)
            if rf.get("type") == "json_object" and "schema" in rf:
                rf = {"type": "json_schema", "json_schema": {"name": "schema", "schema": rf["schema"]}}
            body["response_format"] = rf
        return self._named(self._model.chat_completion(**body))

    # Embeddings and tokens.

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Dict[str, Any]:
        """Embeddings in OpenAI's shape (``object: list``)."""
        body = {"input": input, "model": self._model.id}
        out = self._model.request("/v1/embeddings", body)
        out["model"] = model or self.model_path
        return out

    def embed(self, input: Union[str, List[str]], normalize: bool = False, truncate: bool = True,
              return_count: bool = False) -> Any:
        """The embedding of ``input`` (a list of floats), or of each string
        of a list. minfer's vectors are unit length; ``normalize`` is
        accepted for that reason and changes nothing."""
        vecs = self._model.embed(input)
        if return_count:
            texts = [input] if isinstance(input, str) else list(input)
            count = sum(len(self._model.tokenize(t)) for t in texts)
            return vecs, count
        return vecs

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        """Token ids of ``text`` (bytes, as llama-cpp-python takes it)."""
        s = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else text
        return self._model.tokenize(s, add_special=add_bos)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        """The bytes of ``tokens``."""
        return self._model.detokenize(tokens).encode("utf-8")

    def n_ctx(self) -> int:
        """The context window in tokens."""
        return self._n_ctx

    def close(self) -> None:
        """Frees the model now."""
        self._model.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Llama", "LLAMA_DEFAULT_SEED", "CHAT_FORMATS"]
