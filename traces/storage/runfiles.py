"""Runs made elsewhere, in and out of an experiment: TREC run files (`qid Q0 docid rank score tag`),
JSONL (`{"qid", "docid", "score"[, "rank"]}` a line) and CSV (a header with qid, docid, score[, rank]).

An imported method is one stage ("imported": the file, its tag, the hits it gave) and the final
ranking, recorded like a benchmark's runs, so it is compared, funnelled, pooled and judged as any
other. A question id the experiment does not hold, or a passage id the KB does not, is named with
its line; nothing is stored unless the whole file reads.
"""
from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from retrieval.bench.runner import QuestionResult
from retrieval.core.errors import InputError
from retrieval.core.records import Question
from retrieval.trace.model import RankedPassage, RunResult, Stage

from .experiments import Experiment, Experiments

FORMATS = ("trec", "jsonl", "csv")


@dataclass
class RunFile:
    path: str
    format: str
    tag: str = ""
    # question id → [(passage id, rank, score, line)], in rank order once read
    hits: dict[str, list[tuple[str, int, float, int]]] = field(default_factory=dict)


def _format(path: Path, given: Optional[str]) -> str:
    if given:
        if given not in FORMATS:
            raise InputError(f"--format {given!r}: use {', '.join(FORMATS)}")
        return given
    suffix = path.suffix.lower()
    return {".jsonl": "jsonl", ".csv": "csv"}.get(suffix, "trec")


def _num(value: str, what: str, where: str, kind=float):
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {what} should be a number, got {str(value)[:40]!r}") from None


def read_run(path: str | Path, fmt: Optional[str] = None) -> RunFile:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no run file {p}") from None
    except UnicodeDecodeError:
        raise InputError(f"{p.name}: not UTF-8 text") from None
    out = RunFile(p.name, _format(p, fmt))
    rows: list[tuple[str, str, Optional[int], float, int]] = []   # qid, docid, rank, score, line
    if out.format == "trec":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            where = f"{p.name} line {n}"
            if len(parts) != 6:
                raise InputError(f"{where}: a TREC run line has 6 fields (qid Q0 docid rank score tag), "
                                 f"got {len(parts)}")
            rows.append((parts[0], parts[2], _num(parts[3], "rank", where, int), _num(parts[4], "score", where), n))
            out.tag = out.tag or parts[5]
    elif out.format == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{p.name} line {n}"
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{where}: not JSON ({e.msg})") from None
            if not isinstance(d, dict):
                raise InputError(f"{where}: expected an object with qid, docid, score")
            qid, doc = d.get("qid", d.get("question_id")), d.get("docid", d.get("passage_id", d.get("id")))
            if qid in (None, "") or doc in (None, ""):
                raise InputError(f"{where}: needs 'qid' and 'docid'")
            rank = d.get("rank")
            rows.append((str(qid), str(doc), None if rank is None else _num(rank, "rank", where, int),
                         _num(d.get("score", 0.0), "score", where), n))
    else:
        reader = csv.DictReader(io.StringIO(text))
        cols = [c.strip().lower() for c in reader.fieldnames or []]
        if "qid" not in cols or "docid" not in cols:
            raise InputError(f"{p.name}: the CSV needs 'qid' and 'docid' columns (its header: "
                             f"{', '.join(cols) or 'none'})")
        for n, rec in enumerate(reader, 2):
            rec = {(k or "").strip().lower(): v for k, v in rec.items()}
            where = f"{p.name} line {n}"
            rank = rec.get("rank")
            rows.append((rec["qid"], rec["docid"], None if rank in (None, "") else _num(rank, "rank", where, int),
                         _num(rec.get("score") or 0.0, "score", where), n))
    if not rows:
        raise InputError(f"{p.name}: no run lines")
    by: dict[str, list] = {}
    for i, (qid, doc, rank, score, n) in enumerate(rows):
        by.setdefault(qid, []).append((doc, rank if rank is not None else i, score, n))
    # Rank order as the file gives it (rank, then score descending), as trec_eval would read it.
    out.hits = {q: sorted(hs, key=lambda h: (h[1], -h[2])) for q, hs in by.items()}
    return out


def _question(q: dict) -> Question:
    return Question(q["id"], q["text"], list(q.get("answers") or []), list(q.get("gold") or []), q.get("hops"),
                    q.get("type"))


def import_run(experiments: Experiments, exp: Experiment, run: RunFile, method: str, store) -> int:
    """Adds `method`'s runs to the experiment; returns how many questions it ranked."""
    if method in exp.methods:
        raise InputError(f"experiment {exp.id[:12]} already holds a method named {method!r}; import under another "
                         "--method name")
    known = {q["id"]: q for q in exp.questions}
    for qid, hs in run.hits.items():
        if qid not in known:
            raise InputError(f"{run.path} line {hs[0][3]}: question id {qid!r} is not in experiment {exp.id[:12]} "
                             f"(its ids: {', '.join(list(known)[:5])}{', …' if len(known) > 5 else ''})")
    docs = {d for hs in run.hits.values() for d, *_ in hs}
    found = {p.id: p.title for p in store.passages(sorted(docs))}
    for hs in run.hits.values():
        for d, _, _, n in hs:
            if d not in found:
                raise InputError(f"{run.path} line {n}: passage id {d!r} is not in KB {exp.kb}")
    k = max(exp.ks) if exp.ks else 10
    experiments.add_method(exp, method, {"method": method, "imported_from": run.path, "tag": run.tag,
                                         "format": run.format})
    for qid, q in known.items():
        hs = run.hits.get(qid)
        if hs is None:
            continue
        seen: dict[str, None] = {}
        ranked = [RankedPassage(d, s, found[d]) for d, _, s, _ in hs if not (d in seen or seen.setdefault(d, None))]
        imported = Stage(name="imported", title=f"Imported from {run.path}", started_at=time.time(),
                         payload={"file": run.path, "format": run.format, "tag": run.tag, "hits": len(hs),
                                  "kept": len(ranked), "k": k})
        final = Stage(name="ranking", title="Final ranking", started_at=time.time(), payload={
            "how": f"the order of {run.path}",
            "ranked": [{"rank": i + 1, "passage_id": r.passage_id, "title": r.title, "score": r.score}
                       for i, r in enumerate(ranked)]})
        result = RunResult(method, q["text"], ranked=ranked, stages=[imported, final],
                           config={"k": k, "imported_from": run.path})
        row = QuestionResult(qid, method, k, [r.passage_id for r in ranked], list(q.get("gold") or []), 0.0, 0, 0,
                             "ok")
        experiments.record(exp, _question(q), method, k, result, row)
    return sum(1 for q in known if q in run.hits)


def export_run(experiments: Experiments, exp: Experiment, method: str, tag: Optional[str] = None,
               k: Optional[int] = None) -> str:
    """The method's rankings as TREC run lines: its runs at `k` (a per-k benchmark stores one run
    a k, and R@k reads the run made at k), else at the largest k it ran."""
    entries = [e for e in experiments.entries(exp) if e["method"] == method]
    if not entries:
        raise InputError(f"experiment {exp.id[:12]} holds no runs of {method!r}; it holds "
                         f"{', '.join(dict.fromkeys(e['method'] for e in experiments.entries(exp))) or 'none'}")
    if k is not None:
        entries = [e for e in entries if e["k"] == k]
        if not entries:
            raise InputError(f"{method!r} has no runs at k = {k} in experiment {exp.id[:12]} (ks: "
                             f"{', '.join(map(str, exp.ks))})")
    best: dict[str, dict] = {}
    for e in entries:   # per question, the run made at the largest k (a per-k benchmark stores several)
        if e["question_id"] not in best or e["k"] > best[e["question_id"]]["k"]:
            best[e["question_id"]] = e
    lines = []
    for q in exp.questions:
        e = best.get(q["id"])
        if e is None:
            continue
        run, _ = experiments.traces.load_run(e["run_id"])
        for i, r in enumerate(run.ranked, 1):
            lines.append(f"{q['id']} Q0 {r.passage_id} {i} {r.score:.6f} {tag or method}")
    return "\n".join(lines) + "\n"
