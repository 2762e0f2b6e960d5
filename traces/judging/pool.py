"""TREC depth-k pooling of an experiment's stored runs.

For each question, the top `depth` passages of every method are pooled and deduplicated
(trectools' topX pool, as TREC makes its assessors' pools). The pool is built from the runs the
experiment already stored — nothing is run again — and kept in the trace file with, for each
pooled passage, the rank each method gave it: the Judge view reveals those only after a person
has graded it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Optional

from retrieval.core.errors import InputError

from ..storage.experiments import Experiment, Experiments

MAX_DEPTH = 100


@dataclass
class PooledPair:
    question_id: str
    passage_id: str
    rank: int                                      # the best rank any method gave it
    ranks: dict[str, int] = field(default_factory=dict)   # method → its rank (1-based), for methods that pooled it


@dataclass
class Pool:
    experiment_id: str
    depth: int
    methods: list[str]
    pairs: list[PooledPair]
    created_at: float = 0.0

    def by_question(self) -> dict[str, list[PooledPair]]:
        out: dict[str, list[PooledPair]] = {}
        for p in self.pairs:
            out.setdefault(p.question_id, []).append(p)
        return out

    def at(self, depth: int) -> list[PooledPair]:
        """The pairs a shallower pool would hold (a depth-5 pool inside a depth-10 one)."""
        return [p for p in self.pairs if p.rank <= depth]


def rankings(experiments: Experiments, exp: Experiment, depth: int,
             methods: Optional[list[str]] = None) -> dict[str, dict[str, list[str]]]:
    """method → question id → ranked passage ids, from the run that ranks at least `depth`
    deep: the run at the smallest recorded k ≥ depth, else at the largest k (a method that
    depends on k ranks deeper at a larger k)."""
    entries = experiments.entries(exp)
    if not entries:
        raise InputError(f"experiment {exp.id[:12]} has no stored runs to pool")
    held = list(dict.fromkeys(e["method"] for e in entries))
    methods = methods or held
    missing = [m for m in methods if m not in held]
    if missing:
        raise InputError(f"method(s) {', '.join(missing)} not in experiment {exp.id[:12]}; it holds {', '.join(held)}")
    best: dict[tuple[str, str], dict] = {}
    for e in entries:
        if e["method"] not in methods:
            continue
        key = (e["method"], e["question_id"])
        cur = best.get(key)
        if cur is None or _better(e["k"], cur["k"], depth):
            best[key] = e
    out: dict[str, dict[str, list[str]]] = {m: {} for m in methods}
    for (m, q), e in best.items():
        out[m][q] = list(e["row"]["ranked"])
    return out


def _better(k: int, cur: int, depth: int) -> bool:
    if (k >= depth) != (cur >= depth):
        return k >= depth
    return k < cur if k >= depth else k > cur


def make_pool(experiments: Experiments, exp: Experiment, depth: int,
              methods: Optional[list[str]] = None) -> Pool:
    """Depth-`depth` pool of the experiment's methods (all of them unless `methods`)."""
    import pandas as pd
    from trectools import TrecPoolMaker, TrecRun

    if not 1 <= depth <= MAX_DEPTH:
        raise InputError(f"--depth must be between 1 and {MAX_DEPTH}, got {depth}")
    ranked = rankings(experiments, exp, depth, methods)
    runs = []
    for m, per_q in ranked.items():
        rows = [(q, "Q0", pid, r, -r, m) for q, ids in per_q.items() for r, pid in enumerate(ids, 1)]
        if not rows:
            continue
        run = TrecRun()
        run.run_data = pd.DataFrame(rows, columns=["query", "q0", "docid", "rank", "score", "system"])
        runs.append(run)
    pooled = TrecPoolMaker().make_pool(runs, strategy="topX", topX=depth).pool
    order = [q["id"] for q in exp.questions]
    pairs = []
    for q in order:
        for pid in pooled.get(q, ()):
            ranks = {m: per_q[q].index(pid) + 1 for m, per_q in ranked.items()
                     if q in per_q and pid in per_q[q][:depth]}
            pairs.append(PooledPair(q, pid, min(ranks.values()), ranks))
    # Within a question: the best-ranked first, then by id, so a pool lists the same way each time.
    pos = {q: i for i, q in enumerate(order)}
    pairs.sort(key=lambda p: (pos[p.question_id], p.rank, p.passage_id))
    return Pool(exp.id, depth, list(ranked), pairs, time.time())


class Pools:
    """The pool of each experiment, in the trace file. Pooling again at another depth replaces it."""

    def __init__(self, experiments: Experiments):
        self.traces = experiments.traces
        with self.traces._lock:
            db = self.traces.db
            if "pools" not in db.table_names():
                db["pools"].create({"experiment_id": str, "depth": int, "methods": str, "created_at": float},
                                   pk="experiment_id", foreign_keys=[("experiment_id", "experiments")])
            if "pool_pairs" not in db.table_names():
                db["pool_pairs"].create({"experiment_id": str, "seq": int, "question_id": str, "passage_id": str,
                                         "rank": int, "ranks": str},
                                        pk=("experiment_id", "question_id", "passage_id"))

    def save(self, pool: Pool) -> None:
        with self.traces.transaction() as con:
            con.execute("DELETE FROM pool_pairs WHERE experiment_id = ?", [pool.experiment_id])
            con.execute("DELETE FROM pools WHERE experiment_id = ?", [pool.experiment_id])
            self.traces._insert(con, "pools", [{"experiment_id": pool.experiment_id, "depth": pool.depth,
                                                "methods": json.dumps(pool.methods), "created_at": pool.created_at}])
            self.traces._insert(con, "pool_pairs", [
                {"experiment_id": pool.experiment_id, "seq": i, "question_id": p.question_id,
                 "passage_id": p.passage_id, "rank": p.rank, "ranks": json.dumps(p.ranks)}
                for i, p in enumerate(pool.pairs)])

    def get(self, experiment_id: str) -> Optional[Pool]:
        head = self.traces.db.execute("SELECT depth, methods, created_at FROM pools WHERE experiment_id = ?",
                                      [experiment_id]).fetchone()
        if head is None:
            return None
        rows = self.traces.db.execute("SELECT question_id, passage_id, rank, ranks FROM pool_pairs "
                                      "WHERE experiment_id = ? ORDER BY seq", [experiment_id]).fetchall()
        return Pool(experiment_id, head[0], json.loads(head[1]),
                    [PooledPair(q, p, r, json.loads(rk)) for q, p, r, rk in rows], head[2])
