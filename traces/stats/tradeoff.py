"""The whole trade-off of an experiment's methods: right answers and where they were lost, money,
run-to-run spread, and recall at an equal context budget.

- **Answer split.** Each answered question falls in one of four cells: the gold passages were in
  the reader's top k (all of them: a multi-hop answer needs every hop) or not, and the answer
  was right (exact match) or not. "Gold in, wrong answer" is where *the reader* lost it; "gold
  missed, wrong answer" is where *the retriever* did.
- **Money.** Each run's cost as recorded (retrieval/llm/prices.py): dollars per question, or
  "price unknown"; the embedded model's CPU seconds.
- **Spread.** With `bench --repeat N`, each measure's standard deviation over the N
  repetitions' means, and each pair's verdict in every repetition: a verdict that differs
  between repetitions is flagged, since one run of the benchmark could have shown either.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from itertools import combinations
from typing import Optional, Sequence

from retrieval.bench.metrics import allhit_at, recall_at
from retrieval.bench.significance import paired_many

READER_K = 5   # the shared answer step reads the top 5 (retrieval/methods/answer.py TOP_PASSAGES)

CELLS = ("gold_in_right", "gold_in_wrong", "gold_missed_right", "gold_missed_wrong")
CELL_TEXT = {"gold_in_right": "gold in the top {k}, answer right",
             "gold_in_wrong": "gold in the top {k}, answer wrong: the reader lost it",
             "gold_missed_right": "gold missed, answer right anyway",
             "gold_missed_wrong": "gold missed, answer wrong: the retriever lost it"}


def cell(ranked: Sequence[str], gold: Sequence[str], em: float, k: int = READER_K) -> str:
    """One answered question's cell of the split."""
    had = allhit_at(ranked, gold, k) == 1.0
    right = em >= 1.0
    return ("gold_in_" if had else "gold_missed_") + ("right" if right else "wrong")


@dataclass
class AnswerSplit:
    method: str
    k: int
    questions: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CELLS})

    @property
    def n(self) -> int:
        return sum(len(v) for v in self.questions.values())

    def count(self, c: str) -> int:
        return len(self.questions[c])

    def to_json(self) -> dict:
        return {"method": self.method, "k": self.k, "n": self.n,
                **{c: {"count": self.count(c), "questions": self.questions[c]} for c in CELLS}}


def answer_split(rows: Sequence[dict], method: str, k: int = READER_K) -> Optional[AnswerSplit]:
    """The split of `method`'s answered rows with gold (the first repetition's: one cell a
    question); None when it answered none."""
    mine = [r for r in rows if r["method"] == method and r.get("em") is not None and r.get("gold")
            and r.get("rep", 1) == 1]
    if not mine:
        return None
    split = AnswerSplit(method, k)
    seen = set()
    for r in mine:
        if r["question_id"] in seen:
            continue
        seen.add(r["question_id"])
        split.questions[cell(r["ranked"], r["gold"], r["em"], k)].append(r["question_id"])
    return split


# --- money and CPU -----------------------------------------------------------------------------
def cost_per_question(rows: Sequence[dict], method: str, machine: str = "") -> dict:
    """{usd (None = price unknown), cpu_s (None unless measured), runs}: the mean over the method's
    runs that answered or, without answers, over all its runs at their largest k. Given the
    experiment's `machine`, CPU seconds read only the runs on it (a row without one is its
    experiment's): a sitting resumed elsewhere adds scores, not seconds of another CPU."""
    mine = _headline(rows, method)
    usd = [r.get("usd") for r in mine]
    cpu = [r["cpu_s"] for r in mine if r.get("cpu_s") is not None
           and (not machine or (r.get("machine") or machine) == machine)]
    # A run imported from a file (or stored before runs kept their cost) spent no tokens here and
    # has no cost: "not recorded", which is not "price unknown".
    recorded = any(r.get("usd") is not None or r.get("cpu_s") is not None or r.get("tokens_in") or r.get("tokens_out")
                   for r in mine)
    return {"usd": None if not mine or any(u is None for u in usd) else statistics.fmean(usd),
            "cpu_s": statistics.fmean(cpu) if cpu else None, "runs": len(mine), "recorded": recorded}


def _headline(rows: Sequence[dict], method: str) -> list[dict]:
    mine = [r for r in rows if r["method"] == method]
    answered = [r for r in mine if r.get("em") is not None]
    if answered:
        return answered
    top = max((r["k"] for r in mine), default=None)
    return [r for r in mine if r["k"] == top]


# --- repetitions -------------------------------------------------------------------------------
def repetitions(rows: Sequence[dict]) -> int:
    return max((r.get("rep", 1) for r in rows), default=1)


def score(r: dict, metric: str) -> float:
    """One run's score: recall@K, recall@Ttok (over the passages that fit), em, f1."""
    name, _, at = metric.partition("@")
    if name in ("em", "f1"):
        v = r.get(name)
        return float("nan") if v is None else float(v)
    if at.endswith("tok"):
        fit = r.get("budget_fit")
        return float("nan") if fit is None else recall_at(r["ranked"], r["gold"], fit)
    return recall_at(r["ranked"], r["gold"], int(at))


def _rows_at(rows: Sequence[dict], method: str, metric: str) -> list[dict]:
    """The method's runs a metric reads: answered runs for em / f1, else those made at the
    metric's k (or the largest k the method ran at, when it ran once)."""
    name, _, at = metric.partition("@")
    mine = [r for r in rows if r["method"] == method]
    if name in ("em", "f1"):
        return [r for r in mine if r.get(name) is not None]
    ks = {r["k"] for r in mine}
    want = int(at) if at.isdigit() and int(at) in ks else max(ks, default=0)
    return [r for r in mine if r["k"] == want]


def per_rep(rows: Sequence[dict], method: str, metric: str) -> dict[int, dict[str, float]]:
    """rep → question → score."""
    out: dict[int, dict[str, float]] = {}
    for r in _rows_at(rows, method, metric):
        v = score(r, metric)
        if not math.isnan(v):
            out.setdefault(r.get("rep", 1), {})[r["question_id"]] = v
    return out


def spread(rows: Sequence[dict], method: str, metric: str) -> Optional[float]:
    """The standard deviation of the repetitions' means; None with one repetition."""
    reps = per_rep(rows, method, metric)
    if len(reps) < 2:
        return None
    return statistics.stdev(statistics.fmean(v.values()) for v in reps.values() if v)


def stable(rows: Sequence[dict], method: str, k: int) -> Optional[float]:
    """stable@k: the share of questions whose top k was one set in every repetition."""
    tops: dict[str, set] = {}
    for r in _rows_at(rows, method, f"recall@{k}"):
        tops.setdefault(r["question_id"], set()).add(frozenset(r["ranked"][:k]))
    if repetitions(rows) < 2 or not tops:
        return None
    return sum(len(t) == 1 for t in tops.values()) / len(tops)


def verdict_word(a: str, b: str, p) -> str:
    if p.n == 0 or math.isnan(p.mean_diff) or not p.significant:
        return "inconclusive"
    return f"{a} better" if p.mean_diff > 0 else f"{b} better"


@dataclass
class Flag:
    """A pair whose verdict differs between repetitions."""
    a: str
    b: str
    verdicts: list[str]   # one per repetition, in order

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "verdicts": self.verdicts}

    def text(self) -> str:
        return (f"{self.a} vs {self.b}: " + " · ".join(f"rep {i + 1}: {v}" for i, v in enumerate(self.verdicts)))


def verdicts_by_rep(rows: Sequence[dict], methods: Sequence[str], metric: str) -> dict[tuple[str, str], list[str]]:
    """Each pair's verdict (paired randomization test, α = 0.05) in each repetition alone."""
    reps = {m: per_rep(rows, m, metric) for m in methods}
    n = max((len(v) for v in reps.values()), default=0)
    asked, slots = [], []   # every (pair, repetition) with questions in common, tested in one call
    out: dict[tuple[str, str], list[str]] = {}
    for a, b in combinations(methods, 2):
        out[(a, b)] = [NOT_MEASURED] * n
        for rep in range(1, n + 1):
            sa, sb = reps[a].get(rep, {}), reps[b].get(rep, {})
            common = [q for q in sa if q in sb]
            if common:
                asked.append((a, [sa[q] for q in common], b, [sb[q] for q in common]))
                slots.append((a, b, rep - 1))
    for (a, b, i), p in zip(slots, paired_many(asked)):
        out[(a, b)][i] = verdict_word(a, b, p)
    return out


NOT_MEASURED = "not measured"


def flags(rows: Sequence[dict], methods: Sequence[str], metric: str) -> tuple[list[Flag], int]:
    """The pairs whose verdict differs between two repetitions that both measured them, and how many
    pairs had a second measured repetition to compare. A pair one of whose methods ran once (the
    LLM-free methods of an experiment whose LLM methods repeat) has nothing to compare: its missing
    repetition is not a change of verdict."""
    if repetitions(rows) < 2:
        return [], 0
    out, compared = [], 0
    for (a, b), v in verdicts_by_rep(rows, methods, metric).items():
        measured = [x for x in v if x != NOT_MEASURED]
        if len(measured) < 2:
            continue
        compared += 1
        if len(set(measured)) > 1:
            out.append(Flag(a, b, v))
    return out, compared


# --- one line a method ---------------------------------------------------------------------------
@dataclass
class TradeOff:
    method: str
    em: Optional[float]
    f1: Optional[float]
    recall: Optional[float]                # recall@k (k the comparison's, else 5)
    recall_budget: Optional[float]         # recall@Ttok, when the experiment ran with --budget T
    usd: Optional[float]                   # per question; None = price unknown
    cpu_s: Optional[float]
    sd: dict = field(default_factory=dict)  # measure → spread over repetitions
    stable: Optional[float] = None
    cost_recorded: bool = True             # False: imported runs, no cost to show

    @property
    def usd_label(self) -> str:
        from retrieval.core.money import usd_text

        return usd_text(self.usd) if self.cost_recorded else "not recorded"

    def to_json(self) -> dict:
        return dict(self.__dict__)


def tradeoffs(rows: Sequence[dict], methods: Sequence[str], k: int = 5,
              budget: Optional[int] = None, machine: str = "") -> list[TradeOff]:
    out = []
    for m in methods:
        def mean(metric: str, m: str = m) -> Optional[float]:
            vals = [v for rep in per_rep(rows, m, metric).values() for v in rep.values()]
            return statistics.fmean(vals) if vals else None

        measures = {"em": "em", "f1": "f1", "recall": f"recall@{k}"}
        if budget:
            measures["recall_budget"] = f"recall@{budget}tok"
        got = {f: mean(metric) for f, metric in measures.items()}
        sd = {metric: s for metric in measures.values() if (s := spread(rows, m, metric)) is not None}
        cost = cost_per_question(rows, m, machine)
        out.append(TradeOff(m, got["em"], got["f1"], got["recall"], got.get("recall_budget"), cost["usd"],
                            cost["cpu_s"], sd, stable(rows, m, k), cost["recorded"]))
    return out


def budget_of(spec_args: Optional[dict] = None) -> Optional[int]:
    """The experiment's --budget T, from its arguments (None when it ran without one)."""
    b = (spec_args or {}).get("budget")
    if b:
        return int(b)
    return None
