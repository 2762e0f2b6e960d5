"""The embedded model on llama.cpp's own `llama-server`, no library internals patched.

Opt-in for now: `HOPTRACE_LLM_SERVER=llama-server` (the default stays llama-cpp-python's server
with patches.py until this one is measured no slower on every task; docs/profiles.md). The binary
is built by `bash scripts/build_llama_server.sh` (→ .venv/bin/llama-server) or named by
HOPTRACE_LLAMA_SERVER. Each patch's effect, through the server's own options:
  prompt cache          --cache-ram (MiB) and cache_prompt, bounded as today
  JSON grammars         response_format json_schema, per request
  extraction drafts     --spec-type ngram-simple when drafts are asked for
  early stop on DONE    the reply is streamed and the stream closed once its mark matches
  start-up check        /health, /props, and one schema-bound request
Token counts come from the server's /tokenize. Not yet carried over: the compact JSON grammar
(compact.py's spaceless grammar needs a schema-to-GBNF converter of our own; until then a reply
may hold spaces, ~17 % more tokens written on extraction).
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

from ..core.envvars import whole_number
from ..core.paths import home
from ..core.ports import free_port
from . import early_stop
from .backends import ChildServer, OpenAICompatible, RawReply, chatml, server_threads
from .compact import unmark
from .errors import LLMCallError, LLMUnavailable
from .gguf import gguf_path
from .settings import LLMSettings


def server_binary() -> Path:
    """HOPTRACE_LLAMA_SERVER, else the venv's llama-server, else one on PATH."""
    named = os.environ.get("HOPTRACE_LLAMA_SERVER", "").strip()
    candidates = [Path(named)] if named else [Path(sys.prefix) / "bin" / "llama-server"]
    found = shutil.which("llama-server")
    if not named and found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    where = f"HOPTRACE_LLAMA_SERVER={named}" if named else f"{candidates[0]} (or PATH)"
    raise LLMUnavailable(f"no llama-server binary at {where}: run `bash scripts/build_llama_server.sh`")


def slots() -> int:
    """The server's parallel slots: HOPTRACE_LLM_SLOTS, by default 1 (two cores hold one decode)."""
    return whole_number("HOPTRACE_LLM_SLOTS", 1, minimum=1)


class LlamaServer(ChildServer, OpenAICompatible):
    """`llama-server` in a child process on 127.0.0.1, supervised so it dies with the app."""

    _lock = threading.Lock()
    _servers: dict[str, "LlamaServer"] = {}
    streams = True

    def __init__(self, settings: LLMSettings):
        self.binary = server_binary()
        self.gguf = gguf_path(settings.model)
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = home() / "llama_server.log"
        self.props: dict = {}
        self.checked = ""
        super().__init__(settings, base_url=f"http://127.0.0.1:{self.port}/v1",
                         label=f"embedded llama-server · {settings.model}")

    def server_command(self) -> list[str]:
        threads = str(server_threads())
        cmd = [sys.executable, "-m", "retrieval.llm.supervise", str(os.getpid()), str(self.binary),
               "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port),
               "-c", str(self.settings.n_ctx), "-t", threads, "-tb", threads, "-np", str(slots()),
               "-a", self.model, "--cache-ram", str(self.settings.prompt_cache_mb), "--no-webui", "--metrics",
               # A slot picked for its prompt's similarity skips the RAM cache: with one slot a
               # method's steps alternate (SAG: entities, rerank), sharing only the system prompt
               # (~0.45 similar), so each step re-read its instructions. Off, every request is
               # matched against the cache and resumes from its longest cached prefix.
               "--slot-prompt-similarity", "0"]
        if self.settings.draft_tokens > 0:
            cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", str(self.settings.draft_tokens)]
        return cmd

    def start(self, wait_s: float = 180.0) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.server_command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        t0 = time.time()
        while time.time() - t0 < wait_s:
            if self.proc.poll() is not None:
                raise LLMUnavailable(f"llama-server exited with code {self.proc.returncode}; see {self.log_path}")
            if self._get("/health", quiet=True) is not None:
                self.self_check()
                return
            time.sleep(0.25)
        self.stop()
        raise LLMUnavailable(f"llama-server did not become healthy within {wait_s:.0f} s; see {self.log_path}")

    def _get(self, path: str, quiet: bool = False) -> Optional[dict]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return json.loads(r.read()) if r.status == 200 else None
        except (OSError, ValueError):
            if quiet:
                return None
            raise

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def self_check(self) -> None:
        """/props names the server's build and the model it loaded; one schema-bound reply parses."""
        try:
            self.props = self._get("/props") or {}
            wrong = []
            if Path(self.props.get("model_path", "")).resolve() != Path(self.gguf).resolve():
                wrong.append(f"it loaded {self.props.get('model_path')!r}, not {self.gguf}")
            schema = {"type": "object", "required": ["city"],
                      "properties": {"city": {"type": "string", "maxLength": 20}}}
            raw = self.complete([{"role": "user", "content": 'Name the capital of France as JSON {"city": "..."}.'}],
                                max_tokens=16, temperature=0.0, seed=0, schema=schema)
            try:
                value = json.loads(raw.text)
            except ValueError:
                value = None
            if not isinstance(value, dict) or not isinstance(value.get("city"), str):
                wrong.append(f"a schema-bound reply did not parse: {raw.text[:80]!r}")
        except (OSError, ValueError, LLMCallError) as e:
            wrong = [f"it could not be asked ({e})"]
        if wrong:
            self.stop()
            raise LLMUnavailable("llama-server failed its start-up check: " + "; ".join(wrong)
                                 + f"; see {self.log_path}")
        self.checked = f"llama-server {self.build}, {self.props.get('total_slots', '?')} slot(s)"
        # Experiments and runs name their LLM by this line: the server's build goes with every one.
        self.label = f"embedded llama-server {self.build} · {self.model}"

    @property
    def build(self) -> str:
        return str(self.props.get("build_info", "unknown build"))

    def response_format(self, schema: Optional[dict], name: str) -> Optional[dict]:
        if schema is None:
            return None
        return {"type": "json_schema", "json_schema": {"name": name or "answer", "schema": unmark(schema)}}

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "",
                 on_token: Optional[Callable[[int], None]] = None) -> RawReply:
        pattern = (schema or {}).get(early_stop.MARK)
        if pattern:
            return self._until(messages, max_tokens, temperature, seed, schema, name, re.compile(pattern), on_token)
        return super().complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                schema=schema, name=name, on_token=on_token)

    def _until(self, messages, max_tokens, temperature, seed, schema, name, pattern, on_token) -> RawReply:
        """A streamed reply, closed as soon as the text so far matches its schema's early-stop mark
        (the server stops decoding when the stream closes), then closed as JSON (early_stop.close)."""
        fmt = self.response_format(schema, name)
        stream = self._client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
            stream=True, response_format=fmt)
        parts: list[str] = []
        try:
            for chunk in stream:
                for ch in chunk.choices or []:
                    piece = ch.delta.content if ch.delta else None
                    if piece:
                        parts.append(piece)
                        if on_token is not None:
                            on_token(len(parts))
                if pattern.search("".join(parts)):
                    break
        finally:
            stream.close()
        text = "".join(parts)
        return RawReply(early_stop.close(text, schema), self.count_prompt(messages), self.count_tokens(text))

    def count_tokens(self, text: str) -> int:
        return len(self._post("/tokenize", {"content": text}).get("tokens", []))

    def count_prompt(self, messages: list[dict]) -> int:
        return self.count_tokens(chatml(messages))
