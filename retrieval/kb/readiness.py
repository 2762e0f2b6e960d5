"""What a KB can serve while it is still being built: its units, which of them are whole, and
what the person waiting is told about each method.

A unit is a layer's rows ("triples") or a layer's vectors ("triples vectors"). A method needs some
units (`retrieval/methods/layers.py`); it is ready when all of them are whole. Wholeness is read
from the KB's content and the marks a build leaves when a step finishes (extraction state for
every passage, `derived_*_upto`, `vectors_upto`, `same_as_upto`), never from a list a build
claims: a snapshot taken half-way through a step shows that step's unit as not whole.

A build publishes a snapshot of its working copy each time the set of ready methods grows
(`build.py`), so a KB opens for bm25 seconds after the build starts and for each other method as
its units land. While it runs it keeps a small status file beside the KB (`<kb>.status.json`)
that the app and `hoptrace kb info` read: each method ready, or when it should be.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from . import db
from .schema import EMBEDDED_LAYERS

EXTRACTED = ("triples", "events", "propositions")            # made by extractors
DERIVED_FROM_TRIPLES = ("partial_triples", "predicates")      # made from the triples (GRIEVER App. A.1)
ROWS = ("passages", "triples", "partial_triples", "predicates", "entities", "same_as", "events", "propositions")
VECTOR_SUFFIX = " vectors"


def vectors(layer: str) -> str:
    """The unit of a layer's vectors."""
    return layer + VECTOR_SUFFIX


def is_vectors(unit: str) -> bool:
    return unit.endswith(VECTOR_SUFFIX)


def layer_of(unit: str) -> str:
    return unit[: -len(VECTOR_SUFFIX)] if is_vectors(unit) else unit


def _max_rowid(con: sqlite3.Connection, table: str) -> int:
    return con.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0]


def whole_units(con: sqlite3.Connection) -> frozenset[str]:
    """The units of this KB (or a build's working copy) that are whole."""
    passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
    if not passages:
        return frozenset()
    # A KB finished before builds left these marks (or written by another tool, as bench-store's
    # synthetic KBs are) held every layer it has rows for, whole, with its vectors.
    legacy = db.get_meta(con, "vectors_upto") is None and db.get_meta(con, "complete", False)

    def caught_up(mark: str, table: str) -> bool:
        return legacy or db.get_meta(con, mark, 0) >= _max_rowid(con, table)

    out = {"passages"}
    covered = dict(con.execute("SELECT layer, count(*) FROM extraction_state GROUP BY layer").fetchall())
    out.update(layer for layer in EXTRACTED if covered.get(layer, 0) >= passages
               or (legacy and _max_rowid(con, layer) > 0))
    if "triples" in out and caught_up("derived_partials_upto", "triples"):
        out.update(DERIVED_FROM_TRIPLES)
    if any(layer in out for layer in EXTRACTED) and caught_up("derived_entities_upto", "triples"):
        out.add("entities")
    upto = db.get_meta(con, "vectors_upto", {}) or {}
    for layer in EMBEDDED_LAYERS:
        if layer in out and (legacy or upto.get(layer, -1) >= _max_rowid(con, layer)):
            out.add(vectors(layer))
    if vectors("entities") in out and caught_up("same_as_upto", "entities"):
        out.add("same_as")
    return frozenset(out)


def ready_methods(targets: dict[str, tuple[str, ...]], whole: Iterable[str]) -> list[str]:
    have = set(whole)
    return [m for m, units in targets.items() if all(u in have for u in units)]


# -- the status file a running build keeps beside its KB -------------------------------------------------
@dataclass
class Readiness:
    """A running build's word on each method: ready since (seconds after the build started), or
    expected in `eta_s` seconds from `updated`. `alive`: the build's process still runs."""
    kb: str
    started: float
    updated: float
    pid: int
    ready: dict[str, float] = field(default_factory=dict)      # method → seconds after start
    eta_s: dict[str, float] = field(default_factory=dict)      # method → seconds from `updated`
    waiting: list[str] = field(default_factory=list)           # asked for, no estimate yet
    step: str = ""
    alive: bool = True

    def left_s(self, method: str, now: Optional[float] = None) -> Optional[float]:
        if method not in self.eta_s:
            return None
        return max(0.0, self.eta_s[method] - ((now or time.time()) - self.updated))

    def state(self, method: str, now: Optional[float] = None) -> str:
        """"ready", "ready in ~40 s", "building", or "not built" for a method the build will not make."""
        if method in self.ready:
            return "ready"
        if not self.alive:
            return "build stopped"
        left = self.left_s(method, now)
        if left is not None:
            return f"ready in ~{_secs(left)}"
        return "building" if method in self.waiting else "not built"

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "alive"}


def _secs(s: float) -> str:
    s = max(1, int(round(s)))
    return f"{s} s" if s < 120 else f"{s // 60} min"


def status_path(kb_path: Path) -> Path:
    return kb_path.with_name(kb_path.name + ".status.json")


def write_status(kb_path: Path, status: Readiness) -> None:
    """Atomically: a reader sees the old file or the new one, never half of one."""
    path = status_path(kb_path)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status.as_dict()))
    os.replace(tmp, path)


def clear_status(kb_path: Path) -> None:
    status_path(kb_path).unlink(missing_ok=True)


def read_status(kb_path: Path) -> Optional[Readiness]:
    """The status of a build of `kb_path`, or None when no build has one. A build whose process is
    gone (killed) reads as stopped."""
    try:
        raw = json.loads(status_path(kb_path).read_text())
        st = Readiness(**raw)
    except (OSError, ValueError, TypeError):
        return None
    st.alive = _alive(st.pid)
    return st


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def readiness_line(order: list[tuple[float, list[str]]]) -> str:
    """`ready: bm25 (3 s) · dense, rrf_hybrid (58 s) · griever (190 s)`: when each method became ready."""
    return "ready: " + " · ".join(f"{', '.join(ms)} ({t:.0f} s)" for t, ms in order) if order else "ready: none"
