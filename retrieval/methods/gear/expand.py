"""Graph expansion (§4.2): Diverse Triple Beam Search over the KB's triples, then beams →
passages → RRF with the base list (eq. 3)."""
from __future__ import annotations

from typing import Hashable

import numpy as np

from ...core.records import Triple
from ...store.base import Hit, rrf
from ...trace.model import Tracer
from ..baselines import hits_payload
from ..context import Context
from .beam import Beam, diverse_triple_beam_search, flatten_breadth_first
from .config import GearConfig
from .sync import add_triple_node


class TripleGraph:
    """The KB's triples as a graph for Algorithm 1: neighbours share a head or tail entity."""

    def __init__(self, ctx: Context, query_vec: np.ndarray, cfg: GearConfig):
        self.ctx, self.q, self.cfg = ctx, query_vec.astype(np.float32), cfg
        self.triples: dict[int, Triple] = {}
        self._vec: dict[int, np.ndarray] = {}
        self.encoder_passes = 0
        self.capped: dict[int, list[int]] = {}   # triple → neighbours the cap dropped (a hub entity)

    def add(self, triples: list[Triple]) -> None:
        new = [t for t in triples if t.id not in self.triples]
        for t in new:
            self.triples[t.id] = t
        if new:
            for t, v in zip(new, self.ctx.store.vectors("triples", [t.id for t in new])):
                self._vec[t.id] = v

    def neighbours(self, tid: Hashable) -> list[int]:
        t = self.triples[tid]
        near = [n for n in self.ctx.store.triples_of_entities({t.subject, t.object}) if n.id != tid]
        self.add(near)
        ids = list(dict.fromkeys(n.id for n in near))
        if len(ids) > self.cfg.neighbours_per_beam:
            # A hub entity ("United States") has thousands of triples; keep the ones nearest the query.
            sims = np.array([self._vec[i] @ self.q for i in ids])
            order = np.argsort(-sims, kind="stable")
            self.capped[tid] = [ids[j] for j in order[self.cfg.neighbours_per_beam:]]
            ids = [ids[j] for j in order[: self.cfg.neighbours_per_beam]]
        return ids

    def score(self, seqs: list[tuple[Hashable, ...]]) -> list[float]:
        """cos(q, T) for each triple sequence T (Algorithm 1, score)."""
        if self.cfg.sequence_scoring == "encode":
            texts = ["; ".join(self.triples[i].text for i in seq) for seq in seqs]
            self.encoder_passes += len(texts)
            return list(self.ctx.embedder.encode(texts) @ self.q)
        mats = np.stack([np.sum([self._vec[i] for i in seq], axis=0) for seq in seqs])
        mats /= np.maximum(np.linalg.norm(mats, axis=1, keepdims=True), 1e-9)
        return list(mats @ self.q)


def _beam_rows(graph: TripleGraph, beams: list[Beam]) -> list[dict]:
    return [{"triples": [graph.triples[i].text for i in b.triples], "score": round(b.score, 4),
             "step_score": round(b.step_score, 4), "rank_in_parent": b.rank_in_parent,
             "diversity_weight": round(b.weight, 4)} for b in beams]


def _candidate_rows(graph: TripleGraph, prev: list[Beam], pool: list[Beam], kept: list[Beam],
                    per_beam: int = 12) -> list[dict]:
    """Each beam of the previous step with its candidate extensions before top-b: the raw
    sequence score, n (rank within the beam's extensions), the diversity weight and the result."""
    chosen = {b.triples for b in kept}
    rows = []
    for j, beam in enumerate(prev):
        ext = [b for b in pool if b.parent == j]
        rows.append({"beam": j + 1, "beam_score": round(beam.score, 4), "last": graph.triples[beam.last].text,
                     "n_candidates": len(ext),
                     "neighbours_dropped_by_cap": [graph.triples[i].text for i in graph.capped.get(beam.last, [])
                                                   if i in graph.triples][:10],
                     "n_dropped_by_cap": len(graph.capped.get(beam.last, [])),
                     "candidates": [{"add": graph.triples[b.last].text, "raw": round(b.step_score, 4),
                                     "accumulated": round(beam.score + b.step_score, 4), "n": b.rank_in_parent,
                                     "weight": round(b.weight, 4), "weighted": round(b.score, 4),
                                     "kept": b.triples in chosen} for b in ext[:per_beam]]})
    return rows


def stage_beam_search(ctx: Context, tracer: Tracer, query: str, query_vec: np.ndarray, seeds: list[Triple],
                      cfg: GearConfig, name: str = "beam_search") -> tuple[TripleGraph, list[Beam]]:
    """Diverse Triple Beam Search (§4.2, Algorithm 1): length l, width b, γ = 2b (C.2)."""
    gamma = cfg.gamma or 2 * cfg.beam_width
    with tracer.stage(name, f"Diverse triple beam search from {len(seeds)} seed triples") as st:
        graph = TripleGraph(ctx, query_vec, cfg)
        graph.add(seeds)
        pools: list[list[Beam]] = []
        steps = diverse_triple_beam_search([t.id for t in seeds], graph.neighbours, graph.score,
                                           cfg.beam_width, cfg.beam_length, gamma, cfg.diversity, pools)
        final = steps[-1] if steps else []
        st.payload = {"query": query, "width": cfg.beam_width, "length": cfg.beam_length, "gamma": gamma,
                      "diversity": cfg.diversity, "neighbours_per_beam": cfg.neighbours_per_beam,
                      "scoring": cfg.sequence_scoring, "triples_seen": len(graph.triples),
                      "steps": [{"step": i, "beams": _beam_rows(graph, b),
                                 **({"extensions": _candidate_rows(graph, steps[i - 1], pools[i - 1], b)}
                                    if i >= 1 and i - 1 < len(pools) else {})}
                                for i, b in enumerate(steps)]}
        if cfg.sequence_scoring == "encode":
            st.payload["encoder_passes"] = graph.encoder_passes
        if len(steps) < cfg.beam_length and steps:
            st.payload["note"] = f"no beam could grow past length {len(steps)}"
        g = st.graph()
        for rank, b in enumerate(final):
            prev = None
            for i in b.triples:
                t = graph.triples[i]
                node = add_triple_node(g, f"t:{i}", t.subject, t.predicate, t.object, beam=rank + 1)
                if prev:
                    g.edge(prev, node, "beam", f"beam {rank + 1}", b.score)
                prev = node
        if not seeds:
            st.empty("no seed triple to start from")
    return graph, final


def stage_beams_to_passages(ctx: Context, tracer: Tracer, graph: TripleGraph, beams: list[Beam],
                            name: str = "passage_map") -> list[Hit]:
    """Flatten beams breadth-first, map each triple to its source passage → C̃_q (§4.2)."""
    with tracer.stage(name, "Beams → passages (breadth-first)") as st:
        order = flatten_breadth_first(beams)
        seen: dict[str, int] = {}
        g = st.graph()
        for pos, tid in enumerate(order):
            t = graph.triples[tid]
            seen.setdefault(t.passage_id, pos)
        hits = [Hit(p, 1.0 / (1 + pos)) for p, pos in seen.items()]
        payload = hits_payload(ctx, hits)
        titles = {r["passage_id"]: r["title"] for r in payload}
        for tid in order:
            t = graph.triples[tid]
            node = add_triple_node(g, f"t:{tid}", t.subject, t.predicate, t.object)
            g.edge(node, g.node(t.passage_id, "passage", titles.get(t.passage_id, t.passage_id)), "from_passage")
        st.payload = {"triples_in_order": [graph.triples[i].text for i in order], "passages": payload}
        if not hits:
            st.empty("the beams hold no triple")
    return hits


def stage_rrf(ctx: Context, tracer: Tracer, rankings: list[list[Hit]], labels: list[str], k: int, k_rrf: int,
              name: str, title: str, eq: str) -> list[Hit]:
    """RRF of ranked passage lists (eq. 3 for SyncGE, eq. 9 for GEAR)."""
    with tracer.stage(name, title) as st:
        fused = rrf([r for r in rankings if r], k, k_rrf)
        ranks = [{h.id: n for n, h in enumerate(r, start=1)} for r in rankings]
        rows = hits_payload(ctx, fused)
        for row in rows:  # each passage's rank in each input list, so the fusion can be checked by hand
            row["ranks"] = {lab: rk.get(row["passage_id"]) for lab, rk in zip(labels, ranks)}
        st.payload = {"eq": eq, "k_rrf": k_rrf, "inputs": {lab: len(r) for lab, r in zip(labels, rankings)},
                      "fused": rows}
        if not fused:
            st.empty("every input list is empty")
    return fused
