"""A bounded wait for the one embedded model (public mode): a request with LLM work is refused at
once when the LLM work already admitted ahead of it would make it wait longer than a bound,
with a message that says how busy the model is and points at the recorded showcase.

The model serves one request at a time, so the wait is the sum of what is ahead: each admitted
request counts its methods' expected time (ui/picker.py, the slow sitting's figure) less what it
has run so far. While admitted, a request's stages show their queue position as before
(`LLM.json` reports "waiting for the LLM (n requests ahead)"). LLM-free methods never pass
through here.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

from retrieval.core.envvars import positive_number
from retrieval.methods import uses_llm

from .picker import EXPECTED_EMBEDDED_S
from .public import LimitError

DEFAULT_MAX_WAIT_S = 120.0
UNMEASURED_S = 30.0        # an LLM method without a measured time (an ablation, say)
ANSWER_S = 4.0             # the shared answer step: one short read and reply


class BusyError(LimitError):
    """The model has more work ahead than a request may wait for."""


def expected_s(method: str) -> float:
    """A method's expected seconds on the embedded model: the slow end of its measured range."""
    v = EXPECTED_EMBEDDED_S.get(method)
    if v is None:
        return UNMEASURED_S if uses_llm(method) else 0.0
    return float(v[1] if isinstance(v, tuple) else v)


@dataclass
class _Ticket:
    expected_s: float
    started: float


class LLMQueue:
    def __init__(self, max_wait_s: float = DEFAULT_MAX_WAIT_S):
        self.max_wait_s = max_wait_s
        self._tickets: list[_Ticket] = []
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "LLMQueue":
        value = positive_number("HOPTRACE_LLM_QUEUE_MAX_S")
        return cls() if value is None else cls(value)

    def ahead_s(self, now: float | None = None) -> tuple[int, float]:
        """Requests admitted and the seconds of LLM work they still hold."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return len(self._tickets), self._ahead(now)

    def _ahead(self, now: float) -> float:
        """The model works through admitted requests one at a time, busy since the oldest arrived:
        what is left is their expected work less that time (at least a second a request)."""
        if not self._tickets:
            return 0.0
        total = sum(t.expected_s for t in self._tickets)
        busy = now - min(t.started for t in self._tickets)
        return max(float(len(self._tickets)), total - busy)

    @contextmanager
    def admit(self, methods: Sequence[str], answer: bool = False, now: float | None = None,
              extra_s: float = 0.0) -> Iterator[float]:
        """Admits a request with LLM work (yields the wait ahead of it), or raises BusyError.
        `extra_s`: LLM work besides methods (judging a pool), at its estimated seconds."""
        llm = [m for m in methods if uses_llm(m)]
        work = sum(expected_s(m) for m in llm) + (ANSWER_S if answer else 0.0) + extra_s
        if work <= 0:
            yield 0.0
            return
        now = time.monotonic() if now is None else now
        ticket = _Ticket(work, now)
        with self._lock:
            n = len(self._tickets)
            ahead = self._ahead(now)
            if n and ahead > self.max_wait_s:
                names = ", ".join(llm) or ("the LLM judge" if extra_s else "the answer step")
                raise BusyError(
                    f"the model is busy: {n} request{'s' if n != 1 else ''} with LLM work ahead, about {ahead:.0f} s "
                    f"of it, and this demo queues at most {self.max_wait_s:.0f} s. Try again in a minute, or open "
                    f"a recorded run of {names} from the Showcase list above the question: it opens at once.")
            self._tickets.append(ticket)
        try:
            yield ahead
        finally:
            with self._lock:
                self._tickets.remove(ticket)

    def __len__(self) -> int:
        return len(self._tickets)
