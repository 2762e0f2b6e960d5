"""GRASP's scoring functions (§3.3), free of any store so they can be checked by hand."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Hashable, Mapping, Sequence


def sigma(cos: float, bm25: float, lam: float) -> float:
    """Eq. 1: σ(s, K, p) = cos(e_s, e_p) + λ·log(1 + BM25(K, p))."""
    return cos + lam * math.log1p(max(0.0, bm25))


def entity_scores(prop_sigma: Mapping[Hashable, float], prop_entities: Mapping[Hashable, Sequence[Hashable]],
                  degree: Mapping[Hashable, int]) -> dict[Hashable, float]:
    """Eq. 2: score(e) = Σ_{p ∈ P_m(e)} σ(p) / sqrt(1 + d(e)); the degree damps hub entities."""
    sums: dict[Hashable, float] = defaultdict(float)
    for p, s in prop_sigma.items():
        for e in prop_entities.get(p, ()):
            sums[e] += s
    return {e: s / math.sqrt(1 + degree.get(e, 0)) for e, s in sums.items()}


def rank_vote(ranked_props: Sequence[Hashable], passage_of: Mapping[Hashable, Hashable],
              uniform: bool = False) -> list[tuple[Hashable, float]]:
    """RankVote (§3.3): score(D) = Σ_{p ∈ P(D)} 1/(1 + R(p)), R the proposition's rank (1 = best).
    `uniform` is the A.1.7 ablation: every proposition votes 1."""
    votes: dict[Hashable, float] = defaultdict(float)
    for r, p in enumerate(ranked_props, start=1):
        votes[passage_of[p]] += 1.0 if uniform else 1.0 / (1 + r)
    return sorted(votes.items(), key=lambda kv: -kv[1])
