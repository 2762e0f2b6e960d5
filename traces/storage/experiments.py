"""Experiments: a benchmark kept as evidence, in the trace database.

An experiment is what `hoptrace bench`, `hoptrace reproduce` or the Benchmark tab ran: the KB
and its fingerprint, each method with its settings, profile and code fingerprint, the LLM, the
ks, the code version and the questions. Each (question, method, k) run is stored as it finishes
— its full trace in `runs` (so it opens like any stored run) and a row in `experiment_runs`
with the bench row and where its gold passages were held (retrieval/trace/gold.py `gold_presence`) —
in one transaction, under a primary key: a run is stored once or not at all. That is what
makes `--resume` exact: a killed benchmark restarts with the runs it has, and runs only the rest.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from retrieval.bench.runner import QuestionResult
from retrieval.core import cpu
from retrieval.core.errors import InputError
from retrieval.core.records import Question
from retrieval.trace.gold import gold_presence
from retrieval.trace.model import RunResult, dumps

from .store import TraceStore

KINDS = ("bench", "reproduce", "app")
MIN_PREFIX = 6   # a shorter id prefix would match too much to be a reference


@dataclass
class Experiment:
    id: str
    created_at: float
    kind: str
    kb: str
    kb_fingerprint: str
    llm: str
    code_version: str
    status: str                       # running | done | failed | paused (a recording between sittings)
    owner: str = ""
    session_id: str = ""
    n_questions: int = 0
    spec: dict = field(default_factory=dict)   # methods, ks, protocol, questions, args
    summary: Optional[dict] = None             # BenchResult.to_json without rows, when done
    finished_at: Optional[float] = None
    store_seconds: float = field(default=0.0, compare=False)   # this process's time spent storing runs

    @property
    def methods(self) -> list[str]:
        return list(self.spec.get("methods", {}))

    @property
    def ks(self) -> list[int]:
        return list(self.spec.get("ks", []))

    @property
    def questions(self) -> list[dict]:
        return list(self.spec.get("questions", []))

    @property
    def machine(self) -> str:
        """The CPU it ran on ("" for experiments stored before this was recorded)."""
        return str(self.spec.get("machine", ""))

    def provenance(self) -> str:
        """What its figures depend on besides the KB: the LLM, the code and the CPU."""
        return f"LLM {self.llm} · code {self.code_version}" + (f" · on {self.machine}" if self.machine else "")

    def metrics(self) -> list[str]:
        """What can be compared: rank metrics at each k, and em / f1 if the runs answered."""
        out = [f"{m}@{k}" for m in ("recall", "anyhit", "allhit") for k in self.ks]
        if self.spec.get("args", {}).get("answer") or self.summary and any(
                "em" in v for v in (self.summary.get("methods") or {}).values()):
            out += ["em", "f1"]
        return out

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created_at))
        return (f"{self.id[:12]} · {when} · {self.kind} · {self.kb} · {self.n_questions} q · "
                f"{', '.join(self.methods)} · {self.status}")


def question_record(q: Question) -> dict:
    rec = {"id": q.id, "text": q.text, "hops": q.hops, "type": q.type, "gold": list(q.gold_passage_ids),
           "answers": list(q.answers)}
    if getattr(q, "grades", None):
        rec["grades"] = dict(q.grades)   # graded qrels stay graded (qrels export --gold)
    return rec


# Metadata about how the last build went, not about what the KB holds: its seconds, device and
# encoder. With them in, the same corpus built again (a fresh machine, a user's rebuild) was a
# "changed" KB, and a resumed recording or benchmark refused it.
BUILD_ONLY_META = ("last_build", "embed_device")


def kb_fingerprint(store) -> str:
    """What the KB's runs depend on: its backend's counts, metadata and embedding model."""
    info = store.info()
    meta = {k: v for k, v in (info.meta or {}).items() if k not in BUILD_ONLY_META}
    blob = json.dumps({"counts": info.counts, "meta": meta, "embed": info.embed_model, "dim": info.embed_dim},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def code_version() -> str:
    """The checkout's commit (with '+dirty' when tracked files changed), or the package version."""
    from retrieval.core.paths import REPO_ROOT

    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "hoptrace " + version("hoptrace")
    except PackageNotFoundError:
        return "unknown"


def method_spec(method, name: str, settings: dict) -> dict:
    """A method as an experiment records it: the name and settings it was made with, its profile,
    every config value, and the fingerprint of its code and prompts (retrieval/showcase.py)."""
    from retrieval.methods import root_method
    from retrieval.showcase import fingerprint

    cfg = asdict(method.config) if hasattr(method.config, "__dataclass_fields__") else {}
    return {"method": name, "settings": settings, "profile": method.profile, "config": cfg,
            "fingerprint": fingerprint(root_method(name), method.profile or "local")}


class Experiments:
    """Experiments in a TraceStore's file."""

    def __init__(self, traces: TraceStore):
        self.traces = traces

    # --- writing ---------------------------------------------------------------------------
    def start(self, kind: str, kb: str, kb_fp: str, llm: str, spec: dict, owner: str = "") -> Experiment:
        """A new experiment, status running. Its id is 128 random bits: in public mode a link to it
        is a capability, as a session link is."""
        if kind not in KINDS:
            raise ValueError(f"experiment kind {kind!r} not in {KINDS}")
        session = self.traces.new_session(kb, question=f"{kind} experiment", kind="experiment", owner=owner)
        spec = {**spec, "machine": cpu.describe()}  # times and near-tie replies belong to it
        exp = Experiment(secrets.token_hex(16), time.time(), kind, kb, kb_fp, llm, code_version(), "running", owner,
                         session, len(spec.get("questions", [])), spec)
        with self.traces.transaction() as con:
            self.traces._insert(con, "experiments", [{
                "id": exp.id, "created_at": exp.created_at, "finished_at": None, "kind": kind, "kb": kb,
                "kb_fingerprint": kb_fp, "llm": llm, "code_version": exp.code_version, "status": exp.status,
                "owner": owner, "session_id": session, "n_questions": exp.n_questions,
                "spec": json.dumps(spec, default=str), "summary": None}])
        return exp

    def record(self, exp: Experiment, question: Question, label: str, k: int, run: RunResult,
               row: QuestionResult) -> str:
        """One finished run: its trace and its experiment row, together or not at all. A second
        record of the same (question, method, k, repetition) is refused by the primary key (nothing
        doubles)."""
        gold = list(question.gold_passage_ids)
        presence = dumps(gold_presence(run, gold)).decode() if gold else None
        with self.traces.transaction() as con:
            rid = self.traces.insert_run(con, exp.session_id, exp.kb, run, gold, k)
            seq = con.execute("SELECT count(*) FROM experiment_runs WHERE experiment_id = ?", [exp.id]).fetchone()[0]
            self.traces._insert(con, "experiment_runs", [{
                "experiment_id": exp.id, "question_id": question.id, "method": label, "k": k,
                "rep": getattr(row, "rep", 1) or 1, "run_id": rid,
                "seq": seq, "row": dumps(row.__dict__).decode(), "fates": presence}])
        self.traces.announce(rid, exp.session_id, exp.kb, run, gold)
        return rid

    def add_method(self, exp: Experiment, label: str, spec: dict) -> None:
        """A method joins the experiment after it ran (runs imported from a file)."""
        exp.spec.setdefault("methods", {})[label] = spec
        self.save_spec(exp)

    def save_spec(self, exp: Experiment) -> None:
        with self.traces.transaction() as con:
            con.execute("UPDATE experiments SET spec = ? WHERE id = ?", [json.dumps(exp.spec, default=str), exp.id])

    def sink(self, exp: Experiment):
        """A run_bench sink that records every run of `exp`; the time it takes adds up in
        `exp.store_seconds` (what keeping the traces cost the benchmark)."""
        def record(q, label, k, run, row) -> None:
            t0 = time.perf_counter()
            try:
                self.record(exp, q, label, k, run, row)
            finally:
                exp.store_seconds += time.perf_counter() - t0
        return record

    def finish(self, exp: Experiment, summary: dict, status: str = "done") -> None:
        exp.status, exp.summary, exp.finished_at = status, summary, time.time()
        with self.traces.transaction() as con:
            con.execute("UPDATE experiments SET status = ?, summary = ?, finished_at = ? WHERE id = ?",
                        [status, json.dumps(summary, default=str), exp.finished_at, exp.id])

    # --- reading ---------------------------------------------------------------------------
    _COLS = ("id", "created_at", "kind", "kb", "kb_fingerprint", "llm", "code_version", "status", "owner",
             "session_id", "n_questions", "spec", "summary", "finished_at")

    def _from_row(self, row) -> Experiment:
        d = dict(zip(self._COLS, row))
        d["spec"] = json.loads(d["spec"] or "{}")
        d["summary"] = json.loads(d["summary"]) if d["summary"] else None
        d["owner"] = d["owner"] or ""
        return Experiment(**d)

    def get(self, ref: str, owner: Optional[str] = None) -> Experiment:
        """By id, or locally (owner None) by a unique prefix of at least MIN_PREFIX characters.
        With `owner` (public mode) the whole id is needed; a link opens read-only for whoever
        has it, as a session link does."""
        ref = (ref or "").strip().lower()
        if ref == "latest" and owner is None:  # locally: the newest, so a session of commands needs no id
            newest = self.list(limit=1)
            if not newest:
                raise InputError("no experiment yet: `hoptrace bench` stores one")
            return newest[0]
        if not ref or not all(c in "0123456789abcdef" for c in ref):
            raise InputError(f"no experiment with id {ref!r} (ids are hexadecimal; `hoptrace experiments` lists them)")
        sql = f"SELECT {', '.join(self._COLS)} FROM experiments WHERE "
        if owner is None and MIN_PREFIX <= len(ref) < 32:
            rows = self.traces.db.execute(sql + "id LIKE ? ORDER BY created_at", [ref + "%"]).fetchall()
        else:
            rows = self.traces.db.execute(sql + "id = ?", [ref]).fetchall()
        if not rows:
            raise InputError(f"no experiment with id {ref!r} (`hoptrace experiments` lists them)")
        if len(rows) > 1:
            raise InputError(f"experiment id prefix {ref!r} matches {len(rows)} experiments; give more of it")
        return self._from_row(rows[0])

    def list(self, owner: Optional[str] = None, limit: int = 100) -> list[Experiment]:
        """Newest first; with `owner` (public mode) only that visitor's, and none for an empty owner."""
        where, args = "", []
        if owner is not None:
            where, args = "WHERE owner = ? AND owner != ''", [owner]
        rows = self.traces.db.execute(f"SELECT {', '.join(self._COLS)} FROM experiments {where} "
                                      "ORDER BY created_at DESC LIMIT ?", args + [limit]).fetchall()
        return [self._from_row(r) for r in rows]

    def entries(self, exp: Experiment, repetitions: bool = False) -> list[dict]:
        """The experiment's stored runs in the order they finished:
        {question_id, method, k, rep, run_id, row (dict), fates (dict | None)}. Of a `bench --repeat`
        experiment only the first repetition (pools, funnels and drill-downs read one run a
        question), unless `repetitions`."""
        rows = self.traces.db.execute(
            "SELECT question_id, method, k, rep, run_id, row, fates FROM experiment_runs WHERE experiment_id = ? "
            + ("" if repetitions else "AND rep = 1 ") + "ORDER BY seq", [exp.id]).fetchall()
        return [{"question_id": q, "method": m, "k": k, "rep": rep, "run_id": rid, "row": json.loads(row),
                 "fates": json.loads(f) if f else None} for q, m, k, rep, rid, row, f in rows]

    def name_row_machines(self, exp: Experiment, machine: str) -> int:
        """Rows stored before a row named its machine are read as the experiment's: named `machine`
        (that one), so they stay where they were when the experiment's machine moves. Returns how many."""
        with self.traces.transaction() as con:
            rows = [(rid, json.loads(row)) for rid, row in
                    con.execute("SELECT run_id, row FROM experiment_runs WHERE experiment_id = ?", [exp.id])]
            unnamed = [(rid, row) for rid, row in rows if not row.get("machine")]
            for rid, row in unnamed:
                con.execute("UPDATE experiment_runs SET row = ? WHERE experiment_id = ? AND run_id = ?",
                            [dumps({**row, "machine": machine}).decode(), exp.id, rid])
        return len(unnamed)

    def finished(self, exp: Experiment) -> dict[tuple[str, str, int, int], QuestionResult]:
        """The rows a resumed run keeps, keyed as run_bench's `done`: (question, method, k, rep)."""
        fields = QuestionResult.__dataclass_fields__
        return {(e["question_id"], e["method"], e["k"], e["rep"]):
                QuestionResult(**{f: v for f, v in e["row"].items() if f in fields})
                for e in self.entries(exp, repetitions=True)}

    def size_bytes(self, exp: Experiment) -> int:
        """What the experiment's stored traces take in the file (run JSON, stage and call rows, its rows)."""
        one = self.traces.db.execute
        runs = one("SELECT coalesce(sum(length(result) + length(gold) + length(question)), 0) FROM runs "
                   "WHERE session_id = ?", [exp.session_id]).fetchone()[0]
        calls = one("SELECT coalesce(sum(length(prompt) + length(completion)), 0) FROM llm_calls WHERE run_id IN "
                    "(SELECT id FROM runs WHERE session_id = ?)", [exp.session_id]).fetchone()[0]
        rows = one("SELECT coalesce(sum(length(row) + coalesce(length(fates), 0)), 0) FROM experiment_runs "
                   "WHERE experiment_id = ?", [exp.id]).fetchone()[0]
        return int(runs + calls + rows)


def check_resume(exp: Experiment, asked: dict[str, Any]) -> None:
    """A resume must ask what the original asked: each argument given again must be equal. The
    error lists every difference, so nothing is run or stored under mixed settings."""
    if exp.status == "done":
        raise InputError(f"experiment {exp.id[:12]} finished already; nothing to resume")
    if exp.kind != "bench":
        raise InputError(f"experiment {exp.id[:12]} is a {exp.kind} experiment; only `hoptrace bench` resumes")
    original = exp.spec.get("args", {})
    diff = [f"{k}: original {original.get(k)!r}, now {v!r}" for k, v in asked.items()
            if v is not None and original.get(k) != v]
    if diff:
        raise InputError(f"--resume {exp.id[:12]} was started with other arguments; drop them or start a new "
                         "experiment: " + "; ".join(diff))
