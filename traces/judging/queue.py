"""A person's grades where they decide the comparison.

Two things, after Carterette, Allan and Sitaraman ("Minimal test collections for retrieval
evaluation", SIGIR 2006):

- **The queue.** Each pooled pair weighs how much its grade can move the experiment's pairwise
  differences at the chosen metric and k, times the doubt its automatic grade (the prior) leaves.
  A passage in every method's top k, or in none, moves no difference: weight 0. A passage one
  method ranks first and the others leave out, which the answer rule graded 0, comes first.
  Method pairs whose verdict is already settled stop adding weight, so grades go where a verdict
  is still open.
- **Settled and open verdicts.** With every pair a person has not graded left open, each method
  pair's per-question differences are bounded: best case (every open pair that favours A is
  relevant, every one that favours B is not) and worst case. Both extremes get the paired test
  the comparison uses (Holm over the method pairs). A verdict is settled when both extremes give
  it; otherwise it is open, with the number of grades that could still change it.

Exact for P@k, whose per-question difference is linear in the grades. nDCG@k and judged recall
are not linear (their ideal DCG and denominator move with every grade): the queue can still order
by them, but their bounds are refused by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Optional, Sequence

import numpy as np

from retrieval.bench.significance import ALPHA, RESAMPLES, SEED, TIE, holm
from retrieval.core.errors import InputError

from .pool import Pool, PooledPair

QUEUE_METRICS = ("p", "ndcg", "jrecall")
BOUND_METRICS = ("p",)
# The chance that a person's grade lands on the other side of the relevance line than the
# automatic grade did. Where the automatic judge said relevant (2, 3), the chance it was wrong.
# Where it said not relevant or nothing, the pair's own chance of being relevant, read from how
# the methods ranked it: the mean reciprocal rank over the methods, between 0.05 and 0.5. A
# passage several methods put near the top is likely a hop the answer rule cannot see. Measured,
# not assumed: `judge-validity --simulate-person` on the demo reached every gold verdict after 40 %
# of the pool with a flat 0.35 for the rule's 0, and after 14 % with this (docs/judging.md).
DOUBT_IF_RELEVANT = {2: 0.15, 3: 0.1}
PRIOR_MIN, PRIOR_MAX = 0.05, 0.5


def doubt(prior: Optional[int], pair: PooledPair, methods: Sequence[str]) -> float:
    if prior is not None and prior in DOUBT_IF_RELEVANT:
        return DOUBT_IF_RELEVANT[prior]
    rr = sum(1.0 / pair.ranks[m] for m in methods if m in pair.ranks) / max(1, len(methods))
    return min(PRIOR_MAX, max(PRIOR_MIN, rr))


def parse(metric: str, bounds: bool = False) -> tuple[str, int]:
    name, _, k = (metric or "").lower().partition("@")
    allowed = BOUND_METRICS if bounds else QUEUE_METRICS
    if name not in allowed or not k.isdigit() or int(k) < 1:
        what = "bound a verdict" if bounds else "order the queue"
        raise InputError(f"the Judge queue cannot {what} by {metric!r}; use "
                         + " or ".join(f"{m}@K" for m in allowed)
                         + (" (nDCG and judged recall are not linear in the grades)" if bounds else ""))
    return name, int(k)


def _at(rank: Optional[int], name: str, k: int) -> float:
    """What one relevant passage at this rank adds to a method's score (per unit of relevance)."""
    if rank is None or rank > k:
        return 0.0
    return 1.0 / k if name == "p" else (1.0 / math.log2(rank + 1) if name == "ndcg" else 1.0)


def delta(pair: PooledPair, a: str, b: str, name: str, k: int) -> float:
    """How much pair's relevance moves score(a) − score(b) on its question."""
    return _at(pair.ranks.get(a), name, k) - _at(pair.ranks.get(b), name, k)


@dataclass
class QueueItem:
    pair: PooledPair
    weight: float
    prior: Optional[int]     # the automatic grade, if any
    why: str


@dataclass
class Bound:
    a: str
    b: str
    now: str                  # the verdict on the grades as they stand (person, else automatic)
    best: str                 # with every open pair set in A's favour
    worst: str                # ... in B's favour
    low: float                # mean difference A − B, worst case
    high: float               # best case
    open: int                 # open pairs whose grade moves this difference

    @property
    def settled(self) -> bool:
        return self.best == self.worst

    def line(self) -> str:
        if self.settled:
            what = {"a": f"{self.a} better", "b": f"{self.b} better", "=": "no significant difference"}[self.best]
            return f"{self.a} vs {self.b}: settled, {what} — no remaining grade can change it"
        return (f"{self.a} vs {self.b}: open — {self.open} grades could still change it (now: "
                f"{_word(self.now, self)}; difference between {self.low:+.3f} and {self.high:+.3f})")


def _word(v: str, b: Bound) -> str:
    return {"a": f"{b.a} better", "b": f"{b.b} better", "=": "inconclusive"}[v]


def _flips(n: int) -> np.ndarray:
    """RESAMPLES rows of ±1, one column a question: the sign flips of a paired randomization test."""
    got = _FLIPS.get(n)
    if got is None:
        got = _FLIPS[n] = np.random.default_rng(SEED).choice([-1.0, 1.0], size=(RESAMPLES, n))
    return got


_FLIPS: dict[int, np.ndarray] = {}


def _verdicts(diffs: dict[tuple[str, str], np.ndarray]) -> dict[tuple[str, str], tuple[str, float]]:
    """Each method pair's verdict on per-question differences: 'a', 'b' or '=' (Holm over pairs).

    The comparison's test (significance.paired: two-sided paired randomization, RESAMPLES sign
    flips), computed for every pair at once: the bounds test three cases of every pair, and the
    simulation does so at every checkpoint, where scipy's one-at-a-time test took 2.5 s."""
    keys = list(diffs)
    if not keys:
        return {}
    d = np.stack([diffs[k] for k in keys])                       # pairs × questions
    n = d.shape[1]
    mean = d.mean(axis=1)
    if n < 2:
        p = np.ones(len(keys))
    else:
        null = np.abs(_flips(n) @ d.T) / n                       # resamples × pairs
        p = (1 + (null >= np.abs(mean) - 1e-12).sum(axis=0)) / (RESAMPLES + 1)
        p[~np.any(np.abs(d) > TIE, axis=1)] = 1.0               # nothing to tell apart
    adj = holm(list(p)) if len(keys) > 1 else list(p)
    return {k: ("=" if not pa < ALPHA else ("a" if m > 0 else "b"), float(m)) for k, m, pa in zip(keys, mean, adj)}


def bounds(pool: Pool, grades: dict[str, dict[str, int]], person: set[tuple[str, str]], metric: str,
           methods: Optional[Sequence[str]] = None, rel: int = 2) -> list[Bound]:
    """Each method pair's verdict now, at its best and worst case, with the unpersoned pairs open."""
    name, k = parse(metric, bounds=True)
    if pool.depth < k:
        raise InputError(f"the pool is {pool.depth} deep, so {metric} sees passages nobody pooled; pool at "
                         f"depth ≥ {k}")
    methods = list(methods or pool.methods)
    qids = list(pool.by_question())
    pos = {q: i for i, q in enumerate(qids)}
    pairs = list(combinations(methods, 2))
    now, best, worst = ({ab: np.zeros(len(qids)) for ab in pairs} for _ in range(3))
    n_open = {ab: 0 for ab in pairs}
    for pp in pool.pairs:
        i = pos[pp.question_id]
        g = grades.get(pp.question_id, {}).get(pp.passage_id)
        fixed = (pp.question_id, pp.passage_id) in person
        for ab in pairs:
            d = delta(pp, ab[0], ab[1], name, k)
            if d == 0.0:
                continue
            if g is not None and g >= rel:
                now[ab][i] += d
            if fixed:
                if g is not None and g >= rel:
                    best[ab][i] += d
                    worst[ab][i] += d
            else:
                n_open[ab] += 1
                best[ab][i] += max(d, 0.0)
                worst[ab][i] += min(d, 0.0)
    v_now, v_best, v_worst = _verdicts(now), _verdicts(best), _verdicts(worst)
    return [Bound(a, b, v_now[(a, b)][0], v_best[(a, b)][0], v_worst[(a, b)][0], v_worst[(a, b)][1],
                  v_best[(a, b)][1], n_open[(a, b)]) for a, b in pairs]


def weigh(pool: Pool, prior: dict[str, dict[str, int]], person: set[tuple[str, str]], metric: str,
          methods: Optional[Sequence[str]] = None, settled: Optional[set[tuple[str, str]]] = None
          ) -> list[QueueItem]:
    """Every pair no person graded, heaviest first (pool order among equals)."""
    name, k = parse(metric)
    methods = list(methods or pool.methods)
    pairs = [ab for ab in combinations(methods, 2) if not settled or ab not in settled]
    out = []
    for seq, pp in enumerate(pool.pairs):
        if (pp.question_id, pp.passage_id) in person:
            continue
        g = prior.get(pp.question_id, {}).get(pp.passage_id)
        move = sum(abs(delta(pp, a, b, name, k)) for a, b in pairs)
        out.append((QueueItem(pp, round(move * doubt(g, pp, methods), 6), g, _why(pp, methods, k, g)), seq))
    out.sort(key=lambda t: (-t[0].weight, t[1]))
    return [item for item, _ in out]


def _why(pp: PooledPair, methods: Sequence[str], k: int, g: Optional[int]) -> str:
    inside = sorted((r, m) for m, r in pp.ranks.items() if m in methods and r <= k)
    outside = [m for m in methods if pp.ranks.get(m, k + 1) > k]
    if not inside:
        return f"in no method's top {k}: its grade moves no difference at k = {k}"
    if not outside:
        return f"in every method's top {k}: its grade moves no difference between them"
    ranked = ", ".join(f"#{r} by {m}" for r, m in inside)
    prior = "ungraded" if g is None else f"the automatic judge gave {g}"
    return f"{ranked}; outside the top {k} of {', '.join(outside)}; {prior}"


def judged(qrels, experiment_id: str, owner: str = ""):
    """The automatic grades (the prior), every grade in force, and the pairs a person graded."""
    from .qrels import as_dict

    prior = as_dict(qrels.effective(experiment_id, owner, ("llm", "answer")))
    grades = as_dict(qrels.effective(experiment_id, owner))
    person = {(j.question_id, j.passage_id) for j in qrels.all(experiment_id, owner, "person", "ok")}
    return prior, grades, person


def state(experiments, exp, metric: str, owner: str = "", methods: Optional[Sequence[str]] = None):
    """The stored pool, then `judged`'s three. An InputError says "pool it first" when the
    experiment has no pool."""
    from .pool import Pools
    from .qrels import Qrels

    pool = Pools(experiments).get(exp.id)
    if pool is None:
        raise InputError(f"experiment {exp.id[:12]} has no pool yet: pool it first (`hoptrace judge "
                         f"{exp.id[:12]} --depth 10`, or Pool and judge in the Judge tab)")
    parse(metric)
    if methods:
        missing = [m for m in methods if m not in pool.methods]
        if missing:
            raise InputError(f"method(s) {', '.join(missing)} not in the pool (it holds {', '.join(pool.methods)})")
    return (pool, *judged(Qrels(experiments.traces), exp.id, owner))


def status_lines(experiments, exp, metric: str, owner: str = "", methods: Optional[Sequence[str]] = None,
                 rel: int = 2) -> list[str]:
    """Each method pair as it stands: settled (and on whose grades) or open (and how many grades
    could change it). For `compare` and the Benchmark tab; [] where nothing can be bounded: a
    metric other than P@k, no pool yet, or a pool shallower than k."""
    from .pool import Pools
    from .qrels import Qrels

    if not metric.lower().startswith("p@"):
        return []
    pool = Pools(experiments).get(exp.id)
    if pool is None or pool.depth < parse(metric, bounds=True)[1]:
        return []
    _, grades, person = judged(Qrels(experiments.traces), exp.id, owner)
    bs = bounds(pool, grades, person, metric, methods, rel)
    n_person = sum(1 for pp in pool.pairs if (pp.question_id, pp.passage_id) in person)
    out = [f"verdicts at {metric} with every grade no person gave left open ({n_person} of {len(pool.pairs)} "
           f"pooled pairs graded by a person; the rest by the automatic judges, or not at all):"]
    for b in bs:
        # A settled verdict holds whatever the open pairs are: it rests on the person's grades
        # (and on what no grade can move). An open one rests, for now, on the automatic grades.
        out.append(f"  {b.line()}" + (" · rests on a person's grades" if b.settled
                                       else " · now rests on automatic grades"))
    return out
