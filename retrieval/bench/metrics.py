"""Retrieval metrics over one ranked list and a gold set.

recall@k  — fraction of gold passages in the top k (GRIEVER, GEAR);
anyhit@k  — 1 if at least one gold passage is in the top k (SAG §4.3's hit rate);
allhit@k  — 1 if every gold passage is in the top k.
EM / F1   — answer quality with SQuAD normalisation, best over the gold answer's aliases.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

import numpy as np

_PUNCT = set(string.punctuation)


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


# --- answer quality (SQuAD-style, as HotpotQA / MuSiQue / GEAR Table 3 score it) ---------------
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """Lower case, drop punctuation and articles, squeeze whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1 if the prediction equals any gold answer or alias after normalisation."""
    p = normalize_answer(prediction or "")
    return float(any(p == normalize_answer(a) for a in answers)) if answers else float("nan")


def _f1(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if not p or not g:
        return float(p == g)
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """Token F1 against the best-matching gold answer or alias."""
    return max(_f1(prediction or "", a) for a in answers) if answers else float("nan")
