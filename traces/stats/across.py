"""`hoptrace compare OLD --against NEW`: the same methods on the same questions in two experiments.

What a change to the KB or the code did to each method: a rebuilt index (another encoder, another
extractor), a new version. Per method held by both, the mean per-question difference new − old
with its 95 % bootstrap interval and a two-sided paired randomization p-value, Holm-adjusted over
the methods (retrieval/bench/significance.py). Questions are paired by id; only those both
experiments scored for the method count.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from retrieval.bench.metrics import per_question_scores
from retrieval.bench.significance import ALPHA, Interval, Paired, holm, mean_intervals, paired_many
from retrieval.core.errors import InputError

from ..storage.experiments import Experiment, Experiments
from .compare import _entries, _p, check_measured


@dataclass
class MethodChange:
    method: str
    old: Interval
    new: Interval
    change: Paired          # a = new, b = old: mean_diff = new − old

    @property
    def verdict(self) -> str:
        if not self.change.significant:
            return "no significant change"
        return "significant gain" if self.change.mean_diff > 0 else "SIGNIFICANT LOSS"


@dataclass
class Across:
    old: Experiment
    new: Experiment
    metric: str
    rows: list[MethodChange]
    not_shared: list[str]     # methods only one experiment ran

    def to_json(self) -> dict:
        return {"old": self.old.id, "new": self.new.id, "metric": self.metric, "alpha": ALPHA,
                "old_kb_fingerprint": self.old.kb_fingerprint, "new_kb_fingerprint": self.new.kb_fingerprint,
                "correction": "holm" if len(self.rows) > 1 else "none",
                "methods": {r.method: {"old": r.old.__dict__, "new": r.new.__dict__, "change": r.change.to_json(),
                                       "verdict": r.verdict} for r in self.rows},
                "not_shared": self.not_shared}


def compare_across(experiments: Experiments, old: Experiment, new: Experiment, metric: str,
                   methods: Optional[Sequence[str]] = None) -> Across:
    """InputError names what the two experiments do not share (methods, questions, the metric)."""
    if old.id == new.id:
        raise InputError("--against needs a second experiment, not the same one")
    scores = {}
    for exp in (old, new):
        check_measured(exp, metric)
        entries, _ = _entries(experiments, exp, None)
        scores[exp.id] = per_question_scores([e["row"] for e in entries], metric)
    held_old, held_new = set(scores[old.id]), set(scores[new.id])
    shared = [m for m in scores[old.id] if m in held_new]
    if methods:
        missing = [m for m in methods if m not in shared]
        if missing:
            raise InputError(f"method(s) {', '.join(missing)} not scored in both experiments; both hold "
                             f"{', '.join(shared) or 'none'}")
        shared = list(methods)
    if not shared:
        raise InputError(f"experiments {old.id[:12]} and {new.id[:12]} share no method scored with {metric}")
    news, olds = [], []
    for m in shared:
        common = [q for q in scores[old.id][m] if q in scores[new.id][m]]
        if not common:
            raise InputError(f"{m}: the two experiments share no question (paired by question id)")
        news.append([scores[new.id][m][q] for q in common])
        olds.append([scores[old.id][m][q] for q in common])
    # Every method's intervals and test resampled together (significance.paired_many): the same figures.
    intervals = mean_intervals(olds + news)
    changes = paired_many([("new", a, "old", b) for a, b in zip(news, olds)])
    rows = [MethodChange(m, intervals[i], intervals[len(shared) + i], changes[i]) for i, m in enumerate(shared)]
    if len(rows) > 1:
        for r, adj in zip(rows, holm([r.change.p for r in rows])):
            r.change.p_adjusted = adj
    return Across(old, new, metric, rows, sorted((held_old ^ held_new) - set(shared)))


def differences(old: Experiment, new: Experiment) -> list[tuple[str, str]]:
    """(what, how it differs) for each of methods, questions, KB, LLM, code and machine that the
    two experiments do not share; what they share is left out."""
    def listed(xs) -> str:
        xs = list(xs)
        return ", ".join(xs[:6]) + (f" and {len(xs) - 6} more" if len(xs) > 6 else "")

    out = []
    gone, added = [m for m in old.methods if m not in new.methods], [m for m in new.methods if m not in old.methods]
    if gone or added:
        out.append(("methods", "; ".join(x for x in (f"only before: {listed(gone)}" if gone else "",
                                                     f"only after: {listed(added)}" if added else "") if x)))
    qa, qb = {q["id"] for q in old.questions}, {q["id"] for q in new.questions}
    if qa != qb:
        out.append(("questions", f"{len(qa)} → {len(qb)}, {len(qa & qb)} shared"))
    for what, a, b in (("KB", f"{old.kb} ({old.kb_fingerprint})", f"{new.kb} ({new.kb_fingerprint})"),
                       ("LLM", old.llm, new.llm), ("code", old.code_version, new.code_version),
                       ("machine", old.machine or "not recorded", new.machine or "not recorded")):
        if a != b:
            out.append((what, f"{a} → {b}"))
    return out


def render_across(c: Across) -> str:
    lines = [f"old: experiment {c.old.id} · KB {c.old.kb} ({c.old.kb_fingerprint}) · {c.old.provenance()}",
             f"new: experiment {c.new.id} · KB {c.new.kb} ({c.new.kb_fingerprint}) · {c.new.provenance()}",
             f"{c.metric}, questions paired by id; change = new − old, 95 % bootstrap interval, paired "
             f"randomization test" + (f", Holm-adjusted over {len(c.rows)} methods" if len(c.rows) > 1 else ""),
             "what differs: " + ("; ".join(f"{w}: {d}" for w, d in differences(c.old, c.new)) or "nothing recorded"),
             "",
             f"  {'method':<20} {'n':>4} {'old':>7} {'new':>7}  {'change [95 % CI]':<26} {'p':>7} {'p adj':>7}"
             f"  better/same/worse  verdict"]
    for r in c.rows:
        p = r.change
        adj = "" if p.p_adjusted is None else _p(p.p_adjusted)
        lines.append(f"  {r.method:<20} {p.n:>4} {r.old.mean:>7.3f} {r.new.mean:>7.3f}  "
                     f"{p.mean_diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}]{'':<4} {_p(p.p):>7} {adj:>7}"
                     f"  {p.wins:>6}/{p.ties:>4}/{p.losses:<6} {r.verdict}")
    if c.not_shared:
        lines.append(f"\nin one experiment only (not compared): {', '.join(c.not_shared)}")
    return "\n".join(lines)

