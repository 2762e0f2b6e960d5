"""A build that serves as it goes: the order of its steps, the snapshots it publishes, and what
it says about each method meanwhile.

The order: passages and their BM25 index first (the KB opens for bm25), then the passages'
vectors (dense and rrf_hybrid), then extraction, then each method's missing vectors, the method
nearest to ready first (or only the methods asked for: `hoptrace build --methods`). After each
step, when more methods are ready than in the KB being served, the working copy is copied whole
(SQLite's backup) beside the KB and renamed over it: a reader opens the old snapshot or the new
one, never a half-written layer. Estimates rest on per-text priors measured on these machines,
rescaled by the rate the build measures on the passages' vectors.
"""
from __future__ import annotations

import functools
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from . import db
from .readiness import (
    EXTRACTED,
    Readiness,
    clear_status,
    is_vectors,
    layer_of,
    ready_methods,
    vectors,
    whole_units,
    write_status,
)
from .schema import EMBEDDED_LAYERS

# Encoding seconds a text per layer and texts a passage, bf16 on 2 cores, from the 2Wiki build's
# per-layer times (docs/profiles.md, "Building faster"). Only a first guess: the rate measured on
# the passages' vectors rescales them.
PRIOR_S_PER_TEXT = {"passages": 0.0092, "triples": 0.0011, "partial_triples": 0.00084, "predicates": 0.0006,
                    "entities": 0.00088, "propositions": 0.0036, "events": 0.0036}
PRIOR_TEXTS_PER_PASSAGE = {"passages": 1.0, "triples": 13.2, "partial_triples": 21.0, "predicates": 2.7,
                           "entities": 11.0, "propositions": 3.6, "events": 1.0}
PRIOR_EXTRACT_S_PER_PASSAGE = 0.012      # the rules on 2Wiki, 2 cores
PRIOR_SYNONYM_S_PER_ENTITY = 0.0003
SPEED_BY_PRECISION = {"bf16": 1.0, "fp32": 12500 / 8500, "int8": 12500 / 20000}


@dataclass
class Step:
    name: str                 # "passages", "passages vectors", "extract", "vectors: griever"
    units: tuple[str, ...]    # what it makes whole
    estimate_s: float


class Costs:
    """Seconds each unit still needs, from the KB's counts (or the passages' count and a prior
    before the rows exist)."""

    def __init__(self, con: sqlite3.Connection, precision: str, extract_s_per_passage: float):
        self.con = con
        self.factor = SPEED_BY_PRECISION.get(precision, 1.0) * 2 / max(1, os.cpu_count() or 1)
        self.extract_s = extract_s_per_passage

    def measured(self, layer: str, texts: int, seconds: float) -> None:
        """Rescale every prior by how this machine encoded `texts` of `layer`."""
        if texts >= 200 and seconds > 1:
            self.factor = seconds / texts / PRIOR_S_PER_TEXT[layer]

    def _passages(self) -> int:
        return self.con.execute("SELECT count(*) FROM passages").fetchone()[0]

    def texts_left(self, layer: str, whole_rows: bool) -> float:
        if not whole_rows:
            return self._passages() * PRIOR_TEXTS_PER_PASSAGE[layer]
        upto = (db.get_meta(self.con, "vectors_upto", {}) or {}).get(layer, 0)
        return self.con.execute(f"SELECT count(*) FROM {layer} WHERE rowid>?", (upto,)).fetchone()[0]

    def unit(self, unit: str, whole: frozenset[str]) -> float:
        if is_vectors(unit):
            layer = layer_of(unit)
            return self.texts_left(layer, layer in whole) * PRIOR_S_PER_TEXT[layer] * self.factor
        if unit == "same_as":
            n = self.con.execute("SELECT count(*) FROM entities").fetchone()[0] if "entities" in whole else \
                self._passages() * PRIOR_TEXTS_PER_PASSAGE["entities"]
            return n * PRIOR_SYNONYM_S_PER_ENTITY
        if unit in EXTRACTED:
            done = self.con.execute("SELECT count(*) FROM extraction_state WHERE layer=?", (unit,)).fetchone()[0]
            return max(0, self._passages() - done) * self.extract_s
        return 0.0


def vector_groups(targets: Optional[dict[str, tuple[str, ...]]], whole: frozenset[str], wanted: frozenset[str],
                  cost: Callable[[str], float]) -> list[Step]:
    """The vector steps still to run, in order. With targets: repeatedly the method whose missing
    units cost least, so the most methods are ready soonest (ties: the order targets list them,
    the methods asked for first). Every other wanted unit comes last, in one step."""
    cost = functools.lru_cache(maxsize=None)(cost)  # each unit's count queries once a plan, not once a round
    left = {u for u in wanted if (is_vectors(u) or u == "same_as") and u not in whole}
    steps: list[Step] = []
    pending = dict(targets or {})
    while pending and left:
        need = {m: [u for u in units if u in left] for m, units in pending.items()}
        m = min(need, key=lambda x: sum(cost(u) for u in need[x]))
        units = _ordered(need.pop(m))
        pending.pop(m)
        if units:
            steps.append(Step(f"vectors for {m}", units, sum(cost(u) for u in units)))
            left -= set(units)
    if left:
        units = _ordered(left)
        steps.append(Step("vectors", units, sum(cost(u) for u in units)))
    return steps


def _ordered(units) -> tuple[str, ...]:
    """Vectors in the schema's order, same_as (which reads the entities' vectors) last."""
    order = [vectors(layer) for layer in EMBEDDED_LAYERS] + ["same_as"]
    return tuple(u for u in order if u in set(units))


class Publisher:
    """Publishes the working copy over the KB when more methods are ready than in the KB served,
    and keeps the status file the app reads."""

    def __init__(self, path: Path, targets: Optional[dict[str, tuple[str, ...]]], t0: float,
                 announce: Optional[Callable[[str], None]] = None):
        self.announce = announce   # a line each time methods become ready (the CLI's terminal)
        self.path = path
        self.targets = targets or {}
        self.t0 = t0
        self.ready_at: dict[str, float] = {}
        # An append of new passages leaves every layer of the copy not whole until its end: no more
        # methods are ready than in the KB served, so nothing half-built replaces it. A build
        # without targets (the API's build_kb) publishes only at its end, as before.
        self.served = self._served_now()
        self.whole: frozenset[str] = frozenset()
        self.steps: list[Step] = []
        self.step_started = time.time()
        self._last_write = 0.0
        self.snapshots = 0

    def _served_now(self) -> set[str]:
        if not self.path.exists():
            return set()
        try:
            con = db.connect(self.path, readonly=True)
            try:
                return set(ready_methods(self.targets, whole_units(con)))
            finally:
                con.close()
        except sqlite3.Error:
            return set()

    def plan(self, steps: list[Step], whole: Optional[frozenset[str]] = None) -> None:
        """The steps still to run (the first is starting now), and the units already whole."""
        if whole is not None:
            self.whole = whole
        self.steps = list(steps)
        self.step_started = time.time()
        self.tick(force=True)

    def step_done(self, con: sqlite3.Connection) -> None:
        """After a step: note newly ready methods, publish if more are ready than served."""
        if self.steps:
            self.steps.pop(0)
        self.step_started = time.time()
        whole = self.whole = whole_units(con)
        now = round(time.time() - self.t0, 1)
        ready = ready_methods(self.targets, whole)
        new = [m for m in ready if m not in self.ready_at]
        for m in new:
            self.ready_at[m] = now
        if new and self.announce is not None:
            self.announce(f"ready after {now:.0f} s: {', '.join(new)}")
        if self.targets and set(ready) > self.served:
            self._snapshot(con)
            self.served = set(ready)
        self.tick(force=True)

    def _snapshot(self, con: sqlite3.Connection) -> None:
        con.commit()
        tmp = self.path.with_name(self.path.name + ".publishing")
        tmp.unlink(missing_ok=True)
        dst = sqlite3.connect(str(tmp))
        try:
            con.backup(dst)
            with dst:
                db.set_meta(dst, "complete", False)
                db.set_meta(dst, "published", time.strftime("%Y-%m-%d %H:%M:%S"))
        finally:
            dst.close()
        os.replace(tmp, self.path)
        self.snapshots += 1

    def tick(self, force: bool = False) -> None:
        """Rewrite the status file (at most once a second unless forced)."""
        now = time.time()
        if not self.targets or (not force and now - self._last_write < 1.0):
            return
        self._last_write = now
        eta: dict[str, float] = {}
        if self.steps:
            spent = now - self.step_started
            acc = max(1.0, self.steps[0].estimate_s - spent)
            covered = set()
            for i, step in enumerate(self.steps):
                if i:
                    acc += step.estimate_s
                covered.update(step.units)
                for m, units in self.targets.items():
                    if m not in self.ready_at and m not in eta and all(u in covered or u in self.whole
                                                                       for u in units):
                        eta[m] = round(acc, 1)
        waiting = [m for m in self.targets if m not in self.ready_at and m not in eta]
        write_status(self.path, Readiness(self.path.stem, self.t0, now, os.getpid(), dict(self.ready_at), eta,
                                          waiting, self.steps[0].name if self.steps else ""))

    def finish(self) -> None:
        """The build ended, done or failed: no status file stays behind (a killed build's does, and
        reads as stopped)."""
        clear_status(self.path)

    def order(self) -> list[tuple[float, list[str]]]:
        by_time: dict[float, list[str]] = {}
        for m, t in self.ready_at.items():
            by_time.setdefault(t, []).append(m)
        return sorted(by_time.items())
