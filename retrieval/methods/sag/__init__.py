"""SAG: SQL-retrieval with query-time dynamic hyperedges (`sag`).

  query_entities (U_q) → entity_expansion (Û_q) → seed_events (E_R, eq. 1–2) →
  expansion (E_cand, eq. 3) → coarse_rank (Ê) → rerank (E*) → direct_chunks → merge (C_out, eq. 4)

Each stage is one link of §3.5's auditable chain and lists the SQL it ran. Without an LLM,
U_q comes from spaCy NER and there is no rerank (Ê keeps its coarse order); a `fallback`
stage says so.
"""
from __future__ import annotations

from ...core.errors import ConfigError
from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage, ranked_from_hits
from .config import SagConfig
from .stages import (
    stage_coarse_rank,
    stage_direct_chunks,
    stage_entity_expansion,
    stage_expansion,
    stage_merge,
    stage_query_entities,
    stage_rerank,
    stage_seed_events,
)

# "none" keeps the coarse cosine order: it is not Table 6's lightweight reranker (no reranker
# model ships offline; see docs/sag.md), and is named for what it does.
RERANKERS = ("llm", "none")


class Sag(Method):
    name, title, Config = "sag", "SAG (SQL + query-time hyperedges)", SagConfig
    layers = ("passages", "entities", "events")
    vectors = ("passages", "entities", "events")
    uses_llm = True
    # The output is at most K_out chunks whatever k is (§4.4, eq. 4).
    k_dependent = False

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg = self.config
        if cfg.reranker not in RERANKERS:
            raise ConfigError(f"sag reranker must be one of {RERANKERS}, got {cfg.reranker!r}")
        reranker = cfg.reranker
        if self.ctx.llm is None and reranker == "llm":
            with tracer.stage("fallback", "No LLM: no rerank") as st:
                st.status = "skipped"
                st.message = ("no LLM is configured (--llm none): query entities come from spaCy NER and the "
                              "rerank is skipped — the top K_event events of the coarse cosine ranking are kept")
            reranker = "none"
        qvec = self.ctx.embedder.encode_query(question).vector
        u_q = stage_query_entities(self.ctx, tracer, question)
        u_hat = stage_entity_expansion(self.ctx, tracer, u_q, cfg)
        seeds = stage_seed_events(self.ctx, tracer, qvec, u_hat, cfg)
        hops = stage_expansion(self.ctx, tracer, qvec, seeds, list(u_hat), cfg)
        candidates = seeds + [ev for h in hops for ev in h.new_events]
        shortlist = stage_coarse_rank(self.ctx, tracer, qvec, candidates, cfg)
        chosen = stage_rerank(self.ctx, tracer, question, shortlist, cfg, reranker)
        # Eq. 4: C_out = TopK_{K_out}(C^event ∪ C^direct) with exactly K_direct direct chunks, so
        # Table 7's K_event / K_direct splits are reproducible; after de-duplication C_out may
        # hold fewer than K_out chunks, as in the paper.
        direct = stage_direct_chunks(self.ctx, tracer, qvec, cfg.k_direct)
        merged = stage_merge(self.ctx, tracer, chosen, direct, cfg.k_out)
        return final_stage(tracer, ranked_from_hits(self.ctx, merged), question,
                           "event-derived chunks (in rerank order), then direct chunks (eq. 4)")


__all__ = ["Sag", "SagConfig"]
