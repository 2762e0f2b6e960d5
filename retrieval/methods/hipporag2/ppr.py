"""Personalized PageRank over the phrase/passage graph, by scipy's sparse linear algebra.

PPR with damping d and reset distribution s solves x = (1 − d)·s + d·Pᵀx, P the graph's
row-normalised weights. The solution is proportional to (I − d·Pᵀ)⁻¹ s whatever becomes of a
dangling node's mass, so we solve that system with BiCGSTAB (d = 0.5 makes it well conditioned:
it converges in a few dozen products) and normalise. On the demo KB's graph this equals
python-igraph's PRPACK `personalized_pagerank`, which the reference code calls, to 1e-13
(docs/hipporag2.md). An LU factor would be reused across questions, but a 2Wiki graph fills it in
to 190 M entries (200 s); the iterative solve takes ~50 ms there.

The system is linear in s, so solving once per seed gives each seed's share of every node's mass:
the trace says which seed a passage's mass came from.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.sparse import linalg as sla

from ...core.errors import ConfigError
from .graph import PhraseGraph

RTOL = 1e-10


def _operators(graph: PhraseGraph, damping: float):
    """(I − d·Pᵀ, P) for this graph, made once per damping."""
    ops = graph.__dict__.setdefault("_ops", {})
    if damping not in ops:
        deg = np.asarray(graph.adjacency.sum(axis=1)).ravel()
        inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
        p = sparse.diags(inv) @ graph.adjacency                  # row-stochastic (dangling rows empty)
        a = (sparse.identity(graph.n_nodes, format="csr") - damping * p.T).tocsr()
        ops[damping] = (a, p.tocsr())
    return ops[damping]


def solve(graph: PhraseGraph, reset: np.ndarray, damping: float) -> np.ndarray:
    """(I − d·Pᵀ)⁻¹ reset, unnormalised."""
    if not 0.0 < damping < 1.0:
        raise ConfigError(f"hipporag2 damping must be between 0 and 1 (exclusive), got {damping}")
    if not reset.any():
        return np.zeros_like(reset)
    a, _ = _operators(graph, damping)
    x, info = sla.bicgstab(a, reset, rtol=RTOL, atol=0.0)
    if info != 0:  # never seen on a KB's graph; the direct solver is slow but exact
        x = sla.spsolve(a.tocsc(), reset)
    return np.maximum(x, 0.0)


def attributed(graph: PhraseGraph, sources: dict[str, np.ndarray], damping: float):
    """PPR for the summed reset vectors, normalised to mass 1, and each source's share of every
    node's mass (`sources`: name → its part of the reset)."""
    parts = {name: solve(graph, r, damping) for name, r in sources.items()}
    total = sum(parts.values())
    mass = float(total.sum()) or 1.0
    return total / mass, {name: y / mass for name, y in parts.items()}


def flow(graph: PhraseGraph, x: np.ndarray, damping: float, i: int, j: int) -> float:
    """The PPR mass that moves along edge i → j each step: d · x_i · P_ij."""
    _, p = _operators(graph, damping)
    return float(damping * x[i] * p[i, j])


def strongest_paths(graph: PhraseGraph, damping: float, source: int, targets: list[int]) -> dict[int, list[int]]:
    """For each target, the path from `source` a random walk most likely takes (the product of its
    transition probabilities is largest): a shortest path under −log P."""
    _, p = _operators(graph, damping)
    cost = p.copy()
    cost.data = -np.log(np.clip(cost.data, 1e-300, 1.0)) + 1e-9  # +ε: a sure step still counts as an edge
    _, pred = csgraph.dijkstra(cost, directed=True, indices=[source], return_predecessors=True)
    out = {}
    for t in targets:
        path, node = [], t
        while node >= 0 and node != source:
            path.append(node)
            node = pred[0, node]
        if node == source:
            out[t] = [source, *reversed(path)]
    return out
