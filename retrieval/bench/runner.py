"""`hoptrace bench`: every method on every question, then metrics per method."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from tqdm import tqdm

from ..methods import Context, make_method
from ..records import Question
from .metrics import allhit_at, anyhit_at, percentile, recall_at

KS = (2, 5, 10, 15)


@dataclass
class QuestionResult:
    question_id: str
    method: str
    ranked: list[str]
    gold: list[str]
    latency_ms: float
    tokens_in: int
    tokens_out: int
    status: str
    error: Optional[str] = None


@dataclass
class BenchResult:
    kb: str
    n_questions: int
    k: int
    methods: dict[str, dict] = field(default_factory=dict)
    per_question: list[QuestionResult] = field(default_factory=list)
    started_at: float = 0.0
    seconds: float = 0.0

    def to_json(self, include_per_question: bool = True) -> dict:
        out = {"kb": self.kb, "n_questions": self.n_questions, "k": self.k, "ks": list(KS),
               "started_at": self.started_at, "seconds": self.seconds, "methods": self.methods}
        if include_per_question:
            out["per_question"] = [q.__dict__ for q in self.per_question]
        return out


def summarise(results: Sequence[QuestionResult], ks: Sequence[int] = KS) -> dict:
    def mean(xs):
        xs = [x for x in xs if not math.isnan(x)]
        return round(statistics.fmean(xs), 4) if xs else None

    ok = [r for r in results if r.status == "ok"]
    lat = [r.latency_ms for r in ok]
    out: dict = {}
    for k in ks:
        out[f"recall@{k}"] = mean([recall_at(r.ranked, r.gold, k) for r in results])
        out[f"anyhit@{k}"] = mean([anyhit_at(r.ranked, r.gold, k) for r in results])
        out[f"allhit@{k}"] = mean([allhit_at(r.ranked, r.gold, k) for r in results])
    out.update({
        "latency_ms_p50": round(percentile(lat, 50), 2) if lat else None,
        "latency_ms_p95": round(percentile(lat, 95), 2) if lat else None,
        "latency_ms_mean": round(statistics.fmean(lat), 2) if lat else None,
        "tokens_in": sum(r.tokens_in for r in results),
        "tokens_out": sum(r.tokens_out for r in results),
        "tokens_per_question": round(sum(r.tokens_in + r.tokens_out for r in results) / max(1, len(results)), 1),
        "errors": len(results) - len(ok),
    })
    return out


def run_bench(ctx: Context, kb_label: str, questions: Sequence[Question], methods: Sequence[str],
              k: int = max(KS), progress: bool = True,
              on_progress: Optional[Callable[[int, int, str], None]] = None,
              overrides: Optional[dict[str, dict]] = None) -> BenchResult:
    """Methods run one after another, so latencies are not inflated by each other."""
    overrides = overrides or {}
    instances = {m: make_method(m.split(":")[0], ctx, **overrides.get(m, {})) for m in methods}
    _warm(ctx)
    res = BenchResult(kb_label, len(questions), k, started_at=time.time())
    total = len(questions) * len(methods)
    done = 0
    bar = tqdm(total=total, desc="bench", unit="run", disable=not progress)
    for label, method in instances.items():
        rows = []
        for q in questions:
            run = method.run(q.text, k=k)
            rows.append(QuestionResult(q.id, label, run.ranked_ids(), q.gold_passage_ids, run.latency_ms,
                                       run.tokens_in, run.tokens_out, run.status, run.error))
            done += 1
            bar.update(1)
            bar.set_postfix_str(label)
            if on_progress:
                on_progress(done, total, label)
        res.methods[label] = summarise(rows)
        res.per_question.extend(rows)
    bar.close()
    res.seconds = round(time.time() - res.started_at, 1)
    return res


def _warm(ctx: Context) -> None:
    """Load vectors and run the encoder once, so the first question is not charged for it."""
    warm = getattr(ctx.store, "warm", None)
    if warm:
        warm(("passages", "partial_triples", "entities"))
    ctx.embedder.encode_query("warm up")
