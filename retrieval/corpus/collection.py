"""A collection as the field ships it, with its own passage ids: JSONL and TSV corpora, BEIR
folders, questions as JSONL, TREC qrels as gold.

- JSONL corpus: one `{id | _id, title?, text | contents}` a line (FlashRAG's `contents` holds
  "title\\ntext"); read line by line, never as one JSON document.
- TSV corpus: `id<TAB>text[<TAB>title]` (MS MARCO's collection.tsv), an optional header line.
- BEIR folder: `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv` (`query-id corpus-id
  score`, a header line).
- Questions JSONL: `{id, question | text, answers | golden_answers?}`.
- TREC qrels (`qid 0 docid grade`): a question's gold passages are those graded at least
  `min_grade` (1 by default).

A record's `id` (or `_id`) is the passage id everywhere after: the KB, traces, exports and the
app. The same id twice is an error naming both records. Errors name the file and the line.
"""
from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Iterator, Optional

from ..core.errors import InputError
from ..core.records import Passage, Question
from .hipporag import MAX_PASSAGE_CHARS, MAX_TITLE_CHARS, record_id

DEFAULT_MIN_GRADE = 1


def _open(path: Path) -> io.TextIOBase:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    raw = gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text file, decoded strictly; blank lines skipped."""
    with _open(path) as fh:
        n = 0
        try:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    yield n, line.rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: invalid UTF-8 after line {n}: {e.reason}") from None
        except (OSError, EOFError) as e:   # a truncated gzip file
            raise InputError(f"{path}: not readable after line {n} ({e})") from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of a JSONL file, one line at a time."""
    path = Path(path)
    for n, line in _lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {n} is not JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}: line {n} is not a JSON object but {type(obj).__name__}")
        yield n, obj


def passage_from(pid: Optional[str], title: str, text: str, where: str) -> Passage:
    title, text = (title or "").strip(), (text or "").strip()
    if not text:
        raise InputError(f"{where}: empty text" + (f" (id {pid!r})" if pid else ""))
    if len(text) > MAX_PASSAGE_CHARS or len(title) > MAX_TITLE_CHARS:
        raise InputError(f"{where}: a {'text' if len(text) > MAX_PASSAGE_CHARS else 'title'} of "
                         f"{max(len(text), len(title)):,} characters; a passage holds at most "
                         f"{MAX_PASSAGE_CHARS:,} characters of text and {MAX_TITLE_CHARS:,} of title")
    return Passage(pid, title, text) if pid else Passage.make(title, text)


class UniqueIds:
    """Refuses a passage id met before, naming both records."""

    def __init__(self, source: str):
        self.source, self.seen = source, {}

    def add(self, pid: str, where: str) -> None:
        if pid in self.seen:
            raise InputError(f"{self.source}: passage id {pid!r} appears twice: {self.seen[pid]} and {where}")
        self.seen[pid] = where


def _text_of(rec: dict, where: str) -> tuple[str, str]:
    """(title, text): `text`, else FlashRAG's `contents` ("title\\ntext")."""
    title = rec.get("title") or ""
    if not isinstance(title, str):
        raise InputError(f"{where}: field 'title' should be a string, got {type(title).__name__}")
    if isinstance(rec.get("text"), str):
        return title, rec["text"]
    contents = rec.get("contents")
    if isinstance(contents, str):
        if not title and "\n" in contents:
            head, _, body = contents.partition("\n")
            return head.strip().strip('"'), body
        return title, contents
    raise InputError(f"{where}: missing field 'text' (or 'contents')")


def _collect(path: Path, records: Iterator[tuple[int, Optional[str], str, str]]) -> list[Passage]:
    """Passages from (line number, own id, title, text) records: each checked, ids unique."""
    ids, out = UniqueIds(str(path)), []
    for n, pid, title, text in records:
        p = passage_from(pid, title, text, f"{path}: line {n}")
        ids.add(p.id, f"line {n}")
        out.append(p)
    if not out:
        raise InputError(f"{path}: the corpus has no passages")
    return out


def read_jsonl_corpus(path: str | Path) -> list[Passage]:
    path = Path(path)

    def records():
        for n, rec in iter_jsonl(path):
            where = f"{path}: line {n}"
            yield (n, record_id(rec, where), *_text_of(rec, where))

    return _collect(path, records())


def read_tsv_corpus(path: str | Path) -> list[Passage]:
    """`id<TAB>text[<TAB>title]`, MS MARCO style; a first line `id<TAB>text…` is a header."""
    path = Path(path)

    def records():
        for n, line in _lines(path):
            cells = line.split("\t")
            if n == 1 and cells[0].strip().lower() in ("id", "_id", "docid", "pid"):
                continue
            if len(cells) not in (2, 3):
                raise InputError(f"{path}: line {n}: expected id<TAB>text[<TAB>title], got {len(cells)} "
                                 "tab-separated fields")
            pid = cells[0].strip()
            if not pid:
                raise InputError(f"{path}: line {n}: empty id")
            yield n, pid, cells[2] if len(cells) == 3 else "", cells[1]

    return _collect(path, records())


# --- questions and gold ---------------------------------------------------------------------------
def read_jsonl_questions(path: str | Path) -> list[Question]:
    """`{id, question | text, answers | golden_answers?}` a line; gold comes from qrels."""
    path = Path(path)
    out, seen = [], {}
    for n, rec in iter_jsonl(path):
        where = f"{path}: line {n}"
        qid = record_id(rec, where)
        if qid is None:
            raise InputError(f"{where}: a question needs an 'id' (or '_id')")
        if qid in seen:
            raise InputError(f"{path}: question id {qid!r} appears twice: line {seen[qid]} and line {n}")
        seen[qid] = n
        text = rec.get("question", rec.get("text"))
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: missing the question's text ('question' or 'text')")
        answers = rec.get("answers", rec.get("golden_answers", rec.get("answer", [])))
        answers = [answers] if isinstance(answers, str) else answers
        if not isinstance(answers, list) or not all(isinstance(a, (str, int, float)) for a in answers):
            raise InputError(f"{where}: 'answers' should be a list of strings")
        out.append(Question(qid, text.strip(), [str(a) for a in answers]))
    if not out:
        raise InputError(f"{path}: no questions")
    return out


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels (`qid iter docid grade`) or BEIR's TSV (`query-id corpus-id score`, a header):
    question → passage → grade, grades as given."""
    path = Path(path)
    out: dict[str, dict[str, int]] = {}
    for n, line in _lines(path):
        cells = line.split()
        if n == 1 and cells and cells[0].lower() in ("query-id", "qid", "query_id"):
            continue
        where = f"{path}: line {n}"
        if len(cells) == 4:
            qid, _, pid, grade = cells
        elif len(cells) == 3:
            qid, pid, grade = cells
        else:
            raise InputError(f"{where}: expected 'qid 0 docid grade' (TREC) or 'query-id corpus-id score' (BEIR), "
                             f"got {len(cells)} fields")
        try:
            g = int(float(grade))
        except ValueError:
            raise InputError(f"{where}: the grade {grade!r} is not a number") from None
        out.setdefault(qid, {})[pid] = g
    return out


def attach_gold(questions: list[Question], qrels: dict[str, dict[str, int]], passage_ids: set[str],
                source: str, min_grade: int = DEFAULT_MIN_GRADE) -> list[Question]:
    """Each question's gold: its passages graded ≥ `min_grade`. A qrels line naming a passage the
    corpus does not hold is an error naming it."""
    for q in questions:
        grades = qrels.get(q.id, {})
        unknown = [p for p in grades if p not in passage_ids]
        if unknown:
            raise InputError(f"{source}: question {q.id!r} grades passage id {unknown[0]!r}, which the corpus "
                             f"does not hold" + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""))
        q.gold_passage_ids = [p for p, g in grades.items() if g >= min_grade]
        q.grades = dict(grades) if grades else None
    return questions


# --- formats, told apart by the file or folder -----------------------------------------------------
def is_beir_folder(path: Path) -> bool:
    return path.is_dir() and ((path / "corpus.jsonl").exists() or (path / "corpus.jsonl.gz").exists())


def _beir_file(folder: Path, name: str) -> Path:
    for cand in (folder / name, folder / (name + ".gz")):
        if cand.exists():
            return cand
    raise InputError(f"{folder}: a BEIR folder needs {name}")


def read_beir(folder: str | Path, split: str = "test",
              min_grade: int = DEFAULT_MIN_GRADE) -> tuple[list[Passage], list[Question]]:
    """A BEIR folder: its corpus, and the queries its `qrels/<split>.tsv` grades, with their gold."""
    folder = Path(folder)
    passages = read_jsonl_corpus(_beir_file(folder, "corpus.jsonl"))
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        have = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise InputError(f"{folder}: no qrels/{split}.tsv" + (f" (it has {', '.join(have)}: pass --split)"
                                                             if have else ""))
    qrels = read_qrels(qrels_path)
    queries = read_jsonl_questions(_beir_file(folder, "queries.jsonl"))
    questions = [q for q in queries if q.id in qrels]
    return passages, attach_gold(questions, qrels, {p.id for p in passages}, str(qrels_path), min_grade)


def corpus_kind(path: Path) -> Optional[str]:
    """'beir', 'jsonl', 'tsv' or None (the JSON formats load_corpus reads itself)."""
    name = path.name.lower().removesuffix(".gz")
    if path.is_dir():
        if not is_beir_folder(path):
            raise InputError(f"{path}: a folder is read as BEIR (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), "
                             "and this one has no corpus.jsonl")
        return "beir"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith((".tsv", ".tab")):
        return "tsv"
    return None


def ids_kind(ids: list[str]) -> str:
    """What `kb info` says of a KB's passage ids."""
    chunk = sum(1 for i in ids if i.startswith("chunk-") and len(i) == 38)
    if chunk == len(ids):
        return "chunk ids (md5 of title and text: the corpus gave none)"
    if chunk == 0:
        return "the collection's own ids"
    return f"mixed: {len(ids) - chunk:,} of the collection's own ids, {chunk:,} chunk ids"
