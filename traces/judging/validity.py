"""Is a judge any good? Its judgments set against gold, where gold exists.

For an experiment whose questions have gold passages, a judge's grades of the pool are compared
with the gold, pair by pair — the AUC of its score (scikit-learn), the precision and recall of
"relevant" (grade ≥ rel), Cohen's κ — and method by method: whether ranking the methods by judged
nDCG@5 orders them as gold R@5 does (Kendall τ, scipy) and each pair's verdict under both.

What was measured is kept in measured.py, so that every judged result names its judge's agreement.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Optional

from .measured import key
from .qrels import Judgment


@dataclass
class Agreement:
    judge: str
    pairs: int                 # judged pairs compared
    gold_pairs: int            # of which gold supporting passages
    auc: Optional[float]
    precision: Optional[float]
    recall: Optional[float]
    kappa: Optional[float]
    rel: int = 2

    def line(self) -> str:
        f = lambda x: "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"  # noqa: E731
        return (f"{self.judge}: {self.pairs} pairs ({self.gold_pairs} gold) · AUC {f(self.auc)} · precision "
                f"{f(self.precision)} · recall {f(self.recall)} · Cohen's κ {f(self.kappa)} (relevant = grade ≥ "
                f"{self.rel})")


def agreement(judge: str, judgments: dict[tuple[str, str], Judgment], gold: dict[str, set[str]],
              rel: int = 2) -> Agreement:
    """Pairs judged ok by `judge`, against gold membership (a gold supporting passage = relevant)."""
    from sklearn.metrics import cohen_kappa_score, roc_auc_score

    ys, scores, preds = [], [], []
    for (q, p), j in judgments.items():
        if q not in gold or j.status != "ok":
            continue
        ys.append(int(p in gold[q]))
        scores.append(j.score if j.score is not None else float(j.grade))
        preds.append(int(j.grade >= rel))
    n_gold = sum(ys)
    auc = roc_auc_score(ys, scores) if 0 < n_gold < len(ys) else None
    tp = sum(1 for y, p in zip(ys, preds) if y and p)
    precision = tp / sum(preds) if sum(preds) else None
    recall = tp / n_gold if n_gold else None
    kappa = cohen_kappa_score(ys, preds) if len(set(ys)) > 1 or len(set(preds)) > 1 else None
    return Agreement(judge, len(ys), n_gold, _r(auc), _r(precision), _r(recall), _r(kappa), rel)


def _r(x) -> Optional[float]:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


@dataclass
class RankAgreement:
    judged_metric: str
    gold_metric: str
    means_judged: dict[str, float]
    means_gold: dict[str, float]
    tau: Optional[float]
    p: Optional[float]
    verdicts: list[dict] = field(default_factory=list)   # per pair: a, b, gold verdict, judged verdict, same

    def lines(self) -> list[str]:
        out = [f"{'method':<22} {self.gold_metric:>10} {self.judged_metric:>12}"]
        for m in sorted(self.means_gold, key=lambda m: -self.means_gold[m]):
            out.append(f"{m:<22} {self.means_gold[m]:>10.3f} {self.means_judged.get(m, math.nan):>12.3f}")
        tau = "–" if self.tau is None else f"{self.tau:+.3f} (p {self.p:.3f})"
        out.append(f"Kendall τ between the two rankings of the methods: {tau}")
        if self.verdicts:
            same = sum(v["same"] for v in self.verdicts)
            out.append(f"pair verdicts (Holm-adjusted paired randomization tests): {same} of {len(self.verdicts)} "
                       "the same under both")
            for v in self.verdicts:
                out.append(f"  {v['a'] + ' vs ' + v['b']:<36} gold: {v['gold']:<16} judged: {v['judged']:<16}"
                           + ("" if v["same"] else "  ← differs"))
        return out


def rank_agreement(gold_cmp, judged_cmp) -> RankAgreement:
    """Two traces.compare Comparisons of the same methods and questions: one on a gold metric,
    one on a judged metric."""
    from scipy.stats import kendalltau

    ms = [m for m in gold_cmp.methods if m in judged_cmp.methods]
    g = {m: gold_cmp.means[m].mean for m in ms}
    j = {m: judged_cmp.means[m].mean for m in ms}
    tau = p = None
    if len(ms) >= 2:
        res = kendalltau([g[m] for m in ms], [j[m] for m in ms])
        if not math.isnan(res.statistic):
            tau, p = round(float(res.statistic), 4), round(float(res.pvalue), 4)
    verdicts = []
    for a, b in combinations(ms, 2):
        vg, vj = _verdict(gold_cmp.pair(a, b)), _verdict(judged_cmp.pair(a, b))
        verdicts.append({"a": a, "b": b, "gold": vg, "judged": vj, "same": vg == vj})
    return RankAgreement(judged_cmp.metric, gold_cmp.metric, j, g, tau, p, verdicts)


def _verdict(p) -> str:
    if p is None:
        return "–"
    if not p.significant:
        return "inconclusive"
    return f"{p.a} better" if p.mean_diff > 0 else f"{p.b} better"


@dataclass
class Validity:
    agreement: Agreement
    ranking: Optional[RankAgreement]
    disagreements: list[dict]

    def lines(self) -> list[str]:
        out = [self.agreement.line()]
        if self.ranking is not None:
            out += self.ranking.lines()
        if self.disagreements:
            out.append("disagreements (judge vs gold):")
            for d in self.disagreements:
                out.append(f"  [{d['question_id']}] {d['question'][:90]}")
                out.append(f"      {d['title'][:40]!r}: grade {d['grade']} ({d['reason'][:50]}), gold: {d['gold']}")
        return out


def measure(experiments, exp, source: str, store, rel: int = 2, gold_metric: str = "recall@5",
            judged_metric: str = "ndcg@5", n_disagreements: int = 10,
            prompt_version: Optional[str] = None) -> Validity:
    """One judge's validity on an experiment whose questions have gold: pair agreement over the
    pairs it graded, the methods' ranking under its qrels against gold's, and a sample of the pairs
    where it and gold disagree (both kinds, alternately, in pool order)."""
    from retrieval.core.errors import InputError

    from ..stats.compare import compare
    from .judged import judged_for
    from .qrels import Qrels

    gold = {q["id"]: set(q.get("gold") or []) for q in exp.questions if q.get("gold")}
    if not gold:
        raise InputError(f"experiment {exp.id[:12]}'s questions have no gold passages: a judge's validity is "
                         "measured where gold exists (the demo, 2Wiki)")
    qrels = Qrels(experiments.traces)
    if prompt_version is None and source == "llm":
        versions = qrels.versions(exp.id, "", source)
        prompt_version = versions[-1] if versions else None
    eff = qrels.effective(exp.id, "", [source], prompt_version)
    if not eff:
        raise InputError(f"experiment {exp.id[:12]} has no judgments by {source!r}; `hoptrace judge "
                         f"{exp.id[:12]} --judge {source}` makes them")
    j0 = next(iter(eff.values()))
    name = "person" if source == "person" else key(j0.judge, j0.prompt_version)
    agree = agreement(name, eff, gold, rel)
    ranking = None
    try:
        # Over the questions this judge graded, so both rankings read the same questions.
        graded = {q for q, _ in eff}
        sub = dataclasses.replace(exp, spec={**exp.spec, "questions": [q for q in exp.questions if q["id"] in graded]})
        ranking = rank_agreement(compare(experiments, sub, gold_metric),
                                 compare(experiments, sub, judged_metric,
                                         qrels=judged_for(experiments.traces, exp, "", [source], rel, prompt_version)))
    except InputError:
        pass
    texts = {q["id"]: q["text"] for q in exp.questions}
    wrong_pos = [(k, j) for k, j in eff.items() if k[0] in gold and j.grade >= rel and k[1] not in gold[k[0]]]
    wrong_neg = [(k, j) for k, j in eff.items() if k[0] in gold and j.grade < rel and k[1] in gold[k[0]]]
    picked = [x for pair in zip(wrong_pos, wrong_neg) for x in pair][:n_disagreements]
    if len(picked) < n_disagreements:
        rest = wrong_pos[len(picked) // 2 + 1:] + wrong_neg[len(picked) // 2 + 1:]
        picked += rest[: n_disagreements - len(picked)]
    titles = {p.id: p.title for p in store.passages([k[1] for k, _ in picked])} if picked else {}
    dis = [{"question_id": q, "question": texts.get(q, ""), "passage_id": p, "title": titles.get(p, p),
            "grade": j.grade, "reason": j.reason, "gold": "supporting" if p in gold[q] else "not supporting"}
           for (q, p), j in picked]
    return Validity(agree, ranking, dis)
