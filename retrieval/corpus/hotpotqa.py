"""HotpotQA's original format: questions with `context`, corpus as `title -> sentences`."""
from __future__ import annotations

from typing import Any

from ..core.errors import InputError
from ..core.records import Passage, Question


def _join(sentences: list[str]) -> str:
    # HotpotQA sentences carry their own leading spaces; joining with "" restores the text.
    return "".join(sentences).strip()


def is_title_sentences_corpus(data: Any) -> bool:
    return isinstance(data, dict) and all(isinstance(v, list) for v in list(data.values())[:5])


def parse_title_sentences_corpus(data: dict, source: str = "corpus") -> list[Passage]:
    passages = []
    for title, sentences in data.items():
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise InputError(f"{source}[{title!r}]: expected a list of sentence strings")
        text = _join(sentences)
        if not title.strip():
            raise InputError(f"{source}: an entry has an empty title")
        if not text:
            raise InputError(f"{source}[{title!r}]: empty text")
        passages.append(Passage.make(title.strip(), text))
    if not passages:
        raise InputError(f"{source}: the corpus has no passages")
    return passages


def is_hotpotqa_questions(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "supporting_facts" in data[0]


def parse_hotpotqa_questions(data: list, passages: list[Passage], source: str = "questions") -> list[Question]:
    """Gold passages are those whose title appears in `supporting_facts`."""
    by_title: dict[str, list[str]] = {}
    for p in passages:
        by_title.setdefault(p.title, []).append(p.id)
    out = []
    for i, rec in enumerate(data):
        where = f"{source}[{i}]"
        for key in ("_id", "question", "answer", "supporting_facts"):
            if key not in rec:
                raise InputError(f"{where}: missing field {key!r}")
        titles = list(dict.fromkeys(t for t, _ in rec["supporting_facts"]))
        missing = [t for t in titles if t not in by_title]
        if missing:
            raise InputError(f"{where}: supporting title(s) not in the corpus: {missing}")
        gold = [pid for t in titles for pid in by_title[t]]
        out.append(Question(str(rec["_id"]), rec["question"], [rec["answer"]], gold,
                            hops=len(titles), type=rec.get("type")))
    return out
