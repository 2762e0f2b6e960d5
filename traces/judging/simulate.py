"""`judge-validity ID --simulate-person`: does the Judge queue reach gold's verdicts with fewer
grades than pool order or a random order?

The simulated person grades a pair 2 when it is a gold supporting passage and 0 otherwise. The
prior is the answer rule's grades, as the Judge tab starts from. After every `step` grades, each
method pair's verdict at the metric (paired test, Holm over the pairs) is set against the verdict
that grading the whole pool by gold gives, which is gold's own verdict at that metric. Nothing is
stored: the pool is made in memory and no grade is written.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional, Sequence

from retrieval.core.errors import InputError

from ..storage.experiments import Experiment, Experiments
from . import answer_rule
from .pool import make_pool
from .queue import bounds, weigh
from .service import questions_of

ORDERS = ("queue", "pool", "random")
MARKS = (0.05, 0.10, 0.15, 0.25)


@dataclass
class Curve:
    order: str
    points: list[tuple[int, int]] = field(default_factory=list)   # (grades given, verdicts as gold's)
    needed: Optional[int] = None   # the first grade count at which every verdict is gold's

    def at(self, n: int) -> int:
        """Verdicts matched after n grades (the last checkpoint at or before n)."""
        got = [m for g, m in self.points if g <= n]
        return got[-1] if got else 0


@dataclass
class Simulation:
    experiment: str
    metric: str
    depth: int
    pool_size: int
    pairs: int                        # method pairs compared
    gold_verdicts: dict[str, str]     # "a vs b" → a | b | =
    significant: int                  # gold verdicts that are significant
    curves: list[Curve]

    def lines(self) -> list[str]:
        sig = ", ".join(f"{k}: {v}" for k, v in self.gold_verdicts.items() if v != "=") or "none"
        out = [f"experiment {self.experiment[:12]} · {self.metric} · depth-{self.depth} pool of {self.pool_size} "
               f"pairs · {self.pairs} method pairs, {self.significant} significant by gold ({sig})",
               "verdicts as gold's after grading a share of the pool (simulated person: gold passage 2, else 0; "
               "prior: the answer rule):",
               f"  {'order':<7} {'grades needed':>22}  " + "  ".join(f"{int(m * 100):>3} %" for m in MARKS)]
        for c in self.curves:
            need = (f"{c.needed} ({c.needed / self.pool_size:.0%})" if c.needed is not None
                    else "not reached")
            out.append(f"  {c.order:<7} {need:>22}  " + "  ".join(
                f"{c.at(int(m * self.pool_size)):>2}/{self.pairs}" for m in MARKS))
        return out


def _key(a: str, b: str) -> str:
    return f"{a} vs {b}"


def simulate(experiments: Experiments, exp: Experiment, store, metric: str = "p@5", depth: int = 10,
             orders: Sequence[str] = ORDERS, methods: Optional[Sequence[str]] = None, step: Optional[int] = None,
             seed: int = 0) -> Simulation:
    unknown = [o for o in orders if o not in ORDERS]
    if unknown:
        raise InputError(f"--order {unknown[0]!r}: use {', '.join(ORDERS)}")
    questions = questions_of(exp, store)
    gold = {q.id: set(q.gold_passage_ids) for q in questions.values()}
    if not any(gold.values()):
        raise InputError(f"experiment {exp.id[:12]}'s questions have no gold passages: a simulated person needs "
                         "gold to grade by")
    pool = make_pool(experiments, exp, depth, list(methods) if methods else None)
    passages = {p.id: p for p in store.passages(list({pp.passage_id for pp in pool.pairs}))}
    js, _ = answer_rule.judge((questions[pp.question_id], passages[pp.passage_id]) for pp in pool.pairs
                              if pp.passage_id in passages)
    prior: dict[str, dict[str, int]] = {}
    for j in js:
        prior.setdefault(j.question_id, {})[j.passage_id] = j.grade
    truth = {(pp.question_id, pp.passage_id): (2 if pp.passage_id in gold.get(pp.question_id, ()) else 0)
             for pp in pool.pairs}
    everyone = set(truth)
    full = {}
    for (q, p), g in truth.items():
        full.setdefault(q, {})[p] = g
    gold_b = bounds(pool, full, everyone, metric, methods)
    gold_v = {(b.a, b.b): b.now for b in gold_b}
    n = len(pool.pairs)
    step = step or max(1, n // 100)
    curves = []
    for order in orders:
        curve = Curve(order)
        person: set[tuple[str, str]] = set()
        fixed_order = [(pp.question_id, pp.passage_id) for pp in pool.pairs]
        if order == "random":
            random.Random(seed).shuffle(fixed_order)
        given = 0
        while True:
            grades = {q: dict(ps) for q, ps in prior.items()}
            for q, p in person:
                grades.setdefault(q, {})[p] = truth[(q, p)]
            bs = bounds(pool, grades, person, metric, methods)
            matched = sum(b.now == gold_v[(b.a, b.b)] for b in bs)
            curve.points.append((given, matched))
            if curve.needed is None and matched == len(bs):
                curve.needed = given
            if given >= n:
                break
            if order == "queue":
                settled = {(b.a, b.b) for b in bs if b.settled}
                nxt = [(it.pair.question_id, it.pair.passage_id) for it in
                       weigh(pool, prior, person, metric, methods, settled)[:step]]
            else:
                nxt = [key for key in fixed_order if key not in person][:step]
            person.update(nxt)
            given = len(person)
        curves.append(curve)
    return Simulation(exp.id, metric, depth, n, len(gold_b), {_key(*k): v for k, v in gold_v.items()},
                      sum(v != "=" for v in gold_v.values()), curves)


def plot(sim: Simulation, path) -> None:
    """Verdicts matching gold's against grades given, one line an order (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for c in sim.curves:
        ax.step([g / sim.pool_size * 100 for g, _ in c.points], [m for _, m in c.points], where="post",
                label=c.order + (f" (all at {c.needed / sim.pool_size:.0%})" if c.needed is not None else ""))
    ax.set_xlabel("share of the pool graded by the (simulated) person, %")
    ax.set_ylabel(f"method pairs with gold's verdict (of {sim.pairs})")
    ax.set_title(f"{sim.metric}, depth-{sim.depth} pool of {sim.pool_size} pairs")
    ax.set_ylim(0, sim.pairs + 0.5)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
