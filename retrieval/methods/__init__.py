"""Method registry: CLI and UI names → method classes."""
from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .base import Context, Method
from .baselines import BM25, Composed, Dense, RRFHybrid

METHODS: dict[str, type[Method]] = {m.name: m for m in (BM25, Dense, RRFHybrid, Composed)}


def make_method(name: str, ctx: Context, **overrides: Any) -> Method:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    return METHODS[name](ctx, **overrides)


__all__ = ["METHODS", "Context", "Method", "make_method"]
