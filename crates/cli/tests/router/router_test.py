"""Three `minfer serve` replicas behind HAProxy, driven with the official
`openai` client (run by crates/cli/tests/router_haproxy.rs, which starts the
replicas and HAProxy on loopback and passes them in the environment):

- MINFER_PREFIX_URL: HAProxy's front end that hashes a request's leading
  bytes (prefix affinity); MINFER_RR_URL: the round-robin one;
- MINFER_STATS_URL: HAProxy's stats page (CSV with ";csv");
- MINFER_REPLICAS: JSON {name: {"url": ..., "pid": ...}} of the replicas,
  named as HAProxy's servers (r1, r2, r3);
- MINFER_MODEL_ID, MINFER_TRACE (tests/fixtures/chat-trace.jsonl) and
  MINFER_ROUTER_SUMMARY (where the summary JSON goes).

Three phases, each bounded in time:

1. The chat trace replayed through each front end (its conversations in
   parallel, each conversation's turns in order, every turn resending the
   conversation so far): prefix-cache hit rate from the replicas' /metrics,
   aggregate completion tokens per second, time to first token p50/p99.
   Prefix affinity must hit the cache more often than round robin.
2. One replica SIGKILLed while streams run on it: every request that had
   not started streaming on it succeeds elsewhere with the answer it gets
   alone; those that had end with an error the client sees; none is lost.
3. SIGTERM to the replica serving a long stream: /health turns 503 at once,
   HAProxy takes the replica out and sends new requests elsewhere, the long
   stream finishes (the Rust side then checks the exit status).

Exits non-zero with the failed check's message; prints the tables.
"""

import concurrent.futures
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

PREFIX_URL = os.environ["MINFER_PREFIX_URL"]
RR_URL = os.environ["MINFER_RR_URL"]
STATS_URL = os.environ["MINFER_STATS_URL"]
REPLICAS = json.loads(os.environ["MINFER_REPLICAS"])
MODEL = os.environ["MINFER_MODEL_ID"]
TRACE = os.environ["MINFER_TRACE"]
SUMMARY = os.environ["MINFER_ROUTER_SUMMARY"]

REPLAY_MAX_TOKENS = 24
REPLAY_CONCURRENCY = 6
FAILOVER_MAX_TOKENS = 40
FAILOVER_CONCURRENCY = 8
LONG_MAX_TOKENS = 256


def client(url):
    # No client retries: what is retried must be retried by the router.
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{url}/metrics has no {name}")


def cache_counters(names):
    hits = sum(metric(REPLICAS[n]["url"], "vllm:prefix_cache_hits_total") for n in names)
    queries = sum(metric(REPLICAS[n]["url"], "vllm:prefix_cache_queries_total") for n in names)
    return hits, queries


def percentile(values, p):
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def stream_chat(c, messages, max_tokens, on_first=None, on_headers=None):
    """One streamed chat request. Returns (served_by, text, finish_reason,
    completion_tokens, ttft); raises whatever the client raises."""
    t0 = time.monotonic()
    raw = c.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=messages,
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    served_by = raw.headers.get("x-minfer-replica", "?")
    if on_headers is not None:
        on_headers(served_by)
    text, finish, usage, ttft = [], None, None, None
    for chunk in raw.parse():
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        for ch in chunk.choices:
            if ch.delta.content:
                if ttft is None:
                    ttft = time.monotonic() - t0
                    if on_first is not None:
                        on_first(served_by)
                text.append(ch.delta.content)
            if ch.finish_reason is not None:
                finish = ch.finish_reason
    return served_by, "".join(text), finish, usage, ttft


def load_trace():
    with open(TRACE) as f:
        return [json.loads(line) for line in f if line.strip()]


def replay(url, tag, convs):
    """Replays every conversation through `url`; the tag starts each system
    prompt so that no phase reuses another's cache."""
    c = client(url)
    ttfts, tokens, served = [], [0], {}
    lock = threading.Lock()

    def conversation(conv):
        messages = [{"role": "system", "content": f"[{tag}] {conv['system']}"}]
        for turn in conv["turns"]:
            messages.append({"role": "user", "content": turn})
            by, text, finish, usage, ttft = stream_chat(c, messages, REPLAY_MAX_TOKENS)
            assert finish is not None, f"{conv['id']}: stream ended without finish_reason"
            assert usage is not None and ttft is not None, conv["id"]
            messages.append({"role": "assistant", "content": text})
            with lock:
                ttfts.append(ttft)
                tokens[0] += usage
                served.setdefault(conv["id"], []).append(by)

    names = list(REPLICAS)
    h0, q0 = cache_counters(names)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(REPLAY_CONCURRENCY) as pool:
        for f in [pool.submit(conversation, conv) for conv in convs]:
            f.result(timeout=300)
    wall = time.monotonic() - t0
    # A replica counts a request's cache hits once its first token is out,
    # which every finished request's was.
    h1, q1 = cache_counters(names)
    return {
        "requests": len(ttfts),
        "hit_rate": (h1 - h0) / max(1.0, q1 - q0),
        "prompt_tokens": q1 - q0,
        "cached_tokens": h1 - h0,
        "completion_tokens": tokens[0],
        "tokens_per_s": tokens[0] / wall,
        "ttft_p50_ms": 1000 * percentile(ttfts, 50),
        "ttft_p99_ms": 1000 * percentile(ttfts, 99),
        "wall_s": wall,
        "replicas_per_conversation": sum(len(set(v)) for v in served.values()) / len(served),
    }


def failover(convs):
    """SIGKILLs the replica with the most open streams while a round of
    requests is still to be sent."""
    requests = []
    for conv in convs:
        for turn in conv["turns"][:2]:
            requests.append(
                [
                    {"role": "system", "content": f"[failover] {conv['system']}"},
                    {"role": "user", "content": turn},
                ]
            )
    # The answers each request gets alone, one at a time, from one replica
    # (greedy; every replica computes the same bits).
    ref_client = client(REPLICAS["r3"]["url"])
    alone = []
    for messages in requests:
        r = ref_client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=FAILOVER_MAX_TOKENS, temperature=0
        )
        alone.append(r.choices[0].message.content)

    c = client(PREFIX_URL)
    lock = threading.Lock()
    # replica -> responses that began there and are not done; a response
    # begins (its headers, named by HAProxy's X-Minfer-Replica) before the
    # first token, and once it has, the router can no longer retry it.
    open_on = {}
    killed = {"name": None}
    records = [None] * len(requests)
    sent = [0]

    def headers(i, by):
        with lock:
            records[i]["served_by"] = by
            open_on[by] = open_on.get(by, 0) + 1

    def one(i):
        with lock:
            sent[0] += 1
            records[i] = {"served_by": None, "sent_after_kill": killed["name"] is not None}
        rec = records[i]
        try:
            _, text, finish, _, _ = stream_chat(
                c, requests[i], FAILOVER_MAX_TOKENS, on_headers=lambda b: headers(i, b)
            )
            rec.update(text=text, finish=finish)
            rec["outcome"] = "ok" if finish is not None else "lost"
        except Exception as e:  # noqa: BLE001 - any error the client sees
            rec.update(outcome="error", error=f"{type(e).__name__}: {e}")
        finally:
            with lock:
                if rec["served_by"] is not None:
                    open_on[rec["served_by"]] -= 1

    def killer():
        # The replica with the most open responses, once at least two are
        # open there and a full round of requests is still to be sent.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                busy = max(open_on.items(), key=lambda kv: kv[1], default=(None, 0))
                if busy[1] >= 2 and sent[0] <= len(requests) - FAILOVER_CONCURRENCY:
                    killed["name"] = busy[0]
                    killed["open"] = busy[1]
                    os.kill(REPLICAS[busy[0]]["pid"], signal.SIGKILL)
                    return
            time.sleep(0.002)

    k = threading.Thread(target=killer, daemon=True)
    k.start()
    with concurrent.futures.ThreadPoolExecutor(FAILOVER_CONCURRENCY) as pool:
        for f in [pool.submit(one, i) for i in range(len(requests))]:
            f.result(timeout=300)
    k.join(timeout=5)
    assert killed["name"] is not None, "no replica had two open responses in time to be killed"
    victim = killed["name"]

    counts = {
        "killed": victim,
        "open_on_it_at_kill": killed["open"],
        "sent": len(records),
        "succeeded": sum(r["outcome"] == "ok" for r in records),
        "failed_visibly": sum(r["outcome"] == "error" for r in records),
        "lost": sum(r["outcome"] == "lost" for r in records),
        "sent_after_kill": sum(r["sent_after_kill"] for r in records),
        "answered_elsewhere_after_kill": sum(
            r["sent_after_kill"] and r["outcome"] == "ok" for r in records
        ),
    }
    problems = []
    for i, r in enumerate(records):
        if r["outcome"] == "lost":
            problems.append(f"request {i}: stream ended without finish_reason and without an error")
        elif r["outcome"] == "error" and r["served_by"] != victim:
            problems.append(
                f"request {i} had not started on {victim} (response from {r['served_by']}) "
                f"but failed: {r.get('error')}"
            )
        elif r["outcome"] == "ok" and r["text"] != alone[i]:
            problems.append(f"request {i} (on {r['served_by']}): {r['text']!r} != alone {alone[i]!r}")
        if r["sent_after_kill"] and r["served_by"] == victim:
            problems.append(f"request {i} was answered by {victim} after its SIGKILL")
    return counts, problems


def health(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return f"{type(e).__name__}"


def haproxy_status(backend, server):
    with urllib.request.urlopen(STATS_URL + ";csv", timeout=5) as r:
        rows = r.read().decode().splitlines()
    head = rows[0].lstrip("# ").split(",")
    for row in rows[1:]:
        v = dict(zip(head, row.split(",")))
        if v.get("pxname") == backend and v.get("svname") == server:
            return v.get("status")
    return None


def drain(convs, dead):
    """SIGTERM to the replica that serves a long stream."""
    c = client(PREFIX_URL)
    conv = convs[0]
    messages = [
        {"role": "system", "content": f"[drain] {conv['system']}"},
        {"role": "user", "content": "Tell me a long story about a journey across the sea."},
    ]
    first = threading.Event()
    box = {}

    def on_first(by):
        box["started_on"] = by
        first.set()

    def long_stream():
        try:
            by, text, finish, usage, _ = stream_chat(c, messages, LONG_MAX_TOKENS, on_first)
            box.update(by=by, finish=finish, usage=usage, done_at=time.monotonic())
        except Exception as e:  # noqa: BLE001
            box.update(error=f"{type(e).__name__}: {e}", done_at=time.monotonic())
            first.set()

    t = threading.Thread(target=long_stream, daemon=True)
    t.start()
    assert first.wait(60), "the long stream did not start"
    assert "error" not in box, box
    # The stream's replica, from HAProxy's response header.
    target = box["started_on"]
    assert target in REPLICAS and target != dead, (target, dead)
    url = REPLICAS[target]["url"]
    assert health(url) == 200

    os.kill(REPLICAS[target]["pid"], signal.SIGTERM)
    t_sig = time.monotonic()
    seen = []
    while time.monotonic() - t_sig < 5:
        s = health(url)
        seen.append(s)
        if s != 200:
            break
        time.sleep(0.005)
    first_change = next((s for s in seen if s != 200), None)
    in_flight_then = "done_at" not in box
    result = {
        "replica": target,
        "health_after_sigterm": first_change,
        "polls_until_503": len(seen),
        "long_stream_in_flight_at_503": in_flight_then,
    }
    problems = []
    if first_change != 503:
        problems.append(f"/health after SIGTERM went {seen[-3:]} instead of turning 503")
    if not in_flight_then:
        problems.append("the long stream ended before /health turned 503 (make it longer)")

    # HAProxy's check takes the replica out (fall 2 at fastinter 100ms).
    deadline = time.monotonic() + 10
    status = None
    while time.monotonic() < deadline:
        status = haproxy_status("minfer_prefix", target)
        if status and status.startswith("DOWN"):
            break
        time.sleep(0.05)
    result["haproxy_status"] = status
    result["marked_down_after_s"] = round(time.monotonic() - t_sig, 2)
    result["long_stream_in_flight_when_down"] = "done_at" not in box
    if not (status and status.startswith("DOWN")):
        problems.append(f"HAProxy still has {target} as {status} 10 s after its SIGTERM")
    elif not result["long_stream_in_flight_when_down"]:
        problems.append("the long stream ended before HAProxy took its replica out (make it longer)")

    # New requests go elsewhere and succeed.
    def after_one(other):
        msgs = [
            {"role": "system", "content": f"[after-drain] {other['system']}"},
            {"role": "user", "content": other["turns"][0]},
        ]
        by, _, finish, _, _ = stream_chat(c, msgs, 4)
        return by, finish

    after = []
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for f in [pool.submit(after_one, other) for other in convs[1:7]]:
            try:
                by, finish = f.result(timeout=120)
                after.append(by)
                if by == target or finish is None:
                    problems.append(f"a request after the drain began: served by {by}, finish {finish}")
            except Exception as e:  # noqa: BLE001
                problems.append(f"a request after the drain began failed: {e}")
    result["new_requests_served_by"] = after
    result["long_stream_in_flight_after_them"] = "done_at" not in box

    t.join(timeout=120)
    assert not t.is_alive(), "the long stream hung"
    result["long_stream"] = {k: box.get(k) for k in ("by", "finish", "usage", "error")}
    if box.get("finish") is None:
        problems.append(f"the drained stream did not finish properly: {box}")
    if box.get("by") != target:
        problems.append(f"the long stream was served by {box.get('by')}, not {target}")
    return result, problems


def main():
    convs = load_trace()
    assert len(convs) >= 10, TRACE
    summary = {"haproxy_version": os.environ.get("MINFER_HAPROXY_VERSION", "?")}
    failures = []
    t_all = time.monotonic()

    rows = {}
    for policy, url in [("prefix hash", PREFIX_URL), ("round robin", RR_URL)]:
        rows[policy] = replay(url, policy.replace(" ", "-"), convs)
    summary["replay"] = rows
    print(f"\nreplay: {len(convs)} conversations, {rows['prefix hash']['requests']} requests each way, "
          f"max_tokens {REPLAY_MAX_TOKENS}, {REPLAY_CONCURRENCY} conversations at once, 3 replicas")
    print(f"{'policy':<12} {'hit rate':>9} {'cached/prompt tok':>18} {'agg t/s':>8} "
          f"{'TTFT p50':>9} {'TTFT p99':>9} {'replicas/conv':>13}")
    for policy, r in rows.items():
        print(f"{policy:<12} {100 * r['hit_rate']:>8.1f}% {int(r['cached_tokens']):>8}/{int(r['prompt_tokens']):<9} "
              f"{r['tokens_per_s']:>8.1f} {r['ttft_p50_ms']:>7.0f}ms {r['ttft_p99_ms']:>7.0f}ms "
              f"{r['replicas_per_conversation']:>13.2f}")
    if not rows["prefix hash"]["hit_rate"] > rows["round robin"]["hit_rate"]:
        failures.append("prefix hashing's hit rate is not above round robin's")

    counts, problems = failover(convs)
    summary["failover"] = counts
    print(f"\nfailover (SIGKILL {counts['killed']} mid-run): sent {counts['sent']}, "
          f"succeeded {counts['succeeded']}, failed visibly {counts['failed_visibly']}, lost {counts['lost']} "
          f"({counts['open_on_it_at_kill']} streams open on it at the kill; "
          f"{counts['sent_after_kill']} requests sent after it, {counts['answered_elsewhere_after_kill']} answered)")
    failures += problems
    if counts["lost"] != 0:
        failures.append(f"{counts['lost']} requests lost")
    if counts["failed_visibly"] == 0:
        failures.append("the SIGKILL hit no stream in flight")

    result, problems = drain(convs, counts["killed"])
    summary["drain"] = result
    print(f"\ndrain (SIGTERM {result['replica']}): /health {result['health_after_sigterm']} after "
          f"{result['polls_until_503']} polls, HAProxy {result['haproxy_status']} after "
          f"{result['marked_down_after_s']} s, new requests on {result['new_requests_served_by']}, "
          f"long stream {result.get('long_stream')}")
    failures += problems
    summary["wall_s"] = round(time.monotonic() - t_all, 1)
    summary["failures"] = failures
    with open(SUMMARY, "w") as f:
        json.dump(summary, f, indent=1)
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"\nall router checks passed in {summary['wall_s']} s")


if __name__ == "__main__":
    main()
