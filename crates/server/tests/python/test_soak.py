"""A bounded soak: 64 clients for MINFER_SOAK_SECS seconds (default 60)
with random prompt lengths, random disconnects and some malformed bodies.
Afterwards the server must be healthy with nothing running and no KV cell
held for a generation, and its RSS must not have grown past a bound. Loopback only; every loop is bounded in time."""

import collections
import http.client
import json
import os
import random
import re
import threading
import time
import urllib.parse
import urllib.request

CLIENTS = 64
# What a server of SmolLM2-135M with --n-ctx 8192 may hold at most: the
# model's weights (94 MiB, mapped from the file or repacked in memory),
# the whole KV cache once every cell has been touched (8192 cells x 30
# layers x K and V x 192 values x 2 bytes = 180 MiB), and 224 MiB for
# graph buffers, logits, the allocator and the HTTP side. Measured after
# this whole suite: 441 MiB for a build that served ~330 soak requests,
# 443-471 MiB for one twice as fast (~700 requests): the allocator's high
# water rises with the traffic, then levels off. A leak of a few KiB per
# request, or of a sequence's cells, crosses the bound. The server's
# prompt-cache tier in host memory is bounded by --cache-ram 128 (MiB) in
# the harness and counted on top.
RSS_LIMIT_MIB = 94 + 180 + 224 + 128

WORDS = "alpha beta gamma delta river stone cloud paper window garden".split()


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        kb = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    return kb / 1024


def metrics(base_url):
    with urllib.request.urlopen(base_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(minfer_\w+) (\S+)$", text, re.M)}


def one_request(host, port, rng, model, counts):
    kind = rng.random()
    conn = http.client.HTTPConnection(host, port, timeout=300)
    try:
        if kind < 0.05:
            body = rng.choice([b"{oops", b'{"model": 5}', b'{"model":"%s","messages":"x"}' % model.encode()])
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            counts[f"malformed {resp.status}"] += 1
            return
        n_words = rng.choice([1, 8, 64, 256])
        text = " ".join(rng.choice(WORDS) for _ in range(n_words))
        stream = rng.random() < 0.6
        body = json.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": text}],
                "max_tokens": rng.randint(1, 32),
                "temperature": rng.choice([0, 0.7]),
                "stream": stream,
            }
        )
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if stream and resp.status == 200 and kind < 0.30:
            # Disconnect after a few chunks.
            for _ in range(rng.randint(1, 4)):
                if not resp.fp.readline():
                    break
            counts["disconnected"] += 1
            return
        data = resp.read()
        counts[f"status {resp.status}"] += 1
        if resp.status == 200 and stream:
            assert data.rstrip().endswith(b"data: [DONE]"), data[-200:]
    finally:
        conn.close()


def test_soak(base_url, model):
    pid = int(os.environ["MINFER_SERVER_PID"])
    secs = float(os.environ.get("MINFER_SOAK_SECS", "60"))
    url = urllib.parse.urlparse(base_url)
    counts = collections.Counter()
    lock = threading.Lock()
    errors = []

    rss_before = rss_mib(pid)
    deadline = time.monotonic() + secs

    def client(i):
        rng = random.Random(1000 + i)
        while time.monotonic() < deadline:
            try:
                local = collections.Counter()
                one_request(url.hostname, url.port, rng, model, local)
                with lock:
                    counts.update(local)
            except Exception as e:  # noqa: BLE001 - collected and reported below
                with lock:
                    errors.append(repr(e))
                return

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=secs + 360)
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert not errors, errors[:5]

    # Nothing left running; the disconnected ones were cancelled.
    end = time.monotonic() + 30
    while time.monotonic() < end:
        m = metrics(base_url)
        if m["minfer_requests_active"] == 0 and m["minfer_requests_queued"] == 0:
            break
        time.sleep(0.1)
    m = metrics(base_url)
    assert m["minfer_requests_active"] == 0
    assert m["minfer_requests_queued"] == 0
    assert m["minfer_sequences_live"] == 0
    with urllib.request.urlopen(base_url + "/health", timeout=30) as r:
        assert r.status == 200
    # No cell is held for a generation any more: those still used belong
    # to finished sequences kept for prefix reuse, evicted when needed.
    assert m["minfer_kv_cells_live"] == 0
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
    conn.request(
        "POST",
        "/v1/completions",
        json.dumps({"model": model, "prompt": "After the soak,", "max_tokens": 4, "temperature": 0}),
        {"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    r = json.loads(resp.read())
    assert resp.status == 200, r
    assert r["usage"]["completion_tokens"] >= 1, r
    rss_after = rss_mib(pid)
    m = metrics(base_url)
    served = sum(v for k, v in counts.items() if k.startswith("status 200"))
    summary = {
        "seconds": secs,
        "clients": CLIENTS,
        "outcomes": dict(counts),
        "served_200": served,
        "disconnects_counted_by_server": m["minfer_disconnects_total"],
        "rss_mib_before": round(rss_before, 1),
        "rss_mib_after": round(rss_after, 1),
        "rss_mib_limit": RSS_LIMIT_MIB,
        "kv_cells_used_by_idle_cache": m["minfer_kv_cells_used"],
        "kv_cells_live": m["minfer_kv_cells_live"],
        "sequences_live": m["minfer_sequences_live"],
    }
    # pytest captures stdout and stderr; the harness prints this file.
    out = os.environ.get("MINFER_SOAK_SUMMARY")
    if out:
        with open(out, "w") as f:
            json.dump(summary, f)
    assert served > CLIENTS, summary
    assert counts["disconnected"] > 0 and m["minfer_disconnects_total"] > 0, summary
    assert all(k in ("malformed 400",) for k in counts if k.startswith("malformed")), summary
    assert rss_after < RSS_LIMIT_MIB, summary
