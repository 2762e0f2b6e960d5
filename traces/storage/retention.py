"""Bounded storage for a public demo: traces pruned by age and by total size, oldest sessions
first, in the background (`Pruner`), in short transactions that never hold the writer for long.

A pruned session or experiment leaves its id in `pruned`, so a link to it says it expired
rather than that it never existed. Local mode keeps everything: only the app in public mode
starts a Pruner.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Optional

from retrieval.core.envvars import positive_number

from .shipped import SESSION_KIND, reserved_bytes
from .store import TraceStore


@dataclass(frozen=True)
class Retention:
    max_age_days: float = 7.0       # a Space's visitors come back within days, not months
    max_mb: float = 500.0           # a free Space's disk is tens of GB; traces are ~10 KB a run packed
    every_s: float = 600.0          # how often the background pass runs at the least
    # Once over max_mb, prune down to this share of it: the headroom absorbs what is written
    # before the next pass, so the file stays under its bound, not just near it.
    low_water: float = 0.9
    # A pass also runs after this many stored runs: a busy demo writes ~4 MB a minute of traces
    # (the soak: 120 sessions a minute), more than a 10 % headroom of a small bound holds.
    wake_after_runs: int = 50

    @classmethod
    def from_env(cls) -> "Retention":
        """HOPTRACE_TRACES_MAX_DAYS, HOPTRACE_TRACES_MAX_MB, HOPTRACE_PRUNE_EVERY_S; a bad value is
        a ConfigError naming the variable."""
        out = {}
        for field_name, var in (("max_age_days", "HOPTRACE_TRACES_MAX_DAYS"), ("max_mb", "HOPTRACE_TRACES_MAX_MB"),
                                ("every_s", "HOPTRACE_PRUNE_EVERY_S")):
            value = positive_number(var)
            if value is not None:
                out[field_name] = value
        return cls(**out)

    def describe(self) -> str:
        return f"{self.max_age_days:g} days and {self.max_mb:g} MB"


@dataclass
class PruneReport:
    sessions: int = 0
    runs: int = 0
    experiments: int = 0
    used_mb_before: float = 0.0
    used_mb_after: float = 0.0


def used_bytes(store: TraceStore) -> int:
    """Bytes the file's live pages hold, less what the shipped experiment takes (it is never pruned,
    so counting it would prune visitors' runs for a size they cannot free)."""
    return max(0, store.used_bytes() - reserved_bytes(store))


def _drop(store: TraceStore, session_ids: list[str]) -> tuple[int, int]:
    """One batch of sessions with their runs, stages, calls and experiments, in one transaction."""
    now = time.time()
    with store.transaction() as con:
        runs, exps = store.delete_sessions(con, session_ids)
        con.executemany("INSERT OR REPLACE INTO pruned(id, kind, pruned_at) VALUES (?, ?, ?)",
                        [(s, "session", now) for s in session_ids] + [(e, "experiment", now) for e in exps])
    return runs, len(exps)


def prune(store: TraceStore, retention: Retention, now: Optional[float] = None, batch: int = 20) -> PruneReport:
    """Sessions older than the age bound go first; then, while the file's live pages exceed the
    size bound, the oldest sessions that remain, `batch` at a time. The newest are kept."""
    now = time.time() if now is None else now
    report = PruneReport(used_mb_before=round(used_bytes(store) / 1e6, 2))

    def oldest(where: str, args: list) -> list[str]:
        return [r[0] for r in store.db.execute(
            f"SELECT id FROM sessions WHERE ({where}) AND coalesce(kind, '') != ? ORDER BY created_at LIMIT ?",
            args + [SESSION_KIND, batch]).fetchall()]

    def drop(ids: list[str]) -> None:
        runs, exps = _drop(store, ids)
        report.sessions += len(ids)
        report.runs += runs
        report.experiments += exps

    cutoff = now - retention.max_age_days * 86400
    while ids := oldest("created_at < ?", [cutoff]):
        drop(ids)
    if used_bytes(store) > retention.max_mb * 1e6:
        target = retention.max_mb * retention.low_water * 1e6
        while used_bytes(store) > target and (ids := oldest("1", [])):
            drop(ids)
    report.used_mb_after = round(used_bytes(store) / 1e6, 2)
    return report


class Pruner:
    """Runs `prune` on a daemon thread every `retention.every_s`, and sooner after every
    `retention.wake_after_runs` stored runs (a storing thread only counts and, at most, sets an
    event); `last` holds the latest report. A failing pass is kept in `error` and retried next
    time: storage must never stop the app."""

    def __init__(self, store: TraceStore, retention: Retention):
        self.store, self.retention = store, retention
        self.last: Optional[PruneReport] = None
        self.error: Optional[str] = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._saved = 0
        self._thread = threading.Thread(target=self._loop, name="trace-pruner", daemon=True)
        store.on_saved.append(self._count)

    def _count(self, *_run) -> None:
        self._saved += 1  # a lost increment under a race only delays a pass
        if self._saved >= self.retention.wake_after_runs:
            self._saved = 0
            self._wake.set()

    def start(self) -> "Pruner":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.last, self.error = prune(self.store, self.retention), None
            except Exception as e:  # noqa: BLE001 - reported, retried; a request never sees it
                self.error = f"{type(e).__name__}: {e}"
            self._wake.wait(self.retention.every_s)
            self._wake.clear()
