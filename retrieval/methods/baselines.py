"""Single-step baselines (GRIEVER §5.1): BM25, Dense (SBERT), RRFHybrid and Composed (§4.2.2)."""
from __future__ import annotations

from dataclasses import dataclass

from ..store.base import Hit, rrf
from ..trace.model import RankedPassage, Tracer
from .base import Method, final_stage, ranked_from_hits
from .context import Context


def hits_payload(ctx: Context, hits: list[Hit], limit: int = 50) -> list[dict]:
    titles = {p.id: p.title for p in ctx.store.passages([h.id for h in hits[:limit]])}
    return [{"passage_id": h.id, "title": titles.get(h.id, ""), "score": round(float(h.score), 6)}
            for h in hits[:limit]]


def stage_bm25(ctx: Context, tracer: Tracer, query: str, k: int, flt=None, name: str = "bm25") -> list[Hit]:
    """Sparse retrieval: FTS5 BM25 over passage title and text."""
    with tracer.stage(name, f"BM25 top {k}") as st:
        hits = ctx.store.bm25("passages", query, k, flt)
        st.payload = {"query": query, "k": k, "filter": flt.describe() if flt else None,
                      "candidates": hits_payload(ctx, hits)}
        if not hits:
            st.empty("no passage shares a word with the query")
    return hits


def stage_encode(ctx: Context, tracer: Tracer, query: str):
    """Query encoding: one encoder pass (sentence vector + token vectors, GRIEVER §4.3)."""
    with tracer.stage("encode", "Encode query") as st:
        enc = ctx.embedder.encode_query(query)
        st.payload = {"model": ctx.embedder.name, "dim": int(enc.vector.shape[0]), "tokens": len(enc.token_spans)}
        if enc.shared:
            st.payload["shared"] = "encoded once for this request by another method, reused here"
    return enc


def stage_dense(ctx: Context, tracer: Tracer, query: str, vector, k: int, flt=None, name: str = "dense") -> list[Hit]:
    """Dense retrieval: cosine kNN over passage embeddings."""
    with tracer.stage(name, f"Dense top {k}") as st:
        hits = ctx.store.knn("passages", vector, k, flt)
        st.payload = {"query": query, "k": k, "filter": flt.describe() if flt else None,
                      "candidates": hits_payload(ctx, hits)}
        if not hits:
            st.empty("no passage passes the filter")
    return hits


def stage_rrf(ctx: Context, tracer: Tracer, rankings: list[list[Hit]], k: int, k_rrf: int) -> list[Hit]:
    """Reciprocal Rank Fusion of the sparse and dense rankings (Cormack et al., 2009)."""
    with tracer.stage("rrf", "RRF fusion") as st:
        fused = rrf(rankings, k, k_rrf)
        st.payload = {"k_rrf": k_rrf, "fused": hits_payload(ctx, fused)}
    return fused


def stage_composed_rerank(ctx: Context, tracer: Tracer, vector, candidates: list[Hit], k: int) -> list[Hit]:
    """Composed retrieval, GRIEVER §4.2.2: dense scores only for the BM25 candidates."""
    with tracer.stage("dense_rerank", f"Dense scores over {len(candidates)} BM25 candidates") as st:
        ids = [h.id for h in candidates]
        sims = ctx.store.similarities("passages", vector, ids) if ids else []
        hits = sorted((Hit(i, float(s)) for i, s in zip(ids, sims)), key=lambda h: -h.score)[:k]
        st.payload = {"candidates": len(ids), "reranked": hits_payload(ctx, hits)}
        if not hits:
            st.empty("BM25 returned no candidates to rescore")
    return hits


@dataclass
class BM25Config:
    pass


class BM25(Method):
    name, title, Config = "bm25", "BM25", BM25Config
    k_dependent = False
    vectors = ()  # FTS5 alone: served as soon as a build has stored the passages

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        hits = stage_bm25(self.ctx, tracer, question, k)
        return final_stage(tracer, ranked_from_hits(self.ctx, hits), question, "BM25 score")


@dataclass
class DenseConfig:
    pass


class Dense(Method):
    name, title, Config = "dense", "Dense (SBERT)", DenseConfig
    k_dependent = False

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        enc = stage_encode(self.ctx, tracer, question)
        hits = stage_dense(self.ctx, tracer, question, enc.vector, k)
        return final_stage(tracer, ranked_from_hits(self.ctx, hits), question, "cosine similarity")


@dataclass
class RRFHybridConfig:
    depth_factor: int = 2   # each retriever contributes depth_factor·k candidates to the fusion
    k_rrf: int = 60         # Cormack et al. (2009)'s constant, also Elasticsearch's default


class RRFHybrid(Method):
    name, title, Config = "rrf_hybrid", "RRFHybrid", RRFHybridConfig

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        depth = self.config.depth_factor * k
        sparse = stage_bm25(self.ctx, tracer, question, depth)
        enc = stage_encode(self.ctx, tracer, question)
        dense = stage_dense(self.ctx, tracer, question, enc.vector, depth)
        fused = stage_rrf(self.ctx, tracer, [sparse, dense], k, self.config.k_rrf)
        return final_stage(tracer, ranked_from_hits(self.ctx, fused), question, "RRF score")


@dataclass
class ComposedConfig:
    # GRIEVER §4.2.2 restricts the dense step to the top k·c BM25 hits; the paper gives
    # no value for c. 10 keeps the dense step at ≤150 vectors for k ≤ 15.
    c: int = 10


class Composed(Method):
    name, title, Config = "composed", "Composed (BM25 → dense)", ComposedConfig

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        candidates = stage_bm25(self.ctx, tracer, question, k * self.config.c, name="bm25_candidates")
        enc = stage_encode(self.ctx, tracer, question)
        hits = stage_composed_rerank(self.ctx, tracer, enc.vector, candidates, k)
        return final_stage(tracer, ranked_from_hits(self.ctx, hits), question, "cosine over BM25 candidates")
