"""One short request before a batch of LLM work (judging a pool, generating questions): an endpoint
that does not answer is named at once, before anything is recorded (otherwise every item of the
batch would be stored as failed)."""
from __future__ import annotations

import time

from ..core.errors import ConfigError, HopTraceError

_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def probe(llm, purpose: str, who: str, nothing: str) -> None:
    """Raises ConfigError "{who} does not answer (model): why; {nothing}" when the request fails."""
    try:
        # A nonce: a cached reply from an earlier session must not stand in for an answer now.
        llm.json(None, purpose, [{"role": "user", "content": f'Reply with {{"ok": true}}. ({time.time()})'}],
                 _SCHEMA, max_tokens=10)
    except HopTraceError as e:
        raise ConfigError(f"{who} does not answer ({llm.describe()}): {e}; {nothing}") from None
