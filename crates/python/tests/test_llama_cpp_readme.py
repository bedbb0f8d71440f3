"""llama-cpp-python's README examples (the 0.3.36 sdist's), each run as
written there but for the import (``llama_cpp`` -> ``minfer.llama_cpp``)
and the model path, and their answers checked for llama-cpp-python's
shapes. Then the rest of the subset applications use."""

import json

import pytest

from minfer.llama_cpp import Llama
import minfer.llama_cpp as llama_cpp
from minfer.llama_cpp.llama_speculative import LlamaPromptLookupDecoding


def test_readme_text_completion(smollm_path):
    llm = Llama(
          model_path=smollm_path,
          # n_gpu_layers=-1, # Uncomment to use GPU acceleration
          # seed=1337, # Uncomment to set a specific seed
          # n_ctx=2048, # Uncomment to increase the context window
    )
    output = llm(
          "Q: Name the planets in the solar system? A: ", # Prompt
          max_tokens=32, # Generate up to 32 tokens, set to None to generate up to the end of the context window
          stop=["Q:", "\n"], # Stop generating just before the model would generate a new question
          echo=True # Echo the prompt back in the output
    ) # Generate a completion, can also call create_completion
    print(output)
    assert output["object"] == "text_completion"
    assert output["model"] == smollm_path
    choice = output["choices"][0]
    assert choice["text"].startswith("Q: Name the planets in the solar system? A: ")
    assert "\n" not in choice["text"] and choice["finish_reason"] in ("stop", "length")
    u = output["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] <= 32 + u["prompt_tokens"]


def test_readme_chat_completion(smollm_path):
    llm = Llama(
          model_path=smollm_path,
          chat_format="llama-2"
    )
    out = llm.create_chat_completion(
          messages = [
              {"role": "system", "content": "You are an assistant who perfectly describes images."},
              {
                  "role": "user",
                  "content": "Describe this image in detail please."
              }
          ]
    )
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant"
    # (SmolLM2 was not trained on Llama 2's format and may answer nothing.)
    assert isinstance(out["choices"][0]["message"]["content"], str)
    assert out["choices"][0]["finish_reason"] in ("stop", "length")
    # The llama-2 format was used: its prompt wraps the system message.
    assert out["usage"]["prompt_tokens"] > 20


def test_readme_json_mode(smollm_path):
    # The README's call, with a fixed seed: its default is a fresh seed per
    # request, and at 0.7 a small model sometimes writes an object longer
    # than max_tokens, which json_object mode cannot close. The engine is
    # deterministic for a seed, so this one answer is checked every run.
    llm = Llama(model_path=smollm_path, chat_format="chatml", seed=1)
    out = llm.create_chat_completion(
        messages=[
            {
                "role": "system",
                "content": "You are a helpful assistant that outputs in JSON.",
            },
            {"role": "user", "content": "Who won the world series in 2020"},
        ],
        response_format={
            "type": "json_object",
        },
        temperature=0.7,
        max_tokens=200,
    )
    json.loads(out["choices"][0]["message"]["content"])


def test_readme_json_schema_mode(smollm_path):
    # A fixed seed, as in the JSON mode test above.
    llm = Llama(model_path=smollm_path, chat_format="chatml", seed=1)
    out = llm.create_chat_completion(
        messages=[
            {
                "role": "system",
                "content": "You are a helpful assistant that outputs in JSON.",
            },
            {"role": "user", "content": "Who won the world series in 2020"},
        ],
        response_format={
            "type": "json_object",
            "schema": {
                "type": "object",
                "properties": {"team_name": {"type": "string"}},
                "required": ["team_name"],
            },
        },
        temperature=0.7,
    )
    assert isinstance(json.loads(out["choices"][0]["message"]["content"])["team_name"], str)


def test_readme_function_calling(qwen_path):
    llm = Llama(model_path=qwen_path, chat_format="chatml-function-calling")
    out = llm.create_chat_completion(
          messages = [
            {
              "role": "system",
              "content": "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions. The assistant calls functions with appropriate input when necessary"

            },
            {
              "role": "user",
              "content": "Extract Jason is 25 years old"
            }
          ],
          tools=[{
            "type": "function",
            "function": {
              "name": "UserDetail",
              "parameters": {
                "type": "object",
                "title": "UserDetail",
                "properties": {
                  "name": {
                    "title": "Name",
                    "type": "string"
                  },
                  "age": {
                    "title": "Age",
                    "type": "integer"
                  }
                },
                "required": [ "name", "age" ]
              }
            }
          }],
          tool_choice={
            "type": "function",
            "function": {
              "name": "UserDetail"
            }
          }
    )
    call = out["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "UserDetail"
    args = json.loads(call["function"]["arguments"])
    assert args["age"] == 25 and "Jason" in args["name"]


def test_readme_speculative_decoding(smollm_path):
    llama = Llama(
        model_path=smollm_path,
        draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10) # num_pred_tokens is the number of tokens to predict 10 is the default and generally good for gpu, 2 performs better for cpu-only machines.
    )
    plain = Llama(model_path=smollm_path)
    prompt = "Repeat exactly: the quick brown fox jumps over the lazy dog. the quick brown fox"
    a = llama(prompt, max_tokens=24, temperature=0)["choices"][0]["text"]
    b = plain(prompt, max_tokens=24, temperature=0)["choices"][0]["text"]
    assert a == b


def test_readme_embeddings(smollm_path):
    llm = llama_cpp.Llama(model_path=smollm_path, embedding=True)

    embeddings = llm.create_embedding("Hello, world!")
    assert embeddings["object"] == "list" and len(embeddings["data"]) == 1

    # or create multiple embeddings at once

    embeddings = llm.create_embedding(["Hello, world!", "Goodbye, world!"])
    assert [d["index"] for d in embeddings["data"]] == [0, 1]
    assert len(llm.embed("Hello, world!")) == len(embeddings["data"][0]["embedding"])


def test_readme_context_window(smollm_path):
    llm = Llama(model_path=smollm_path, n_ctx=2048)
    assert llm.n_ctx() == 2048


def test_streamed_chat_chunks_and_tokens(smollm_path):
    llm = Llama(model_path=smollm_path, n_ctx=1024, seed=7)
    chunks = list(llm.create_chat_completion(
        messages=[{"role": "user", "content": "Count to five."}], stream=True, max_tokens=24,
        temperature=0))
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == smollm_path for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    whole = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Count to five."}], max_tokens=24, temperature=0)
    assert text == whole["choices"][0]["message"]["content"]
    ids = llm.tokenize(b"Hello world")
    assert llm.detokenize(ids).endswith(b"Hello world")
    assert llm.tokenize(b"Hello world", add_bos=False) == ids[-len(llm.tokenize(b"Hello world", add_bos=False)):]


def test_logprobs_grammar_and_unknown_arguments(smollm_path):
    llm = Llama(model_path=smollm_path, n_ctx=1024, use_mmap=True, n_threads_batch=2, verbose=False)
    out = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Hi"}], max_tokens=4, logprobs=True, top_logprobs=2)
    assert len(out["choices"][0]["logprobs"]["content"]) >= 1
    g = llama_cpp.LlamaGrammar.from_string('root ::= "yes" | "no"')
    assert llm("Is water wet?", grammar=g, max_tokens=4)["choices"][0]["text"] in ("yes", "no")
    with pytest.raises(TypeError):
        Llama(model_path=smollm_path, no_such_argument=1)
    with pytest.raises(ValueError):
        Llama(model_path=smollm_path, chat_format="no-such-format")
