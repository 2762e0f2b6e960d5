"""The answer rule: open-domain QA's answer-recall convention as a judge. LLM-free and instant.

A pooled passage whose text contains the question's answer, or one of its aliases, after SQuAD
normalisation and on word boundaries, is graded 2: it holds the answer, so it serves the last
hop. Any other passage is graded 0 by this rule — which says only that the answer string is
absent: a first-hop passage that names no answer is graded 0 too, and that is the rule's known
blind spot (docs/judging.md measures it). Questions without an answer, or whose answers are
only yes / no, cannot be judged by it and are left unjudged.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

from retrieval.bench.metrics import normalize_answer
from retrieval.core.records import Passage, Question

from .qrels import Judgment

RULE = "answer-in-passage (SQuAD-normalised, word boundaries)"
VERSION = "answer-rule-1"
UNMATCHABLE = {"yes", "no", ""}


def matchable(answers: Sequence[str]) -> list[str]:
    """The answers a passage can contain: normalised, without yes / no."""
    return [a for a in dict.fromkeys(normalize_answer(x) for x in answers) if a not in UNMATCHABLE]


def contains(passage: Passage, answers: Sequence[str]) -> bool:
    text = f" {normalize_answer(passage.title + ' ' + passage.text)} "
    return any(f" {a} " in text for a in answers)


def judge(pairs: Iterable[tuple[Question, Passage]], owner: str = "") -> tuple[list[Judgment], int]:
    """Judgments of the pairs it can judge, and how many pairs it could not (no usable answer)."""
    out, skipped, now = [], 0, time.time()
    for q, p in pairs:
        answers = matchable(q.answers)
        if not answers:
            skipped += 1
            continue
        hit = contains(p, answers)
        out.append(Judgment(q.id, p.id, 2 if hit else 0, "answer", RULE, VERSION, now, score=float(hit),
                            reason="holds the answer" if hit else "the answer is not in the passage", owner=owner))
    return out, skipped
