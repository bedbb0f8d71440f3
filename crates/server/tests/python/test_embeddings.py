"""Embeddings through `minfer serve`: OpenAI's `/v1/embeddings` with the
official `openai` client, Ollama's `/api/embed` and `/api/embeddings` with
the official `ollama` client, against `minfer embed` on the same model.

SmolLM2 has no pooling type in its GGUF, so the server pools by the last
token: `minfer embed --pooling last` must print the same vector."""

import base64
import json
import math
import struct
import subprocess

import openai
import pytest

from conftest import env
from test_openai_api import http

TEXTS = ["The sky is blue because of Rayleigh scattering.", "fn main() {}"]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def minfer_embed(*args):
    out = subprocess.run(
        [env("MINFER_BIN"), "embed", env("MINFER_MODEL_PATH"), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(out.stdout)


def test_shape_unit_norm_and_equal_inputs(client, model, minfer_tokenize):
    r = client.embeddings.create(model=model, input=[TEXTS[0], TEXTS[1], TEXTS[0]])
    assert r.object == "list"
    assert r.model == model
    assert [d.index for d in r.data] == [0, 1, 2]
    assert all(d.object == "embedding" for d in r.data)
    widths = {len(d.embedding) for d in r.data}
    assert widths == {576}, widths  # SmolLM2-135M's n_embd
    for d in r.data:
        assert abs(norm(d.embedding) - 1.0) < 1e-4
    # The same text alone or beside others, first or last: the same vector.
    assert r.data[0].embedding == r.data[2].embedding
    assert cosine(r.data[0].embedding, r.data[1].embedding) < 0.999
    n = sum(len(minfer_tokenize(t)) for t in (TEXTS[0], TEXTS[1], TEXTS[0]))
    assert r.usage.prompt_tokens == n
    assert r.usage.total_tokens == n


def test_one_string_and_token_ids_give_the_texts_vector(client, model, minfer_tokenize):
    by_text = client.embeddings.create(model=model, input=TEXTS[1]).data[0].embedding
    ids = minfer_tokenize(TEXTS[1])
    one_list = client.embeddings.create(model=model, input=ids).data[0].embedding
    lists = client.embeddings.create(model=model, input=[ids, ids]).data
    assert one_list == by_text
    assert lists[0].embedding == by_text and lists[1].embedding == by_text


def test_vectors_equal_minfer_embed(client, model):
    served = client.embeddings.create(model=model, input=TEXTS).data
    printed = minfer_embed("--pooling", "last", *TEXTS)
    assert len(printed) == len(served)
    for s, p in zip(served, printed):
        assert len(p) == len(s.embedding)
        assert cosine(s.embedding, p) >= 0.99999


def test_base64_decodes_to_the_floats(base_url, model):
    body = lambda fmt: json.dumps({"model": model, "input": TEXTS, "encoding_format": fmt})
    status, floats = http(base_url + "/v1/embeddings", body("float"))
    assert status == 200, floats
    status, b64 = http(base_url + "/v1/embeddings", body("base64"))
    assert status == 200, b64
    for f, b in zip(floats["data"], b64["data"]):
        raw = base64.b64decode(b["embedding"])
        decoded = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        # JSON floats print the shortest text that reads back as the same
        # f32, so both are the same bits.
        assert decoded == [struct.unpack("<f", struct.pack("<f", x))[0] for x in f["embedding"]]


def test_errors(client, model, base_url):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=model, input="x", dimensions=7)
    assert "dimensions" in str(e.value)
    assert e.value.body["param"] == "dimensions"
    # The model's own width is accepted.
    assert len(client.embeddings.create(model=model, input="x", dimensions=576).data) == 1
    for bad in ({"input": []}, {"input": [1, "a"]}, {"input": "x", "encoding_format": "int8"},
                {"input": ""}, {"input": [99999999]}):
        status, body = http(base_url + "/v1/embeddings", json.dumps({"model": model, **bad}))
        assert status == 400, (bad, body)
        assert body["error"]["type"] == "invalid_request_error", body

def test_inputs_past_the_context(keyed_url, api_key, model):
    # The keyed server's context is 512 tokens.
    auth = {"Authorization": f"Bearer {api_key}"}
    long_text = "x " * 1000
    status, body = http(keyed_url + "/v1/embeddings",
                        json.dumps({"model": model, "input": long_text}), headers=auth)
    assert status == 400 and body["error"]["code"] == "context_length_exceeded", body
    assert "512" in body["error"]["message"]
    status, body = http(keyed_url + "/api/embed",
                        json.dumps({"model": model, "input": long_text, "truncate": False}),
                        headers=auth)
    assert status == 400 and "context length" in body["error"], body
    # Ollama truncates to the context by default.
    status, body = http(keyed_url + "/api/embed",
                        json.dumps({"model": model, "input": long_text}), headers=auth)
    assert status == 200 and len(body["embeddings"]) == 1, body
    assert body["prompt_eval_count"] == 512


def test_ollama_embed_and_legacy_embeddings(base_url, client, model):
    try:
        import ollama
    except ImportError:
        pytest.fail("the ollama client is missing: scripts/test.sh installs ollama==0.6.3")
    oc = ollama.Client(host=base_url)
    r = oc.embed(model=model, input=TEXTS)
    assert r.model == model
    assert len(r.embeddings) == 2
    assert r.prompt_eval_count > 0
    assert r.total_duration > 0
    openai_vectors = [d.embedding for d in client.embeddings.create(model=model, input=TEXTS).data]
    for o, v in zip(r.embeddings, openai_vectors):
        assert abs(norm(o) - 1.0) < 1e-4
        assert cosine(o, v) >= 0.99999
    one = oc.embed(model=model, input=TEXTS[0]).embeddings
    assert len(one) == 1 and cosine(one[0], openai_vectors[0]) >= 0.99999
    # The legacy endpoint returns the vector unnormalized, as Ollama does.
    legacy = oc.embeddings(model=model, prompt=TEXTS[0]).embedding
    assert abs(norm(legacy) - 1.0) > 1e-3
    assert cosine(legacy, openai_vectors[0]) >= 0.99999
    with pytest.raises(ollama.ResponseError) as e:
        oc.embed(model=model, input=[])
    assert e.value.status_code == 400 and "empty" in e.value.error
    # The client refuses an empty model name itself; the server too.
    status, body = http(base_url + "/api/embed", json.dumps({"input": "x"}))
    assert (status, body) == (400, {"error": "model is required"})
    status, body = http(base_url + "/api/embeddings", json.dumps({"model": model}))
    assert status == 400 and "error" in body, body


def test_embeddings_run_between_the_steps_of_a_generation(client, model):
    alone = [d.embedding for d in client.embeddings.create(model=model, input=TEXTS).data]
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count from one to twenty."}],
        max_tokens=48,
        temperature=0,
        stream=True,
    )
    chunks = iter(stream)
    next(chunks)
    during = [d.embedding for d in client.embeddings.create(model=model, input=TEXTS).data]
    rest = list(chunks)
    # Each row is computed alone whatever else the step holds: the same bits.
    assert during == alone
    assert rest[-1].choices[0].finish_reason in ("stop", "length")
