"""LLM errors: each names the backend and what went wrong, so a stage can show it as-is."""
from ..core.errors import ConfigError, HopTraceError


class LLMUnavailable(ConfigError):
    """No LLM is configured, or the configured one cannot be reached or started."""


class LLMCallError(HopTraceError):
    """A request failed after its retries (timeout, HTTP error, server died)."""


class LLMOutputError(HopTraceError):
    """The model's answer could not be parsed as the JSON the stage asked for, even after one repair."""
