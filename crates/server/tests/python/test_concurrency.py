"""Batch invariance end to end: 16 streaming clients at once get exactly
the answers they get alone."""

import concurrent.futures

TOPICS = [
    "cats", "the sea", "bread", "winter", "trains", "music", "gardens", "rain",
    "mountains", "coffee", "libraries", "bicycles", "the moon", "bees", "rivers", "clocks",
]


def ask(client, model, topic):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": f"Write one sentence about {topic}."}],
        max_tokens=32,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, finish = [], None, None
    for ch in stream:
        if ch.choices:
            text.append(ch.choices[0].delta.content or "")
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = (ch.usage.prompt_tokens, ch.usage.completion_tokens)
    return "".join(text), usage, finish


def test_sixteen_concurrent_streams_match_their_solo_answers(client, model):
    alone = {t: ask(client, model, t) for t in TOPICS}
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        futures = {t: pool.submit(ask, client, model, t) for t in TOPICS}
        together = {t: f.result(timeout=300) for t, f in futures.items()}
    for t in TOPICS:
        assert together[t] == alone[t], t
        assert alone[t][0], t
    # Different prompts gave different answers: nothing was mixed up.
    assert len({a[0] for a in alone.values()}) > 8
