"""Which KB layers each method reads, and a clear refusal when the KB lacks one.

A layer is one of the KB's tables as `hoptrace kb info` counts them. A method declares the layers
it reads (`Method.layers`, or `needs()` where its config decides, as GEAR's base does). A run on a
KB without one of them is refused before any stage runs, naming the layer. Nothing then fails
half-way with an empty index, and a user knows what to build.
"""
from __future__ import annotations

import threading
import weakref
from typing import Iterable

from ..core.errors import KBError

LAYERS = ("passages", "triples", "partial_triples", "predicates", "entities", "same_as", "events", "propositions")

# What a run can be refused for. The passages and the extractors' layers are built or not; the
# layers derived from them (partial triples, predicates, entities, same_as) can be empty in a KB
# that built them (a small corpus with no synonym pair), so an empty one proves nothing and is
# not refused: `kb info` still shows it as empty.
CHECKED = ("passages", "triples", "events", "propositions")

_PRESENT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def held(info) -> frozenset[str]:
    """The layers a KB's StoreInfo shows: rows in them, or their extractor's run recorded as done
    (a layer can be built and empty)."""
    built = {row["layer"] for row in info.extraction or [] if row.get("status") == "done"}
    return frozenset(layer for layer in LAYERS if info.counts.get(layer, 0) > 0 or layer in built)


def present(store) -> frozenset[str]:
    """The checked layers this open store holds. A KB is published whole and then only read, so
    an open store's answer is kept."""
    with _LOCK:
        got = _PRESENT.get(store)
        if got is None:
            got = _PRESENT[store] = held(store.info()) & frozenset(CHECKED)
    return got


def check(store, method: str, needed: Iterable[str]) -> None:
    """KBError naming the first layer `method` needs that the KB lacks."""
    have = present(store)
    missing = [layer for layer in needed if layer in CHECKED and layer not in have]
    if missing:
        name = store.info().meta.get("name") or store.info().location
        raise KBError(f"{method} needs the KB's {missing[0]} layer"
                      + (f" (and {', '.join(missing[1:])})" if len(missing) > 1 else "")
                      + f", which KB {name} does not have: rebuild or extend it with the extractor that makes it "
                      "(`hoptrace kb info` lists its layers and the methods they serve)")
