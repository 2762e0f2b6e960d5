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


# --- one score a question, for paired comparisons (bench/significance.py) ----------------------
RANK_METRICS = {"recall": recall_at, "anyhit": anyhit_at, "allhit": allhit_at}
BUDGET = "recall_tok"


def parse_metric(metric: str) -> tuple[str, int]:
    """'recall@5' → ('recall', 5); 'em' / 'f1' → (name, 0). A ConfigError names what is accepted."""
    from ..core.errors import ConfigError

    name, _, k = metric.partition("@")
    if name in ("em", "f1") and not k:
        return name, 0
    if name in RANK_METRICS and k.isdigit() and int(k) > 0:
        return name, int(k)
    if name == "recall" and k.endswith("tok") and k[:-3].isdigit() and int(k[:-3]) > 0:
        return BUDGET, int(k[:-3])   # recall@{T}tok: over the passages that fit T tokens (bench --budget)
    raise ConfigError(f"unknown metric {metric!r}; use recall@K, anyhit@K, allhit@K, recall@Ttok, em or f1")


def _field(r, name: str):
    """A row's field that rows stored before it existed lack."""
    return r.get(name) if isinstance(r, dict) else getattr(r, name, None)


def per_question_scores(rows: Sequence, metric: str) -> dict[str, dict[str, float]]:
    """{method: {question_id: score}} from bench rows (runner.QuestionResult or their dicts). A
    rank metric at k is read from the run made at k when the method ran once per k (per-k
    protocol), else from its one run; em / f1 from the run that answered. Questions without gold
    (or without an answer, for em / f1) are left out. Several runs of a question (repetitions)
    give their mean."""
    name, k = parse_metric(metric)
    get = (lambda r, f: r[f]) if rows and isinstance(rows[0], dict) else getattr
    by: dict[tuple[str, str], list] = {}
    for r in rows:
        by.setdefault((get(r, "method"), get(r, "question_id")), []).append(r)
    out: dict[str, dict[str, float]] = {}
    for (method, qid), rs in by.items():
        # With repetitions (bench --repeat) a question has several runs: its score is their mean,
        # and paired tests compare those means.
        if name in ("em", "f1"):
            vals = [get(r, name) for r in rs if get(r, name) is not None]
            value = float(np.mean(vals)) if vals else None
        elif name == BUDGET:
            top = max(get(r, "k") for r in rs)
            fitted = [r for r in rs if get(r, "k") == top and _field(r, "budget_fit") is not None]
            value = (float(np.mean([recall_at(get(r, "ranked"), get(r, "gold"), _field(r, "budget_fit"))
                                    for r in fitted])) if fitted else None)
        else:
            at = [r for r in rs if get(r, "k") == k]
            if not at:
                top = max(get(r, "k") for r in rs)
                at = [r for r in rs if get(r, "k") == top]
            value = float(np.mean([RANK_METRICS[name](get(r, "ranked"), get(r, "gold"), k) for r in at]))
        if value is not None and not (isinstance(value, float) and np.isnan(value)):
            out.setdefault(method, {})[qid] = float(value)
    return out
