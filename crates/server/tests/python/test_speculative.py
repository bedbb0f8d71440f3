"""Speculative decoding in `minfer serve`: answers are exactly those of a
server without it.

The keyed server runs SmolLM2 with itself as the draft model, checking up
to four guesses every step (`--draft ... --spec-fixed --draft-max 4`) and
prompt lookup; the open server runs the same model with speculation
turned off (`--lookup 0`; `serve` looks up by default).
The tools server (Qwen2.5-Coder-0.5B) runs with adaptive prompt lookup, so
every test of tools, grammars and `n > 1` there runs with speculation on."""

import concurrent.futures
import re
import urllib.request

import openai
import pytest


def keyed_client(keyed_url, api_key):
    return openai.OpenAI(base_url=keyed_url + "/v1", api_key=api_key, max_retries=0, timeout=120)


PROMPTS = [
    "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.",
    "Write a Python function that returns the squares of a list of numbers.",
    "Tell me a short story about a fox.",
]


def answer(c, model, prompt, **kw):
    r = c.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=48, **kw)
    return r.choices[0].message.content, r.choices[0].finish_reason, r.usage.completion_tokens


def metric(url, key, name):
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {key}"})
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_answers_equal_the_plain_server(client, keyed_url, api_key, model, prompt):
    plain = answer(client, model, prompt, temperature=0)
    spec = answer(keyed_client(keyed_url, api_key), model, prompt, temperature=0)
    assert spec == plain


@pytest.mark.parametrize("seed", [1, 2])
def test_seeded_answers_equal_the_plain_server(client, keyed_url, api_key, model, seed):
    kw = dict(temperature=0.9, top_p=0.95, seed=seed)
    plain = answer(client, model, PROMPTS[2], **kw)
    spec = answer(keyed_client(keyed_url, api_key), model, PROMPTS[2], **kw)
    assert spec == plain


def test_streamed_and_concurrent_answers_equal_the_plain_server(client, keyed_url, api_key, model):
    want = [answer(client, model, p, temperature=0)[0] for p in PROMPTS[:2]]
    kc = keyed_client(keyed_url, api_key)

    def streamed(prompt):
        s = kc.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=48,
            temperature=0, stream=True)
        return "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)

    # Two at once: the keyed server's two slots decode together.
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        got = list(ex.map(streamed, PROMPTS[:2]))
    assert got == want


def test_metrics_count_the_guesses(keyed_url, api_key, model):
    before = metric(keyed_url, api_key, "llamacpp:spec_decode_num_draft_tokens_total")
    answer(keyed_client(keyed_url, api_key), model, PROMPTS[0], temperature=0)
    drafted = metric(keyed_url, api_key, "llamacpp:spec_decode_num_draft_tokens_total")
    accepted = metric(keyed_url, api_key, "vllm:spec_decode_num_accepted_tokens_total")
    checks = metric(keyed_url, api_key, "minfer:spec_decode_num_drafts_total")
    assert drafted > before
    assert 0 < accepted <= drafted
    assert 0 < checks <= drafted


def test_a_server_without_speculation_counts_none(base_url, model):
    text = urllib.request.urlopen(base_url + "/metrics", timeout=30).read().decode()
    assert "vllm:spec_decode_num_draft_tokens_total 0\n" in text
