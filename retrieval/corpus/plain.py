"""Questions without gold: a user's own questions, from their users or their logs.

Three shapes are read: a `.txt` file (one question a line), a JSON list of strings or of
`{id, question[, answer | answers]}`, and a CSV with a `question` column (and optional `id`,
`answer`). A JSON file in a gold format (MuSiQue, HotpotQA, 2Wiki) is left to `load_questions`.
Every problem names the file and the line or item, and nothing is half-read.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Optional

from ..core.errors import InputError
from ..core.records import Question
from .readers import read_json, read_text

MAX_QUESTIONS = 20_000
MAX_CHARS = 2_000   # a question longer than this is a passage pasted by mistake


def is_plain_questions(data: Any) -> bool:
    """A JSON list of strings or of objects with a `question` key (and no gold format's keys)."""
    if not isinstance(data, list) or not data:
        return False
    if all(isinstance(x, str) for x in data):
        return True
    gold_keys = {"paragraphs", "supporting_facts", "context", "supporting_passage_idx"}
    return all(isinstance(x, dict) and "question" in x and not (gold_keys & set(x)) for x in data)


def plain_format(path: str | Path) -> str:
    """'txt', 'csv' or 'json' from the name (a trailing .gz is looked through)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for ext in ("txt", "csv", "json"):
        if name.endswith("." + ext):
            return ext
    raise InputError(f"{path}: unknown questions file type (expected .txt, .json or .csv)")


def plain_or_none(path: str | Path) -> Optional[list[Question]]:
    """The file's questions when it holds questions without gold (.txt, .csv, a plain JSON list),
    else None: a MuSiQue / HotpotQA / 2Wiki file (or one of another name), for `load_questions`."""
    try:
        kind = plain_format(path)
    except InputError:
        return None
    if kind != "json":
        return load_plain_questions(path)
    data = read_json(path)
    # Every gold format is a non-empty list: anything else gets the plain reader's own error.
    gold_shaped = isinstance(data, list) and data and not is_plain_questions(data)
    return None if gold_shaped else load_plain_questions(path, data)


def load_plain_questions(path: str | Path, data: Optional[Any] = None) -> list[Question]:
    """Questions with no gold passages. `data`: the file's JSON, when the caller has read it."""
    kind = plain_format(path)
    src = str(path)
    if kind == "txt":
        items = [(f"line {i}", {"question": line}) for i, line in enumerate(read_text(path).splitlines(), 1)
                 if line.strip()]
        auto_id = True
    elif kind == "csv":
        items, auto_id = _csv_items(read_text(path), src)
    else:
        data = read_json(path) if data is None else data
        if not isinstance(data, list):
            raise InputError(f"{src}: expected a JSON list of questions (strings or {{id, question[, answer]}})")
        items, auto_id = [], True
        for i, x in enumerate(data):
            if isinstance(x, str):
                items.append((f"item {i}", {"question": x}))
            elif isinstance(x, dict):
                if "question" not in x:
                    raise InputError(f"{src}: item {i} has no 'question' field")
                items.append((f"item {i}", x))
                auto_id = auto_id and "id" not in x
            else:
                raise InputError(f"{src}: item {i} should be a string or an object, got {type(x).__name__}")
    return _questions(items, src, auto_id)


def _csv_items(text: str, src: str) -> tuple[list[tuple[str, dict]], bool]:
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
        if "question" not in header:
            raise InputError(f"{src}: the CSV has no 'question' column (its header is {', '.join(header) or 'empty'})")
        reader.fieldnames = header
        rows = [(f"line {i}", {k: v for k, v in row.items() if k}) for i, row in enumerate(reader, 2)]
    except csv.Error as e:
        raise InputError(f"{src}: not a readable CSV ({e})") from None
    return rows, "id" not in header


def _questions(items: list[tuple[str, dict]], src: str, auto_id: bool) -> list[Question]:
    if not items:
        raise InputError(f"{src}: no questions in the file")
    if len(items) > MAX_QUESTIONS:
        raise InputError(f"{src}: {len(items):,} questions; at most {MAX_QUESTIONS:,} a set")
    out: list[Question] = []
    seen: dict[str, str] = {}
    for n, (where, x) in enumerate(items, 1):
        text = x.get("question")
        if not isinstance(text, str):
            raise InputError(f"{src}: {where}: 'question' should be a string, got {type(text).__name__}")
        text = " ".join(text.split())
        if not text:
            raise InputError(f"{src}: {where}: the question is empty")
        if len(text) > MAX_CHARS:
            raise InputError(f"{src}: {where}: the question is {len(text):,} characters; at most {MAX_CHARS:,}")
        qid = f"q{n}" if auto_id else str(x.get("id", "")).strip()
        if not qid:
            raise InputError(f"{src}: {where}: the id is empty")
        if qid in seen:
            raise InputError(f"{src}: {where}: duplicate id {qid!r} (also at {seen[qid]})")
        seen[qid] = where
        out.append(Question(qid, text, _answers(x, src, where)))
    return out


def _answers(x: dict, src: str, where: str) -> list[str]:
    raw = x.get("answers", x.get("answer"))
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw.strip()]
    if isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        return [a.strip() for a in raw if a.strip()]
    raise InputError(f"{src}: {where}: 'answer' should be a string or a list of strings")
