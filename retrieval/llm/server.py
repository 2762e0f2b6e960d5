"""The embedded model: llama.cpp's own `llama-server` in a child process, no library internals
patched.

`scripts/setup.sh` builds the binary (scripts/build_llama_server.sh → .venv/bin/llama-server);
HOPTRACE_LLAMA_SERVER names another. What HopTrace needs of it, each through a supported option:
  prompt cache          --cache-ram (MiB) and cache_prompt, bounded by LLMSettings.prompt_cache_mb
  JSON grammars         our own grammar per request, in its `grammar` field (gbnf.py): one optional
                        space between tokens, none for a compact-marked schema; json_schema
                        (the server's grammar) only for a schema ours does not write
  extraction drafts     --spec-type ngram-simple when drafts are asked for
  early stop on DONE    the reply is streamed and the stream closed once its mark matches
  start-up check        /health, /props (build, model file), and one schema-bound request
  parallel slots        -np HOPTRACE_LLM_SLOTS (default 1: two cores hold one decode)
  anything else         HOPTRACE_LLAMA_SERVER_ARGS, appended (a GPU build's `-ngl 99`)
Token counts come from the server's /tokenize. A child, not an in-process model: the app's
threads stay responsive while the model computes, and a crash in native code cannot take the
app down; supervise.py ends it with the app however the app ends.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

from ..core.errors import ConfigError
from ..core.paths import home
from ..core.ports import free_port
from . import compact, early_stop
from .backends import OpenAICompatible, RawReply, chatml, server_threads
from .compact import unmark
from .errors import LLMCallError, LLMUnavailable
from .gbnf import compact_grammar, schema_grammar
from .gguf import gguf_path
from .pins import SlotPins
from .settings import LLMSettings, prompt_slots, slots


@functools.lru_cache(maxsize=64)
def _grammar(schema_json: str, compact_form: bool) -> Optional[str]:
    """Our grammar for a schema (gbnf.py), or None where it uses a keyword ours does not write.
    Keyed by the schema's JSON as written: property order is the order the grammar imposes."""
    schema = json.loads(schema_json)
    try:
        return compact_grammar(schema) if compact_form else schema_grammar(schema)
    except ValueError:
        return None


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


def extra_args() -> list[str]:
    """HOPTRACE_LLAMA_SERVER_ARGS: more llama-server flags, split as a shell would."""
    text = os.environ.get("HOPTRACE_LLAMA_SERVER_ARGS", "")
    try:
        return shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"HOPTRACE_LLAMA_SERVER_ARGS cannot be split into flags ({e}): {text!r}") from None


# What llama-server logs when the port picked for it was taken before it could bind it.
PORT_IN_USE = "couldn't bind HTTP server socket"


class _PortTaken(Exception):
    pass


class LlamaServer(OpenAICompatible):
    """`llama-server` in a child process on 127.0.0.1, supervised so it dies with the app."""

    _lock = threading.Lock()
    _servers: dict[tuple, "LlamaServer"] = {}
    streams = True

    def __init__(self, settings: LLMSettings):
        self.binary = server_binary()
        self.gguf = gguf_path(settings.model)
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = home() / "llama_server.log"
        self.props: dict = {}
        self.checked = ""
        self.pins = SlotPins(max(slots(), prompt_slots()))
        self._asking = threading.local()   # the slot this thread's request goes to (format_kwargs)
        # The label names the model, as every recording does; the server's build is recorded
        # beside it (`server`), as the machine is: both change greedy outputs at near-ties.
        from .models import MODELS

        known = f" ({MODELS[settings.model].hf_name})" if settings.model in MODELS else ""
        super().__init__(settings, base_url=f"http://127.0.0.1:{self.port}/v1", label=settings.describe() + known)

    @classmethod
    def shared(cls, settings: LLMSettings) -> "LlamaServer":
        """The server for these settings, started on first use and again after it exited: one per
        process for each model, draft setting, context size and prompt cache (what its command
        line holds)."""
        key = (settings.speed_key, settings.n_ctx, settings.prompt_cache_mb, slots(), prompt_slots())
        with cls._lock:
            srv = cls._servers.get(key)
            if srv is None or (srv.proc and srv.proc.poll() is not None):
                srv = cls(settings)
                srv.start()
                cls._servers[key] = srv
            return srv

    def server_command(self) -> list[str]:
        threads = str(server_threads())
        cmd = [sys.executable, "-m", "retrieval.llm.supervise", str(os.getpid()), str(self.binary),
               "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port),
               # Each slot its own context and KV (not one buffer for all: a prompt would then attend
               # over every slot's cells, and read 10 % slower with four slots held).
               "-c", str(self.settings.n_ctx * self.pins.n_slots), "-np", str(self.pins.n_slots),
               "-t", threads, "-tb", threads, "-a", self.model, "--no-webui", "--metrics",
               "--cache-ram", str(self.settings.prompt_cache_mb)]
        if self.pins.n_slots > 1:
            # Each request names its slot (pins.py), whose prompt stays while it is idle. A slot
            # about to lose over half its prompt saves it to the RAM cache and resumes from a
            # better one there, if any (the same top 5 passages answered for another method).
            cmd += ["--no-cache-idle-slots"]
        else:
            # One slot: a slot picked for its prompt's similarity skips the RAM cache, and a
            # method's steps alternate (SAG: entities, rerank), sharing only the system prompt
            # (~0.45 similar), so each step re-read its instructions. Off, every request is matched
            # against the cache and resumes from its longest cached prefix.
            cmd += ["--slot-prompt-similarity", "0"]
        if self.settings.draft_tokens > 0:
            cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", str(self.settings.draft_tokens)]
        # The operator's own flags last, so they win (a GPU build's `-ngl 99`, say).
        return cmd + extra_args()

    def start(self, wait_s: float = 180.0, tries: int = 3) -> None:
        """Start the child and check it (self_check). A port free when picked can be taken before
        the server binds it (another server on the machine picked the same one): the server then
        exits saying so, and starts again on a new port, at most `tries` times."""
        for attempt in range(1, tries + 1):
            try:
                return self._start_once(wait_s)
            except _PortTaken:
                if attempt == tries:
                    raise LLMUnavailable(f"llama-server: {tries} ports in a row were taken before it could "
                                         f"bind them; see {self.log_path}") from None
                self._move_to(free_port())

    def _move_to(self, port: int) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._client = self._client.with_options(base_url=self.base_url)

    def _start_once(self, wait_s: float) -> None:
        log = open(self.log_path, "ab")
        since = log.tell()  # the log is kept across starts; this start's lines begin here
        self.proc = subprocess.Popen(self.server_command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        t0 = time.time()
        while time.time() - t0 < wait_s:
            if self.proc.poll() is not None:
                said = self._text_since(since)
                if PORT_IN_USE in said:
                    raise _PortTaken()
                last = [ln for ln in said.splitlines() if ln.strip()][-3:]
                raise LLMUnavailable(f"llama-server exited with code {self.proc.returncode}"
                                     + (f": {' / '.join(ln.strip() for ln in last)}" if last else "")
                                     + f"; see {self.log_path}")
            if self._get("/health", quiet=True) is not None:
                self.self_check()
                return
            time.sleep(0.25)
        self.stop()
        raise LLMUnavailable(f"llama-server did not become healthy within {wait_s:.0f} s; see {self.log_path}")

    def _text_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def health(self) -> str:
        """One line for the page header: the child's pid and state."""
        if self.proc is None:
            return "not started"
        code = self.proc.poll()
        if code is not None:
            return f"exited with code {code}, its log kept in {self.log_path.name}"
        return f"pid {self.proc.pid}, {self.checked or 'starting'}, log {self.log_path.name}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

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
        self.checked = f"{self.server}, {self.props.get('total_slots', '?')} slot(s)"

    @property
    def build(self) -> str:
        return str(self.props.get("build_info", "unknown build"))

    @property
    def server(self) -> str:
        """The program and build answering: stored with each LLM call and each experiment. A build
        from a source tree without git history reports `b0-unknown`; the source it was built from
        (scripts/build_llama_server.sh's stamp beside the binary) then names it."""
        source = ""
        try:
            source = (self.binary.parent / f"{self.binary.name}.built-from").read_text().split(" sha256:")[0]
        except OSError:
            pass
        if source and "unknown" in self.build:
            return f"llama-server {self.build} ({source.replace('llama-cpp-python', 'llama.cpp of llama-cpp-python')})"
        return f"llama-server {self.build}"

    def response_format(self, schema: Optional[dict], name: str) -> Optional[dict]:
        if schema is None:
            return None
        return {"type": "json_schema", "json_schema": {"name": name or "answer", "schema": unmark(schema)}}

    def format_kwargs(self, schema: Optional[dict], name: str) -> dict:
        """A schema goes as our own grammar (gbnf.py): without spaces for a compact-marked one, else
        with one optional space where JSON allows it. The server's own grammar (json_schema) only
        for a schema ours cannot write: it lets the model indent, which costs written tokens."""
        slot = getattr(getattr(self, "_asking", None), "slot", -1)   # -1 outside complete()
        body = {"id_slot": slot} if slot >= 0 else {}
        if schema:
            grammar = _grammar(json.dumps(unmark(schema)), bool(schema.get(compact.MARK)))
            if grammar is not None:
                return {"extra_body": {**body, "grammar": grammar}}
        kwargs = super().format_kwargs(schema, name)
        return {**kwargs, "extra_body": body} if body else kwargs

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "",
                 on_token: Optional[Callable[[int], None]] = None) -> RawReply:
        # With one slot, the server's own choice (its RAM cache); with more, the purpose's own (pins.py).
        self._asking.slot = self.pins.take(name) if self.pins.n_slots > 1 else -1
        try:
            pattern = (schema or {}).get(early_stop.MARK)
            if pattern:
                return self._until(messages, max_tokens, temperature, seed, schema, name, re.compile(pattern),
                                   on_token)
            return super().complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                    schema=schema, name=name, on_token=on_token)
        finally:
            if self._asking.slot >= 0:
                self.pins.give_back(self._asking.slot)
            self._asking.slot = -1

    def _until(self, messages, max_tokens, temperature, seed, schema, name, pattern, on_token) -> RawReply:
        """A streamed reply, closed as soon as the text so far matches its schema's early-stop mark
        (the server stops decoding when the stream closes), then closed as JSON (early_stop.close)."""
        stream = self._client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
            stream=True, **self.format_kwargs(schema, name))
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
