"""Which LLM to use: one settings record, read from flags or environment.

Spec strings (`--llm` / HOPTRACE_LLM):
  local                      the embedded default: llama.cpp server on 127.0.0.1, Qwen2.5-Coder-1.5B
  local:qwen2.5-coder-0.5b   the smaller embedded model (about twice as fast, weaker)
  local:/path/to/model.gguf  any GGUF file, embedded (also --llm-model PATH.gguf with local)
  none                       no LLM: methods that need one say so (GEAR falls back to NaiveGE)
  openai                     api.openai.com; key from HOPTRACE_LLM_API_KEY or OPENAI_API_KEY
  http(s)://host:port/v1     any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, HF router)
For the last two the model is HOPTRACE_LLM_MODEL (or --llm-model).
HOPTRACE_LLM_CACHE=0 bypasses the response cache (to time real calls).
HOPTRACE_DRAFT_TOKENS=N sets the embedded server's n-gram drafts (server.py; 0 = off).
HOPTRACE_LLM_THREADS=N sets the embedded server's threads (default: the cores, at most 8).
HOPTRACE_LLM_SLOTS=N gives the embedded llama-server N parallel slots (default 1).
HOPTRACE_LLAMA_SERVER=PATH runs another llama-server binary than the one setup.sh built.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Optional

from ..core.envvars import positive_number, whole_number
from ..core.errors import ConfigError
from .errors import LLMUnavailable
from .gguf import check_gguf, looks_like_path
from .models import DEFAULT_MODEL, MODELS

BACKENDS = ("local", "openai", "none")
MAX_DRAFT_TOKENS = 15


def slots() -> int:
    """The embedded server's parallel slots: HOPTRACE_LLM_SLOTS, by default 1 (on two cores one
    decode takes both). As many calls go to it at once (max_concurrency)."""
    return whole_number("HOPTRACE_LLM_SLOTS", 1, minimum=1)


def prompt_slots() -> int:
    """The embedded server's slots that keep a kind of request's prompt between its requests
    (pins.py): HOPTRACE_LLM_PROMPT_SLOTS, by default 4 (a method's steps and the answer, each in
    its own); 1 gives every request the one slot and llama-server's RAM cache. The server runs
    max(slots(), prompt_slots()) slots, each with the context n_ctx."""
    return whole_number("HOPTRACE_LLM_PROMPT_SLOTS", 4, minimum=1)


def check_draft_tokens(value, source: str) -> int:
    """A draft length from `source` (a flag or a variable, named in the error): 0..MAX_DRAFT_TOKENS."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > MAX_DRAFT_TOKENS:
        raise ConfigError(f"{source} must be a whole number 0..{MAX_DRAFT_TOKENS}, got {value!r}")
    return int(text)


# A public demo's server keeps its memory flat: the cache fills in its first minutes (a SAG run
# saves ~60 MB of states) and then holds what the latest runs' steps share, their instructions.
# With 1,024 MB it was still filling 30 minutes into the soak (the model server +26 %).
PUBLIC_PROMPT_CACHE_MB = 256


@dataclass(frozen=True)
class LLMSettings:
    backend: str = "local"                 # local | openai (any OpenAI-compatible URL) | none
    model: str = DEFAULT_MODEL
    base_url: Optional[str] = None
    api_key: Optional[str] = None
    timeout_s: float = 300.0               # a 1.5B model on 2 cores needs ~40 s for a 2k-token read
    max_retries: int = 3                   # HTTP retries with exponential backoff (openai client's)
    concurrency: Optional[int] = None      # None: the embedded server's slots for local, 4 for HTTP
    temperature: float = 0.0               # GEAR §6.2 and GRASP run at temperature 0
    seed: int = 0
    cache: bool = True                     # SQLite response cache in $HOPTRACE_HOME/llm_cache.sqlite
    # The embedded model's context for one request, each server slot's (HOPTRACE_LLM_CTX): SAG's
    # rerank of 100 candidate events (the paper profile) is the longest prompt measured, 7,165
    # tokens with its reply; GEAR's read of 15 passages ~2.5k. Its KV costs ~28 KB a token for the
    # 1.5B model: 0.9 GB for four slots of 8,192.
    n_ctx: int = 8192
    # llama.cpp's prompt-state cache (RAM) for the embedded server; 0 turns it off.
    # HOPTRACE_PROMPT_CACHE_MB sets it; public mode uses PUBLIC_PROMPT_CACHE_MB unless it is set.
    prompt_cache_mb: int = 1024
    # N-gram drafts of the embedded server (llama-server's ngram-simple speculation): up to this
    # many tokens guessed from the text so far and checked in one pass; 0 = off. Off for the methods (their recall was
    # measured without; a draft changes the rounding and so, sometimes, a greedy pick);
    # `hoptrace build` turns it on for extraction (BUILD_DRAFT_TOKENS).
    draft_tokens: int = 0
    # Whether HOPTRACE_DRAFT_TOKENS set draft_tokens: then it also wins over a build's default.
    draft_from_env: bool = field(default=False, compare=False)

    @property
    def speed_key(self) -> str:
        """What a measured writing speed belongs to: the model, and drafts if on."""
        return f"{self.model}+draft{self.draft_tokens}" if self.draft_tokens else self.model

    @property
    def max_concurrency(self) -> int:
        return self.concurrency or (slots() if self.backend == "local" else 4)

    def describe(self) -> str:
        if self.backend == "none":
            return "none"
        if self.backend == "local":
            return f"embedded llama.cpp · {self.model}"
        return f"{self.base_url} · {self.model}"

    @classmethod
    def parse(cls, spec: Optional[str] = None, model: Optional[str] = None, **overrides) -> "LLMSettings":
        spec = (spec if spec is not None else os.environ.get("HOPTRACE_LLM", "local")).strip()
        model = model or os.environ.get("HOPTRACE_LLM_MODEL")
        key = os.environ.get("HOPTRACE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if spec == "none":
            s = cls(backend="none", model="")
        elif spec == "local" or spec.startswith("local:"):
            name = spec.partition(":")[2] or model or DEFAULT_MODEL
            if name not in MODELS and looks_like_path(name):
                name = str(check_gguf(name))   # any GGUF file, embedded
            elif name not in MODELS:
                raise LLMUnavailable(f"unknown embedded model {name!r}; available: {', '.join(MODELS)}, "
                                     "or a GGUF file's path")
            s = cls(backend="local", model=name)
        elif spec == "openai" or spec.startswith(("http://", "https://")):
            if not model:
                raise LLMUnavailable(f"LLM endpoint {spec!r} needs a model name: set --llm-model or HOPTRACE_LLM_MODEL")
            url = "https://api.openai.com/v1" if spec == "openai" else spec.rstrip("/")
            s = cls(backend="openai", model=model, base_url=url, api_key=key)
        else:
            raise LLMUnavailable(f"unknown LLM spec {spec!r}; use local, local:MODEL, none, openai or an http(s) URL")
        if os.environ.get("HOPTRACE_LLM_CACHE", "1").lower() in ("0", "off", "false", "no"):
            s = replace(s, cache=False)
        s = replace(s, **overrides) if overrides else s
        n_ctx = whole_number("HOPTRACE_LLM_CTX", 0, minimum=512)
        if n_ctx:
            s = replace(s, n_ctx=n_ctx)
        cache_mb = positive_number("HOPTRACE_PROMPT_CACHE_MB")
        if cache_mb is not None:
            s = replace(s, prompt_cache_mb=int(cache_mb))
        draft = os.environ.get("HOPTRACE_DRAFT_TOKENS", "").strip()
        if draft:  # the environment wins over code defaults, as for the cache
            s = replace(s, draft_tokens=check_draft_tokens(draft, "HOPTRACE_DRAFT_TOKENS"), draft_from_env=True)
        return s
