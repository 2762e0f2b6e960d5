"""Chat backends behind one narrow interface, all spoken through the `openai` package.

`OpenAICompatible` talks to any OpenAI-style endpoint. `EmbeddedLlamaCpp` starts the
llama.cpp server (llama-cpp-python) on 127.0.0.1 with the assembled Qwen GGUF and then
is an OpenAI-compatible backend like any other, so one code path serves both.
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..core import cpu
from ..core.envvars import positive_number
from ..core.errors import ConfigError
from ..core.paths import home
from ..core.ports import free_port
from . import early_stop, patches
from .compact import mark as compact_mark
from .compact import unmark
from .errors import LLMCallError, LLMUnavailable
from .settings import LLMSettings


@dataclass
class RawReply:
    text: str
    tokens_in: Optional[int]
    tokens_out: Optional[int]


# What to fall back to when an endpoint rejects a response_format (modes not listed have none).
_WEAKER_FORMAT = {"json_schema": "json_object", "json_object": "none"}


class OpenAICompatible:
    def __init__(self, settings: LLMSettings, base_url: Optional[str] = None, label: Optional[str] = None):
        import openai

        self.settings = settings
        self.model = settings.model
        self.base_url = base_url or settings.base_url
        self.label = label or f"{self.base_url} · {self.model}"
        # The openai client retries connection errors, 408/409/429 and 5xx with exponential backoff.
        self._client = openai.OpenAI(base_url=self.base_url, api_key=settings.api_key or "no-key",
                                     timeout=settings.timeout_s, max_retries=settings.max_retries)
        self._format_mode = "json_schema"   # downgraded once if the endpoint rejects it

    def describe(self) -> str:
        return self.label

    def response_format(self, schema: Optional[dict], name: str) -> Optional[dict]:
        schema = unmark(schema)  # the marks are for our embedded server only
        if schema is None or self._format_mode == "none":
            return None
        if self._format_mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name or "answer", "schema": schema}}
        return {"type": "json_object"}

    # Streams when asked for progress (on_token), so the app can show tokens as they come.
    streams = True

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "",
                 on_token: Optional[Callable[[int], None]] = None) -> RawReply:
        import openai

        while True:
            fmt = self.response_format(schema, name)
            kwargs = {"response_format": fmt} if fmt else {}
            try:
                if on_token is not None:
                    return self._stream(messages, max_tokens, temperature, seed, kwargs, on_token)
                resp = self._client.chat.completions.create(
                    model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature,
                    seed=seed, **kwargs)
                break
            except openai.BadRequestError as e:
                # Some endpoints know only json_object, some no response_format at all.
                msg = str(e).lower()
                weaker = _WEAKER_FORMAT.get(self._format_mode)
                if fmt and weaker and ("response_format" in msg or "json_schema" in msg):
                    self._format_mode = weaker
                    continue
                raise LLMCallError(f"{self.label}: request rejected: {e}") from e
            except openai.APITimeoutError as e:
                raise LLMCallError(f"{self.label}: no answer within {self.settings.timeout_s:.0f} s") from e
            except openai.APIConnectionError as e:
                raise LLMCallError(f"{self.label}: cannot connect ({e})") from e
            except openai.APIStatusError as e:
                raise LLMCallError(f"{self.label}: HTTP {e.status_code}: {e.message}") from e
        choice = resp.choices[0] if resp.choices else None
        text = (choice.message.content or "") if choice else ""
        usage = resp.usage
        return RawReply(text, usage.prompt_tokens if usage else None, usage.completion_tokens if usage else None)

    def _stream(self, messages, max_tokens, temperature, seed, kwargs, on_token) -> RawReply:
        """One streamed request: on_token(n) after each chunk; usage from the last chunk if the
        endpoint sends one (stream_options), else None and the caller counts."""
        extra = self._stream_options()
        stream = self._client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
            stream=True, **kwargs, **extra)
        parts: list[str] = []
        usage = None
        n = 0
        for chunk in stream:
            if getattr(chunk, "usage", None):
                usage = chunk.usage
            for ch in chunk.choices or []:
                piece = ch.delta.content if ch.delta else None
                if piece:
                    parts.append(piece)
                    n += 1
                    on_token(n)
        text = "".join(parts)
        if usage:
            return RawReply(text, usage.prompt_tokens, usage.completion_tokens)
        return RawReply(text, self.count_prompt(messages), self.count_tokens(text) if text else 0)

    def _stream_options(self) -> dict:
        return {"stream_options": {"include_usage": True}}

    def count_prompt(self, messages: list[dict]) -> int:
        return self.count_tokens("\n".join(m["content"] for m in messages)) + 4 * len(messages)

    def count_tokens(self, text: str) -> int:
        # Only when an endpoint reports no usage: ~4 characters a token for English.
        return max(1, len(text) // 4)


def chatml(messages: list[dict]) -> str:
    """Messages as the Qwen chat template renders them (what llama.cpp tokenizes)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


# The server's default logits_all=True computes and copies the 151,936 vocabulary logits of
# every prompt token (nothing here asks for logprobs): off, a 690-token prompt reads in 12.3 s
# instead of 14.1 s on 2 cores, and the server no longer keeps an n_ctx x vocabulary score
# array (10 GB of address space at n_ctx 16,384, touched as long prompts come in).
SERVER_FLAGS = ("--logits_all", "False")


PORT_IN_USE = "address already in use"   # uvicorn's words when the child's port was taken


class _PortTaken(Exception):
    pass


def server_threads() -> int:
    """The embedded server's threads: HOPTRACE_LLM_THREADS, else the machine's cores (at most 8).

    Set it to 1 where other work shares the cores (the test suite's second worker): llama.cpp's
    threads meet at a barrier after every operation, so one thread descheduled by another process
    stalls the rest while they spin, 3-8x slower on 2 cores; one thread only waits its turn."""
    n = positive_number("HOPTRACE_LLM_THREADS")
    if n is not None:
        if n != int(n):
            raise ConfigError(f"HOPTRACE_LLM_THREADS must be a whole number, got {n:g}")
        return int(n)
    return max(1, min(os.cpu_count() or 2, 8))


class ChildServer:
    """What both embedded servers share: a child process (`proc`), its log and its start-up check."""
    proc: Optional[subprocess.Popen] = None
    log_path: Path
    checked: str = ""
    # Each server class keeps its own: one server per model (and draft setting) per process.
    _lock: threading.Lock
    _servers: dict

    @classmethod
    def shared(cls, settings: LLMSettings):
        """The class's server for this model (and draft setting), started on first use and again
        after it exited."""
        with cls._lock:
            srv = cls._servers.get(settings.speed_key)
            if srv is None or (srv.proc and srv.proc.poll() is not None):
                srv = cls(settings)
                srv.start()
                cls._servers[settings.speed_key] = srv
            return srv

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


class EmbeddedLlamaCpp(ChildServer, OpenAICompatible):
    """llama-cpp-python's OpenAI-compatible server in a child process on 127.0.0.1.

    A child process, not an in-process model: the app's threads stay responsive while the
    model computes, and a crash in native code cannot take the app down.
    """

    _lock = threading.Lock()
    _servers: dict[str, "EmbeddedLlamaCpp"] = {}

    def __init__(self, settings: LLMSettings):
        from .gguf import gguf_path
        from .models import MODELS

        try:
            import llama_cpp  # noqa: F401
        except ImportError as e:
            raise LLMUnavailable("the embedded LLM needs llama-cpp-python: run `bash scripts/setup.sh`") from e
        self.gguf = gguf_path(settings.model)
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = home() / "llama_server.log"
        self.checked = ""
        super().__init__(settings, base_url=f"http://127.0.0.1:{self.port}/v1",
                         label=f"embedded llama.cpp · {settings.model}"
                               + (f" ({MODELS[settings.model].hf_name})" if settings.model in MODELS else ""))
        self._format_mode = "llama_schema"
        self._tokenizer = None

    def server_command(self) -> list[str]:
        """The child's command line (retrieval.llm.child, then llama_cpp.server's flags)."""
        threads = str(server_threads())
        cmd = [sys.executable, "-m", "retrieval.llm.child", str(os.getpid()), "--model", str(self.gguf), "--host",
               "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.settings.n_ctx), "--n_threads", threads,
               "--n_threads_batch", threads, "--model_alias", self.model, "--verbose", "False",
               *SERVER_FLAGS]
        if self.settings.draft_tokens > 0:  # the child swaps in lookup.PromptLookupDraft
            cmd += ["--draft_model", "prompt-lookup-decoding",
                    "--draft_model_num_pred_tokens", str(self.settings.draft_tokens)]
        if self.settings.prompt_cache_mb > 0:
            # Without it llama.cpp reuses only the previous request's prefix; the agents alternate
            # between steps (read, reason, rewrite), so each step's fixed instructions would be
            # read again every time. The RAM cache keeps a state per prompt and resumes from the
            # longest matching prefix.
            cmd += ["--cache", "True", "--cache_type", "ram",
                    "--cache_size", str(self.settings.prompt_cache_mb << 20)]
        return cmd

    def start(self, wait_s: float = 180.0, tries: int = 3) -> None:
        """Start the child and check it (self_check). A port free when picked can be taken before
        the child binds it (another server on the machine picked the same one): the child then
        exits saying so, and starts again on a new port, at most `tries` times."""
        for attempt in range(1, tries + 1):
            try:
                return self._start_once(wait_s)
            except _PortTaken:
                if attempt == tries:
                    raise LLMUnavailable(f"embedded llama.cpp server: {tries} ports in a row were taken "
                                         f"before it could bind them; see {self.log_path}") from None
                self._move_to(free_port())

    def _move_to(self, port: int) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._client = self._client.with_options(base_url=self.base_url)

    def _start_once(self, wait_s: float) -> None:
        self.log_path = home() / "llama_server.log"
        log = open(self.log_path, "ab")
        since = log.tell()  # the log is kept across starts; this start's lines begin here
        cmd = self.server_command()
        # glibc raises its mmap threshold each time a large block is freed, so the prompt cache's
        # states (10–200 MB, made and dropped all the time) end up on the heap, which it fragments:
        # with a 64 MB cache the server grew 2,401 → 2,546 MB over 35 requests; with the threshold
        # fixed at 128 KiB every state is its own mapping, returned whole (2,360 → 2,378 MB).
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": os.environ.get("MALLOC_MMAP_THRESHOLD_", "131072")}
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        atexit.register(self.stop)
        t0 = time.time()
        while time.time() - t0 < wait_s:
            if self.proc.poll() is not None:
                if PORT_IN_USE in self._text_since(since):
                    raise _PortTaken()
                said = self._said_since(since)
                raise LLMUnavailable(f"embedded llama.cpp server exited with code {self.proc.returncode}"
                                     + (f": {said}" if said else "") + f"; see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self._ready():
                    self.self_check()
                    return
            except OSError:
                pass
            time.sleep(0.25)
        self.stop()
        raise LLMUnavailable(f"embedded llama.cpp server did not start within {wait_s:.0f} s")

    def _ready(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def _text_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _said_since(self, offset: int) -> str:
        """The child's own `hoptrace:` lines (a refusal names what changed) since `offset`."""
        lines = self._text_since(offset).splitlines()
        for i, line in enumerate(lines):
            if line.startswith("hoptrace: the embedded LLM server refuses"):
                rest = [ln.strip() for ln in lines[i + 1:] if ln.startswith("  ")]
                return f"{line[len('hoptrace: '):]} {'; '.join(rest)}".strip()
        return ""

    def status(self) -> dict:
        """The child's answer at patches.STATUS_PATH: version, build, patches in place, their use."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{patches.STATUS_PATH}", timeout=5) as r:
            return json.loads(r.read())

    def self_check(self) -> None:
        """Right after start: the server is our child, of the pinned version and a build that runs
        on this CPU, with every patch in place, and a grammar-constrained reply parses, written
        by the fast sampler under a compact grammar. Stops the child and says what is wrong if not."""
        import json

        try:
            before = self.status()
            wrong = patches.status_problems(before, cpu.flags())
            if not wrong:
                schema = compact_mark({"type": "object", "required": ["city"],
                                       "properties": {"city": {"type": "string", "maxLength": 20}}})
                raw = OpenAICompatible.complete(self, [{"role": "user", "content": 'Name the capital of France as '
                                                                                   'JSON {"city": "..."}.'}],
                                                max_tokens=16, temperature=0.0, seed=0, schema=schema)
                try:
                    value = json.loads(raw.text)
                except ValueError:
                    value = None
                used = self.status().get("used", {})
                if not isinstance(value, dict) or not isinstance(value.get("city"), str):
                    wrong.append(f"a grammar-constrained reply did not parse: {raw.text[:80]!r}")
                elif raw.text.strip() != json.dumps(value, separators=(",", ":"), ensure_ascii=False):
                    wrong.append(f"a compact-marked reply came back with spaces: {raw.text[:80]!r}")
                for counter in ("fast_sampler_replies", "compact_json_grammars"):
                    if used.get(counter, 0) <= before.get("used", {}).get(counter, 0):
                        wrong.append(f"the check's reply did not go through {counter.rsplit('_', 1)[0]}")
        except (OSError, ValueError, LLMCallError) as e:
            wrong = [f"its status could not be read ({e})"]
        if wrong:
            self.stop()
            raise LLMUnavailable("embedded llama.cpp server failed its start-up check: " + "; ".join(wrong)
                                 + f"; see {self.log_path}")
        self.checked = f"llama-cpp-python {before['llama_cpp']}, {len(before['patches'])} patches checked"

    def response_format(self, schema: Optional[dict], name: str) -> Optional[dict]:
        # llama-cpp-python turns a JSON schema inside json_object into a grammar, so even a
        # 0.5B model can only emit JSON of the requested shape. The marks stay: our child
        # process reads them (compact.py, early_stop.py).
        if schema is None:
            return None
        return {"type": "json_object", "schema": schema}

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "",
                 on_token: Optional[Callable[[int], None]] = None) -> RawReply:
        raw = super().complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                               schema=schema, name=name, on_token=on_token)
        return RawReply(early_stop.close(raw.text, schema), raw.tokens_in, raw.tokens_out)

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            from .models import gguf_token_counter
            self._tokenizer = gguf_token_counter(self.gguf)
        return self._tokenizer(text)

    def _stream_options(self) -> dict:
        return {}  # llama-cpp-python's server sends no usage when streaming; we count ourselves

    def count_prompt(self, messages: list[dict]) -> int:
        # Qwen's chat template is ChatML: each message is <|im_start|>role\n…<|im_end|>\n, then the
        # assistant header the model continues from.
        return self.count_tokens(chatml(messages))
