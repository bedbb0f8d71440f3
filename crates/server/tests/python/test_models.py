"""Many models in one session, as the issue's user does it: `minfer serve`
with no argument over a store holding three models (Qwen2.5-Coder-0.5B,
the default, loaded at start; SmolLM2-135M; Gemma 3 270M), used one after
another by the official openai and ollama clients, then unloaded with
Ollama's `keep_alive: 0`, the server's memory going back down.

The load, switch and unload times and the resident memory are written as
JSON to MINFER_MODELS_SUMMARY (the Rust harness prints them).
"""

import json
import os
import subprocess
import time

import ollama
import openai
import pytest

from conftest import env

FILES = {
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "smollm2-135m-instruct": "smollm2-135m-instruct-q4_1.gguf",
    "gemma-3-270m": "gemma-3-270m-q4_k_m.gguf",
}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """`minfer serve` with no argument over a store of the three models
    (links to the test models; nothing is pulled)."""
    home = tmp_path_factory.mktemp("three-models")
    store = home / "models"
    store.mkdir()
    source = env("MINFER_MODELS_DIR")
    for file in FILES.values():
        (store / file).symlink_to(os.path.join(source, file))
        sidecar = os.path.join(source, file + ".sha256")
        if os.path.exists(sidecar):
            (store / (file + ".sha256")).symlink_to(sidecar)
    cmd = [env("MINFER_BIN"), "serve", "--port", "0", "-t", "2", "-c", "2048", "--np", "1"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "MINFER_HOME": str(home),
                                 "MINFER_PYTHON": "/nonexistent/no-pulls-here"})
    line = proc.stdout.readline()
    assert "with model qwen2.5-coder-0.5b-instruct" in line, line
    ready = time.monotonic() - started
    yield "http://" + line.split("http://")[1].split()[0], proc.pid, ready
    proc.terminate()
    proc.wait(timeout=30)


def test_three_models_one_after_another(session):
    url, pid, ready = session
    figures = {"start_with_default_s": round(ready, 2), "rss_kib": {}}
    oa = openai.OpenAI(base_url=url + "/v1", api_key="none")
    ol = ollama.Client(host=url)
    assert sorted(m.id for m in oa.models.list().data) == sorted(FILES)
    figures["rss_kib"]["default_loaded"] = rss_kib(pid)

    ask = [{"role": "user", "content": "Name one colour."}]
    timings = {}
    for name in ["qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct", "gemma-3-270m"]:
        t = time.monotonic()
        if name == "gemma-3-270m":  # a base model: no chat template
            r = oa.completions.create(model=name, prompt="The sky is", max_tokens=4, temperature=0)
            assert r.model == name and r.choices[0].text
        else:
            r = oa.chat.completions.create(model=name, messages=ask, max_tokens=4, temperature=0)
            assert r.model == name and r.choices[0].message.content
        timings[name] = round(time.monotonic() - t, 3)
    figures["first_request_s"] = timings
    figures["rss_kib"]["three_loaded"] = rss_kib(pid)
    loaded = {m.model: m for m in ol.ps().models}
    assert sorted(loaded) == sorted(n + ":latest" for n in FILES)
    assert all(m.size > 0 and m.size_vram == 0 for m in loaded.values())

    # A switch back to a loaded model costs no load.
    t = time.monotonic()
    ol.chat(model="smollm2-135m-instruct", messages=ask, options={"num_predict": 4, "temperature": 0})
    figures["switch_to_loaded_s"] = round(time.monotonic() - t, 3)

    # Ollama's unload: an empty request with keep_alive 0.
    for name in FILES:
        t = time.monotonic()
        r = ol.generate(model=name, keep_alive=0)
        assert r.done_reason == "unload"
        figures.setdefault("unload_s", {})[name] = round(time.monotonic() - t, 3)
    deadline = time.monotonic() + 10
    while ol.ps().models and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ol.ps().models == []
    time.sleep(0.5)
    figures["rss_kib"]["none_loaded"] = rss_kib(pid)
    assert {m["status"]["value"] for m in
            oa.models.list().model_dump()["data"]} == {"unloaded"}
    # The default model unloaded is not a server that is loading: a
    # router's health check keeps it in.
    import urllib.request
    with urllib.request.urlopen(url + "/health") as h:
        assert h.status == 200
    # Back down: at most a tenth of what the three models took.
    r = figures["rss_kib"]
    assert r["none_loaded"] < r["three_loaded"] / 10, r
    t = time.monotonic()
    oa.chat.completions.create(model="smollm2-135m-instruct", messages=ask, max_tokens=2)
    figures["reload_smollm2_s"] = round(time.monotonic() - t, 3)
    out = os.environ.get("MINFER_MODELS_SUMMARY")
    if out:
        with open(out, "w") as f:
            json.dump(figures, f)
