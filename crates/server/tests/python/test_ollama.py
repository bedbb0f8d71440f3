"""Ollama's API on `minfer serve`, with the official `ollama` Python
client: /api/chat and /api/generate (whole and streamed as NDJSON),
`format`, `options`, tools, thinking, the model endpoints and the errors."""

import datetime
import json
import os

import ollama
import pytest

from conftest import WEATHER, env
from test_openai_api import http, metric

ASK = [{"role": "user", "content": "Name three colours of the rainbow."}]
GREEDY = {"temperature": 0, "seed": 42, "num_predict": 24}


def client(url, **kw):
    return ollama.Client(host=url, timeout=300, **kw)


def check_final(r):
    """The counts and durations of a finished answer."""
    assert r.done is True
    assert r.done_reason in ("stop", "length")
    assert r.prompt_eval_count > 0 and r.eval_count > 0
    assert r.total_duration >= r.eval_duration > 0
    assert r.total_duration >= r.prompt_eval_duration > 0
    assert r.load_duration > 0
    datetime.datetime.fromisoformat(r.created_at.replace("Z", "+00:00")[:26] + "+00:00")


def joined(parts, field):
    """The streamed pieces of `field` joined, and the final line."""
    *pieces, last = parts
    assert all(p.done is False for p in pieces) and last.done is True
    text = "".join(field(p) or "" for p in parts)
    return text, last


def test_chat_streamed_pieces_join_to_the_whole_answer(base_url, model):
    c = client(base_url)
    r = c.chat(model=model, messages=ASK, options=GREEDY)
    assert r.model == model
    assert r.message.role == "assistant" and r.message.content.strip()
    check_final(r)
    parts = list(c.chat(model=model, messages=ASK, options=GREEDY, stream=True))
    assert len(parts) > 3
    text, last = joined(parts, lambda p: p.message.content)
    assert text == r.message.content
    assert last.message.content == ""
    assert (last.eval_count, last.done_reason) == (r.eval_count, r.done_reason)
    check_final(last)
    # The stream is NDJSON; Ollama streams unless told not to.
    status, body = http(
        base_url + "/api/chat",
        json.dumps({"model": model, "messages": ASK, "options": GREEDY}),
    )
    lines = [json.loads(line) for line in body.splitlines()]
    assert status == 200 and lines[-1]["done"] is True
    assert "".join(x["message"]["content"] for x in lines) == r.message.content


def test_generate_renders_one_user_turn_unless_raw(base_url, model):
    c = client(base_url)
    prompt = ASK[0]["content"]
    g = c.generate(model=model, prompt=prompt, options=GREEDY)
    check_final(g)
    as_chat = c.chat(model=model, messages=ASK, options=GREEDY)
    assert g.response == as_chat.message.content
    assert g.prompt_eval_count == as_chat.prompt_eval_count
    parts = list(c.generate(model=model, prompt=prompt, options=GREEDY, stream=True))
    text, last = joined(parts, lambda p: p.response)
    assert text == g.response and last.response == ""
    raw = c.generate(model=model, prompt="The capital of France is", raw=True, options=GREEDY)
    check_final(raw)
    assert raw.prompt_eval_count < 10 < g.prompt_eval_count
    # A system message goes before the turn, as in a chat.
    system = "Answer in French."
    s = c.generate(model=model, prompt=prompt, system=system, options=GREEDY)
    s_chat = c.chat(model=model, messages=[{"role": "system", "content": system}] + ASK, options=GREEDY)
    assert (s.response, s.prompt_eval_count) == (s_chat.message.content, s_chat.prompt_eval_count)
    assert s.response != g.response


def test_format_schema_constrains_the_answer(base_url, model):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "colours": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["name", "age", "colours"],
        "additionalProperties": False,
    }
    msg = [{"role": "user", "content": "Describe a person as JSON."}]
    r = client(base_url).chat(
        model=model, messages=msg, format=schema, options={"temperature": 0, "num_predict": 200}
    )
    assert r.done_reason == "stop", r
    v = json.loads(r.message.content)
    assert set(v) == {"name", "age", "colours"}
    assert isinstance(v["name"], str) and isinstance(v["age"], int)
    assert isinstance(v["colours"], list) and len(v["colours"]) <= 3
    assert all(isinstance(x, str) for x in v["colours"])
    g = client(base_url).generate(
        model=model, prompt="A JSON object:", format="json", raw=True,
        options={"temperature": 0, "num_predict": 200},
    )
    assert isinstance(json.loads(g.response), dict)


def test_options_limit_stop_and_are_checked(base_url, model):
    c = client(base_url)
    r = c.chat(model=model, messages=ASK, options={"temperature": 0, "num_predict": 5})
    assert (r.eval_count, r.done_reason) == (5, "length")
    full = c.chat(model=model, messages=ASK, options=GREEDY).message.content
    words = full.split()
    assert len(words) > 3, full
    stop = " " + words[2]
    cut = c.chat(model=model, messages=ASK, options={**GREEDY, "stop": [stop, "x1", "x2", "x3", "x4"]})
    assert cut.done_reason == "stop"
    assert stop not in cut.message.content and full.startswith(cut.message.content)
    # Runner options and unknown ones are ignored, as Ollama ignores them.
    same = c.chat(
        model=model, messages=ASK,
        options={**GREEDY, "num_ctx": 128, "num_gpu": 99, "no_such_option": True},
    )
    assert same.message.content == full
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model=model, messages=ASK, options={"temperature": "hot"})
    assert e.value.status_code == 400 and "temperature" in e.value.error


def test_logprobs_come_with_each_token(base_url, model):
    r = client(base_url).chat(
        model=model, messages=ASK, options=GREEDY, logprobs=True, top_logprobs=2
    )
    assert len(r.logprobs) == r.eval_count
    assert "".join(lp.token for lp in r.logprobs) == r.message.content
    for lp in r.logprobs:
        assert lp.logprob <= 0 and len(lp.top_logprobs) == 2
        # Greedy: the chosen token is the likeliest.
        assert lp.top_logprobs[0].logprob == pytest.approx(lp.logprob, abs=1e-4)


def test_tool_call_arguments_are_an_object_and_results_carry_on(tools_url, tools_model):
    c = client(tools_url)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    opts = {"temperature": 0, "num_predict": 64}
    r = c.chat(model=tools_model, messages=ask, tools=[WEATHER], options=opts)
    assert r.done_reason == "stop"
    (call,) = r.message.tool_calls
    assert call.function.name == "get_weather"
    assert isinstance(call.function.arguments, dict)
    assert "Paris" in call.function.arguments["city"]
    assert r.message.content == ""
    parts = list(c.chat(model=tools_model, messages=ask, tools=[WEATHER], options=opts, stream=True))
    calls = [tc for p in parts for tc in p.message.tool_calls or []]
    assert [(tc.function.name, tc.function.arguments) for tc in calls] == [
        (call.function.name, call.function.arguments)
    ]
    assert "".join(p.message.content for p in parts) == ""
    # The call (arguments as an object) and its result go back as Ollama's
    # clients send them; without tools the answer is text.
    history = ask + [
        r.message,
        {"role": "tool", "content": "Sunny and 24 degrees Celsius.", "tool_name": "get_weather"},
    ]
    second = c.chat(model=tools_model, messages=history, options=opts)
    alone = c.chat(model=tools_model, messages=ask, options={**opts, "num_predict": 1})
    assert second.prompt_eval_count > alone.prompt_eval_count + 20
    assert not second.message.tool_calls, second
    answer = second.message.content.lower()
    assert "24" in answer or "sunny" in answer, answer
    show = c.show(tools_model)
    assert "tools" in show.capabilities and "insert" in show.capabilities


def test_model_endpoints_describe_the_served_model(base_url, model):
    c = client(base_url)
    (m,) = c.list().models
    assert m.model == model + ":latest"
    assert m.size == os.path.getsize(env("MINFER_MODEL_PATH"))
    assert len(m.digest) == 64 and int(m.digest, 16) >= 0
    assert m.details.format == "gguf" and m.details.family == "llama"
    assert m.details.families == ["llama"]
    assert m.details.parameter_size.endswith("M")
    assert m.details.quantization_level == "Q4_1"
    assert m.modified_at.year >= 2024
    show = c.show(m.model)
    assert show.details.family == "llama"
    assert show.modelinfo["general.architecture"] == "llama"
    assert show.modelinfo["llama.context_length"] > 0
    assert show.modelinfo["general.parameter_count"] > 100_000_000
    assert show.modelinfo["tokenizer.ggml.tokens"] == []
    assert "tokenizer.chat_template" not in show.modelinfo
    assert "<|im_start|>" in show.template and "FROM " in show.modelfile
    assert "num_ctx" in show.parameters
    assert show.capabilities == ["completion"]
    (p,) = c.ps().models
    # As Ollama's, ps's size is the memory the model takes: its weights
    # and its cache, more than the file.
    assert p.model == m.model and p.digest == m.digest and p.size > m.size
    assert p.size_vram == 0
    assert p.expires_at > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=3650)
    assert p.context_length > 0
    status, v = http(base_url + "/api/version")
    assert status == 200 and v["version"][0].isdigit()
    # Clients probe the root, which also serves the chat page.
    assert http(base_url + "/", method="HEAD")[0] == 200
    assert "<html" in http(base_url + "/")[1].lower()


def test_empty_requests_load_the_model(base_url, model):
    c = client(base_url)
    g = c.generate(model=model)
    assert (g.done, g.done_reason, g.response, g.eval_count) == (True, "load", "", None)
    r = c.chat(model=model, messages=[])
    assert (r.done, r.done_reason, r.message.content) == (True, "load", "")


def test_thinking_is_asked_of_the_template(think_url, think_model, base_url, model):
    c = client(think_url)
    assert "thinking" in c.show(think_model).capabilities
    opts = {"temperature": 0, "num_predict": 4}
    default = c.chat(model=think_model, messages=ASK, options=opts)
    off = c.chat(model=think_model, messages=ASK, options=opts, think=False)
    # Qwen3's template closes an empty thinking block when told not to think.
    assert off.prompt_eval_count > default.prompt_eval_count
    with pytest.raises(ollama.ResponseError) as e:
        client(base_url).chat(model=model, messages=ASK, think=True)
    assert e.value.status_code == 400 and "does not support thinking" in e.value.error


def test_errors_are_ollama_shaped(keyed_url, api_key, model, base_url):
    keyed = client(keyed_url, headers={"Authorization": f"Bearer {api_key}"})
    with pytest.raises(ollama.ResponseError) as e:
        keyed.chat(model="no-such-model", messages=ASK)
    assert e.value.status_code == 404
    assert e.value.error == "model 'no-such-model' not found"
    with pytest.raises(ollama.ResponseError) as e:
        keyed.show("no-such-model")
    assert e.value.status_code == 404
    # The listed name (with Ollama's default tag) is the served model.
    r = keyed.generate(model=model + ":latest", prompt="Hi", options={"num_predict": 2})
    assert r.eval_count <= 2
    with pytest.raises(ollama.ResponseError) as e:
        client(keyed_url).list()
    assert e.value.status_code == 401 and isinstance(e.value.error, str)
    c = client(base_url)
    for call, status, word in [
        (lambda: c.chat(model=model, messages=[{"role": "user", "content": "x", "images": ["aGk="]}]), 400, "images"),
        (lambda: c.generate(model=model, prompt="x", images=["aGk="]), 400, "images"),
        (lambda: c.generate(model=model, prompt="x", template="{{ .Prompt }}"), 400, "template"),
        (lambda: c.generate(model=model, prompt="x", context=[1, 2]), 400, "context"),
        (lambda: c.generate(model=model, prompt="x", raw=True, system="s"), 400, "raw"),
        # A file served by its path is not something the store can pull.
        (lambda: c.pull(model), 404, "known model"),
    ]:
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == status and word in e.value.error, e.value
    for body, word in [
        ("{not json", "JSON"),
        (json.dumps({"model": model, "messages": ASK, "format": "yaml"}), "format"),
        (json.dumps({"messages": ASK}), "model is required"),
    ]:
        status, r = http(base_url + "/api/chat", body)
        assert status == 400 and word in r["error"], r
    assert metric(base_url, 'minfer_requests_total{endpoint="/api/chat",status="200"}') >= 1
    assert metric(base_url, 'minfer_requests_total{endpoint="/api/chat",status="400"}') >= 1


def test_suffix_makes_a_fill_in_the_middle_prompt(tools_url, tools_model):
    c = client(tools_url)
    opts = {"temperature": 0, "num_predict": 16}
    prefix = "def add(a, b):\n"
    fim = c.generate(model=tools_model, prompt=prefix, suffix="\n\nprint(add(1, 2))\n", options=opts)
    check_final(fim)
    assert "return" in fim.response, fim.response
    plain = c.generate(model=tools_model, prompt=prefix, raw=True, options=opts)
    assert fim.prompt_eval_count > plain.prompt_eval_count + 5
    with pytest.raises(ollama.ResponseError) as e:
        c.generate(model=tools_model, prompt=prefix, suffix="x", system="s")
    assert e.value.status_code == 400 and "system" in e.value.error


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    """A server of many models: a --models-dir holding the test model as
    `smol.gguf`, over a store of its own; nothing loaded at start."""
    import subprocess

    root = tmp_path_factory.mktemp("store-server")
    models = root / "dir"
    models.mkdir()
    (models / "smol.gguf").symlink_to(env("MINFER_MODEL_PATH"))
    cmd = [env("MINFER_BIN"), "serve", "--models-dir", str(models), "--port", "0",
           "-t", "2", "-c", "512", "--np", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "MINFER_HOME": str(root / "home")})
    line = proc.stdout.readline()
    assert "listening on http://" in line, line
    yield "http://" + line.split("http://")[1].split()[0]
    proc.terminate()
    proc.wait(timeout=30)


def test_copy_pull_delete_and_ps_manage_the_models(store_url):
    c = client(store_url)
    assert [m.model for m in c.list().models] == ["smol:latest"]
    assert c.ps().models == []
    c.copy("smol", "mine")
    assert sorted(m.model for m in c.list().models) == ["mine:latest", "smol:latest"]
    g = c.generate(model="mine", prompt="Hi", options={"num_predict": 2, "temperature": 0})
    assert g.done and g.model == "mine"
    (p,) = c.ps().models
    assert p.model == "mine:latest" and p.size > 0
    assert c.delete("mine").status == "success"
    assert [m.model for m in c.list().models] == ["smol:latest"]
    assert c.ps().models == []
    with pytest.raises(ollama.ResponseError) as e:
        c.delete("mine")
    assert e.value.status_code == 404
    # A file of --models-dir is the user's: it stays.
    with pytest.raises(ollama.ResponseError) as e:
        c.delete("smol")
    assert e.value.status_code == 400
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("no-such-model")
    assert e.value.status_code == 404 and "known model" in e.value.error
    # keep_alive 0: answered, then unloaded.
    c.generate(model="smol", prompt="Hi", keep_alive=0, options={"num_predict": 2})
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=10)
    while c.ps().models and datetime.datetime.now() < deadline:
        pass
    assert c.ps().models == []
