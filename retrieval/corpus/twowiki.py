"""2WikiMultiHopQA dev questions whose gold passages are indices into the HippoRAG corpus."""
from __future__ import annotations

from typing import Any

from ..core.errors import InputError
from ..core.records import Passage, Question


def is_twowiki_questions(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "supporting_passage_idx" in data[0]


def parse_twowiki_questions(data: list, passages: list[Passage], source: str = "questions") -> list[Question]:
    out = []
    for i, rec in enumerate(data):
        where = f"{source}[{i}]"
        for key in ("_id", "question", "supporting_passage_idx"):
            if key not in rec:
                raise InputError(f"{where}: missing field {key!r}")
        idx = rec["supporting_passage_idx"]
        bad = [j for j in idx if not isinstance(j, int) or not 0 <= j < len(passages)]
        if bad:
            raise InputError(f"{where}: supporting_passage_idx {bad} outside the corpus (0..{len(passages) - 1})")
        titles = rec.get("supporting_titles")
        if titles and [passages[j].title for j in idx] != titles:
            raise InputError(f"{where}: supporting_passage_idx does not match supporting_titles; wrong corpus?")
        answers = list(dict.fromkeys([rec.get("answer", "")] + list(rec.get("answers") or [])))
        answers = [a for a in answers if a]
        gold = list(dict.fromkeys(passages[j].id for j in idx))
        out.append(Question(str(rec["_id"]), rec["question"], answers, gold,
                            hops=len(gold), type=rec.get("type")))
    return out
