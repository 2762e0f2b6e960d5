"""Measures against judgments instead of gold, computed by ir-measures (pytrec_eval underneath).

- `ndcg@k`: nDCG with the grades 0–3 as gains;
- `p@k`: the share of the top k judged relevant (grade ≥ rel);
- `jrecall@k`: the judged-relevant passages of a question found in its top k;
- `judged@k`: the share of the top k that was judged at all, so that an unjudged passage is
  never mistaken for an irrelevant one.

A question with no judged-relevant passage has no nDCG or jrecall (NaN, left out as a question
with no gold is), though its P@k is 0.
"""
from __future__ import annotations

import math
from typing import Sequence

JUDGED_METRICS = ("ndcg", "p", "jrecall", "judged")


def is_judged_metric(metric: str) -> bool:
    return metric.partition("@")[0].lower() in JUDGED_METRICS


def _measure(name: str, k: int, rel: int):
    import ir_measures

    return {"ndcg": ir_measures.nDCG @ k, "p": ir_measures.P(rel=rel) @ k, "jrecall": ir_measures.R(rel=rel) @ k,
            "judged": ir_measures.Judged @ k}[name]


def scores(rankings: dict[str, Sequence[str]], qrels: dict[str, dict[str, int]], metric: str,
           rel: int = 2) -> dict[str, float]:
    """question id → the metric for one method's rankings (question id → ranked passage ids).
    Every question of `rankings` gets a value, NaN where the measure is undefined."""
    import ir_measures

    name, _, k = metric.lower().partition("@")
    if name not in JUDGED_METRICS or not k.isdigit() or int(k) < 1:
        from retrieval.core.errors import ConfigError

        raise ConfigError(f"unknown judged metric {metric!r}; use ndcg@K, p@K, jrecall@K or judged@K")
    k_ = int(k)
    measure = _measure(name, k_, rel)
    # Strictly falling scores in rank order: trec_eval sorts by score and breaks ties by docid.
    run = {q: {pid: float(len(ids) - i) for i, pid in enumerate(dict.fromkeys(ids))}
           for q, ids in rankings.items() if ids}
    got = {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], qrels, run)}
    out = {}
    for q in rankings:
        judged = qrels.get(q, {})
        relevant = any(g >= rel for g in judged.values())
        if name in ("ndcg", "jrecall") and not relevant:
            out[q] = math.nan
        elif not judged:
            out[q] = math.nan          # a question nobody judged says nothing
        else:
            out[q] = got.get(q, 0.0)   # pytrec_eval leaves out a query with an empty run
    return out
