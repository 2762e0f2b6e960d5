"""The judgments a judged comparison reads (traces/stats/compare.py `Judged`): pair by pair the first
source that graded it, and a line naming whose grades they are and how each judge agreed with gold."""
from __future__ import annotations

from typing import Optional

from retrieval.core.errors import InputError

from ..stats.compare import Judged
from ..storage.experiments import Experiment
from .measured import key, measured_line
from .qrels import Qrels, as_dict


def judged_for(traces, exp: Experiment, owner: str = "", judges=("person", "llm", "answer"), rel: int = 2,
               prompt_version: Optional[str] = None):
    """The experiment's judgments as a judged comparison reads them (`Judged`):
    pair by pair the first of `judges` that graded it, and a line naming how many each gave and
    each judge's measured agreement with gold (measured.MEASURED)."""
    if not 0 <= rel <= 3:
        raise InputError(f"--rel must be a grade 0–3, got {rel}")
    eff = Qrels(traces).effective(exp.id, owner, judges, prompt_version)
    by: dict[str, int] = {}
    keys: dict[str, str] = {}
    for j in eff.values():
        by[j.source] = by.get(j.source, 0) + 1
        if j.source != "person":
            keys.setdefault(j.source, key(j.judge, j.prompt_version))
    parts = []
    for src in judges:
        if by.get(src):
            what = {"person": "a person", "llm": "the LLM judge", "answer": "the answer rule"}[src]
            parts.append(f"{by[src]} pairs by {what}" + (f" ({measured_line(keys[src])})"
                                                          if src in keys else " (the reference)"))
    line = "; ".join(parts) + f"; relevant = grade ≥ {rel}" if parts else ""
    return Judged(as_dict(eff), rel, line)
