"""Chat backends behind one narrow interface, all spoken through the `openai` package.

`OpenAICompatible` talks to any OpenAI-style endpoint. The embedded model (server.py) starts
llama.cpp's `llama-server` on 127.0.0.1 with the assembled Qwen GGUF and then is an
OpenAI-compatible backend like any other, so one code path serves both.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.envvars import positive_number
from ..core.errors import ConfigError
from .compact import unmark
from .errors import LLMCallError
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

    def format_kwargs(self, schema: Optional[dict], name: str) -> dict:
        """The request's arguments that bind its reply to `schema` (none without one)."""
        fmt = self.response_format(schema, name)
        return {"response_format": fmt} if fmt else {}

    # Streams when asked for progress (on_token), so the app can show tokens as they come.
    streams = True

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int,
                 schema: Optional[dict] = None, name: str = "",
                 on_token: Optional[Callable[[int], None]] = None) -> RawReply:
        import openai

        while True:
            kwargs = self.format_kwargs(schema, name)
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
                if kwargs and weaker and ("response_format" in msg or "json_schema" in msg):
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
