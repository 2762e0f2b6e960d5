"""Every run, stored as it was: sessions → runs → stages → LLM calls, in one SQLite file.

A stored run re-renders exactly (its RunResult JSON is kept whole); the per-stage and
per-call rows exist so runs can be listed, filtered and summed with SQL. Writes are
serialised by a lock and each run is one transaction, so concurrent app users never
interleave or lose each other's traces.
"""
from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import sqlite_utils

from retrieval.core.errors import InputError
from retrieval.trace.model import RunResult, dumps

_log = logging.getLogger("hoptrace")

SCHEMA_VERSION = 1


@dataclass
class RunSummary:
    id: str
    session_id: str
    created_at: float
    kb: str
    method: str
    question: str
    status: str
    latency_ms: float
    tokens_in: int
    tokens_out: int
    recall: Optional[float]


def pack(result: bytes) -> bytes:
    """A run's JSON as stored: zlib level 1. GRIEVER's traces (subgraphs, candidate lists) are
    ~170 KB of JSON a run; 1,000 benchmark runs took 48.5 MB as text and 8.5 MB packed, and level 1
    compresses a GRIEVER run in ~0.7 ms (level 6: 6.8 MB, several times slower)."""
    return zlib.compress(result, 1)


def unpack(result) -> str:
    """Stored JSON back: files written before packing hold it as text."""
    return zlib.decompress(result).decode() if isinstance(result, bytes) else result


def check_file(path: Path) -> Optional[str]:
    """Why an existing trace file cannot be used (not a database, SQLite's quick check fails), or
    None when it is fine or does not exist yet."""
    import sqlite3

    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        return str(e)
    return None if rows == ["ok"] else "integrity check failed: " + "; ".join(rows[:3])


def set_aside(path: Path, why: str) -> Path:
    """Moves a bad trace file (and its WAL and shared-memory files) to a new name beside it;
    nothing is deleted. Returns the new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(path) + suffix)
        if src.exists():
            src.replace(Path(str(aside) + suffix))
    return aside


class TraceStore:
    def __init__(self, path: str | Path, recover: bool = False):
        """`recover`: a file that is not a database or fails SQLite's quick check is kept aside
        under a new name and a fresh one is used (`recovered` then says what happened), instead of
        failing every request (a Space restarted mid-write, a disk that filled)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._local = threading.local()
        self.recovered: Optional[str] = None
        # Called with (run id, session id, kb, run, gold) once a run is committed: the pruner
        # (traces/storage/retention.py) counts them, the live span export (traces/otel/export.py) sends
        # them. A listener that raises does not stop the run being stored (storing comes first);
        # its failure is logged once per listener and kind of exception (announce).
        self.on_saved: list[Callable[[str, str, str, RunResult, list[str]], None]] = []
        self._listener_failures: set[tuple[str, str]] = set()
        if recover:
            why = check_file(self.path)
            if why:
                aside = set_aside(self.path, why)
                self.recovered = (f"the trace file {self.path.name} could not be used ({why}); it was kept as "
                                  f"{aside.name} and a fresh one was started")
        with self._lock:
            db = self.db
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
            self._create(db)

    def hold_for_exit(self, timeout: float) -> bool:
        """Wait for a write in progress to commit, then keep every later one out (the process is
        about to exit: ui/lifecycle.py). False when the wait timed out."""
        return self._lock.acquire(timeout=timeout)

    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            import sqlite3

            con = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a crash of the app
            # loses nothing, a power cut at most the last runs, and the file stays consistent.
            con.execute("PRAGMA synchronous=NORMAL")
            db = self._local.db = sqlite_utils.Database(con)
        return db

    @staticmethod
    def _insert(con, table: str, rows: list[dict]) -> None:
        """Plain executemany: sqlite_utils' insert reads the schema on every call (a fifth of
        storing a run under load); these tables and their columns are fixed by `_create`."""
        if rows:
            cols = list(rows[0])
            con.executemany(f'INSERT INTO "{table}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})',
                            [tuple(r[c] for c in cols) for r in rows])

    @staticmethod
    def _create(db: sqlite_utils.Database) -> None:
        if "meta" not in db.table_names():
            db["meta"].insert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key")
        if "sessions" not in db.table_names():
            db["sessions"].create({"id": str, "created_at": float, "kb": str, "question": str, "kind": str,
                                   "owner": str}, pk="id")
        elif "owner" not in db["sessions"].columns_dict:
            # Files from before public mode: their sessions have no owner, so only a local
            # (non-public) app lists them.
            db["sessions"].add_column("owner", str)
        if "runs" not in db.table_names():
            db["runs"].create({"id": str, "session_id": str, "created_at": float, "kb": str, "method": str,
                               "question": str, "status": str, "error": str, "latency_ms": float,
                               "tokens_in": int, "tokens_out": int, "gold": str, "recall": float, "k": int,
                               "result": str}, pk="id", foreign_keys=[("session_id", "sessions")])
            db["runs"].create_index(["session_id"])
            db["runs"].create_index(["method"])
            db["runs"].create_index(["created_at"])
        if "stages" not in db.table_names():
            db["stages"].create({"run_id": str, "seq": int, "name": str, "title": str, "status": str,
                                 "latency_ms": float, "tokens_in": int, "tokens_out": int, "started_at": float},
                                pk=("run_id", "seq"), foreign_keys=[("run_id", "runs")])
        if "llm_calls" not in db.table_names():
            db["llm_calls"].create({"run_id": str, "stage_seq": int, "seq": int, "model": str, "prompt": str,
                                    "completion": str, "tokens_in": int, "tokens_out": int, "latency_ms": float,
                                    "cached": int, "error": str},
                                   pk=("run_id", "stage_seq", "seq"), foreign_keys=[("run_id", "runs")])
        if "experiments" not in db.table_names():
            # A benchmark kept as evidence (traces/storage/experiments.py): its spec, and one row per
            # (question, method, k) pointing at the run's full trace in `runs`.
            db["experiments"].create({"id": str, "created_at": float, "finished_at": float, "kind": str, "kb": str,
                                      "kb_fingerprint": str, "llm": str, "code_version": str, "status": str,
                                      "owner": str, "session_id": str, "n_questions": int, "spec": str,
                                      "summary": str}, pk="id")
            db["experiments"].create_index(["created_at"])
        if "experiment_runs" not in db.table_names():
            db["experiment_runs"].create({"experiment_id": str, "question_id": str, "method": str, "k": int,
                                          "rep": int, "run_id": str, "seq": int, "row": str, "fates": str},
                                         pk=("experiment_id", "question_id", "method", "k", "rep"),
                                         not_null={"rep"}, defaults={"rep": 1},
                                         foreign_keys=[("experiment_id", "experiments"), ("run_id", "runs")])
        elif "rep" not in db["experiment_runs"].columns_dict:
            # Files from before `bench --repeat`: every stored run is its question's first repetition.
            db["experiment_runs"].add_column("rep", int, not_null_default=1)
            db["experiment_runs"].transform(pk=("experiment_id", "question_id", "method", "k", "rep"))
        if "pruned" not in db.table_names():
            # Ids of sessions and experiments removed by a public demo's retention (traces/storage/retention.py):
            # a link to one says it expired.
            db["pruned"].create({"id": str, "kind": str, "pruned_at": float}, pk="id")
        if "bench_results" not in db.table_names():
            db["bench_results"].create({"id": str, "session_id": str, "created_at": float, "kb": str,
                                        "result": str}, pk="id")

    # --- writing ---------------------------------------------------------------------
    def new_session(self, kb: str, question: str = "", kind: str = "ask", owner: str = "") -> str:
        """A session id is 128 random bits: a session link is a capability, so it must not be guessable."""
        sid = secrets.token_hex(16)
        with self._lock:
            con = self.db.conn
            with con:
                self._insert(con, "sessions", [{"id": sid, "created_at": time.time(), "kb": kb, "question": question,
                                                "kind": kind, "owner": owner}])
        return sid

    def save_run(self, session_id: str, kb: str, run: RunResult, gold: Iterable[str] = (),
                 k: Optional[int] = None) -> str:
        with self._lock:
            con = self.db.conn
            with con:  # one transaction: a run is stored whole or not at all
                rid = self.insert_run(con, session_id, kb, run, gold, k)
        self.announce(rid, session_id, kb, run, gold)
        return rid

    def announce(self, run_id: str, session_id: str, kb: str, run: RunResult, gold: Iterable[str]) -> None:
        """Tell `on_saved` listeners of a committed run (save_run does; so does whoever commits
        insert_run inside a transaction of its own)."""
        for listener in self.on_saved:
            try:
                listener(run_id, session_id, kb, run, list(gold))
            except Exception as e:  # noqa: BLE001 — any listener's failure is reported, never raised
                kind = (getattr(listener, "__qualname__", type(listener).__name__), type(e).__name__)
                if kind not in self._listener_failures:
                    # Once per kind: a collector that is down would otherwise log every run.
                    self._listener_failures.add(kind)
                    _log.warning("run %s stored, but its listener %s failed with %s: %s (further %s failures "
                                 "of this listener are not logged)", run_id, kind[0], kind[1], e, kind[1])

    def used_bytes(self) -> int:
        """Bytes the file's live pages hold (pages freed by a prune are reused before the file grows)."""
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        return (pages - self.db.execute("PRAGMA freelist_count").fetchone()[0]) * page

    def transaction(self):
        """The writer lock and one transaction on this thread's connection: `with store.transaction()
        as con:` for writes that must land together with a run (traces/storage/experiments.py)."""
        return _Transaction(self)

    @staticmethod
    def delete_runs(con, run_ids: str, args: Sequence) -> None:
        """Runs with their stages and LLM calls, inside the caller's transaction. `run_ids` is what
        goes in `IN (...)`: a SELECT of run ids or a list of placeholders, filled by `args`. Rows
        that point at these runs (experiment_runs) are the caller's to delete first."""
        con.execute(f"DELETE FROM llm_calls WHERE run_id IN ({run_ids})", args)
        con.execute(f"DELETE FROM stages WHERE run_id IN ({run_ids})", args)
        con.execute(f"DELETE FROM runs WHERE id IN ({run_ids})", args)

    def delete_sessions(self, con, session_ids: Sequence[str]) -> tuple[int, list[str]]:
        """Sessions with their runs and experiments, inside the caller's transaction; returns the
        runs deleted and the experiments' ids."""
        marks = ",".join("?" * len(session_ids))
        runs = con.execute(f"SELECT count(*) FROM runs WHERE session_id IN ({marks})", session_ids).fetchone()[0]
        exps = [r[0] for r in con.execute(f"SELECT id FROM experiments WHERE session_id IN ({marks})", session_ids)]
        if exps:
            emarks = ",".join("?" * len(exps))
            con.execute(f"DELETE FROM experiment_runs WHERE experiment_id IN ({emarks})", exps)
            con.execute(f"DELETE FROM experiments WHERE id IN ({emarks})", exps)
        self.delete_runs(con, f"SELECT id FROM runs WHERE session_id IN ({marks})", session_ids)
        con.execute(f"DELETE FROM sessions WHERE id IN ({marks})", session_ids)
        return runs, exps

    def insert_run(self, con, session_id: str, kb: str, run: RunResult, gold: Iterable[str] = (),
                   k: Optional[int] = None) -> str:
        """The run's rows, inside the caller's transaction (save_run, or an experiment's record)."""
        return self._insert_rows(con, session_id, kb, {
            "method": run.method, "question": run.question, "status": run.status, "error": run.error,
            "latency_ms": run.latency_ms, "tokens_in": run.tokens_in, "tokens_out": run.tokens_out},
            run.ranked_ids(),
            [(s.name, s.title, s.status, s.latency_ms, s.tokens_in, s.tokens_out, s.started_at) for s in run.stages],
            [[(c.model, c.prompt, c.completion, c.tokens_in, c.tokens_out, c.latency_ms, int(c.cached), c.error)
              for c in s.llm_calls] for s in run.stages],
            run.to_json_bytes(), gold, k)

    def insert_run_dict(self, con, session_id: str, kb: str, run: dict, gold: Iterable[str] = (),
                        k: Optional[int] = None) -> str:
        """A run as JSON gave it (a shipped experiment's file), stored without building its records:
        the rows insert_run(RunResult.from_dict(run)) writes, each missing field at its record's
        default. Building the records and encoding them again was half of installing the shipped
        experiment (2,200 runs: ~5 s of ~10) on an app's first start."""
        stages = run.get("stages") or []
        s_in = [s.get("tokens_in", 0) for s in stages]
        s_out = [s.get("tokens_out", 0) for s in stages]
        return self._insert_rows(con, session_id, kb, {
            "method": run["method"], "question": run["question"], "status": run.get("status", "ok"),
            "error": run.get("error"), "latency_ms": run.get("latency_ms", 0.0),
            "tokens_in": sum(s_in), "tokens_out": sum(s_out)},
            [r["passage_id"] for r in run.get("ranked") or []],
            [(s["name"], s["title"], s.get("status", "ok"), s.get("latency_ms", 0.0), t_in, t_out,
              s.get("started_at", 0.0)) for s, t_in, t_out in zip(stages, s_in, s_out)],
            [[(c["model"], c["prompt"], c["completion"], c["tokens_in"], c["tokens_out"], c["latency_ms"],
               int(c.get("cached", False)), c.get("error")) for c in s.get("llm_calls") or []] for s in stages],
            dumps(run), gold, k)

    def _insert_rows(self, con, session_id: str, kb: str, cols: dict, ranked_ids: list[str], stages: list[tuple],
                     calls: list[list[tuple]], result: bytes, gold: Iterable[str], k: Optional[int]) -> str:
        gold = list(gold)
        rid = uuid.uuid4().hex[:16]
        top = set(ranked_ids)
        recall = (sum(g in top for g in gold) / len(gold)) if gold else None
        self._insert(con, "runs", [{
            "id": rid, "session_id": session_id, "created_at": time.time(), "kb": kb, **cols,
            "gold": json.dumps(gold), "recall": recall, "k": k or len(ranked_ids), "result": pack(result)}])
        stage_cols = ("name", "title", "status", "latency_ms", "tokens_in", "tokens_out", "started_at")
        self._insert(con, "stages", [{"run_id": rid, "seq": i, **dict(zip(stage_cols, s))}
                                     for i, s in enumerate(stages)])
        call_cols = ("model", "prompt", "completion", "tokens_in", "tokens_out", "latency_ms", "cached", "error")
        self._insert(con, "llm_calls", [{"run_id": rid, "stage_seq": i, "seq": j, **dict(zip(call_cols, c))}
                                        for i, stage_calls in enumerate(calls) for j, c in enumerate(stage_calls)])
        return rid

    def save_bench(self, session_id: str, kb: str, result: dict) -> str:
        bid = uuid.uuid4().hex[:12]
        with self._lock:
            self.db["bench_results"].insert({"id": bid, "session_id": session_id, "created_at": time.time(),
                                             "kb": kb, "result": json.dumps(result, default=str)})
        return bid

    # --- reading ---------------------------------------------------------------------
    def list_runs(self, method: Optional[str] = None, text: Optional[str] = None, session_id: Optional[str] = None,
                  status: Optional[str] = None, limit: int = 200, owner: Optional[str] = None) -> list[RunSummary]:
        """Newest first. `owner` (public mode) keeps only the runs of that visitor's sessions; an
        empty owner matches nothing, so a caller without an id never sees anyone's runs."""
        where, args = [], []
        if owner is not None:
            where.append("session_id IN (SELECT id FROM sessions WHERE owner = ? AND owner != '')")
            args.append(owner)
        if method:
            where.append("method = ?")
            args.append(method)
        if session_id:
            where.append("session_id = ?")
            args.append(session_id)
        if status:
            where.append("status = ?")
            args.append(status)
        if text:
            where.append("question LIKE ? ESCAPE '\\'")
            args.append("%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        sql = ("SELECT id, session_id, created_at, kb, method, question, status, latency_ms, tokens_in, tokens_out, "
               "recall FROM runs" + (" WHERE " + " AND ".join(where) if where else "") +
               " ORDER BY created_at DESC LIMIT ?")
        return [RunSummary(*row) for row in self.db.execute(sql, args + [limit]).fetchall()]

    def load_run(self, run_id: str) -> tuple[RunResult, dict[str, Any]]:
        """The run exactly as stored, plus its row (kb, gold, session, created_at)."""
        return read_run(self.db.conn, run_id)

    def session_runs(self, session_id: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM runs WHERE session_id = ? ORDER BY created_at",
                                              [session_id]).fetchall()]

    def session(self, session_id: str) -> Optional[dict]:
        row = self.db.execute("SELECT id, created_at, kb, question, kind FROM sessions WHERE id = ?",
                              [session_id]).fetchone()
        return dict(zip(("id", "created_at", "kb", "question", "kind"), row)) if row else None

    def was_pruned(self, any_id: str) -> bool:
        """Whether a session or experiment with this id existed and was removed by retention."""
        return self.db.execute("SELECT 1 FROM pruned WHERE id = ?", [any_id]).fetchone() is not None

    def owns(self, owner: str, run_id: str) -> bool:
        row = self.db.execute("SELECT 1 FROM runs r JOIN sessions s ON s.id = r.session_id "
                              "WHERE r.id = ? AND s.owner = ? AND s.owner != ''", [run_id, owner]).fetchone()
        return row is not None

    def export(self, run_ids: Iterable[str], owner: Optional[str] = None) -> str:
        """JSON of the listed runs, with their stored context; with `owner`, only that visitor's."""
        out = []
        for rid in run_ids:
            if owner is not None and not self.owns(owner, rid):
                raise InputError(f"no run {rid!r} among this visitor's sessions")
            run, info = self.load_run(rid)
            out.append({"id": rid, **info, "run": run.to_dict()})
        return json.dumps(out, indent=1, default=str)


_RUN_ROW = "SELECT result, kb, gold, session_id, created_at, k FROM runs WHERE id = ?"


def read_run(con, run_id: str) -> tuple[RunResult, dict[str, Any]]:
    row = con.execute(_RUN_ROW, [run_id]).fetchone()
    if row is None:
        raise InputError(f"no stored run with id {run_id!r}")
    result, kb, gold, session_id, created_at, k = row
    return RunResult.from_dict(json.loads(unpack(result))), {
        "kb": kb, "gold": json.loads(gold), "session_id": session_id, "created_at": created_at, "k": k}


class TraceReader:
    """A trace file opened read-only (`hoptrace export`): what it holds, never a write, and a clear
    error when it is not a trace file of a schema this version reads."""

    NEEDS = {"runs": {"id", "session_id", "kb", "gold", "result", "created_at", "k"}, "sessions": {"id"}}

    def __init__(self, path: str | Path):
        import sqlite3

        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"trace file {self.path} does not exist")
        try:
            self.con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
            tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as e:
            raise InputError(f"{self.path} is not a HopTrace trace file ({e})") from e
        for table, columns in self.NEEDS.items():
            have = {r[1] for r in self.con.execute(f"PRAGMA table_info({table})")} if table in tables else set()
            if not have:
                raise InputError(f"{self.path} is not a HopTrace trace file (no table {table!r})")
            missing = sorted(columns - have)
            if missing:
                raise InputError(f"{self.path} is a trace file of an older schema (table {table!r} lacks "
                                 f"{', '.join(missing)}); open it once with this version's app or CLI to upgrade it")
        version = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if "meta" in tables else None
        if version and int(version[0]) > SCHEMA_VERSION:
            raise InputError(f"{self.path} was written by a newer HopTrace (schema {version[0]}, this one reads "
                             f"{SCHEMA_VERSION})")
        self.tables = tables

    def load_run(self, run_id: str) -> tuple[RunResult, dict[str, Any]]:
        return read_run(self.con, run_id)

    def run_ids(self, *, runs: Iterable[str] = (), session: Optional[str] = None,
                experiment: Optional[str] = None) -> list[str]:
        """The ids asked for, each checked to exist, in their stored order."""
        if session:
            ids = [r[0] for r in self.con.execute("SELECT id FROM runs WHERE session_id = ? ORDER BY created_at",
                                                  [session])]
            if not ids:
                raise InputError(f"no session {session!r} with stored runs in {self.path.name}")
            return ids
        if experiment:
            if "experiment_runs" not in self.tables:
                raise InputError(f"{self.path.name} holds no experiments (a trace file from before them)")
            if experiment.strip().lower() == "latest":  # as `compare latest`: the newest experiment
                newest = self.con.execute("SELECT id FROM experiments ORDER BY created_at DESC LIMIT 1").fetchone()
                if newest is None:
                    raise InputError(f"{self.path.name} holds no experiment yet: `hoptrace bench` stores one")
                experiment = newest[0]
            full = [r[0] for r in self.con.execute("SELECT DISTINCT experiment_id FROM experiment_runs "
                                                   "WHERE experiment_id LIKE ? || '%'", [experiment])]
            if len(full) > 1:
                raise InputError(f"experiment id {experiment!r} is ambiguous: give more of it")
            ids = [r[0] for r in self.con.execute("SELECT run_id FROM experiment_runs WHERE experiment_id = ? "
                                                  "ORDER BY seq", [full[0] if full else experiment])]
            if not ids:
                raise InputError(f"no experiment {experiment!r} with stored runs in {self.path.name}")
            return ids
        ids = [r.strip() for r in runs if r.strip()]
        known = {r[0] for r in self.con.execute("SELECT id FROM runs WHERE id IN (SELECT value FROM json_each(?))",
                                                [json.dumps(ids)])}
        unknown = [r for r in ids if r not in known]
        if unknown:
            raise InputError(f"no stored run with id {', '.join(map(repr, unknown))} in {self.path.name}")
        return ids

    def close(self) -> None:
        self.con.close()


class _Transaction:
    def __init__(self, store: TraceStore):
        self.store = store

    def __enter__(self):
        self.store._lock.acquire()
        self.con = self.store.db.conn
        self.con.__enter__()
        return self.con

    def __exit__(self, *exc):
        try:
            return self.con.__exit__(*exc)
        finally:
            self.store._lock.release()


def default_path() -> Path:
    """The trace file the app and the CLI share: $HOPTRACE_TRACES, else $HOPTRACE_HOME/traces.sqlite."""
    import os

    from retrieval.core.paths import home

    return Path(os.environ.get("HOPTRACE_TRACES") or home() / "traces.sqlite")
