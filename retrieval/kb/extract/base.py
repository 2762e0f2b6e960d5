"""The extractor interface: passages in, one Extraction per passage out.

An extractor declares which KB layers it fills (`triples`, `events`, `propositions`);
the build records `name@version` per layer and per passage, so a KB can say which
extractor made what. Optional hooks the build uses when present: `commit_every` (results
per committed transaction; small for slow extractors so a kill loses little),
`progress_note()` (text for the progress bar) and `summary()` (kept in the KB metadata).
"""
from __future__ import annotations

from typing import Iterable, Protocol

from ...core.records import Extraction, Passage


class Extractor(Protocol):
    name: str
    version: str
    layers: frozenset[str]

    def extract(self, passages: list[Passage]) -> Iterable[Extraction]:
        """One Extraction per passage, in order. Raise nothing for one bad passage:
        return an Extraction with `failed` set to the reason instead."""
        ...


def label(extractor: Extractor) -> str:
    return f"{extractor.name}@{extractor.version}"
