"""`hoptrace bench-concurrency`: what `bench --concurrency N` buys against an endpoint that
serves requests in parallel, measured on a loopback endpoint with a fixed delay
(bench/delay_endpoint.py): the same benchmark at each N, its wall time, each run's own latency,
and whether every ranking is identical to the one at N = 1."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Sequence

from ..core.errors import ConfigError
from ..core.records import Question
from ..llm import LLMSettings, get_llm
from ..methods import Context
from .delay_endpoint import DelayEndpoint
from .runner import run_bench


@dataclass
class Level:
    concurrency: int
    seconds: float
    runs: int
    latency_ms_p50: float
    max_in_flight: int
    requests: int
    identical: bool = True
    errors: int = 0


def measure(ctx: Context, kb: str, questions: Sequence[Question], methods: Sequence[str], levels: Sequence[int],
            delay_s: float, ks: Sequence[int] = (5, 10)) -> list[Level]:
    if not levels or min(levels) < 1:
        raise ConfigError(f"--levels must be positive integers, got {list(levels)}")
    out: list[Level] = []
    first = None
    for n in levels:
        server = DelayEndpoint(delay_s)
        with server as url:
            settings = replace(LLMSettings.parse(url, "delay"), concurrency=n, cache=False)
            run_ctx = replace(ctx, llm=get_llm(settings), profile=ctx.profile or "paper")
            t0 = time.perf_counter()
            res = run_bench(run_ctx, kb, questions, list(methods), ks=ks, progress=False, concurrency=n)
            seconds = time.perf_counter() - t0
        ranked = {(r.question_id, r.method, r.k): r.ranked for r in res.per_question}
        first = first or ranked
        lat = sorted(r.latency_ms for r in res.per_question)
        out.append(Level(n, round(seconds, 2), len(res.per_question), round(lat[len(lat) // 2], 1),
                         server.max_in_flight, server.requests, ranked == first,
                         sum(r.status != "ok" for r in res.per_question)))
    return out

