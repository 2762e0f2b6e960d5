"""Which backend serves a request: an endpoint, or the embedded model on llama.cpp's own
`llama-server`. Its own module: server.py builds on backends.py."""
from __future__ import annotations

from .backends import OpenAICompatible
from .errors import LLMUnavailable
from .settings import LLMSettings


def make_backend(settings: LLMSettings):
    if settings.backend == "local":
        from .server import LlamaServer
        return LlamaServer.shared(settings)
    if settings.backend == "openai":
        return OpenAICompatible(settings)
    raise LLMUnavailable("no LLM is configured (--llm none)")
