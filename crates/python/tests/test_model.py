"""minfer.Model: the same tokens as the CLI, streaming, threads that
share forward passes, errors as exceptions, cancellation and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import minfer

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a land far away,",
    "The three primary colours are",
]


def test_greedy_text_is_the_clis(smollm, smollm_path, minfer_bin):
    got = smollm.generate(PROMPTS[0], max_tokens=12, temperature=0)
    cli = subprocess.run(
        [minfer_bin, "run", smollm_path, PROMPTS[0], "--no-template", "-n", "12", "--temp", "0",
         "-c", "2048"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert got and cli.strip().endswith(got.strip()), (got, cli)


def test_stream_pieces_make_the_whole(smollm):
    whole = smollm.chat("Name two fruits.", max_tokens=20, temperature=0)
    pieces = list(smollm.chat("Name two fruits.", max_tokens=20, temperature=0, stream=True))
    assert len(pieces) > 3
    assert "".join(pieces) == whole


def test_threads_at_once_give_what_each_gives_alone(smollm):
    alone = [smollm.generate(p, max_tokens=16, temperature=0) for p in PROMPTS]
    together = [None] * len(PROMPTS)

    def run(i):
        together[i] = smollm.generate(PROMPTS[i], max_tokens=16, temperature=0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone
    # They ran in one batch: the server's metrics saw more than one at once.
    props = smollm.request("/props", method="GET")
    assert props["total_slots"] == 4


def test_tokens_round_trip_and_embeddings(smollm):
    ids = smollm.tokenize("Hello, world!", add_special=False)
    assert ids and all(isinstance(i, int) for i in ids)
    assert smollm.detokenize(ids) == "Hello, world!"
    v = smollm.embed("Hello")
    vs = smollm.embed(["Hello", "Bye"])
    assert len(v) > 10 and len(vs) == 2 and vs[0] == v
    assert abs(sum(x * x for x in v) - 1.0) < 1e-3


def test_schema_and_grammar_hold(smollm):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    text = smollm.chat("Give a number.", max_tokens=32, temperature=0,
                       response_format={"type": "json_schema",
                                        "json_schema": {"name": "x", "schema": schema}})
    assert isinstance(json.loads(text)["n"], int)
    out = smollm.generate("Answer:", max_tokens=8, grammar='root ::= "yes" | "no"')
    assert out in ("yes", "no")


def test_errors_are_exceptions(smollm, tmp_path):
    with pytest.raises(minfer.InvalidRequestError) as e:
        smollm.chat("x", max_tokens=-5)
    assert e.value.status == 400 and isinstance(e.value, ValueError)
    with pytest.raises(minfer.APIError) as e:
        smollm.generate("word " * 3000, max_tokens=4)
    assert e.value.code == "context_length_exceeded"
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00trunc")
    with pytest.raises(minfer.MinferError) as e:
        minfer.Model(str(bad))
    assert "bad.gguf" in str(e.value)
    with pytest.raises(ValueError):
        minfer.Model(str(bad), n_ctx=0)
    # The model still serves.
    assert smollm.generate(PROMPTS[0], max_tokens=2, temperature=0)


def test_closing_a_stream_cancels_it(smollm):
    it = smollm.generate(PROMPTS[2], max_tokens=2000, temperature=0, stream=True)
    next(it)
    t = time.monotonic()
    it.close()
    # Its place is free at once: four more run together.
    assert smollm.generate(PROMPTS[1], max_tokens=4, temperature=0)
    assert time.monotonic() - t < 10


def test_ctrl_c_interrupts_a_generation(smollm_path, tmp_path):
    script = textwrap.dedent(f"""
        import minfer, sys, time
        m = minfer.Model({smollm_path!r}, n_ctx=4096)
        print("ready", flush=True)
        t = time.monotonic()
        try:
            m.generate("Count from one to a thousand:", max_tokens=3000, temperature=0)
        except KeyboardInterrupt:
            print(f"interrupted {{time.monotonic() - t:.2f}}", flush=True)
            sys.exit(0)
        print("finished", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert out.startswith("interrupted"), out
    # Within moments of the signal, not when the answer would have ended.
    assert float(out.split()[1]) < 6.0, out
    assert p.returncode == 0


def test_three_lines_stream_an_answer(smollm_path):
    script = (
        "import minfer\n"
        f"m = minfer.Model({smollm_path!r})\n"
        "for p in m.chat('Say hello.', stream=True, max_tokens=12): print(p, end='', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip()) > 0


def test_chat_prefills_only_the_new_message_and_saves(smollm, tmp_path):
    chat = minfer.Chat(smollm, system="You are brief.", max_tokens=16, temperature=0)
    first = chat.send("Name a colour.")
    turn1 = chat.usage
    second = "".join(chat.send("And another?", stream=True))
    turn2 = chat.usage
    assert first and second
    assert [m["role"] for m in chat.messages] == ["system", "user", "assistant", "user", "assistant"]
    # The first turn's prompt and answer were cached; only the new message
    # (and the template's turn marks) were computed.
    cached = turn2["prompt_tokens_details"]["cached_tokens"]
    assert cached >= turn1["prompt_tokens"], (turn1, turn2)
    assert turn2["prompt_tokens"] - cached < 20, turn2
    path = tmp_path / "chat.json"
    chat.save(path)
    again = minfer.Chat.load(smollm, path)
    assert again.messages == chat.messages and again.fields == chat.fields
    # The same next turn, from the saved conversation or the live one.
    assert again.send("One more?") == chat.send("One more?")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "minfer-chat/1", "messages": 3}')
    with pytest.raises(minfer.MinferError, match="not a saved minfer chat"):
        minfer.Chat.load(smollm, bad)
    bad.write_text("{trunc")
    with pytest.raises(minfer.MinferError):
        minfer.Chat.load(smollm, bad)
