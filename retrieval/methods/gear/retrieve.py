"""Base retrieval for GEAR: h_base over passages (§3), over passages ∪ triples (App. A, eq. 10),
and passageLink (§5.4, eq. 8 / eq. 11)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...core.errors import ConfigError
from ...store.base import Hit, rrf
from ...trace.model import Tracer
from ..baselines import hits_payload
from ..context import Context

BASE_RETRIEVERS = ("bm25", "sbert", "hybrid")
# GEAR's own methods cannot be their own base (the recursion would not end).
_GEAR_FAMILY = ("naivege", "syncge", "gear")


def check_base(kind: str) -> None:
    """The base is an index retriever or another registered, non-GEAR method."""
    if kind in BASE_RETRIEVERS:
        return
    from ..registry import METHODS, method_names, root_method
    if root_method(kind) not in METHODS or root_method(kind) in _GEAR_FAMILY:
        usable = [m for m in method_names() if root_method(m) not in _GEAR_FAMILY]
        raise ConfigError(f"GEAR base must be one of {BASE_RETRIEVERS} or a registered non-GEAR method "
                          f"({', '.join(u for u in usable if u not in BASE_RETRIEVERS)}), got {kind!r}")


def rank_index(ctx: Context, index: str, query: str, vector: Optional[np.ndarray], k: int, kind: str) -> list[Hit]:
    """One base retriever on one index: BM25, SBERT (cosine kNN) or their RRF (§6.1 Hybrid)."""
    if kind == "bm25":
        return ctx.store.bm25(index, query, k)
    if kind == "sbert":
        return ctx.store.knn(index, vector, k)
    if kind == "hybrid":
        return ctx.store.hybrid(index, query, vector, k)
    check_base(kind)
    # A method base (GRIEVER, …) ranks passages; over the triple index (eq. 10/11) Hybrid stands in.
    return ctx.store.hybrid(index, query, vector, k)


def method_base(ctx: Context, tracer: Tracer, method: str, query: str, k: int, prefix: str) -> list[Hit]:
    """h_base^k(q, C) by another registered method (GRIEVER Table 4): its stages are recorded in
    this trace under `prefix`, and its final ranking is C'_q."""
    from ...trace.model import NestedTracer
    from ..registry import make_method
    m = make_method(method, ctx)
    ranked = m.retrieve(query, k, NestedTracer(tracer, prefix, f"{method} as GEAR's base"))[:k]
    return [Hit(r.passage_id, r.score) for r in ranked]


def passages_of_triples(ctx: Context, triple_hits: list[Hit]) -> list[Hit]:
    """Map ranked triples to their source passages (§3: each triple has exactly one), first rank wins."""
    by_id = {t.id: t for t in ctx.store.triples([h.id for h in triple_hits])}
    out: dict[str, float] = {}
    for h in triple_hits:
        t = by_id.get(h.id)
        if t is not None and t.passage_id not in out:
            out[t.passage_id] = h.score
    return [Hit(p, s) for p, s in out.items()]


def h_base(ctx: Context, query: str, vector: Optional[np.ndarray], k: int, kind: str,
           over_triples: bool, k_rrf: int = 60) -> tuple[list[Hit], dict]:
    """h_base^k(q, C), or with `over_triples` h_base^k(q, C ∪ T) = RRF(h(q, C), h(q, T)→passages) (eq. 10)."""
    if kind in BASE_RETRIEVERS:
        passages = rank_index(ctx, "passages", query, vector, k, kind)
    else:  # passageLink through a method base: its ranking only (its stages would repeat per triple)
        passages = method_base(ctx, Tracer(), kind, query, k, "passage_link")
    if not over_triples:
        return passages, {"passages": hits_payload(ctx, passages, 20)}
    # Several triples share a passage: go deeper in T so k unique passages remain after mapping.
    via_triples = passages_of_triples(ctx, rank_index(ctx, "triples", query, vector, 4 * k, kind))[:k]
    fused = rrf([passages, via_triples], k, k_rrf)
    return fused, {"passages": hits_payload(ctx, passages, 20), "via_triples": hits_payload(ctx, via_triples, 20)}


def stage_base(ctx: Context, tracer: Tracer, query: str, k: int, kind: str, over_triples: bool,
               name: str = "base", title: str = "Base retrieval",
               base_k: Optional[int] = None) -> tuple[list[Hit], np.ndarray]:
    """Base retrieval C'_q = h_base^k(q, C) (§4; eq. 10 when fused with the triple index).
    Returns the query vector too: the beam search scores against it, so it is encoded once."""
    check_base(kind)
    # A method base runs first, its own stages streaming; this stage then records its ranking.
    via = method_base(ctx, tracer, kind, query, base_k or k, name) if kind not in BASE_RETRIEVERS else None
    with tracer.stage(name, f"{title}: {kind}{' over passages ∪ triples' if over_triples else ''}, top {k}") as st:
        vector = ctx.embedder.encode_query(query).vector
        if via is not None:
            hits = via
            if over_triples:
                via_triples = passages_of_triples(ctx, rank_index(ctx, "triples", query, vector, 4 * k, "hybrid"))[:k]
                hits = rrf([via, via_triples], k, 60)
            detail = {"method": kind, "method_stages": f"{name}.*", "k": base_k or k}
        else:
            hits, detail = h_base(ctx, query, vector, k, kind, over_triples)
        st.payload = {"query": query, "retriever": kind, "k": k, "eq": "10" if over_triples else None,
                      "ranked": hits_payload(ctx, hits),
                      **({"inputs": detail} if over_triples or via is not None else {})}
        g = st.graph()
        q = g.node("q", "query", query)
        for i, h in enumerate(hits):
            g.edge(q, g.node(h.id, "passage", st.payload["ranked"][i]["title"], h.score, rank=i + 1),
                   "retrieved", f"#{i + 1}", h.score)
        if not hits:
            st.empty("the base retriever found no passage for this query")
    return hits, vector


def stage_passage_link(ctx: Context, tracer: Tracer, memory: list[tuple[str, str, str]], k: int, kind: str,
                       k_rrf: int = 60) -> list[list[Hit]]:
    """passageLink (§5.4, eq. 8): each gist-memory triple as a query to h_base^k(t, C ∪ T) (eq. 11)."""
    with tracer.stage("passage_link", f"passageLink: {len(memory)} memory triples → passages") as st:
        texts = [" ".join(t) for t in memory]
        vectors = ctx.embedder.encode(texts) if texts and kind != "bm25" else [None] * len(texts)
        lists, rows = [], []
        g = st.graph()
        for text, vec in zip(texts, vectors):
            hits, _ = h_base(ctx, text, vec, k, kind, over_triples=True, k_rrf=k_rrf)
            lists.append(hits)
            linked = hits_payload(ctx, hits)
            rows.append({"triple": text, "passages": linked})
            tid = g.node(f"m:{text}", "triple", text)
            for r in linked:
                g.edge(tid, g.node(r["passage_id"], "passage", r["title"], r["score"]), "linked", weight=r["score"])
        st.payload = {"k": k, "retriever": f"{kind} over passages ∪ triples (eq. 11)", "links": rows}
        if not memory:
            st.empty("the gist memory is empty: no triple to link")
    return lists
