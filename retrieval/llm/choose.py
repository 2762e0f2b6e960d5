"""Which backend serves a request: an endpoint, or the embedded model in one of two servers
(llama-cpp-python's, patched, by default; llama.cpp's own `llama-server` with
HOPTRACE_LLM_SERVER=llama-server). Its own module: server.py builds on backends.py."""
from __future__ import annotations

import os

from ..core.errors import ConfigError
from .backends import EmbeddedLlamaCpp, OpenAICompatible
from .errors import LLMUnavailable
from .settings import LLMSettings

LLAMA_SERVERS = ("llama-cpp-python", "llama-server")


def embedded_server() -> str:
    """Which program serves the embedded model: HOPTRACE_LLM_SERVER, by default llama-cpp-python's
    patched server; `llama-server` is llama.cpp's own (server.py)."""
    name = os.environ.get("HOPTRACE_LLM_SERVER", "").strip() or LLAMA_SERVERS[0]
    if name not in LLAMA_SERVERS:
        raise ConfigError(f"HOPTRACE_LLM_SERVER must be one of {', '.join(LLAMA_SERVERS)}, got {name!r}")
    return name


def make_backend(settings: LLMSettings):
    if settings.backend == "local":
        if embedded_server() == "llama-server":
            from .server import LlamaServer
            return LlamaServer.shared(settings)
        return EmbeddedLlamaCpp.shared(settings)
    if settings.backend == "openai":
        return OpenAICompatible(settings)
    raise LLMUnavailable("no LLM is configured (--llm none)")
