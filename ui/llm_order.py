"""Shortest first: the order in which one request's LLM methods take a model that serves one call at
a time, what each is expected to cost on this machine, and the turn between requests.

On two cores the embedded model writes no faster for serving several sequences at once (llama.cpp's
own batched bench: 28.3 tokens/s for one sequence, 31.7 for three), so the last of a request's LLM
methods cannot finish before the sum of their work. What is free is the order. Served in arrival
order, the methods' calls interleaved and each waited for the others': SAG, 20 s alone, arrived
after 65 s. Served one method at a time, shortest first, the first arrives at about its own time
and the last at the same time as before (docs/hop-maps.md, "Several LLM methods at once").

Requests take the model in arrival order (`ModelTurns`): one request's LLM methods run before the
next request's begin, which is what ui/llm_queue.py's bound on the wait already assumes. An endpoint
that serves calls in parallel (`max_concurrency` > 1) runs a request's methods at once, as before.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

from .llm_queue import expected_s

RESCALE_S = 600.0
# Runs of a method measured in this process (no reply from the response cache) that make its estimate.
KEEP_RUNS = 5
# From this many runs of its own here a method's estimate is their median (Estimates.of).
OWN_RUNS = 3


@dataclass
class Estimate:
    seconds: float
    basis: str         # what the figure rests on, said in the waiting column


class Estimates:
    """Each LLM method's expected seconds on this machine: the median of its last runs here once it
    has OWN_RUNS of them; else the shipped experiment's p50 scaled by how the LLM runs here compared
    with their methods' p50s, or before any has run, by this machine's calibration against the
    experiment's; else its own runs here, or the slow end of the range measured when the picker's
    hints were written (ui/picker.py)."""

    def __init__(self, shipped=None, calibration_ms=None):
        self._shipped = shipped            # a traces Experiment, or None
        self._calibration = calibration_ms  # a callable giving this machine's calibration, or None
        self._scale: Optional[tuple[float, str]] = None
        self._scaled_at = 0.0
        self._seen: dict[str, deque] = {}
        self._lock = threading.Lock()

    def observe(self, method: str, seconds: float) -> None:
        """A run of `method` that took `seconds` here, every call answered by the model itself."""
        with self._lock:
            self._seen.setdefault(method, deque(maxlen=KEEP_RUNS)).append(seconds)

    def of(self, method: str) -> Estimate:
        with self._lock:
            seen = list(self._seen.get(method, ()))
        p50 = self._shipped_p50(method)
        # One run is one question: a SAG warm-up that took 6 s promised 6 s for a question that
        # took 21, where the shipped p50 (17 s) was near. So a method's own runs decide only from
        # OWN_RUNS on; before that they, and the other methods' runs, scale the shipped p50s.
        if len(seen) >= OWN_RUNS or (seen and p50 is None):
            n = len(seen)
            return Estimate(statistics.median(seen), f"the median of its last {n} run{'s' if n != 1 else ''} here"
                            if n > 1 else "its last run here")
        if p50 is not None:
            factor, how = self._ran_here() or self.scale()
            return Estimate(p50 * factor, f"the shipped experiment's p50 ({p50:.0f} s on "
                                          f"{self._shipped.machine}){how}")
        return Estimate(expected_s(method), "the slow end of its range measured on 2 cores (ui/picker.py)")

    def _shipped_p50(self, method: str) -> Optional[float]:
        exp = self._shipped
        s = ((exp.summary or {}).get("methods") or {}).get(method) if exp is not None else None
        if not s:
            return None
        # The method's own work: without the shared answer step, which the Ask tab runs only when asked.
        ms = s.get("retrieval_ms_p50") or s.get("latency_ms_p50")
        return ms / 1000 if ms else None

    def _ran_here(self) -> Optional[tuple[float, str]]:
        """How much faster or slower the runs here were than their methods' shipped p50s (the median
        of every run's ratio), with how many it rests on; None before any such run."""
        # The model's speed, not the CPU's: the calibration workload is one Python thread, and a
        # Xeon with AVX-512 timed it 2.3x slower than the experiment's EPYC while its model wrote as
        # fast, so a GRASP expected at 134 s of work did about 55 s. A method's run here measures the model.
        with self._lock:
            seen = {m: list(v) for m, v in self._seen.items()}
        ratios = [t / p50 for m, runs in seen.items() if (p50 := self._shipped_p50(m)) for t in runs]
        if not ratios:
            return None
        factor = statistics.median(ratios)
        n = len(ratios)
        return factor, (f", ×{factor:.2f} as {'this run' if n == 1 else f'the {n} runs'} of LLM methods here "
                        f"compared with {'its' if n == 1 else 'their'} p50")

    def scale(self) -> tuple[float, str]:
        """This machine's calibration against the shipped experiment's (the median of its sittings'),
        measured once: the idle watch's single-threaded workload, a rough guide to the model's speed."""
        # Taken again after RESCALE_S: a calibration timed while the machine was busy (a build beside
        # the app) read 3.3x and would have tripled every estimate for the rest of the process.
        if self._scale is None or time.monotonic() - self._scaled_at > RESCALE_S:
            self._scaled_at = time.monotonic()
            factor, how = 1.0, ", unscaled"
            exp = self._shipped
            sittings = exp.spec.get("sittings", []) if exp is not None else []
            # The p50s are the experiment's machine's: its sittings' calibrations, not another's it resumed on.
            ref = [c for s in ([s for s in sittings if s.get("machine") == exp.machine] or sittings)
                   for pair in s.get("calibration_ms") or [] for c in pair[:1]]
            if ref and self._calibration is not None:
                try:
                    here = float(self._calibration())
                    factor = here / statistics.median(ref)
                    how = f", ×{factor:.2f} for this machine's calibration"
                except Exception:   # a machine that cannot time the workload keeps the plain p50
                    pass
            self._scale = (factor, how)
        return self._scale


def plan(methods: Sequence[str], estimates: Estimates) -> list[tuple[str, Estimate]]:
    """The LLM methods of one request in the order they take the model: shortest expected first."""
    return sorted(((m, estimates.of(m)) for m in methods), key=lambda x: x[1].seconds)


def waiting_text(ahead: Sequence[str], start_in_s: float, own: Estimate, other_requests: int = 0) -> str:
    """What a waiting column says: after whom, when, how much work, and on what basis."""
    names = list(ahead) + ([f"{other_requests} earlier request{'s' if other_requests != 1 else ''}"]
                           if other_requests else [])
    after = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""
    when = f"starts after {after}, in about {max(1, round(start_in_s))} s" if names else "starts next"
    return f"{when} · about {max(1, round(own.seconds))} s of work (estimate: {own.basis})"


class ModelTurns:
    """A first-come-first-served turn at the model for requests: a ticket each, served in order."""

    def __init__(self):
        self._cond = threading.Condition()
        self._next = 0      # the next ticket to hand out
        self._serving = 0   # the ticket whose turn it is
        self._work: dict[int, float] = {}   # ticket -> the seconds of work it expects

    def take(self, expected_s: float) -> tuple[int, int, float]:
        """A ticket, with the requests ahead of it and their expected seconds of work."""
        with self._cond:
            ticket, self._next = self._next, self._next + 1
            ahead = (len(self._work), sum(self._work.values()))
            self._work[ticket] = expected_s
            return ticket, *ahead

    @contextmanager
    def turn(self, ticket: int) -> Iterator[None]:
        """Held for the ticket's turn; the next ticket's turn comes when it ends, however it ends."""
        try:
            with self._cond:
                while self._serving != ticket:
                    self._cond.wait()
            yield
        finally:
            with self._cond:
                self._work.pop(ticket, None)
                self._serving = max(self._serving, ticket + 1)
                self._cond.notify_all()
