"""`minfer serve` against the official `openai` client: the shapes, the
sampling fields, the errors and the operational endpoints."""

import asyncio
import json
import re
import time
import urllib.error
import urllib.request

import openai
import pytest

QUESTION = [{"role": "user", "content": "Name three colours of the rainbow."}]


def chat(client, model, **kw):
    kw.setdefault("messages", QUESTION)
    kw.setdefault("max_tokens", 24)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model=model, **kw)


def http(url, body=None, method=None, headers=None):
    """A raw request: (status, parsed JSON or text)."""
    data = body if isinstance(body, (bytes, type(None))) else body.encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def metric(base_url, name):
    _, text = http(base_url + "/metrics")
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def test_models_lists_the_served_model(client, model):
    ids = [m.id for m in client.models.list().data]
    assert ids == [model]
    assert client.models.retrieve(model).id == model


def test_chat_sync(client, model):
    r = chat(client, model)
    c = r.choices[0]
    assert r.object == "chat.completion"
    assert r.model == model
    assert r.system_fingerprint.startswith("minfer-")
    assert c.message.role == "assistant"
    assert c.message.content.strip()
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    if c.finish_reason == "length":
        assert u.completion_tokens == 24


def test_chat_stream_matches_sync_and_reports_usage(client, model):
    whole = chat(client, model, seed=3)
    chunks = list(chat(client, model, seed=3, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    # As llama-server: the opening chunk has no text (null, not "").
    assert chunks[0].choices[0].delta.content is None
    assert all(ch.system_fingerprint.startswith("minfer-") for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    # The usage chunk comes last, without choices; the others carry null.
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(ch.usage is None for ch in chunks[:-1])
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stream_without_include_usage_has_no_usage(client, model):
    chunks = list(chat(client, model, max_tokens=4, stream=True))
    assert all(getattr(ch, "usage", None) is None for ch in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_async_chat_and_stream(base_url, model):
    async def main():
        client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
        whole = await client.chat.completions.create(model=model, messages=QUESTION, max_tokens=12, temperature=0)
        stream = await client.chat.completions.create(
            model=model, messages=QUESTION, max_tokens=12, temperature=0, stream=True
        )
        parts = [ch.choices[0].delta.content or "" async for ch in stream if ch.choices]
        several = await asyncio.gather(
            *[
                client.chat.completions.create(model=model, messages=QUESTION, max_tokens=12, temperature=0)
                for _ in range(3)
            ]
        )
        await client.close()
        return whole, "".join(parts), several

    whole, streamed, several = asyncio.run(main())
    assert streamed == whole.choices[0].message.content
    assert all(r.choices[0].message.content == streamed for r in several)


def test_completions_usage_equals_minfer_tokenize(client, model, minfer_tokenize):
    prompt = "The quick brown fox jumps over"
    r = client.completions.create(model=model, prompt=prompt, max_tokens=7, temperature=0)
    assert r.object == "text_completion"
    assert r.usage.prompt_tokens == len(minfer_tokenize(prompt))
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 7
    assert r.choices[0].text
    streamed = client.completions.create(model=model, prompt=prompt, max_tokens=7, temperature=0, stream=True)
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == r.choices[0].text


def test_max_completion_tokens_and_default_completions_limit(client, model):
    r = chat(client, model, max_tokens=None, max_completion_tokens=3)
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    r = client.completions.create(model=model, prompt="Once upon a time", temperature=0)
    assert r.usage.completion_tokens <= 16


def test_seed_and_temperature_zero_are_deterministic(client, model):
    greedy = {chat(client, model, temperature=0, seed=s).choices[0].message.content for s in (1, 2, 1)}
    assert len(greedy) == 1
    a = chat(client, model, temperature=1.0, seed=42, max_tokens=32).choices[0].message.content
    b = chat(client, model, temperature=1.0, seed=42, max_tokens=32).choices[0].message.content
    assert a == b


def tokens_of(base_url, text):
    status, r = http(base_url + "/tokenize", json.dumps({"content": text, "add_special": False}), method="POST")
    assert status == 200, r
    return r["tokens"]


def text_of(base_url, tokens):
    status, r = http(base_url + "/detokenize", json.dumps({"tokens": tokens}), method="POST")
    assert status == 200, r
    return r["content"]


def test_logit_bias_steers_the_first_token(base_url, client, model):
    first = chat(client, model, max_tokens=1).choices[0].message.content
    ids = tokens_of(base_url, first)
    assert len(ids) == 1, (first, ids)
    # A -100 bias on the greedy answer's first token removes it.
    banned = chat(client, model, max_tokens=1, logit_bias={str(ids[0]): -100})
    assert banned.choices[0].message.content != first
    streamed = "".join(
        ch.choices[0].delta.content or ""
        for ch in chat(client, model, max_tokens=1, logit_bias={str(ids[0]): -100}, stream=True)
        if ch.choices
    )
    assert streamed == banned.choices[0].message.content
    # A +100 bias on an unlikely token makes it the answer, on both endpoints.
    (banana,) = tokens_of(base_url, " banana")
    word = text_of(base_url, [banana])
    forced = chat(client, model, max_tokens=1, logit_bias={str(banana): 100})
    assert forced.choices[0].message.content == word
    r = client.completions.create(
        model=model, prompt="The sky is", max_tokens=1, temperature=0, logit_bias={str(banana): 100}
    )
    assert r.choices[0].text == word
    # Sampling (temperature 1) sees the bias too.
    sampled = chat(client, model, max_tokens=2, temperature=1.0, seed=9, logit_bias={str(banana): 100})
    assert sampled.choices[0].message.content == word * 2


def test_frequency_and_presence_penalties_change_and_repeat(client, model):
    plain = chat(client, model, max_tokens=48).choices[0].message.content
    freq = chat(client, model, max_tokens=48, frequency_penalty=2.0).choices[0].message.content
    assert freq != plain
    assert chat(client, model, max_tokens=48, frequency_penalty=2.0).choices[0].message.content == freq
    pres = chat(client, model, max_tokens=48, presence_penalty=2.0).choices[0].message.content
    assert pres != plain
    # Zero penalties are the default chain.
    zero = chat(client, model, max_tokens=48, frequency_penalty=0, presence_penalty=0)
    assert zero.choices[0].message.content == plain
    # Sampled with a seed: the same seed, the same text.
    kw = dict(temperature=1.0, seed=42, max_tokens=32, frequency_penalty=1.0, presence_penalty=-0.5)
    a = chat(client, model, **kw).choices[0].message.content
    b = chat(client, model, **kw).choices[0].message.content
    assert a == b


def test_chat_logprobs_sync_and_stream(client, model):
    r = chat(client, model, max_tokens=12, logprobs=True, top_logprobs=3)
    c = r.choices[0]
    content = c.logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(e.token for e in content) == c.message.content
    for e in content:
        assert e.logprob <= 0
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert e.top_logprobs[0].token == e.token
        assert e.top_logprobs[0].logprob == e.logprob
    # Without top_logprobs: the chosen tokens only.
    r0 = chat(client, model, max_tokens=12, logprobs=True)
    assert [e.token for e in r0.choices[0].logprobs.content] == [e.token for e in content]
    assert all(e.top_logprobs == [] for e in r0.choices[0].logprobs.content)
    # Not asked for: null.
    assert chat(client, model, max_tokens=4).choices[0].logprobs is None
    # Streamed: the same entries, spread over the chunks.
    chunks = list(chat(client, model, max_tokens=12, logprobs=True, top_logprobs=3, stream=True))
    streamed = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in content]
    assert [len(e.top_logprobs) for e in streamed] == [3] * len(content)
    # The legacy completions form takes at most 5 alternatives.
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="Hi", max_tokens=2, logprobs=7)
    assert e.value.param == "logprobs"


def test_stop_strings_cut_the_answer(client, model):
    full = chat(client, model, max_tokens=32).choices[0].message.content
    words = full.split()
    assert len(words) >= 3, full
    stop = words[2]
    cut = full[: full.index(stop)]
    for stops in (stop, [stop, "zzzz-never"]):
        r = chat(client, model, max_tokens=32, stop=stops)
        assert r.choices[0].message.content == cut
        assert r.choices[0].finish_reason == "stop"
    streamed = "".join(
        ch.choices[0].delta.content or "" for ch in chat(client, model, max_tokens=32, stop=stop, stream=True) if ch.choices
    )
    assert streamed == cut


def test_errors_are_the_clients_own_exceptions(client, model):
    # Without --strict-model any name is the one model served.
    assert chat(client, "no-such-model", max_tokens=2).model == model
    cases = [
        ({"n": 9}, "n"),
        ({"logit_bias": {"42": 500}}, "logit_bias"),
        ({"logit_bias": {"forty-two": 5}}, "logit_bias"),
        ({"logit_bias": {str(10**9): 5}}, "logit_bias"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -3}, "frequency_penalty"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"response_format": {"type": "json_schema"}}, "response_format"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        ({"temperature": 5}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ]
    for kw, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            chat(client, model, **kw)
        assert e.value.status_code == 400
        assert e.value.param == param, (kw, e.value.body)
        assert param in e.value.message
    with pytest.raises(openai.BadRequestError):
        chat(client, model, messages=[])
    with pytest.raises(openai.BadRequestError):
        chat(client, model, messages=[{"role": "wizard", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        chat(client, model, extra_body={"temperature": "hot"})
    # A schema or grammar that does not compile is the client's error too,
    # also when streaming (it is checked before the stream starts).
    for stream in [False, True]:
        with pytest.raises(openai.BadRequestError) as e:
            bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}}}
            r = chat(client, model, stream=stream, response_format=bad)
            if stream:
                list(r)
        assert e.value.status_code == 400
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, model, extra_body={"grammar": "root ::= (\"a\""})
    assert "GBNF" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="word " * 9000, max_tokens=1)
    assert e.value.code == "context_length_exceeded"


def test_malformed_bodies_get_openai_shaped_4xx(base_url, model):
    url = base_url + "/v1/chat/completions"
    for body in [b"{not json", b"[]", json.dumps({"model": model}).encode(), b""]:
        status, r = http(url, body, method="POST")
        assert status == 400, (body, r)
        assert set(r["error"]) == {"message", "type", "param", "code"}
        assert r["error"]["type"] == "invalid_request_error"
    status, r = http(url, b"x" * (9 << 20), method="POST")
    assert status == 413 and "limit" in r["error"]["message"]
    status, r = http(base_url + "/v1/nowhere")
    assert status == 404 and "error" in r
    status, r = http(url)
    assert status == 405 and "error" in r
    # The server is unharmed.
    assert http(base_url + "/health")[0] == 200


def test_health_metrics_tokenize_detokenize(base_url, client, model, minfer_tokenize):
    assert http(base_url + "/health") == (200, {"status": "ok"})
    chat(client, model, max_tokens=2)
    status, text = http(base_url + "/metrics")
    assert status == 200
    for name in [
        "minfer_requests_total",
        "minfer_prompt_tokens_total",
        "minfer_completion_tokens_total",
        "minfer_prompt_tokens_cached_total",
        "minfer_requests_active",
        "minfer_requests_queued",
        "minfer_kv_cells_free",
        "minfer_step_seconds_bucket",
    ]:
        assert name in text, name
    assert metric(base_url, "minfer_completion_tokens_total") >= 2
    text = "Hello, world! <|im_start|>"
    status, r = http(base_url + "/tokenize", json.dumps({"content": text}), method="POST")
    assert status == 200 and r["tokens"] == minfer_tokenize(text)
    status, r = http(base_url + "/detokenize", json.dumps({"tokens": r["tokens"]}), method="POST")
    assert status == 200 and text in r["content"]
    status, r = http(base_url + "/detokenize", json.dumps({"tokens": [10**9]}), method="POST")
    assert status == 400


def test_prefix_cache_serves_a_repeated_conversation(base_url, client, model):
    system = {"role": "system", "content": "You are a terse assistant. " * 20}
    before = metric(base_url, "minfer_prompt_tokens_cached_total")
    for q in ("What is 2+2?", "What is 3+3?"):
        chat(client, model, messages=[system, {"role": "user", "content": q}], max_tokens=4)
    assert metric(base_url, "minfer_prompt_tokens_cached_total") - before >= 100


def test_client_disconnect_frees_its_sequence(base_url, client, model):
    before = metric(base_url, "minfer_disconnects_total")
    # The answer must still be running when the client leaves: with its end
    # tokens banned it runs to max_tokens, far beyond the four chunks read.
    # (A short answer could finish, and be counted as finished, first.)
    status, body = http(base_url + "/tokenize", json.dumps({"content": "<|im_end|><|endoftext|>", "add_special": False}))
    assert status == 200
    ban = {str(t): -100 for t in body["tokens"]}
    stream = chat(client, model, max_tokens=1500, temperature=0.8, stream=True, logit_bias=ban)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if metric(base_url, "minfer_requests_active") == 0 and metric(base_url, "minfer_disconnects_total") > before:
            break
        time.sleep(0.05)
    assert metric(base_url, "minfer_requests_active") == 0
    assert metric(base_url, "minfer_sequences_live") == 0
    assert metric(base_url, "minfer_disconnects_total") == before + 1


def test_api_key(keyed_url, api_key, model):
    good = openai.OpenAI(base_url=keyed_url + "/v1", api_key=api_key, max_retries=0)
    assert [m.id for m in good.models.list().data] == [model]
    bad = openai.OpenAI(base_url=keyed_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.models.list()
    assert e.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        chat(bad, model)
    for path in ("/metrics", "/v1/models"):
        assert http(keyed_url + path)[0] == 401
    assert http(keyed_url + "/health")[0] == 200
    # Anthropic's clients send the key as x-api-key.
    assert http(keyed_url + "/v1/models", headers={"x-api-key": api_key})[0] == 200
    # This server runs with --strict-model: another name is a 404.
    with pytest.raises(openai.NotFoundError) as e:
        chat(good, "no-such-model")
    assert e.value.status_code == 404 and e.value.code == "model_not_found"


def test_full_queue_gets_503(keyed_url, api_key, model):
    """-np 2 --queue 1: with two running and one waiting, a fourth is refused."""
    client = openai.OpenAI(base_url=keyed_url + "/v1", api_key=api_key, max_retries=0, timeout=120)
    streams = []
    for _ in range(3):
        s = chat(client, model, max_tokens=200, stream=True)
        streams.append(s)
    try:
        time.sleep(0.2)
        with pytest.raises(openai.InternalServerError) as e:
            chat(client, model, max_tokens=2)
        assert e.value.status_code == 503
        assert e.value.code == "queue_full"
    finally:
        for s in streams:
            s.close()
    # Once they are gone the server takes requests again.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            chat(client, model, max_tokens=2)
            break
        except openai.InternalServerError:
            time.sleep(0.1)
    else:
        pytest.fail("the queue did not drain after its clients left")


def test_prompts_that_do_not_fit_together_take_turns(keyed_url, api_key, model):
    """--n-ctx 512: two prompts of ~300 tokens cannot share the cache, so
    one waits for the other instead of both ending early."""
    import concurrent.futures

    client = openai.OpenAI(base_url=keyed_url + "/v1", api_key=api_key, max_retries=0, timeout=300)

    def complete(i):
        return client.completions.create(
            model=model, prompt=f"{i} " + "stone " * 290, max_tokens=40, temperature=0
        )

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(complete, [1, 2]))
    for r in results:
        assert r.usage.prompt_tokens > 256
        assert r.usage.prompt_tokens + 40 < 512
        assert r.usage.completion_tokens == 40, r
        assert r.choices[0].finish_reason == "length"


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def check_person(text):
    v = json.loads(text)
    assert set(v) <= {"name", "age", "pets"} and {"name", "age"} <= set(v), v
    assert isinstance(v["name"], str) and len(v["name"]) <= 24, v
    assert isinstance(v["age"], int) and 0 <= v["age"] <= 120, v
    assert all(p in ("cat", "dog", "fish") for p in v.get("pets", [])) and len(v.get("pets", [])) <= 3, v


def test_response_format_json_schema_and_json_object(client, model):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    for seed in range(3):
        r = chat(client, model, seed=seed, temperature=1.0, max_tokens=120,
                 messages=[{"role": "user", "content": "Describe a person as JSON."}], response_format=fmt)
        assert r.choices[0].finish_reason == "stop"
        check_person(r.choices[0].message.content)
    # Streamed, the pieces join into the same kind of document.
    parts = chat(client, model, seed=5, temperature=1.0, max_tokens=120, stream=True,
                 messages=[{"role": "user", "content": "A person, as JSON"}], response_format=fmt)
    check_person("".join(c.choices[0].delta.content or "" for c in parts if c.choices))
    r = chat(client, model, seed=1, max_tokens=120, response_format={"type": "json_object"},
             messages=[{"role": "user", "content": "Give me a JSON object with a colour."}])
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    # llama-server's own fields: a GBNF grammar and extra sampler settings.
    r = chat(client, model, max_tokens=10, extra_body={"grammar": 'root ::= "yes" | "no"', "top_k": 5, "min_p": 0.1,
             "dry_multiplier": 0.8, "xtc_probability": 0.5, "samplers": ["penalties", "dry", "top_k", "xtc", "temperature"]},
             messages=[{"role": "user", "content": "Is the sky blue?"}])
    assert r.choices[0].message.content in ("yes", "no")
