"""Retrieval metrics over one ranked list and a gold set.

recall@k  — fraction of gold passages in the top k (GRIEVER, GEAR);
anyhit@k  — 1 if at least one gold passage is in the top k (SAG §4.3's hit rate);
allhit@k  — 1 if every gold passage is in the top k.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    if not gold:
        return float("nan")
    top = set(ranked[:k])
    return sum(g in top for g in set(gold)) / len(set(gold))


def anyhit_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return float("nan") if not gold else float(bool(set(ranked[:k]) & set(gold)))


def allhit_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return float("nan") if not gold else float(set(gold) <= set(ranked[:k]))


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")
