"""§4.2.2 Passage retrieval: Composed in the first iteration, RRF with sub-graph filters after."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...store.base import Filter, Hit, SearchStore, rrf


@dataclass
class Retrieved:
    hits: list[Hit]                 # the ranking this call produced
    cosine: dict[str, float]        # passage → cosine to the query vector (comparable across calls)
    detail: dict                    # for the trace


def composed(store: SearchStore, query: str, vector: np.ndarray, k: int, c: int,
             candidates: list[Hit] | None = None) -> Retrieved:
    """BM25 top k·c, then dense scores over just those candidates (GRIEVER §4.2.2).
    `candidates`: the BM25 hits when they were fetched ahead (they need no query vector)."""
    if candidates is None:
        candidates = store.bm25("passages", query, k * c)
    ids = [h.id for h in candidates]
    sims = store.similarities("passages", vector, ids) if ids else np.zeros(0)
    ranked = sorted((Hit(i, float(s)) for i, s in zip(ids, sims)), key=lambda h: -h.score)[:k]
    bm25 = {h.id: h.score for h in candidates}
    return Retrieved(ranked, {h.id: h.score for h in ranked},
                     {"retriever": "composed", "bm25_candidates": len(ids),
                      "top": [{"passage_id": h.id, "bm25": round(bm25[h.id], 3), "dense": round(h.score, 4)}
                              for h in ranked]})


def rrf_hybrid(store: SearchStore, query: str, vector: np.ndarray, k: int, flt: Filter | None,
               depth: int, k_rrf: int, sparse: list[Hit] | None = None) -> Retrieved:
    """RRF of filtered BM25 and filtered kNN; cosine kept for the final scoring.
    `sparse`: the BM25 hits when they were fetched ahead."""
    if sparse is None:
        sparse = store.bm25("passages", query, depth, flt)
    hits = rrf([sparse, store.knn("passages", vector, depth, flt)], k, k_rrf)
    ids = [h.id for h in hits]
    sims = store.similarities("passages", vector, ids) if ids else np.zeros(0)
    cosine = {i: float(s) for i, s in zip(ids, sims)}
    return Retrieved(hits, cosine, {"retriever": "rrf_hybrid", "filter": flt.describe() if flt else None,
                                    "top": [{"passage_id": h.id, "rrf": round(h.score, 5),
                                             "dense": round(cosine[h.id], 4)} for h in hits]})


def combine(runs: list[Retrieved], k: int) -> Retrieved:
    """Sub-queries' results combined (§4.2.1): a passage keeps its best cosine; top k."""
    cosine: dict[str, float] = {}
    for r in runs:
        for pid, s in r.cosine.items():
            cosine[pid] = max(s, cosine.get(pid, -1.0))
    ranked = sorted(cosine.items(), key=lambda kv: -kv[1])[:k]
    return Retrieved([Hit(i, s) for i, s in ranked], dict(ranked), {"combined_from": len(runs)})
