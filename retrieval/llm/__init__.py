"""The LLM layer: one interface (`LLM.json`) over the embedded llama.cpp model or any
OpenAI-compatible endpoint, with a response cache, JSON repair and per-call records."""
from .client import LLM, ChatBackend, get_llm, render_prompt
from .errors import LLMCallError, LLMOutputError, LLMUnavailable
from .jsonparse import parse_json
from .settings import LLMSettings

__all__ = ["LLM", "ChatBackend", "LLMCallError", "LLMOutputError", "LLMSettings", "LLMUnavailable", "get_llm",
           "parse_json", "render_prompt"]
