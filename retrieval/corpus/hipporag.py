"""HippoRAG's corpus format (`[{title, text}]`) and its MuSiQue question format."""
from __future__ import annotations

from typing import Any, Optional

from ..core.errors import InputError
from ..core.records import Passage, Question, passage_id


def _field(record: Any, key: str, where: str, kind: type = str) -> Any:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected an object, got {type(record).__name__}")
    if key not in record:
        raise InputError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, kind):
        raise InputError(f"{where}: field {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def record_id(rec: dict, where: str) -> Optional[str]:
    """A record's own id (`id`, else `_id`), as text; None when it has none."""
    for key in ("id", "_id"):
        if key in rec and rec[key] is not None:
            value = rec[key]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InputError(f"{where}: field {key!r} should be a string or an integer, got "
                                 f"{type(value).__name__}")
            value = str(value).strip()
            if not value:
                raise InputError(f"{where}: empty {key!r}")
            if any(c in value for c in "\t\r\n"):
                raise InputError(f"{where}: {key!r} {value[:40]!r} holds a tab or a line break")
            return value
    return None


# Retrieval passages are paragraphs (MuSiQue's average ~600 characters); a text far past this is a
# whole document or a hostile upload, and would be embedded truncated anyway.
MAX_PASSAGE_CHARS = 100_000
MAX_TITLE_CHARS = 1_000


def parse_corpus(data: Any, source: str = "corpus") -> list[Passage]:
    """`[{"title", "text"}]` → passages. Exact duplicates are an error; a repeated title
    with other text is allowed (MuSiQue splits long articles into several passages). A record's
    `id` (or `_id`) is its passage id; without one the id is the chunk id of title and text
    (HippoRAG's files and the bundled data line up as they always have)."""
    if not isinstance(data, list):
        raise InputError(f"{source}: expected a JSON list of {{title, text}} objects")
    passages: list[Passage] = []
    first_seen: dict[str, int] = {}
    for i, rec in enumerate(data):
        where = f"{source}[{i}]"
        title = _field(rec, "title", where).strip()
        text = _field(rec, "text", where).strip()
        if not title:
            raise InputError(f"{where}: empty title")
        if not text:
            raise InputError(f"{where}: empty text (title {title!r})")
        if len(text) > MAX_PASSAGE_CHARS or len(title) > MAX_TITLE_CHARS:
            raise InputError(f"{where}: a {'text' if len(text) > MAX_PASSAGE_CHARS else 'title'} of "
                             f"{max(len(text), len(title)):,} characters; a passage holds at most "
                             f"{MAX_PASSAGE_CHARS:,} characters of text and {MAX_TITLE_CHARS:,} of title "
                             "(split long documents into passages)")
        own = record_id(rec, where)
        p = Passage(own, title, text) if own else Passage.make(title, text)
        if p.id in first_seen:
            if own:
                raise InputError(f"{source}: passage id {own!r} appears twice: {source}[{first_seen[p.id]}] and "
                                 f"{where}")
            raise InputError(
                f"{where}: duplicate passage: title {title!r} with the same text as {source}[{first_seen[p.id]}]"
            )
        first_seen[p.id] = i
        passages.append(p)
    if not passages:
        raise InputError(f"{source}: the corpus has no passages")
    return passages


def is_musique_questions(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "paragraphs" in data[0]


def parse_musique_questions(data: list, source: str = "questions") -> list[Question]:
    """MuSiQue / HippoRAG questions: gold passages are the `is_supporting` paragraphs."""
    out = []
    for i, rec in enumerate(data):
        where = f"{source}[{i}]"
        qid = str(_field(rec, "id", where, (str, int)))
        text = _field(rec, "question", where)
        paragraphs = _field(rec, "paragraphs", where, list)
        gold = [
            passage_id(_field(p, "title", f"{where}.paragraphs").strip(),
                       _field(p, "paragraph_text", f"{where}.paragraphs").strip())
            for p in paragraphs if p.get("is_supporting")
        ]
        answers = [_field(rec, "answer", where)] + list(rec.get("answer_aliases") or [])
        decomposition = rec.get("question_decomposition")
        hops = len(decomposition) if decomposition else None
        qtype = qid.split("__")[0] if "__" in qid else None
        out.append(Question(qid, text, answers, gold, hops, qtype, decomposition))
    return out
