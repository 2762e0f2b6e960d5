"""HopTrace retrieval toolkit: KB, stores, embedder, methods, bench.

Importing it changes nothing process-wide: thread counts and offline flags are set when a
model is loaded (retrieval/encoders/embedder.py), and `HopTrace` (the notebook API) loads on first use.
"""
from typing import Any

__all__ = ["HopTrace"]


def __getattr__(name: str) -> Any:
    if name == "HopTrace":
        from .api import HopTrace
        return HopTrace
    raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
