"""Every request body that a real client sent (recorded through
scripts/agents/record_proxy.py, in crates/server/tests/fixtures/clients)
is replayed against the tools server, with the same path, query and
client headers. Only the token limit is lowered, so each answer is short.

A body must be answered: 200, or, for the agents' prompts of 6k to 17k
tokens that this test server's 4096-token context cannot hold, the
context-length error, which comes only after the body was parsed, its
tools and schemas compiled into the call grammar and the prompt rendered
and tokenized. Any other 4xx is what a client on its defaults would get.
"""

import json
import pathlib

import httpx
import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "clients"
RECORDINGS = sorted(FIXTURES.glob("*.jsonl"))
# Headers the client sent that describe the request itself; the others
# (length, host, encoding, keys) belong to the original connection.
KEEP = {"anthropic-beta", "anthropic-version", "openai-beta", "x-app", "originator", "user-agent"}
LIMITS = {
    "/v1/messages": "max_tokens",
    "/v1/chat/completions": "max_tokens",
    "/v1/responses": "max_output_tokens",
}


def requests():
    for path in RECORDINGS:
        for n, line in enumerate(path.read_text().splitlines()):
            r = json.loads(line)
            if r["method"] == "POST" and isinstance(r["body"], dict):
                yield pytest.param(r, id=f"{path.stem}-{n}")


def test_there_are_recordings_of_every_client():
    names = " ".join(p.name for p in RECORDINGS)
    for client in ["claude-code", "codex-cli", "continue-cli", "llm", "aider"]:
        assert client in names, names


@pytest.mark.parametrize("rec", list(requests()))
def test_recorded_request_is_answered(tools_url, rec):
    body = dict(rec["body"])
    route = rec["path"].split("?")[0]
    limit = LIMITS.get(route)
    assert limit, f"no replay rule for {route}"
    body.pop("max_completion_tokens", None)
    body[limit] = 4
    headers = {k: v for k, v in rec["headers"].items() if k.lower() in KEEP}
    with httpx.stream("POST", tools_url + rec["path"], json=body, headers=headers, timeout=300) as r:
        text = r.read().decode()
    if r.status_code == 400 and "does not fit in this server's context" in text:
        return
    assert r.status_code == 200, text[:2000]
    if body.get("stream"):
        # A stream that ran to its end, in the client's API.
        assert any(end in text for end in ["[DONE]", "message_stop", "response.completed", "response.incomplete"]), text[-2000:]
