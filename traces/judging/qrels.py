"""Relevance judgments (qrels) of an experiment's pooled pairs, with where each came from.

A judgment grades a (question, passage) pair 0–3 (GRADES). It comes from a person, the answer
rule or an LLM judge, and records that source, the model or rule, the prompt version and the
time. A judge that could not grade a pair records it as failed with the reason — never as 0.
The qrels used for measures take, pair by pair, a person's grade over an LLM's over the answer
rule's (`effective`). TREC's qrels format (`qid 0 docid grade`) reads and writes them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from retrieval.core.errors import InputError

from ..storage.store import TraceStore

GRADES = {0: "unrelated", 1: "related, does not help answer", 2: "holds part of the answer or a needed hop",
          3: "answers the question, alone or with another pooled passage"}
SOURCES = ("person", "llm", "answer")    # in the order a pair's grade is taken from (`effective`)
REL_DEFAULT = 2                          # grade ≥ 2 counts as relevant unless told otherwise


@dataclass
class Judgment:
    question_id: str
    passage_id: str
    grade: Optional[int]          # None when status is "failed"
    source: str                   # person | llm | answer
    judge: str = ""               # the model, the rule or "person"
    prompt_version: str = ""
    created_at: float = 0.0
    status: str = "ok"            # ok | failed
    reason: str = ""
    score: Optional[float] = None  # a continuous score where the judge has one (AUC is measured on it)
    run_id: str = ""              # the stored run holding the judge's LLM call
    owner: str = ""

    def __post_init__(self):
        if self.source not in SOURCES:
            raise InputError(f"judgment source {self.source!r} should be one of {', '.join(SOURCES)}")
        if self.status == "ok" and self.grade not in GRADES:
            raise InputError(f"grade {self.grade!r} for {self.question_id} / {self.passage_id} is outside 0–3")


_COLS = ("experiment_id", "owner", "question_id", "passage_id", "source", "grade", "judge", "prompt_version",
         "created_at", "status", "reason", "score", "run_id")


class Qrels:
    """Judgments in a TraceStore's file, per experiment and owner (a public visitor's are theirs)."""

    def __init__(self, traces: TraceStore):
        self.traces = traces
        with traces._lock:
            db = traces.db
            if "judgments" not in db.table_names():
                db["judgments"].create({"experiment_id": str, "owner": str, "question_id": str, "passage_id": str,
                                        "source": str, "grade": int, "judge": str, "prompt_version": str,
                                        "created_at": float, "status": str, "reason": str, "score": float,
                                        "run_id": str},
                                       pk=("experiment_id", "owner", "question_id", "passage_id", "source"))

    def put(self, experiment_id: str, judgments: Iterable[Judgment]) -> int:
        """Stores judgments, replacing an earlier one of the same pair, source and owner (a person
        who changes their mind; a failed LLM judgment judged again)."""
        rows = [{"experiment_id": experiment_id, **{c: getattr(j, c) for c in _COLS[1:]}}
                for j in judgments]
        for r in rows:
            r["created_at"] = r["created_at"] or time.time()
        with self.traces.transaction() as con:
            con.executemany(f"INSERT OR REPLACE INTO judgments ({', '.join(_COLS)}) VALUES "
                            f"({', '.join('?' * len(_COLS))})", [tuple(r[c] for c in _COLS) for r in rows])
        return len(rows)

    def all(self, experiment_id: str, owner: str = "", source: Optional[str] = None,
            status: Optional[str] = None) -> list[Judgment]:
        sql = f"SELECT {', '.join(_COLS[1:])} FROM judgments WHERE experiment_id = ? AND owner = ?"
        args: list = [experiment_id, owner]
        if source:
            sql += " AND source = ?"
            args.append(source)
        if status:
            sql += " AND status = ?"
            args.append(status)
        return [Judgment(**dict(zip(_COLS[1:], r)))
                for r in self.traces.db.execute(sql + " ORDER BY created_at", args).fetchall()]

    def effective(self, experiment_id: str, owner: str = "", sources: Iterable[str] = SOURCES,
                  prompt_version: Optional[str] = None) -> dict[tuple[str, str], Judgment]:
        """(question, passage) → the judgment measures use: the first of `sources`, in that order,
        that graded the pair (failed judgments are skipped); `prompt_version` keeps one judge's."""
        order = [s for s in sources]
        unknown = [s for s in order if s not in SOURCES]
        if unknown:
            raise InputError(f"unknown judge {unknown[0]!r}; choose from {', '.join(SOURCES)}")
        out: dict[tuple[str, str], Judgment] = {}
        for j in self.all(experiment_id, owner, status="ok"):
            if j.source not in order or (prompt_version and j.prompt_version != prompt_version):
                continue
            key = (j.question_id, j.passage_id)
            cur = out.get(key)
            # oldest first: of one source, the newest judgment of the pair wins (a judge re-run)
            if cur is None or order.index(j.source) <= order.index(cur.source):
                out[key] = j
        return out

    def versions(self, experiment_id: str, owner: str = "", source: str = "llm") -> list[str]:
        """The prompt versions a source's judgments of the experiment were made with, newest last."""
        rows = self.traces.db.execute("SELECT prompt_version, max(created_at) FROM judgments WHERE experiment_id = ? "
                                      "AND owner = ? AND source = ? GROUP BY prompt_version ORDER BY 2",
                                      [experiment_id, owner, source]).fetchall()
        return [r[0] for r in rows]

    def stamp(self, experiment_id: str, owner: str = "") -> tuple:
        """Changes whenever the owner's judgments of the experiment change (a grade added or replaced):
        what a cached judged comparison is keyed by."""
        return tuple(self.traces.db.execute("SELECT count(*), max(created_at) FROM judgments WHERE experiment_id = ? "
                                            "AND owner = ?", [experiment_id, owner]).fetchone())

    def counts(self, experiment_id: str, owner: str = "") -> dict[str, dict[str, int]]:
        """source → {"ok": n, "failed": n}."""
        rows = self.traces.db.execute("SELECT source, status, count(*) FROM judgments WHERE experiment_id = ? AND "
                                      "owner = ? GROUP BY source, status", [experiment_id, owner]).fetchall()
        out: dict[str, dict[str, int]] = {}
        for s, st, n in rows:
            out.setdefault(s, {"ok": 0, "failed": 0})[st] = n
        return out


def as_dict(judgments: dict[tuple[str, str], Judgment]) -> dict[str, dict[str, int]]:
    """qid → docid → grade: what ir-measures reads."""
    out: dict[str, dict[str, int]] = {}
    for (q, p), j in judgments.items():
        out.setdefault(q, {})[p] = int(j.grade)
    return out


# --- TREC qrels files -----------------------------------------------------------------------------
def write_trec(judgments: dict[tuple[str, str], Judgment], path: Path) -> int:
    lines = [f"{q} 0 {p} {j.grade}" for (q, p), j in judgments.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    return len(lines)


def read_trec(path: Path, questions: set[str], passages: set[str]) -> list[tuple[str, str, int]]:
    """Lines `qid iter docid grade`, checked whole before anything is stored: a question the
    experiment does not hold, a passage the KB does not hold, a grade outside 0–3 or a malformed
    line is an error naming its line."""
    from retrieval.corpus.readers import read_text

    out, seen = [], set()
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputError(f"{path}: line {n}: expected 'qid 0 docid grade', got {line.strip()!r}")
        q, _, p, g = parts
        try:
            grade = int(g)
        except ValueError:
            raise InputError(f"{path}: line {n}: grade {g!r} is not a whole number 0–3") from None
        if grade not in GRADES:
            raise InputError(f"{path}: line {n}: grade {grade} is outside 0–3")
        if q not in questions:
            raise InputError(f"{path}: line {n}: unknown question {q!r} (not in the experiment)")
        if p not in passages:
            raise InputError(f"{path}: line {n}: unknown passage {p!r} (not in the experiment's KB)")
        if (q, p) in seen:
            raise InputError(f"{path}: line {n}: {q} / {p} is graded twice")
        seen.add((q, p))
        out.append((q, p, grade))
    if not out:
        raise InputError(f"{path}: no judgments in the file")
    return out
