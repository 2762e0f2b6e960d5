"""The shipped experiment: a recorded experiment of every method on the demo's questions, kept in
the repository (data/experiments/<kb>.json.xz) so the lab opens on a comparison nobody had to run.

The file is an experiment as the trace database holds it — its row, each run's bench row with
where its gold was held, and each run's full trace — plus the conditions of every sitting that
recorded it (traces/storage/recording.py). `install` puts it into a trace database once, in a
session of kind "shipped" that retention never prunes (traces/storage/retention.py), and again
only when the file holds other runs than the copy installed.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Optional

from retrieval.core import gcpause
from retrieval.core.errors import HopTraceError
from retrieval.showcase import read_recording, write_recording
from retrieval.trace.model import dumps

from .experiments import Experiment, Experiments
from .store import TraceStore, unpack

FORMAT = 1
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "experiments"
SESSION_KIND = "shipped"


def path_for(kb: str) -> Path:
    return SHIPPED_DIR / f"{kb}.json.xz"


# What a later repetition's stages keep in the file: their timeline, not their graphs, payloads or calls.
STAGE_SKELETON = ("name", "title", "started_at", "latency_ms", "tokens_in", "tokens_out", "status", "message")
TRIMMED = ("trimmed from the shipped file: a later repetition keeps its ranking, answer, cost and stage "
           "timeline; the first repetition's trace is whole")


def trim(run: dict) -> dict:
    """A later repetition's run without its stages' subgraphs, payloads and LLM calls. No view opens
    it (drill-downs, hop maps and pools read the first repetition; stable@k reads the bench rows),
    and those were about 2 MB of the file's 6.9."""
    stages = [{**{k: s[k] for k in STAGE_SKELETON if k in s}, "message": s.get("message") or TRIMMED}
              for s in run.get("stages", [])]
    return {**run, "stages": stages}


def write(experiments: Experiments, exp: Experiment, out: Path) -> int:
    """The experiment with every stored run (each repetition) as one compressed JSON file (xz, by
    its name: path_for), written atomically; returns its size in bytes. Later repetitions are
    trimmed (`trim`)."""
    db = experiments.traces.db
    entries = []
    for e in experiments.entries(exp, repetitions=True):
        result = db.execute("SELECT result FROM runs WHERE id = ?", [e["run_id"]]).fetchone()
        if result is None:
            continue
        run = json.loads(unpack(result[0]))
        entries.append({**{k: e[k] for k in ("question_id", "method", "k", "rep", "row", "fates")},
                        "run": run if e["rep"] == 1 else trim(run)})
    doc = {"format": FORMAT, "experiment": {
        "id": exp.id, "created_at": exp.created_at, "finished_at": exp.finished_at, "kind": exp.kind, "kb": exp.kb,
        "kb_fingerprint": exp.kb_fingerprint, "llm": exp.llm, "code_version": exp.code_version,
        "status": exp.status, "spec": exp.spec, "summary": exp.summary}, "entries": entries}
    write_recording(doc, out)
    return out.stat().st_size


def read(path: Path) -> dict:
    return read_recording(path, "shipped experiment", FORMAT)


def _stamp(doc: dict) -> str:
    """What distinguishes two versions of the file: its runs, its status and its spec (a spec alone
    changes when its methods' fingerprints are taken again: a copy kept with the old spec would
    show them stale, and a resumed recording would write that spec back)."""
    keys = sorted(f"{e['question_id']}|{e['method']}|{e['k']}|{e['rep']}|{e['run'].get('latency_ms')}"
                  for e in doc["entries"])
    spec = json.dumps(doc["experiment"]["spec"], sort_keys=True, default=str)
    digest = hashlib.sha256("\n".join(keys + [spec]).encode()).hexdigest()[:12]
    return f"{doc['experiment']['status']}:{len(keys)}:{digest}"   # the count: its runs


def installed_stamp(traces: TraceStore, exp_id: str) -> Optional[str]:
    row = traces.db.execute("SELECT value FROM meta WHERE key = ?", [f"shipped:{exp_id}"]).fetchone()
    return row[0] if row else None


def install(traces: TraceStore, path: Path, doc: Optional[dict] = None) -> Optional[Experiment]:
    """The file's experiment in `traces`, installed now unless this very version is there already.
    An older version is replaced whole (its runs and rows); nothing else in the file is touched.
    `doc`: the file as `read` returned it, when the caller has read it already."""
    if not path.exists():
        return None
    # Until the parsed file is dropped: the collector's passes over its millions of objects were
    # ~1 s of storing its runs (retrieval/core/gcpause.py).
    with gcpause.paused():
        return _install(traces, path, doc)


def _install(traces: TraceStore, path: Path, doc: Optional[dict]) -> Optional[Experiment]:
    experiments = Experiments(traces)
    # The file's bytes name it: an app restarted on an installed version does not read ~160 MB
    # of JSON again (6 s of CPU each start) to find the same stamp.
    file_key = "shipped_file:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    row = traces.db.execute("SELECT value FROM meta WHERE key = ?", [file_key]).fetchone()
    if doc is None and row is not None and installed_stamp(traces, row[0]) is not None:
        return experiments.get(row[0])
    doc = doc or read(path)
    x = doc["experiment"]
    stamp = _stamp(doc)
    if installed_stamp(traces, x["id"]) == stamp:
        with traces.transaction() as con:
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [file_key, x["id"]])
        return experiments.get(x["id"])
    remove(traces, x["id"])
    used_before = traces.used_bytes()
    session = traces.new_session(x["kb"], question="shipped experiment", kind=SESSION_KIND)
    spec = x["spec"]
    with traces.transaction() as con:
        traces._insert(con, "experiments", [{
            "id": x["id"], "created_at": x["created_at"], "finished_at": x.get("finished_at"), "kind": x["kind"],
            "kb": x["kb"], "kb_fingerprint": x["kb_fingerprint"], "llm": x["llm"], "code_version": x["code_version"],
            "status": x["status"], "owner": "", "session_id": session, "n_questions": len(spec.get("questions", [])),
            "spec": json.dumps(spec, default=str), "summary": json.dumps(x["summary"]) if x["summary"] else None}])
        gold = {q["id"]: q.get("gold", []) for q in spec.get("questions", [])}
        for seq, e in enumerate(doc["entries"]):
            rid = traces.insert_run_dict(con, session, x["kb"], e["run"], gold.get(e["question_id"], []), e["k"])
            traces._insert(con, "experiment_runs", [{
                "experiment_id": x["id"], "question_id": e["question_id"], "method": e["method"], "k": e["k"],
                "rep": e["rep"], "run_id": rid, "seq": seq, "row": dumps(e["row"]).decode(),
                "fates": dumps(e["fates"]).decode() if e["fates"] is not None else None}])
        con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [f"shipped:{x['id']}", stamp])
        con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [file_key, x["id"]])
    reserve = max(0, traces.used_bytes() - used_before)
    with traces.transaction() as con:
        con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", ["shipped_bytes", str(reserve)])
    return experiments.get(x["id"])


def remove(traces: TraceStore, exp_id: str) -> None:
    """An installed shipped experiment out of the file (before its newer version goes in)."""
    row = traces.db.execute("SELECT session_id FROM experiments WHERE id = ?", [exp_id]).fetchone()
    with traces.transaction() as con:
        if row is not None:   # the experiment's own session: its runs, and the experiment with it
            traces.delete_sessions(con, [row[0]])
        con.execute("DELETE FROM meta WHERE key = ?", [f"shipped:{exp_id}"])
        con.execute("DELETE FROM meta WHERE key LIKE 'shipped_file:%' AND value = ?", [exp_id])


def shipped_ids(traces: TraceStore) -> list[str]:
    """The shipped experiments installed in this file."""
    return [r[0] for r in traces.db.execute("SELECT id FROM experiments WHERE session_id IN "
                                            "(SELECT id FROM sessions WHERE kind = ?) ORDER BY created_at DESC",
                                            [SESSION_KIND]).fetchall()]


def reserved_bytes(traces: TraceStore) -> int:
    """What the installed shipped experiments take: retention's size bound counts only the rest."""
    row = traces.db.execute("SELECT value FROM meta WHERE key = 'shipped_bytes'").fetchone()
    return int(row[0]) if row else 0


def install_for(traces: TraceStore, kbs: list[str]) -> list[Experiment]:
    """Every served KB's shipped experiment, installed; one that cannot be read is reported and
    skipped (the lab then opens on the newest experiment instead)."""
    import sys

    out = []
    for kb in kbs:
        t0 = time.perf_counter()
        try:
            exp = install(traces, path_for(kb))
        except HopTraceError as e:
            print(f"hoptrace: warning: {e}", file=sys.stderr, flush=True)
            continue
        if exp is not None:
            out.append(exp)
            took = time.perf_counter() - t0
            if took > 1:
                print(f"hoptrace: installed the shipped experiment of {kb} in {took:.1f} s", file=sys.stderr)
    return out
