"""Question difficulty r_i for GRASP's success economy C_w (eq. 3).

r_i is the fraction of n closed-book answers of the base LLM (temperature 1, seeds 0…n−1)
that match the gold answer exactly; every sample is cached like any other LLM call, so a
second benchmark reuses them. The weight is the surprisal w_i = −log2 r_i; a question the
model never answers gets r_i = 1/(2n) (half a success), so its weight stays finite.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..core.errors import HopTraceError
from ..core.records import Question
from ..methods.answer import ANSWER_SCHEMA, parse_answer
from .metrics import exact_match


def closed_book_messages(question: str) -> list[dict]:
    return [{"role": "system", "content": "You answer questions. You answer only with JSON."},
            {"role": "user", "content": f"Question: {question}\nGive a short, definite answer of at most 6 words. "
                                        'Answer as {"answer": "..."}.'}]


def estimate_r(llm, question: Question, n: int) -> float:
    hits = 0
    for seed in range(n):
        try:
            ans = llm.json(None, "difficulty", closed_book_messages(question.text), ANSWER_SCHEMA, parse_answer,
                           max_tokens=30, temperature=1.0, seed=seed)
        except HopTraceError:  # a failed call or unusable answer counts as wrong; difficulty is an estimate
            ans = ""
        hits += int(exact_match(ans, question.answers) == 1.0)
    return hits / n


def weight(r: float, n: int) -> float:
    return -math.log2(max(r, 1 / (2 * n)))


def success_economy(tokens: Sequence[int], em: Sequence[Optional[float]], weights: Sequence[float]) -> Optional[float]:
    """Eq. 3: C_w = Σ T_i / Σ w_i·1[EM_i = 1]; None when no weighted question was answered."""
    denom = sum(w for e, w in zip(em, weights) if e == 1.0)
    return round(sum(tokens) / denom, 1) if denom > 0 else None
