"""`kb`, the read-only view a user's retriever gets: what HopTrace's own methods read, and
nothing that writes.

    def retrieve(question, k, kb):
        hits = kb.bm25(question, 50)                 # [(passage id, score)], best first
        texts = kb.texts([pid for pid, _ in hits])   # {passage id: (title, text)}
        ...

A plugin may ignore it and call its own index; its hits are then mapped back to this KB's
passages by id, exact title or normalised text (hits.py).
"""
from __future__ import annotations

import re
import threading
import weakref
from typing import Any, Optional, Sequence

import numpy as np

from ...core.records import Passage, Triple
from ..context import Context


def normalise_text(text: str) -> str:
    """Lower case, whitespace runs as one space: how a hit's text is matched to a passage."""
    return re.sub(r"\s+", " ", text or "").strip().lower()


# title → ids and normalised text → id, per open store: built on the first hit that names no id,
# then shared by every run on that store (a view is made per run).
_LOOKUPS: "weakref.WeakKeyDictionary[Any, tuple[dict, dict]]" = weakref.WeakKeyDictionary()
_LOOKUPS_LOCK = threading.Lock()


class KBView:
    """One KB, read-only. Every method returns plain values or HopTrace's frozen records."""

    def __init__(self, ctx: Context):
        self._ctx = ctx

    # --- what a retriever searches ---------------------------------------------------------------
    def bm25(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The KB's BM25 over passages (title + text), best first."""
        return [(str(h.id), float(h.score)) for h in self._ctx.store.bm25("passages", query, k)]

    def dense(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Cosine search with the KB's own embedder, best first."""
        vec = self._ctx.embedder.encode_query(query).vector
        return [(str(h.id), float(h.score)) for h in self._ctx.store.knn("passages", vec, k)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The KB's embedder: one unit-length row per text."""
        return self._ctx.embedder.encode(list(texts))

    @property
    def embedder_name(self) -> str:
        return self._ctx.embedder.name

    @property
    def llm(self) -> Any:
        """The configured LLM client (retrieval/llm/client.py), or None when the app runs without one."""
        return self._ctx.llm

    # --- what it reads ---------------------------------------------------------------------------
    def passages(self, ids: Sequence[str]) -> list[Passage]:
        return self._ctx.store.passages(list(ids))

    def texts(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        return {p.id: (p.title, p.text) for p in self.passages(ids)}

    def passage_ids(self) -> list[str]:
        """Every passage id of the KB (for a plugin that indexes the KB itself)."""
        ids = getattr(self._ctx.store, "all_passage_ids", None)
        if ids is None:
            raise NotImplementedError(f"the {self._ctx.store.info().backend} store cannot list its passages")
        return ids()

    def triples(self, passage_ids: Sequence[str]) -> list[Triple]:
        """The (subject, predicate, object) triples extracted from these passages."""
        return self._ctx.store.triples_of_passages(passage_ids)

    def triples_of_entities(self, names: Sequence[str]) -> list[Triple]:
        return self._ctx.store.triples_of_entities(names)

    def entity_ids(self, names: Sequence[str]) -> dict[str, int]:
        return self._ctx.store.entity_ids(names)

    # --- how hits find their passage (hits.py) ---------------------------------------------------
    def ids_by_title(self, title: str) -> list[str]:
        return self._lookups()[0].get(title, [])

    def id_by_text(self, text: str) -> Optional[str]:
        return self._lookups()[1].get(normalise_text(text))

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids are passages of the KB (one read for all of them)."""
        return {p.id for p in self._ctx.store.passages(list(dict.fromkeys(ids)))}

    def _lookups(self) -> tuple[dict, dict]:
        store = self._ctx.store
        with _LOOKUPS_LOCK:
            got = _LOOKUPS.get(store)
            if got is None:
                by_title: dict[str, list[str]] = {}
                by_text: dict[str, str] = {}
                for p in self.passages(self.passage_ids()):
                    by_title.setdefault(p.title, []).append(p.id)
                    by_text.setdefault(normalise_text(p.text), p.id)
                got = _LOOKUPS[store] = (by_title, by_text)
        return got
