"""The checks that a composed question needs its hops; the first that fails names the drop.

MuSiQue's single-passage shortcut filter (Trivedi et al. 2022, §3) is the one that needs an LLM:
a question that the model answers from one of its passages alone does not need the others.
"""
from __future__ import annotations

from typing import Optional

from ..bench.metrics import f1_score, normalize_answer
from .compose import ANSWER_SCHEMA, answer_messages
from .pairs import written_in

# Reasons, in the order the checks run (cheapest first: the LLM is asked only when the rest pass).
NAMES_BRIDGE = "names the bridge entity"
ANSWER_NOT_IN_GOLD = "answer not in its gold passages"
ANSWER_IN_QUESTION = "the question gives its answer"
DUPLICATE = "duplicates another question"
SHORTCUT = "answered from one passage alone"
NOT_ANSWERABLE = "not answered from its gold passages together"
COMPOSE_FAILED = "the LLM wrote no usable question"
REASONS = (COMPOSE_FAILED, NAMES_BRIDGE, ANSWER_IN_QUESTION, ANSWER_NOT_IN_GOLD, DUPLICATE, NOT_ANSWERABLE, SHORTCUT)
SHORTCUT_F1 = 0.6  # a probe answer this close to the gold answer counts as answering it


def _norm(s: str) -> str:
    return f" {normalize_answer(s)} "


def names_bridge(question: str, bridges: list[str]) -> Optional[str]:
    q = _norm(question)
    named = [b for b in bridges if normalize_answer(b) and _norm(b) in q]
    return f"{NAMES_BRIDGE} ({named[0]!r})" if named else None


def answer_in_question(question: str, answer: str, kind: str) -> Optional[str]:
    # A comparison names both candidates by design; its answer is one of them.
    if kind != "comparison" and normalize_answer(answer) and _norm(answer) in _norm(question):
        return ANSWER_IN_QUESTION
    return None


def answer_in_gold(answer: str, kind: str, texts: list[str]) -> Optional[str]:
    """In the last passage; for a comparison, in one of the two (the answer is a subject's name)."""
    if not normalize_answer(answer):
        return f"{ANSWER_NOT_IN_GOLD} (empty answer)"
    where = texts if kind == "comparison" else texts[-1:]
    return None if any(written_in(answer, t) for t in where) else f"{ANSWER_NOT_IN_GOLD} ({answer!r})"


def duplicate(question: str, kept: list[str], threshold: float = 0.8) -> Optional[str]:
    """Same words as a kept question (Jaccard of their word sets ≥ threshold)."""
    words = set(normalize_answer(question).split())
    for other in kept:
        o = set(normalize_answer(other).split())
        if words and o and len(words & o) / len(words | o) >= threshold:
            return f"{DUPLICATE} ({other!r})"
    return None


def _matches(got: str, answer: str) -> bool:
    g = normalize_answer(got)
    return got.lower() != "unknown" and bool(g) and (f1_score(got, [answer]) >= SHORTCUT_F1
                                                     or normalize_answer(answer) in g)


def answerable(llm, stage, question: str, answer: str, passages: list[tuple[str, str, str]]
               ) -> tuple[Optional[str], str]:
    """MuSiQue's answerability: with all its gold passages the question gets its answer. A
    rephrasing that drifted from the facts (asks for something else) fails here."""
    title = " + ".join(t for _, t, _ in passages)
    text = "\n\n".join(f"({t}) {x}" for _, t, x in passages)
    got = llm.json(stage, "answerability probe", answer_messages(question, title, text), ANSWER_SCHEMA,
                   _clean_answer, max_tokens=40)
    return (None if _matches(got, answer) else f"{NOT_ANSWERABLE} (got {got!r}, gold {answer!r})"), got


def shortcut(llm, stage, question: str, answer: str, kind: str, passages: list[tuple[str, str, str]]
             ) -> tuple[Optional[str], list[dict]]:
    """Ask the LLM the question with each passage alone. A comparison is checked the same way:
    one subject's year alone must not settle which came first."""
    probes = []
    for pid, title, text in passages:
        got = llm.json(stage, "shortcut probe", answer_messages(question, title, text), ANSWER_SCHEMA,
                       _clean_answer, max_tokens=40)
        hit = _matches(got, answer)
        probes.append({"passage_id": pid, "answer": got, "answers_it": hit})
        if hit:
            return f"{SHORTCUT} ({pid}: {got!r})", probes
    return None, probes


def _clean_answer(value) -> str:
    if not isinstance(value, dict) or not isinstance(value.get("answer"), str):
        raise ValueError("expected {\"answer\": string}")
    return " ".join(value["answer"].split()) or "unknown"
