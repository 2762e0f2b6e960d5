"""Progress bars that suit where they are written: tqdm's bar on a terminal; in a log file, a CI
log or a Space's log (stderr not a terminal), one plain line every PLAIN_EVERY_S seconds instead
of a carriage-return update per step (a 100-question bench wrote 70-93 KB of them)."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

PLAIN_EVERY_S = 10.0


class PlainLines:
    """A file for tqdm that turns its carriage-return redraws into whole lines, one every
    `every_s` seconds at most (a forced refresh included), and always the first and the last."""

    def __init__(self, stream: TextIO, every_s: float = PLAIN_EVERY_S, clock=time.monotonic):
        self.stream, self.every_s, self.clock = stream, every_s, clock
        self._last, self._at = "", None

    def write(self, s: str) -> int:
        line = s.replace("\r", "").strip()
        if not line or line == self._last:   # close() redraws the last state: once is enough
            return len(s)
        now = self.clock()
        if self._at is None or now - self._at >= self.every_s or "100%|" in line:
            self.stream.write(line + "\n")
            self._last, self._at = line, now
        return len(s)

    def flush(self) -> None:
        self.stream.flush()


def on_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def bar(*args: Any, **kw: Any) -> tqdm:
    """tqdm(*args, **kw), plain lines every 10 s when stderr is not a terminal."""
    if kw.get("disable") or on_terminal():
        return tqdm(*args, **kw)
    return tqdm(*args, file=PlainLines(sys.stderr), mininterval=PLAIN_EVERY_S, maxinterval=PLAIN_EVERY_S, miniters=1,
                ascii=True, ncols=100, **kw)


def quiet_library_bars() -> None:
    """Off a terminal, the model loaders' own bars ("Loading weights") say nothing a log needs."""
    if on_terminal():
        return
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # an older transformers: its bar stays, nothing else changes
        pass
