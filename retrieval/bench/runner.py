"""`hoptrace bench`: every method on every question, then metrics per method.

Protocol "per-k" (default): a method whose retrieval depends on k (candidate depth,
iterations) runs once per k and recall@k comes from the run at k, as in the papers'
R@k / ms@k columns; methods that merely cut a ranking run once. Protocol "slice" runs
everything once at the largest k. Latency and tokens at the top level are those of the
runs at the headline k (5); per-k latencies are given as `latency_ms_p50@k`.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from tqdm import tqdm

from ..core.errors import ConfigError
from ..core.records import Question
from ..methods import Context, make_method
from ..trace.model import RunResult
from .difficulty import estimate_r, success_economy, weight
from .metrics import allhit_at, anyhit_at, exact_match, f1_score, percentile, recall_at

KS = (2, 5, 10, 15)
HEADLINE_K = 5
PROTOCOLS = ("per-k", "slice")


@dataclass
class QuestionResult:
    question_id: str
    method: str
    k: int
    ranked: list[str]
    gold: list[str]
    latency_ms: float
    tokens_in: int
    tokens_out: int
    status: str
    error: Optional[str] = None
    answer: Optional[str] = None
    em: Optional[float] = None
    f1: Optional[float] = None
    plan_hops: Optional[int] = None   # GRASP: sub-questions its planner wrote
    gold_hops: Optional[int] = None
    weight: Optional[float] = None    # GRASP eq. 3: surprisal of a correct answer
    answer_ms: float = 0.0            # the shared answer step's part of latency_ms (--answer)
    answer_tokens: int = 0


@dataclass
class BenchResult:
    kb: str
    n_questions: int
    protocol: str
    methods: dict[str, dict] = field(default_factory=dict)
    per_question: list[QuestionResult] = field(default_factory=list)
    started_at: float = 0.0
    seconds: float = 0.0
    pause_ms: float = 0.0             # idle time before each question (--pause-ms), not timed

    def to_json(self, include_per_question: bool = True) -> dict:
        out = {"kb": self.kb, "n_questions": self.n_questions, "protocol": self.protocol, "ks": list(KS),
               "headline_k": HEADLINE_K, "started_at": self.started_at, "seconds": self.seconds,
               "pause_ms": self.pause_ms,
               "methods": self.methods}
        if include_per_question:
            out["per_question"] = [q.__dict__ for q in self.per_question]
        return out


def _mean(xs: Sequence[float]) -> Optional[float]:
    xs = [x for x in xs if not math.isnan(x)]
    return round(statistics.fmean(xs), 4) if xs else None


def _latency(rows: Sequence[QuestionResult], q: float) -> Optional[float]:
    lat = [r.latency_ms for r in rows if r.status == "ok"]
    return round(percentile(lat, q), 2) if lat else None


def _retrieval_latency(rows: Sequence[QuestionResult], q: float) -> Optional[float]:
    """Latency without the shared answer step: what the method itself costs a question."""
    lat = [r.latency_ms - r.answer_ms for r in rows if r.status == "ok"]
    return round(percentile(lat, q), 2) if lat else None


def summarise(rows_by_k: dict[int, list[QuestionResult]]) -> dict:
    out: dict = {}
    for k, rows in rows_by_k.items():
        if not any(r.gold for r in rows):
            continue   # questions without gold: the gold measures are left out, not 0 (hoptrace judge)
        out[f"recall@{k}"] = _mean([recall_at(r.ranked, r.gold, k) for r in rows])
        out[f"anyhit@{k}"] = _mean([anyhit_at(r.ranked, r.gold, k) for r in rows])
        out[f"allhit@{k}"] = _mean([allhit_at(r.ranked, r.gold, k) for r in rows])
    head = rows_by_k.get(HEADLINE_K) or rows_by_k[max(rows_by_k)]
    ok = [r for r in head if r.status == "ok"]
    out.update({
        "latency_ms_p50": _latency(head, 50),
        "latency_ms_p95": _latency(head, 95),
        "latency_ms_mean": round(statistics.fmean(r.latency_ms for r in ok), 2) if ok else None,
        **{f"latency_ms_p50@{k}": _latency(rows, 50) for k, rows in rows_by_k.items()},
        "tokens_in": sum(r.tokens_in for r in head),
        "tokens_out": sum(r.tokens_out for r in head),
        "tokens_per_question": round(sum(r.tokens_in + r.tokens_out for r in head) / max(1, len(head)), 1),
        "errors": len(head) - len(ok),
    })
    if any(r.answer_ms for r in head):
        out.update({"retrieval_ms_p50": _retrieval_latency(head, 50), "retrieval_ms_p95": _retrieval_latency(head, 95),
                    "answer_ms_p50": round(percentile([r.answer_ms for r in ok], 50), 2) if ok else None,
                    "retrieval_tokens_per_question": round(sum(r.tokens_in + r.tokens_out - r.answer_tokens
                                                               for r in head) / max(1, len(head)), 1)})
    answered = [r for r in head if r.em is not None]
    if answered:
        out["em"] = _mean([r.em for r in answered])
        out["f1"] = _mean([r.f1 for r in answered])
        weighted = [r for r in answered if r.weight is not None]
        if weighted:
            out["C_w"] = success_economy([r.tokens_in + r.tokens_out for r in weighted], [r.em for r in weighted],
                                         [r.weight for r in weighted])
    planned = [r for r in head if r.plan_hops is not None and r.gold_hops]
    if planned:
        out["plan_hop_accuracy"] = _mean([float(r.plan_hops == r.gold_hops) for r in planned])
    return out


# Called after each finished run: (question, method label, k, the run's full trace, its row).
RunSink = Callable[[Question, str, int, RunResult, QuestionResult], None]


def run_bench(ctx: Context, kb_label: str, questions: Sequence[Question], methods: Sequence[str],
              ks: Sequence[int] = KS, protocol: str = "per-k", progress: bool = True,
              on_progress: Optional[Callable[[int, int, str], None]] = None, answer: bool = False,
              difficulty_samples: int = 0, specs: Optional[dict[str, tuple[str, dict]]] = None,
              pause_ms: float = 0.0, sink: Optional[RunSink] = None,
              done: Optional[dict[tuple[str, str, int], QuestionResult]] = None,
              concurrency: int = 1) -> BenchResult:
    """Methods run one after another, so latencies are not inflated by each other.

    With `answer`, the runs at the headline k end with the shared answer step (top-5
    passages → answer) and each method gets EM and F1 against the gold answers and aliases.
    A method that answers by itself (GRASP) is scored on its own answer. With
    `difficulty_samples` = n > 0, each question's r_i is estimated with n closed-book samples of
    the LLM and C_w (GRASP eq. 3) is reported. `specs` maps a label in `methods` to a method
    name and settings (`hoptrace reproduce` runs one method under several settings).

    `pause_ms` idles that long before each question, untimed. Back to back, the encoder's
    weights stay in the CPU's caches from one question to the next; a visitor's click comes
    after a pause and finds them gone (a query encoding then takes ~2x as long here). With a
    pause the latencies are what a single click costs, which is what the app's columns show.

    `sink` gets every run as it finishes (an experiment stores its trace: traces/storage/experiments.py).
    `done` holds rows of (question id, label, k) finished earlier (a resumed experiment): those
    are not run again. `concurrency` > 1 keeps that many questions of a method in flight at once,
    for an LLM endpoint that serves requests in parallel; each run still times only itself.
    """
    if pause_ms < 0:
        raise ConfigError(f"pause_ms must be 0 or more, got {pause_ms}")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}; choose one of {PROTOCOLS}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    if concurrency > 1 and pause_ms:
        raise ConfigError("--pause-ms measures one click at a time; it cannot be combined with --concurrency")
    specs = specs or {}
    done = done or {}
    def make(label: str):
        name, settings = specs.get(label, (label, {}))
        inst = make_method(name, ctx, **settings)
        inst.name = label
        return inst

    instances = {m: make(m) for m in methods}
    plan = bench_plan(instances, ks, protocol)
    ctx.warm()  # the first question is not charged for loading
    res = BenchResult(kb_label, len(questions), protocol, started_at=time.time(), pause_ms=pause_ms)
    weights: dict[str, float] = {}
    if difficulty_samples > 0:
        if ctx.llm is None:
            raise ConfigError("--difficulty-samples needs an LLM (--llm)")
        for q in tqdm(questions, desc="difficulty r_i", disable=not progress):
            weights[q.id] = weight(estimate_r(ctx.llm, q, difficulty_samples), difficulty_samples)
    total = len(questions) * sum(len(v) for v in plan.values())
    count = [0]
    bar = tqdm(total=total, desc="bench", unit="run", disable=not progress)

    def tick(label: str, k: int) -> None:
        count[0] += 1
        bar.update(1)
        bar.set_postfix_str(f"{label}@{k}")
        if on_progress:
            on_progress(count[0], total, label)

    for label, method in instances.items():
        runs: dict[int, list[QuestionResult]] = {}
        for k in plan[label]:
            with_answer = answer and k == (HEADLINE_K if HEADLINE_K in plan[label] else max(plan[label]))
            rows: dict[str, QuestionResult] = {}
            todo = []
            for q in questions:
                if (q.id, label, k) in done:
                    rows[q.id] = done[(q.id, label, k)]
                    tick(label, k)
                else:
                    todo.append(q)

            # Bound now: every run of this (label, k) finishes before the loop moves on, and this says so.
            def one(q: Question, label=label, method=method, k=k,
                    with_answer=with_answer) -> tuple[Question, object, QuestionResult]:
                if pause_ms:
                    time.sleep(pause_ms / 1000)
                # Runs in flight at once each get their own instance: no state is shared between them.
                run = (make(label) if concurrency > 1 else method).run(q.text, k=k, answer=with_answer)
                return q, run, _row(q, label, k, run, with_answer, weights)

            if concurrency > 1 and len(todo) > 1:
                from concurrent.futures import ThreadPoolExecutor, as_completed

                with ThreadPoolExecutor(concurrency, thread_name_prefix=f"bench-{label}") as pool:
                    for fut in as_completed([pool.submit(one, q) for q in todo]):
                        q, run, row = fut.result()
                        rows[q.id] = row
                        if sink:
                            sink(q, label, k, run, row)
                        tick(label, k)
            else:
                for q in todo:
                    q, run, row = one(q)
                    rows[q.id] = row
                    if sink:
                        sink(q, label, k, run, row)
                    tick(label, k)
            runs[k] = [rows[q.id] for q in questions]
            res.per_question.extend(runs[k])
        rows_by_k = {k: runs[k] if k in runs else runs[max(runs)] for k in ks}
        res.methods[label] = summarise(rows_by_k)
    bar.close()
    res.seconds = round(time.time() - res.started_at, 1)
    return res


def bench_plan(instances: dict, ks: Sequence[int], protocol: str) -> dict[str, list[int]]:
    """The ks each method runs at: every k for a method whose retrieval depends on k (per-k
    protocol), else once at the largest k, cut at each."""
    return {m: (list(ks) if protocol == "per-k" and inst.k_dependent else [max(ks)]) for m, inst in instances.items()}


def _row(q: Question, label: str, k: int, run, with_answer: bool, weights: dict[str, float]) -> QuestionResult:
    row = QuestionResult(q.id, label, k, run.ranked_ids(), q.gold_passage_ids, run.latency_ms,
                         run.tokens_in, run.tokens_out, run.status, run.error)
    shared = [st for st in run.stages if st.name == "answer"]
    row.answer_ms = sum(st.latency_ms for st in shared)
    row.answer_tokens = sum(st.tokens_in + st.tokens_out for st in shared)
    if (with_answer or run.answer is not None) and q.answers:
        row.answer = run.answer or ""
        row.em, row.f1 = exact_match(row.answer, q.answers), f1_score(row.answer, q.answers)
        row.weight = weights.get(q.id)
    planner = next((st for st in run.stages if st.name == "plan" and st.status == "ok"), None)
    if planner is not None:
        row.plan_hops = len(planner.payload.get("sub_questions", []))
        row.gold_hops = len(q.decomposition) if q.decomposition else q.hops
    return row
