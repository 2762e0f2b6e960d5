"""Diverse Triple Beam Search (GEAR §4.2, Algorithm 1), independent of any store.

The graph is given as two callables so the search can be tested on a hand-built graph:
`neighbours(triple_id)` (triples sharing a head or tail entity) and `score(sequences)`
(cosine of the query with each triple sequence, batched).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Hashable, Optional, Sequence


@dataclass
class Beam:
    triples: tuple[Hashable, ...]
    score: float            # accumulated, after the diversity weight (what top-b ranks)
    step_score: float = 0.0 # score(q, T∘t) of the last extension
    rank_in_parent: int = 0 # n in Algorithm 1, line 16
    weight: float = 1.0     # e^(−min(n,γ)/γ), line 18
    parent: int = -1        # index of the beam it extends in the previous step

    @property
    def last(self) -> Hashable:
        return self.triples[-1]


def diversity_weight(n: int, gamma: float) -> float:
    """Algorithm 1, line 18: candidates ranked lower within one beam's extensions weigh less."""
    return math.exp(-min(n, gamma) / gamma)


def diverse_triple_beam_search(
        seeds: Sequence[Hashable],
        neighbours: Callable[[Hashable], Sequence[Hashable]],
        score: Callable[[list[tuple[Hashable, ...]]], Sequence[float]],
        width: int, length: int, gamma: float, diversity: bool = True,
        pools: Optional[list[list[Beam]]] = None) -> list[list[Beam]]:
    """Algorithm 1. Returns every step's beams B_0 … B_{l-1}, best first; the last is the result.
    With `pools`, each step's candidate extensions before top-b are appended to it (for the trace)."""
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        return []
    seed_scores = score([(t,) for t in seeds])
    b0 = sorted((Beam((t,), float(s), float(s)) for t, s in zip(seeds, seed_scores)), key=lambda b: -b.score)
    steps = [b0[:width]]
    for _ in range(1, length):
        prev = steps[-1]
        on_beams = {t for b in prev for t in b.triples}  # exists(t, B_{i-1}): no revisits
        candidates: list[Beam] = []
        for parent, beam in enumerate(prev):
            ext = [t for t in neighbours(beam.last) if t not in on_beams]
            if not ext:
                continue
            seqs = [beam.triples + (t,) for t in ext]
            scored = sorted(((beam.score + float(s), seq, float(s)) for seq, s in zip(seqs, score(seqs))),
                            key=lambda x: -x[0])
            for n, (s, seq, step) in enumerate(scored):
                w = diversity_weight(n, gamma) if diversity else 1.0
                candidates.append(Beam(seq, s * w, step, n, w, parent))
        if pools is not None:
            pools.append(candidates)
        if not candidates:
            break  # no beam can grow: the previous step stands (Algorithm 1 would return nothing)
        steps.append(sorted(candidates, key=lambda b: -b.score)[:width])
    return steps


def flatten_breadth_first(beams: Sequence[Beam]) -> list[Hashable]:
    """§4.2: the returned sequences read position by position across beams, duplicates dropped."""
    out: dict[Hashable, None] = {}
    depth = max((len(b.triples) for b in beams), default=0)
    for pos in range(depth):
        for b in beams:
            if pos < len(b.triples):
                out.setdefault(b.triples[pos], None)
    return list(out)
