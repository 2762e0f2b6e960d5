"""A loopback OpenAI-compatible endpoint that answers every request after a fixed delay, for
measuring what `hoptrace bench --concurrency N` buys (`hoptrace bench-concurrency`).

It stands in for a hosted model that serves many requests at once: each request sleeps the
delay on its own thread. The answer is the first instance its JSON schema allows (first enum
value, minimal arrays, the first words of the prompt for free text), derived from the request
alone, so a ranking never depends on timing or on the order requests arrive in. It binds to
127.0.0.1 only.
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


def instance(schema: Optional[dict], words: list[str], depth: int = 0) -> Any:
    """A small value that satisfies `schema` (the subset of JSON Schema the methods send)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return instance(schema[key][0], words, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: instance(sub, words, depth + 1) for name, sub in props.items()}
    if kind == "array":
        n = max(1, int(schema.get("minItems", 0)))
        if schema.get("maxItems") is not None:
            n = min(n, int(schema["maxItems"]))
        return [instance(schema.get("items", {}), words[i:], depth + 1) for i in range(n)]
    if kind == "string":
        n = max(1, int(schema.get("minLength", 0)))
        text = " ".join(words[:3]) or "x"
        text = text if len(text) >= n else text.ljust(n, "x")
        return text[: schema["maxLength"]] if schema.get("maxLength") else text
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 0.5))
    if kind == "boolean":
        return False
    return None


class DelayEndpoint:
    """`with DelayEndpoint(delay_s) as url:` a running server; `max_in_flight` says how many
    requests it held at once, `requests` how many it answered."""

    def __init__(self, delay_s: float, port: int = 0):
        self.delay_s = delay_s
        self.requests = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self._server.serve_forever, name="delay-endpoint", daemon=True)
        self._thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def _answer(self, body: dict) -> str:
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
        words = re.findall(r"[A-Z][\w'-]+", prompt)[-12:] or ["x"]
        if schema is None:
            return json.dumps({"answer": " ".join(words[:3])})
        return json.dumps(instance(schema, words))

    def _handler(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: a benchmark prints its own figures
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self.send_error(400, "body is not JSON")
                    return
                with owner._lock:
                    owner._in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner._in_flight)
                try:
                    time.sleep(owner.delay_s)
                    text = owner._answer(body)
                finally:
                    with owner._lock:
                        owner._in_flight -= 1
                        owner.requests += 1
                usage = {"prompt_tokens": sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", [])),
                         "completion_tokens": max(1, len(text) // 4)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                model = body.get("model", "delay")
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                              {"choices": [], "usage": usage}]
                    for c in chunks:
                        c.update({"id": "delay", "object": "chat.completion.chunk", "created": 0, "model": model})
                        self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                out = json.dumps({"id": "delay", "object": "chat.completion", "created": 0, "model": model,
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": text}}],
                                  "usage": usage}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        return Handler


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m retrieval.bench.delay_endpoint --port 8765`: the endpoint on its own, for
    `hoptrace bench --llm http://127.0.0.1:8765/v1 --llm-model NAME`; Ctrl-C stops it."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m retrieval.bench.delay_endpoint", description=main.__doc__)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--delay-ms", type=float, default=20.0, help="the delay before each answer (default 20)")
    args = ap.parse_args(argv)
    with DelayEndpoint(args.delay_ms / 1000, args.port) as url:
        print(f"answering at {url} after {args.delay_ms:g} ms a request (loopback only)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
