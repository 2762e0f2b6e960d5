"""What a method runs on: the backends, chosen by configuration and handed to every stage."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..encoders.embedder import Embedder
from ..store.base import SearchStore


@dataclass
class Context:
    """The backends a method may use; chosen by configuration, never by the method."""
    store: SearchStore
    embedder: Embedder
    llm: Any = None  # the LLM client interface (retrieval.llm.client.LLM); None = no LLM available
    profile: Optional[str] = None  # paper | local; None = by backend (methods/profiles.py)

    # What the methods read on every query: loaded up front, the first question is not
    # charged for loading (bench, `ask` and the app all call warm()).
    WARM_INDICES = ("passages", "partial_triples", "entities", "predicates", "triples", "events", "propositions")

    def warm(self) -> None:
        warm = getattr(self.store, "warm", None)
        if warm:
            warm(self.WARM_INDICES)
        self.embedder.encode_query("warm up")
