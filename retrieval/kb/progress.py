"""What a build tells the person waiting: the step it is on, what is left, and when the whole
build should finish.

One `BuildProgress` per build. It draws a tqdm bar per step in a terminal (the CLI) and hands
every update to a listener (the app's Index tab) as a `BuildStatus`, so both read the same
words. The expected finish adds the steps still to come to the current step's remainder:
extraction's from its passage rate; embedding's from the tokens still to encode at the rate
measured so far (tokens, not texts: a passage costs ~20 entity names). Before embedding starts,
its time is a prior per passage measured on these machines, scaled by cores and marked "~".
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from tqdm import tqdm

from ..core.progress_bar import bar

# Seconds of embedding per passage and tokens encoded per second, both for 2 cores, measured
# with the OpenIE import on the demo (≈ 51 texts a passage: 0.065 s fp32, 0.029 s int8) and the
# rules on 2Wiki (≈ 53: 0.030 s int8), bf16 from 9,190 2Wiki texts of every layer (1.45x fp32):
# docs/profiles.md, "Building faster". Only a first guess; the rates measured in the build
# replace them.
PRIOR_EMBED_S_PER_PASSAGE = {"fp32": 0.065, "bf16": 0.045, "int8": 0.03}
PRIOR_TOKENS_PER_S = {"fp32": 8500.0, "bf16": 12500.0, "int8": 20000.0}
SYNONYM_S_PER_ENTITY = 0.0003  # 2Wiki: 20.4 s for 67,421 entities (exact, it grows with their square; above
# 100,000 comparable names an index takes over, ~0.0003 s a name again at 800,000: synonyms.py)


def _clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@dataclass
class BuildStatus:
    step: str                   # "extract triples+events (rules)", "embed partial_triples", …
    done: int
    total: int
    unit: str                   # passage | text
    left: str = ""              # what remains, in words ("41,203 texts left in triples, 180,420 in all")
    eta_s: Optional[float] = None
    estimated: bool = False     # the finish rests on a prior, not on rates measured in this build

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def finish(self) -> str:
        return f"build done in {'~' if self.estimated else ''}{_clock(self.eta_s)}"

    def line(self) -> str:
        return " · ".join(x for x in (f"{self.step} {self.done:,}/{self.total:,} {self.unit}s", self.left,
                                      self.finish()) if x)


class BuildProgress:
    def __init__(self, bars: bool = True, listener: Optional[Callable[[BuildStatus], None]] = None,
                 precision: str = "fp32"):
        self.bars = bars
        self.listener = listener
        self.cores_scale = 2 / max(1, os.cpu_count() or 1)
        self.precision = precision if precision in PRIOR_TOKENS_PER_S else "fp32"
        self.to_embed_passages = 0        # passages whose layers are still to be embedded (for the prior)
        self.entities = 0                 # for the synonym step's share
        self._bar: Optional[tqdm] = None
        self._status: Optional[BuildStatus] = None
        self._t0 = 0.0
        self._last_emit = 0.0
        self._last_step = ""
        self.on_update: Optional[Callable[[BuildStatus], None]] = None  # the build's status file

    # -- estimates of the steps still to come -------------------------------------------------------
    def embed_prior_s(self) -> float:
        return self.to_embed_passages * PRIOR_EMBED_S_PER_PASSAGE[self.precision] * self.cores_scale

    def tokens_prior_rate(self) -> float:
        return PRIOR_TOKENS_PER_S[self.precision] / self.cores_scale

    def synonyms_s(self) -> float:
        return self.entities * SYNONYM_S_PER_ENTITY

    # -- a step ----------------------------------------------------------------------------------------
    def start(self, step: str, total: int, unit: str) -> None:
        self.close()
        self._status = BuildStatus(step, 0, total, unit)
        self._t0 = time.perf_counter()
        if self.bars:
            self._bar = bar(total=total, desc=step, unit=unit)

    def advance(self, n: int, left: str = "", eta_s: Optional[float] = None, estimated: bool = False,
                step: Optional[str] = None) -> None:
        st = self._status
        if st is None:
            return
        st.done += n
        st.left, st.eta_s, st.estimated = left, eta_s, estimated
        if step:
            st.step = step
        if self._bar is not None:
            if step:
                self._bar.set_description_str(step, refresh=False)
            self._bar.set_postfix_str(" · ".join(x for x in (left, st.finish()) if x), refresh=False)
            self._bar.update(n)
        if self.on_update is not None:
            self.on_update(st)
        now = time.perf_counter()
        # At most two updates a second reach the listener (the app's page), but every new layer does.
        if self.listener is not None and (now - self._last_emit > 0.5 or st.done >= st.total
                                          or st.step != self._last_step):
            self._last_emit, self._last_step = now, st.step
            self.listener(st)

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._status = None

    # -- extraction: its own remainder, then everything after it -----------------------------------------
    def extraction_eta(self, done: int, total: int) -> Optional[float]:
        """The whole build's remainder while extracting; always an estimate (it rests on the prior)."""
        spent = self.elapsed()
        if done <= 0 or spent < 3:  # the first passages wait for spaCy's workers to start
            return None
        return (total - done) * spent / done + self.embed_prior_s() + self.synonyms_s()
