"""The LLM interface methods call: `llm.json(stage, ...)` → parsed JSON, recorded in the stage.

Around any backend it adds what every call needs: the SQLite response cache, a
concurrency limit, tolerant JSON parsing with one repair request, and an LLMCall record
(prompt, completion, tokens, latency, model) attached to the stage that made the call.
A call that still fails raises LLMOutputError / LLMCallError, which the tracer turns into
a failed stage with the reason: the run ends cleanly, it never crashes.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Optional, Protocol

from ..core.paths import home
from ..trace.model import LLMCall, Stage
from .backends import RawReply
from .cache import CachedReply, ResponseCache, cache_key
from .choose import make_backend
from .compact import unmark
from .errors import LLMOutputError
from .jsonparse import parse_json
from .settings import LLMSettings


class ChatBackend(Protocol):
    model: str

    def describe(self) -> str: ...

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "") -> RawReply: ...

    def count_tokens(self, text: str) -> int: ...


def render_prompt(messages: list[dict]) -> str:
    """The prompt as one readable text, for traces."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


class LLM:
    """`backend` may be given (tests pass a scripted double); otherwise it is made from
    `settings` on the first request, so a run of LLM-free methods never starts a model."""

    def __init__(self, settings: LLMSettings, backend: Optional[ChatBackend] = None,
                 cache: Optional[ResponseCache] = None):
        self.settings = settings
        self.cache = cache
        self._backend = backend
        self._start_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        # Requests holding or waiting for a slot: a stage that must wait says how many are ahead.
        self._in_flight = 0
        self._count_lock = threading.Lock()
        # `bench --repeat`: the repetition being run. Above 1 the response cache is neither read
        # nor written, and the seed moves with it, so a repeat is a fresh request.
        self.repetition = 1

    @property
    def backend(self) -> ChatBackend:
        with self._start_lock:
            if self._backend is None:
                self._backend = make_backend(self.settings)
            return self._backend

    def stop(self) -> None:
        """Stop the backend if one was started (the embedded model server's process)."""
        stop = getattr(self._backend, "stop", None)
        if stop is not None:
            stop()

    def start(self) -> "LLM":
        """Start the backend now (the app does this at launch so the first question is not charged)."""
        _ = self.backend
        return self

    @property
    def model(self) -> str:
        return self._backend.model if self._backend is not None else self.settings.model

    @property
    def endpoint(self) -> str:
        """Where requests go, as the response cache keys it: the URL of an endpoint, or, for the
        embedded model, its server's build (the port changes with every start; another build may
        write another reply at a near-tie, so its replies are not reused)."""
        return self._endpoint(self.server)

    def _endpoint(self, server: str) -> str:
        if self.settings.backend == "local":
            return f"local · {server}"
        return self.settings.base_url or self.settings.backend

    def started_server(self) -> str:
        """The server and build if the backend has started (never starts it), else ""."""
        return getattr(self._backend, "server", "") if self._backend is not None else ""

    @property
    def server(self) -> str:
        """The embedded model's server and build (started if it is not yet), else ""."""
        if self.settings.backend != "local":
            return ""
        return getattr(self.backend, "server", "")

    def describe(self) -> str:
        return self._backend.describe() if self._backend is not None else self.settings.describe()

    def health(self) -> str:
        """The backend's own state line (the embedded server's child: pid, checks, log), or ""."""
        return getattr(self._backend, "health", lambda: "")() if self._backend is not None else ""

    # --- one request, cached ------------------------------------------------------------------
    def _complete(self, stage: Optional[Stage], purpose: str, messages: list[dict], schema: Optional[dict],
                  max_tokens: int, temperature: Optional[float] = None, seed: Optional[int] = None) -> CachedReply:
        temperature = self.settings.temperature if temperature is None else temperature
        seed = (self.settings.seed if seed is None else seed) + self.repetition - 1
        params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed, "schema": schema}
        server = self.server   # once a call: the endpoint and the call's record both name it
        key = cache_key(self.model, messages, params, self._endpoint(server))
        cache = self.cache if self.repetition == 1 else None
        cached = cache.get(key) if cache is not None else None
        t0, started = time.perf_counter(), time.time()
        sent = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                "json_schema": bool(schema), **({"server": server} if server else {})}
        if cached is None:
            try:
                raw = self._send(stage, purpose, messages, schema, max_tokens, temperature, seed)
            except Exception as e:
                self._record(stage, purpose, messages, "", 0, 0, (time.perf_counter() - t0) * 1000, False, str(e),
                             started, sent)
                raise
            latency = (time.perf_counter() - t0) * 1000
            t_in = raw.tokens_in if raw.tokens_in is not None else self.backend.count_tokens(render_prompt(messages))
            t_out = raw.tokens_out if raw.tokens_out is not None else self.backend.count_tokens(raw.text)
            cached = CachedReply(raw.text, t_in, t_out, round(latency, 3))
            if cache is not None:
                cache.put(key, self.model, {"messages": messages, **params}, cached)
            self._record(stage, purpose, messages, raw.text, t_in, t_out, latency, False, None, started, sent)
        else:
            self._record(stage, purpose, messages, cached.text, cached.tokens_in, cached.tokens_out,
                         (time.perf_counter() - t0) * 1000, True, None, started, sent)
        return cached

    def _send(self, stage: Optional[Stage], purpose: str, messages: list[dict], schema: Optional[dict],
              max_tokens: int, temperature: float, seed: int) -> RawReply:
        """One request through the concurrency limit, reporting to the stage while it waits for
        a slot and, on a backend that streams, each token as it is written."""
        with self._count_lock:
            ahead = self._in_flight - self.settings.max_concurrency + 1
            self._in_flight += 1
        try:
            if stage is not None and ahead > 0:
                stage.report(llm="waiting", purpose=purpose, ahead=ahead)
            asked = time.perf_counter()
            with self._slots:
                if isinstance(stage, Stage):   # a UsageMeter (KB extraction) stands in for a stage too
                    stage.wait_ms = round(stage.wait_ms + (time.perf_counter() - asked) * 1000, 3)
                backend = self.backend
                if stage is None or not getattr(backend, "streams", False):
                    return backend.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                            schema=schema, name=purpose)
                t0 = time.perf_counter()
                stage.report(llm="reading", purpose=purpose, tokens_out=0, elapsed_s=0.0)
                last = [0.0]

                def on_token(n: int) -> None:
                    now = time.perf_counter()
                    if now - last[0] >= 0.4:  # a UI update per ~0.4 s, not one per token
                        last[0] = now
                        stage.report(llm="writing", purpose=purpose, tokens_out=n, max_tokens=max_tokens,
                                     elapsed_s=round(now - t0, 1))

                return backend.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                        schema=schema, name=purpose, on_token=on_token)
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def _record(self, stage, purpose, messages, text, t_in, t_out, latency, cached, error=None,
                started: float = 0.0, params: Optional[dict] = None) -> None:
        if stage is not None:
            stage.add_llm_call(LLMCall(self.model, render_prompt(messages), text, int(t_in), int(t_out),
                                       round(latency, 3), cached, error, purpose, started, params or {}))

    # --- what methods call ----------------------------------------------------------------------
    def json(self, stage: Optional[Stage], purpose: str, messages: list[dict], schema: dict,
             validate: Optional[Callable[[Any], Any]] = None, max_tokens: int = 512,
             temperature: Optional[float] = None, seed: Optional[int] = None) -> Any:
        """Ask for JSON matching `schema`; `validate` may clean the value or raise ValueError.

        On unparsable or invalid output, one repair request shows the model its answer and
        the problem; a second failure raises LLMOutputError naming both problems.
        """
        reply = self._complete(stage, purpose, messages, schema, max_tokens, temperature, seed)
        try:
            return _checked(reply.text, validate)
        except ValueError as e:
            first = _with_cutoff(e, reply, max_tokens)
            if reply.tokens_out >= max_tokens:
                # Cut off: a small model repeating itself. Shown its answer back it repeats again
                # at greedy decoding (seen twice on one long passage, 2 x 512 tokens), and the
                # answer would add its length to the prompt; ask the same question, sampling.
                reply2 = self._complete(stage, purpose + " (repair)", messages, schema, max_tokens,
                                        RESAMPLE_TEMPERATURE, (seed or 0) + 1)
            else:
                repair = messages + [
                    {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": f"That answer cannot be used: {first}. Reply again with only a "
                                                f"JSON value matching this schema, nothing "
                                                f"else:\n{json.dumps(unmark(schema))}"}]
                reply2 = self._complete(stage, purpose + " (repair)", repair, schema, max_tokens, temperature, seed)
            try:
                return _checked(reply2.text, validate)
            except ValueError as e2:
                second = _with_cutoff(e2, reply2, max_tokens)
                raise LLMOutputError(f"{purpose}: the model's answer is not usable JSON ({first}); after one "
                                     f"repair request still not ({second})") from e2


RESAMPLE_TEMPERATURE = 0.7


def _with_cutoff(error: ValueError, reply: CachedReply, max_tokens: int) -> str:
    """Name the usual cause of broken JSON from a small model: it ran out of tokens."""
    if reply.tokens_out >= max_tokens:
        return f"{error}; the answer was cut off at the {max_tokens}-token limit"
    return str(error)


def _checked(text: str, validate: Optional[Callable[[Any], Any]]) -> Any:
    value = parse_json(text)
    return validate(value) if validate else value


def get_llm(settings: Optional[LLMSettings] = None) -> Optional[LLM]:
    """The configured LLM (started lazily), or None for `--llm none`."""
    settings = settings or LLMSettings.parse()
    if settings.backend == "none":
        return None
    cache = ResponseCache(home() / "llm_cache.sqlite") if settings.cache else None
    return LLM(settings, cache=cache)
