#!/usr/bin/env python3
"""Logging reverse proxy that records what real coding-agent clients send.

Why this exists: clients such as Claude Code, Codex CLI, llm, aider and the
Continue CLI send requests to `minfer serve` whose exact shape (extra fields,
non-function tools, beta headers, streaming options, ...) is not documented
anywhere precisely enough to write tests from. This proxy sits between such a
client and a local minfer server, forwards every request unchanged, streams
the response back unchanged (SSE included, chunk by chunk), and appends one
JSON line per request to a .jsonl file. Those recordings become fixtures for
replay tests under crates/server/tests/fixtures/clients/.

Standard library only. Loopback use only: never point it at a remote host.

Usage:
    python3 record_proxy.py --port 8091 --upstream http://127.0.0.1:8090 \
        --out /tmp/recording.jsonl

Each JSON line has:
    method, path (including the query string), headers (authorization and
    x-api-key values replaced by "REDACTED"), body (parsed JSON if it parses,
    else a string), status, response_head (first 2000 chars of the response
    body as received from upstream, or --head-limit; chunked encoding is
    removed).
"""

import argparse
import http.client
import json
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REDACT = {"authorization", "x-api-key", "proxy-authorization", "api-key"}
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
}
HEAD_LIMIT = 2000


class Recorder:
    """Appends records to the JSONL file; remembers the ones still in flight
    so that stopping the proxy (SIGTERM/SIGINT) still writes them."""

    def __init__(self, path, head_limit=HEAD_LIMIT):
        self.path = path
        self.head_limit = head_limit
        self.lock = threading.Lock()
        self.in_flight = {}

    def start(self, record, head):
        with self.lock:
            self.in_flight[id(record)] = (record, head)

    def write(self, record):
        with self.lock:
            if self.in_flight.pop(id(record), None) is None and record.get("_flushed"):
                return  # already written by flush_in_flight
            record.pop("_flushed", None)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")

    def flush_in_flight(self, why):
        with self.lock:
            items = list(self.in_flight.values())
            self.in_flight.clear()
            with open(self.path, "a", encoding="utf-8") as f:
                for record, head in items:
                    out = dict(record)
                    text = bytes(head).decode("utf-8", errors="replace")
                    out["response_head"] = text[: self.head_limit] if self.head_limit > 0 else text
                    out["error"] = why
                    out.pop("_flushed", None)
                    record["_flushed"] = True
                    f.write(json.dumps(out, ensure_ascii=False) + "\n")


def make_handler(upstream, recorder, timeout, head_limit=HEAD_LIMIT):
    up = urllib.parse.urlsplit(upstream)
    if up.scheme != "http":
        raise SystemExit("only http:// upstreams are supported")
    base_path = up.path.rstrip("/")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            sys.stderr.write("[proxy] %s %s\n" % (self.address_string(), fmt % args))

        def _read_body(self):
            te = self.headers.get("Transfer-Encoding", "").lower()
            if "chunked" in te:
                chunks = []
                while True:
                    size_line = self.rfile.readline()
                    if not size_line:
                        break
                    size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        # Trailers until blank line.
                        while True:
                            line = self.rfile.readline()
                            if not line or line in (b"\r\n", b"\n"):
                                break
                        break
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()  # CRLF after chunk
                return b"".join(chunks)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _proxy(self):
            started = time.time()
            body = self._read_body()
            req_headers = {}
            for k, v in self.headers.items():
                lk = k.lower()
                if lk in HOP_BY_HOP or lk == "host" or lk == "content-length":
                    continue
                req_headers[k] = v
            req_headers["Host"] = up.netloc
            if body or self.command in ("POST", "PUT", "PATCH"):
                req_headers["Content-Length"] = str(len(body))

            logged_headers = {}
            for k, v in self.headers.items():
                logged_headers[k] = "REDACTED" if k.lower() in REDACT else v

            try:
                parsed_body = json.loads(body) if body else None
            except (ValueError, UnicodeDecodeError):
                parsed_body = body.decode("utf-8", errors="replace")

            record = {
                "method": self.command,
                "path": self.path,
                "headers": logged_headers,
                "body": parsed_body,
                "status": None,
                "response_head": "",
            }
            head = bytearray()
            conn = None
            recorder.start(record, head)
            try:
                conn = http.client.HTTPConnection(up.hostname, up.port or 80, timeout=timeout)
                conn.request(self.command, base_path + self.path, body=body, headers=req_headers)
                resp = conn.getresponse()
                record["status"] = resp.status
                self.send_response_only(resp.status, resp.reason)
                chunked = resp.getheader("Content-Length") is None and self.command != "HEAD" \
                    and resp.status not in (204, 304) and not (100 <= resp.status < 200)
                for k, v in resp.getheaders():
                    lk = k.lower()
                    if lk in HOP_BY_HOP:
                        continue
                    self.send_header(k, v)
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                while True:
                    # read1 returns as soon as some data is available, so SSE
                    # events are forwarded as they arrive.
                    data = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
                    if not data:
                        break
                    if head_limit <= 0:
                        head += data
                    elif len(head) < head_limit * 4:
                        head += data[: head_limit * 4 - len(head)]
                    if chunked:
                        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                    else:
                        self.wfile.write(data)
                    self.wfile.flush()
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
            except Exception as e:  # upstream down, client went away, ...
                record["error"] = "%s: %s" % (type(e).__name__, e)
                if record["status"] is None:
                    msg = json.dumps({"error": {"message": "proxy: " + str(e)}}).encode()
                    try:
                        self.send_response(502)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(msg)))
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(msg)
                    except Exception:
                        pass
            finally:
                # Close upstream too, so that a client that went away shows
                # up as a disconnect on the server (which then stops work).
                if conn is not None:
                    conn.close()
                self.close_connection = True
                text = head.decode("utf-8", errors="replace")
                record["response_head"] = text[:head_limit] if head_limit > 0 else text
                record["elapsed_s"] = round(time.time() - started, 3)
                recorder.write(record)

        do_GET = _proxy
        do_POST = _proxy
        do_PUT = _proxy
        do_PATCH = _proxy
        do_DELETE = _proxy
        do_HEAD = _proxy
        do_OPTIONS = _proxy

    Handler.recorder = recorder
    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8090")
    ap.add_argument("--out", required=True, help="JSONL file to append to")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--head-limit", type=int, default=HEAD_LIMIT,
                    help="characters of each response kept (0: the whole response)")
    args = ap.parse_args()
    host = urllib.parse.urlsplit(args.upstream).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("refusing non-loopback upstream %r" % host)
    handler = make_handler(args.upstream, Recorder(args.out, args.head_limit), args.timeout, args.head_limit)
    srv = ThreadingHTTPServer((args.host, args.port), handler)
    srv.daemon_threads = True
    recorder = handler.recorder

    def stop(signum, frame):
        recorder.flush_in_flight("proxy stopped (signal %d) before the response ended" % signum)
        sys.stderr.write("[proxy] stopped\n")
        sys.stderr.flush()
        import os
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stderr.write("[proxy] %s:%d -> %s, logging to %s\n" % (args.host, args.port, args.upstream, args.out))
    srv.serve_forever()


if __name__ == "__main__":
    main()
