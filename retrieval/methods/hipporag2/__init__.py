"""HippoRAG 2 (Gutiérrez et al., 2025, "From RAG to Memory"): Personalized PageRank over a graph of
phrase and passage nodes, seeded by the facts nearest the question (`hipporag2`).

  graph → query_to_triple → recognition_memory → seeds → ppr → ranking
  (→ dense_fallback when no fact is left to seed the graph)

The baseline the four papers measure against (SAG Table 2, GRASP Table 2). `hipporag2_nofilter`
skips recognition memory, the one LLM call, so it runs without an LLM.
"""
from __future__ import annotations

from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage, ranked_from_hits
from .config import HippoRAG2Config, HippoRAG2NoFilterConfig
from .stages import (
    stage_dense_fallback,
    stage_graph,
    stage_ppr,
    stage_query_to_triple,
    stage_recognition_memory,
    stage_seeds,
)


class HippoRAG2(Method):
    name, title, Config = "hipporag2", "HippoRAG 2 (PPR over phrases and passages)", HippoRAG2Config
    layers = ("passages", "triples", "same_as")   # same_as: the synonym edges
    vectors = ("passages", "triples")
    uses_llm = True
    k_dependent = False   # PPR scores every passage; k only cuts the ranking

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg, ctx = self.config, self.ctx
        qvec = ctx.embedder.encode_query(question).vector
        graph = stage_graph(ctx, tracer)
        linked = stage_query_to_triple(ctx, tracer, question, qvec, cfg)
        kept = stage_recognition_memory(ctx, tracer, question, linked, cfg)
        seeds = stage_seeds(ctx, tracer, question, graph, kept, qvec, cfg) if kept else None
        if seeds is None or not seeds.phrases:
            why = ("recognition memory kept no fact" if linked else "no fact was linked to the question") \
                if seeds is None else "no phrase of a kept fact is a node of the graph"
            hits = stage_dense_fallback(ctx, tracer, qvec, k, why)
            return final_stage(tracer, ranked_from_hits(ctx, hits), question, f"dense retrieval ({why})")
        hits = stage_ppr(ctx, tracer, graph, seeds, k, cfg)
        return final_stage(tracer, ranked_from_hits(ctx, hits), question, "passages by Personalized PageRank mass")


class HippoRAG2NoFilter(HippoRAG2):
    name, title, Config = "hipporag2_nofilter", "HippoRAG 2 without recognition memory (no LLM)", \
        HippoRAG2NoFilterConfig
    uses_llm = False


__all__ = ["HippoRAG2", "HippoRAG2Config", "HippoRAG2NoFilter"]
