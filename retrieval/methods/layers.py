"""Which KB units each method reads, and a clear refusal when the KB lacks one.

A unit is a layer's rows ("triples") or a layer's vectors ("triples vectors"), as
`retrieval/kb/readiness.py` defines them. A method declares the layers it reads and those whose
vectors it searches (`Method.layers`, `Method.vectors`, or `units_for()` where its config decides,
as GEAR's base does). A run on a KB without one of them is refused before any stage runs, naming
it; on a KB still being built, the refusal says when the build expects it. A build serves each
method as soon as its units are whole (`targets` tells it which units each method needs).
"""
from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Iterable, Optional

from ..core.errors import KBError
from ..kb.readiness import EXTRACTED, ROWS, is_vectors, read_status

LAYERS = ROWS

# What a KB served by a backend that cannot tell whole units from others (Elasticsearch, pushed
# from a finished KB) is checked for: the passages and the extractors' layers. The layers derived
# from them can be empty in a KB that built them (a small corpus with no synonym pair).
CHECKED = ("passages",) + EXTRACTED

_PRESENT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def held(info) -> frozenset[str]:
    """The layers a KB's StoreInfo shows: rows in them, or their extractor's run recorded as done
    (a layer can be built and empty)."""
    built = {row["layer"] for row in info.extraction or [] if row.get("status") == "done"}
    return frozenset(layer for layer in LAYERS if info.counts.get(layer, 0) > 0 or layer in built)


def present(store) -> Optional[frozenset[str]]:
    """The whole units of this open store, or None where the backend cannot tell (then the checked
    layers are). A published KB is never written again, so an open store's answer is kept."""
    with _LOCK:
        if store not in _PRESENT:
            whole = getattr(store, "whole_units", None)
            _PRESENT[store] = whole() if whole else None
        return _PRESENT[store]


def _root_first(unit: str) -> tuple[int, int]:
    """Missing units, the cause first: passages, then an extractor's layer, then what derives from
    them, then vectors, then same_as (derived from the entities' vectors)."""
    if unit == "same_as":
        return (4, 0)
    if unit == "passages":
        return (0, 0)
    if unit in EXTRACTED:
        return (1, EXTRACTED.index(unit))
    return (3, 0) if is_vectors(unit) else (2, 0)


def missing(store, needed: Iterable[str]) -> list[str]:
    whole = present(store)
    if whole is None:
        have = held(store.info())
        return [u for u in needed if not is_vectors(u) and u in CHECKED and u not in have]
    return sorted((u for u in dict.fromkeys(needed) if u not in whole), key=_root_first)


def check(store, method: str, needed: Iterable[str]) -> None:
    """KBError naming the unit `method` needs that the KB lacks, and, where a build of it is
    running, when that build expects the method."""
    lacks = missing(store, needed)
    if not lacks:
        return
    info = store.info()
    # Never the file's path: public mode shows this message to visitors.
    name = info.meta.get("name") or Path(info.location).stem
    what = f"{lacks[0]}" if is_vectors(lacks[0]) else f"{lacks[0]} layer"
    more = f" (and {', '.join(lacks[1:])})" if len(lacks) > 1 else ""
    status = building(store)
    if status is not None:
        raise KBError(f"{method} is not ready on KB {name} yet: it needs the KB's {what}{more}, which its build "
                      f"is still making ({status.state(method)}); ready now: "
                      f"{', '.join(sorted(status.ready)) or 'none yet'}")
    raise KBError(f"{method} needs the KB's {what}{more}, which KB {name} does not have: build it with "
                  f"`hoptrace build ... --methods {method}` (it adds just those layers to the KB), or "
                  "rebuild with the extractor that makes them (`hoptrace kb info` lists its layers and the "
                  "methods they serve)")


def building(store):
    """The status of a running (or stopped) build of this store's KB, or None."""
    path = getattr(store, "path", None)
    return read_status(Path(path)) if path is not None else None
