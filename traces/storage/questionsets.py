"""Question sets: named lists of questions for a KB, with or without gold passages.

A KB's build may bring its own questions (MuSiQue, HotpotQA or 2Wiki files with supporting
passages marked): they are the set `built-in`. A user adds more sets from plain files
(retrieval/corpus/plain.py) — questions from their users or logs, with no gold — and `bench
--question-set NAME` runs on one. Sets live in the trace file beside the experiments run on
them, so a public visitor's sets are that visitor's (`owner`), as their experiments are.
"""
from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Optional

from retrieval.core.errors import InputError
from retrieval.core.records import Question

from .store import TraceStore

BUILT_IN = "built-in"
_NAME = re.compile(r"^[\w.\- ]{1,80}$")


@dataclass
class QuestionSet:
    kb: str
    name: str
    source: str                      # where it came from: a file's name, "the KB's build", "generated"
    n: int
    n_gold: int                      # questions that name gold passages
    n_answers: int                   # questions that give an answer
    created_at: float = 0.0
    kind: str = "file"               # file | built-in | generated
    owner: str = ""
    id: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def has_gold(self) -> bool:
        return self.n_gold > 0

    def describe(self) -> str:
        gold = ("with gold" if self.n_gold == self.n else f"{self.n_gold} with gold") if self.n_gold else "no gold"
        answers = f", {self.n_answers} with answers" if self.n_answers else ""
        n = f"{self.n} question" + ("s" if self.n != 1 else "")
        return f"{self.name} · {n} · {gold}{answers} · {self.kind} · from {self.source}"


def built_in(kb: str, questions: list[Question]) -> QuestionSet:
    """The KB's own questions as a set (not stored: the KB holds them)."""
    return QuestionSet(kb, BUILT_IN, "the KB's build", len(questions), sum(bool(q.gold_passage_ids) for q in questions),
                       sum(bool(q.answers) for q in questions), kind="built-in")


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not _NAME.match(name):
        raise InputError(f"question set name {name!r} should be 1–80 letters, digits, spaces, '.', '-' or '_'")
    if name == BUILT_IN:
        raise InputError(f"{BUILT_IN!r} names the KB's own questions; choose another name")
    return name


class QuestionSets:
    """Question sets in a TraceStore's file."""

    _COLS = ("id", "kb", "name", "owner", "source", "kind", "created_at", "n", "n_gold", "n_answers", "meta")

    def __init__(self, traces: TraceStore):
        self.traces = traces
        with traces._lock:
            db = traces.db
            if "question_sets" not in db.table_names():
                db["question_sets"].create({c: (float if c == "created_at" else int if c.startswith("n") else str)
                                            for c in self._COLS}, pk="id")
                db["question_sets"].create_index(["kb", "owner", "name"], unique=True)
            if "set_questions" not in db.table_names():
                db["set_questions"].create({"set_id": str, "seq": int, "id": str, "text": str, "answers": str,
                                            "gold": str, "hops": int, "type": str},
                                           pk=("set_id", "id"), foreign_keys=[("set_id", "question_sets")])

    def add(self, kb: str, name: str, questions: list[Question], source: str, owner: str = "",
            kind: str = "file", meta: Optional[dict] = None) -> QuestionSet:
        """A new set, stored whole or not at all. A name the KB already has (for this owner) is
        refused: nothing stored is replaced."""
        name = check_name(name)
        if not questions:
            raise InputError(f"question set {name!r} would hold no questions")
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise InputError(f"question set {name!r}: duplicate question id {dup!r}")
        qs = QuestionSet(kb, name, source, len(questions), sum(bool(q.gold_passage_ids) for q in questions),
                         sum(bool(q.answers) for q in questions), time.time(), kind, owner, secrets.token_hex(8),
                         meta or {})
        with self.traces.transaction() as con:
            if con.execute("SELECT 1 FROM question_sets WHERE kb = ? AND owner = ? AND name = ?",
                           [kb, owner, name]).fetchone():
                raise InputError(f"KB {kb} already has a question set named {name!r}; choose another name")
            self.traces._insert(con, "question_sets", [{c: (json.dumps(qs.meta) if c == "meta" else getattr(qs, c))
                                                        for c in self._COLS}])
            self.traces._insert(con, "set_questions", [
                {"set_id": qs.id, "seq": i, "id": q.id, "text": q.text, "answers": json.dumps(q.answers),
                 "gold": json.dumps(list(q.gold_passage_ids)), "hops": q.hops, "type": q.type}
                for i, q in enumerate(questions)])
        return qs

    def list(self, kb: Optional[str] = None, owner: Optional[str] = None) -> list[QuestionSet]:
        """Oldest first; with `owner` (public mode) only that visitor's sets."""
        where, args = [], []
        if kb is not None:
            where.append("kb = ?")
            args.append(kb)
        if owner is not None:
            where.append("owner = ? AND owner != ''")
            args.append(owner)
        sql = (f"SELECT {', '.join(self._COLS)} FROM question_sets" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY created_at")
        return [self._from_row(r) for r in self.traces.db.execute(sql, args).fetchall()]

    def get(self, kb: str, name: str, owner: Optional[str] = None) -> QuestionSet:
        for qs in self.list(kb, owner):
            if qs.name == name:
                return qs
        have = ", ".join(s.name for s in self.list(kb, owner)) or "none"
        raise InputError(f"KB {kb} has no question set named {name!r} (its sets: {have}; "
                         "`hoptrace questions list --kb KB` lists them)")

    def questions(self, qs: QuestionSet) -> list[Question]:
        rows = self.traces.db.execute("SELECT id, text, answers, gold, hops, type FROM set_questions WHERE set_id = ? "
                                      "ORDER BY seq", [qs.id]).fetchall()
        return [Question(i, t, json.loads(a), json.loads(g), h, ty) for i, t, a, g, h, ty in rows]

    def _from_row(self, row) -> QuestionSet:
        d = dict(zip(self._COLS, row))
        d["meta"] = json.loads(d["meta"] or "{}")
        d["owner"] = d["owner"] or ""
        return QuestionSet(**d)
