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
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..core.errors import ConfigError
from ..core.progress_bar import bar
from ..core.records import Question
from ..llm.prices import EMBEDDED, CpuClock, attach_cost, cost_of, read_price_file
from ..methods import Context, make_method
from ..trace.model import RunResult
from .budget import check_budget, fitter, reader_tokenizer
from .difficulty import estimate_r, success_economy, weight
from .metrics import allhit_at, anyhit_at, exact_match, f1_score, percentile, recall_at
from .protocol import check as check_protocol

KS = (2, 5, 10, 15)
HEADLINE_K = 5


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
    rep: int = 1                      # --repeat N: which repetition (1-based)
    usd: Optional[float] = None       # the run's cost (retrieval/llm/prices.py); None = price unknown
    cpu_s: Optional[float] = None     # the embedded model's runs: CPU seconds, this process and the model's
    budget_fit: Optional[int] = None  # --budget T: how many of `ranked` fit in T tokens of the reader's context
    machine: str = ""                 # the run's machine (cpu.describe()); "" = its experiment's (rows made before)
    llm_server: str = ""              # the embedded model's server build its LLM calls named; "" = none named


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
    repeat: int = 1
    budget: Optional[int] = None
    tokenizer: str = ""               # --budget: whose tokenizer counted the reader's context
    prices: str = ""                  # where the prices came from (retrieval/llm/prices.py)
    ks: tuple = KS                    # the cut-offs asked for; with the protocol, how each recall@k was asked

    def to_json(self, include_per_question: bool = True) -> dict:
        out = {"kb": self.kb, "n_questions": self.n_questions, "protocol": self.protocol, "ks": list(self.ks),
               "headline_k": HEADLINE_K, "started_at": self.started_at, "seconds": self.seconds,
               "pause_ms": self.pause_ms, "repeat": self.repeat, "budget": self.budget,
               "budget_tokenizer": self.tokenizer or None, "prices": self.prices or None,
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


def _sd(xs: Sequence[float]) -> Optional[float]:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return round(statistics.stdev(xs), 4) if len(xs) > 1 else (0.0 if xs else None)


def _by_rep(rows: Sequence[QuestionResult]) -> dict[int, list[QuestionResult]]:
    out: dict[int, list[QuestionResult]] = {}
    for r in rows:
        out.setdefault(r.rep, []).append(r)
    return out


def _spread(out: dict, name: str, rows: Sequence[QuestionResult], score) -> None:
    """`name`: the mean over every repetition's runs; with repetitions, `name_sd`: the standard
    deviation of the repetitions' means (how far one run of the whole benchmark may move)."""
    out[name] = _mean([score(r) for r in rows])
    reps = _by_rep(rows)
    if len(reps) > 1:
        out[f"{name}_sd"] = _sd([_mean([score(r) for r in rs]) for rs in reps.values()])


def stable_share(rows: Sequence[QuestionResult], k: int) -> Optional[float]:
    """stable@k: the share of questions whose top k was the same set in every repetition."""
    by_q: dict[str, list[frozenset]] = {}
    for r in rows:
        by_q.setdefault(r.question_id, []).append(frozenset(r.ranked[:k]))
    if not by_q:
        return None
    return round(sum(len(set(tops)) == 1 for tops in by_q.values()) / len(by_q), 4)


def summarise(rows_by_k: dict[int, list[QuestionResult]], budget: Optional[int] = None) -> dict:
    """Each measure is the mean over questions and repetitions; with --repeat N, `_sd` beside it
    is its spread over the N repetitions and `stable@k` the share of questions with one top k."""
    out: dict = {}
    repeated = len(_by_rep(next(iter(rows_by_k.values()), []))) > 1
    for k, rows in rows_by_k.items():
        if not any(r.gold for r in rows):
            continue   # questions without gold: the gold measures are left out, not 0 (hoptrace judge)
        _spread(out, f"recall@{k}", rows, lambda r, k=k: recall_at(r.ranked, r.gold, k))
        _spread(out, f"anyhit@{k}", rows, lambda r, k=k: anyhit_at(r.ranked, r.gold, k))
        _spread(out, f"allhit@{k}", rows, lambda r, k=k: allhit_at(r.ranked, r.gold, k))
    if budget is not None:
        deepest = rows_by_k[max(rows_by_k)]
        if any(r.gold for r in deepest) and any(r.budget_fit is not None for r in deepest):
            fitted = [r for r in deepest if r.budget_fit is not None]
            _spread(out, f"recall@{budget}tok", fitted, lambda r: recall_at(r.ranked, r.gold, r.budget_fit))
            out[f"passages@{budget}tok"] = _mean([float(r.budget_fit) for r in fitted])
    if repeated:
        for k, rows in rows_by_k.items():
            out[f"stable@{k}"] = stable_share(rows, k)
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
    # Money: None when any run's price is unknown ("price unknown", never $0).
    out["usd_per_question"] = (None if not head or any(r.usd is None for r in head)
                               else round(statistics.fmean(r.usd for r in head), 8))
    if any(r.cpu_s is not None for r in head):
        out["cpu_s_per_question"] = round(statistics.fmean(r.cpu_s for r in head if r.cpu_s is not None), 3)
    if any(r.answer_ms for r in head):
        out.update({"retrieval_ms_p50": _retrieval_latency(head, 50), "retrieval_ms_p95": _retrieval_latency(head, 95),
                    "answer_ms_p50": round(percentile([r.answer_ms for r in ok], 50), 2) if ok else None,
                    "retrieval_tokens_per_question": round(sum(r.tokens_in + r.tokens_out - r.answer_tokens
                                                               for r in head) / max(1, len(head)), 1)})
    answered = [r for r in head if r.em is not None]
    if answered:
        _spread(out, "em", answered, lambda r: r.em)
        _spread(out, "f1", answered, lambda r: r.f1)
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
              done: Optional[dict[tuple, QuestionResult]] = None,
              concurrency: int = 1, repeat: int = 1, budget: Optional[int] = None,
              prices: Optional[Path] = None) -> BenchResult:
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

    `repeat` = N runs each method on each question N times; repetitions after the first bypass
    the LLM response cache and move the seed (retrieval/llm/client.py), so each is a fresh
    request. `budget` = T adds recall@{T}tok (retrieval/bench/budget.py). Every run records its
    cost (retrieval/llm/prices.py; `prices` a price file over genai-prices) and, on the embedded
    model, its CPU seconds.
    """
    if pause_ms < 0:
        raise ConfigError(f"pause_ms must be 0 or more, got {pause_ms}")
    check_protocol(protocol)
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    if concurrency > 1 and pause_ms:
        raise ConfigError("--pause-ms measures one click at a time; it cannot be combined with --concurrency")
    if repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, got {repeat}")
    check_budget(budget)
    if prices is not None:
        read_price_file(prices)   # a bad file is refused before anything runs
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
    res = BenchResult(kb_label, len(questions), protocol, started_at=time.time(), pause_ms=pause_ms, repeat=repeat,
                      budget=budget, ks=tuple(sorted(ks)))
    fit = None
    if budget is not None:
        count_tokens, res.tokenizer = reader_tokenizer(ctx.llm)
        fit = fitter(ctx.store, budget, count_tokens)
    probe = cost_of(ctx.llm, 1, 1, prices)
    res.prices = probe.source if ctx.llm is not None else "no LLM"
    # CPU seconds (this process and the embedded model's server) are a run's own only when runs
    # go one at a time.
    clock = CpuClock(ctx.llm if probe.source == EMBEDDED else None) if concurrency == 1 else None
    if clock is not None and probe.source == EMBEDDED and any(getattr(i, "uses_llm", False) or answer
                                                              for i in instances.values()):
        ctx.llm.start()   # the model's start-up is not charged to the first question
    weights: dict[str, float] = {}
    if difficulty_samples > 0:
        if ctx.llm is None:
            raise ConfigError("--difficulty-samples needs an LLM (--llm)")
        for q in bar(questions, desc="difficulty r_i", disable=not progress):
            weights[q.id] = weight(estimate_r(ctx.llm, q, difficulty_samples), difficulty_samples)
    total = len(questions) * sum(len(v) for v in plan.values()) * repeat
    count = [0]
    pbar = bar(total=total, desc="bench", unit="run", disable=not progress)

    def tick(label: str, k: int) -> None:
        count[0] += 1
        pbar.update(1)
        pbar.set_postfix_str(f"{label}@{k}", refresh=False)
        if on_progress:
            on_progress(count[0], total, label)

    for label, method in instances.items():
        runs: dict[int, list[QuestionResult]] = {}
        for k in plan[label]:
            with_answer = answer and k == (HEADLINE_K if HEADLINE_K in plan[label] else max(plan[label]))
            rows: dict[tuple[str, int], QuestionResult] = {}
            for rep in range(1, repeat + 1):
                todo = []
                for q in questions:
                    key = (q.id, label, k, rep)
                    kept = done.get(key) or (done.get((q.id, label, k)) if rep == 1 else None)
                    if kept is not None:
                        rows[(q.id, rep)] = kept
                        tick(label, k)
                    else:
                        todo.append(q)

                # Bound now: every run of this (label, k, rep) finishes before the loop moves on.
                def one(q: Question, label=label, method=method, k=k, rep=rep,
                        with_answer=with_answer) -> tuple[Question, object, QuestionResult]:
                    if pause_ms:
                        time.sleep(pause_ms / 1000)
                    cpu0 = clock.seconds() if clock else None
                    # Runs in flight at once each get their own instance: no state is shared between them.
                    run = (make(label) if concurrency > 1 else method).run(q.text, k=k, answer=with_answer)
                    cost = attach_cost(run, ctx.llm, prices, clock.seconds() - cpu0 if clock else None)
                    if repeat > 1:
                        run.repetition = rep
                    row = _row(q, label, k, run, with_answer, weights)
                    row.rep, row.usd, row.cpu_s = rep, cost.usd, cost.cpu_s
                    if fit is not None:
                        row.budget_fit = fit(row.ranked)
                    return q, run, row

                if ctx.llm is not None:
                    ctx.llm.repetition = rep
                try:
                    finished = _run_all(one, todo, concurrency, label)
                    for q, run, row in finished:
                        rows[(q.id, rep)] = row
                        if sink:
                            sink(q, label, k, run, row)
                        tick(label, k)
                finally:
                    if ctx.llm is not None:
                        ctx.llm.repetition = 1
            runs[k] = [rows[(q.id, rep)] for rep in range(1, repeat + 1) for q in questions]
            res.per_question.extend(runs[k])
        rows_by_k = {k: runs[k] if k in runs else runs[max(runs)] for k in ks}
        res.methods[label] = summarise(rows_by_k, budget)
    pbar.close()
    res.seconds = round(time.time() - res.started_at, 1)
    return res


def _run_all(one, todo: Sequence[Question], concurrency: int, label: str):
    """`one(q)` for each question, yielded as each finishes: in order, or `concurrency` at once."""
    if concurrency > 1 and len(todo) > 1:
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with ThreadPoolExecutor(concurrency, thread_name_prefix=f"bench-{label}") as pool:
            for fut in as_completed([pool.submit(one, q) for q in todo]):
                yield fut.result()
    else:
        for q in todo:
            yield one(q)


def bench_plan(instances: dict, ks: Sequence[int], protocol: str) -> dict[str, list[int]]:
    """The ks each method runs at: every k for a method whose retrieval depends on k (per-k
    protocol), else once at the largest k, cut at each."""
    return {m: (list(ks) if protocol == "per-k" and inst.k_dependent else [max(ks)]) for m, inst in instances.items()}


def llm_server(run) -> str:
    """The server build the run's LLM calls named (retrieval/llm/client.py records it with each
    call to the embedded model), or "": an endpoint's calls, or no LLM call."""
    for st in run.stages:
        for call in st.llm_calls:
            if call.params.get("server"):
                return call.params["server"]
    return ""


def _row(q: Question, label: str, k: int, run, with_answer: bool, weights: dict[str, float]) -> QuestionResult:
    row = QuestionResult(q.id, label, k, run.ranked_ids(), q.gold_passage_ids, run.latency_ms,
                         run.tokens_in, run.tokens_out, run.status, run.error, machine=run.machine,
                         llm_server=llm_server(run))
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
