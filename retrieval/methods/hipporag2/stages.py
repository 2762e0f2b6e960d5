"""HippoRAG 2's online retrieval (the paper's §3 "Online Retrieval"), one stage per step:
graph → query_to_triple → recognition_memory → seeds → ppr → ranking, with a dense fallback when
no fact is left to seed the graph.

Each stage follows the reference code's function of the same step (OSU-NLP-Group/HippoRAG,
src/hipporag/HippoRAG.py), named in its docstring.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...store.base import Hit
from ...trace.model import Tracer
from ..baselines import hits_payload
from ..context import Context
from . import ppr
from .config import HippoRAG2Config
from .graph import PhraseGraph, graph_for, key
from .prompts import filter_messages, filter_parser, filter_schema


@dataclass(frozen=True)
class Fact:
    """A (subject, predicate, object) linked to the query, with its min-max normalised score."""
    subject: str
    predicate: str
    object: str
    passage_id: str
    cosine: float
    score: float

    @property
    def id(self) -> str:
        return "fact:" + key(f"{self.subject} | {self.predicate} | {self.object}")

    @property
    def text(self) -> str:
        return f"{self.subject} | {self.predicate} | {self.object}"

    def row(self) -> dict:
        return {"fact": self.text, "passage_id": self.passage_id, "cosine": round(self.cosine, 4),
                "score": round(self.score, 4)}


@dataclass
class Seeds:
    phrases: dict[int, float]          # phrase node → reset weight
    passages: np.ndarray               # reset weight of every node (non-zero on passage nodes only)
    dense: dict[str, float]            # passage id → min-max dense score (for the trace)


def _minmax(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (values - lo) / (hi - lo) if hi > lo else np.ones_like(values)


def _phrase_id(graph: PhraseGraph, node: int) -> str:
    return f"ph:{key(graph.phrases[node])}"


def stage_graph(ctx: Context, tracer: Tracer) -> PhraseGraph:
    """The phrase/passage graph of offline indexing (§3 "Offline Indexing"; the code's `initialize_graph`)."""
    with tracer.stage("graph", "Graph: phrase and passage nodes") as st:
        graph, built = graph_for(ctx.store)
        st.payload = {"phrase_nodes": len(graph.phrases), "passage_nodes": len(graph.passages),
                      "edges": graph.edge_counts, "built_ms": graph.build_ms,
                      "built": "now, at this KB's first question (kept for the next ones)" if built
                      else "earlier; reused"}
        st.message = (f"{len(graph.phrases):,} phrase + {len(graph.passages):,} passage nodes; "
                      + ", ".join(f"{n:,} {k}" for k, n in graph.edge_counts.items()) + " edges"
                      + (f"; built in {graph.build_ms:.0f} ms" if built else ""))
        if not graph.phrases:
            st.empty("the KB has no triples: no phrase node to seed, so the run falls back to dense retrieval")
    return graph


def stage_query_to_triple(ctx: Context, tracer: Tracer, question: str, qvec: np.ndarray,
                          cfg: HippoRAG2Config) -> list[Fact]:
    """Query to triple: the `linking_top_k` facts nearest the question, scores min-max normalised
    over every fact (§3 "Online Retrieval"; the code's `get_fact_scores`)."""
    with tracer.stage("query_to_triple", f"Query to triple: top {cfg.linking_top_k} facts") as st:
        hits = ctx.store.knn("triples", qvec, max(cfg.fact_candidates, cfg.linking_top_k))
        facts: list[Fact] = []
        merged = 0
        if hits:
            # The least similar fact of all is the one most similar to −q: one more kNN, any backend.
            lo = -float(ctx.store.knn("triples", -qvec, 1)[0].score)
            hi = float(hits[0].score)
            by_id = {t.id: t for t in ctx.store.triples([h.id for h in hits])}
            seen = set()
            for h in hits:
                t = by_id.get(h.id)
                if t is None:
                    continue
                fact_key = key(f"{t.subject} | {t.predicate} | {t.object}")
                if fact_key in seen:
                    merged += 1
                    continue
                seen.add(fact_key)
                facts.append(Fact(t.subject, t.predicate, t.object, t.passage_id, float(h.score),
                                  float(_minmax(np.array([h.score]), lo, hi)[0])))
                if len(facts) == cfg.linking_top_k:
                    break
            st.payload["min_max"] = [round(lo, 4), round(hi, 4)]
        st.payload.update({"facts": [f.row() for f in facts], "duplicates_merged": merged})
        g = st.graph()
        q = g.node("q", "question", question)
        for f in facts:
            g.edge(q, g.node(f.id, "triple", f.text, round(f.score, 4), passage=f.passage_id), "linked",
                   f"{f.score:.2f}", round(f.score, 4))
        if not facts:
            st.empty("the KB has no triple vectors to link the question to")
    return facts


def stage_recognition_memory(ctx: Context, tracer: Tracer, question: str, facts: list[Fact],
                             cfg: HippoRAG2Config) -> list[Fact]:
    """Recognition memory: the LLM keeps the facts that bear on the question (§3 "Recognition
    Memory"; the code's `rerank_facts`)."""
    with tracer.stage("recognition_memory", "Recognition memory: the LLM filters the facts") as st:
        if not cfg.recognition_memory or ctx.llm is None:
            st.status = "skipped"
            st.message = ("off (hipporag2_nofilter): every linked fact seeds the graph" if not cfg.recognition_memory
                          else "no LLM is configured (--llm none): every linked fact seeds the graph")
            st.payload = {"kept": [f.row() for f in facts], "dropped": []}
            return facts
        if not facts:
            st.empty("no fact to filter")
            st.payload = {"kept": [], "dropped": []}
            return []
        picked = ctx.llm.json(st, "recognition memory", filter_messages(
            question, [(f.subject, f.predicate, f.object) for f in facts]), filter_schema(len(facts)),
            filter_parser(len(facts)), max_tokens=40)
        kept = [facts[i - 1] for i in picked]
        st.payload = {"kept": [f.row() for f in kept], "dropped": [f.row() for f in facts if f not in kept]}
        g = st.graph()
        q = g.node("q", "question", question)
        for f in kept:
            g.edge(q, g.node(f.id, "triple", f.text, round(f.score, 4), passage=f.passage_id), "kept",
                   "kept", round(f.score, 4))
        if not kept:
            st.empty("the LLM kept no fact: the run falls back to dense passage retrieval, as the paper does")
    return kept


def _dense_scores(ctx: Context, graph: PhraseGraph, qvec: np.ndarray) -> np.ndarray:
    sims = np.asarray(ctx.store.similarities("passages", qvec, graph.passages), dtype=np.float64)
    return _minmax(sims, float(sims.min()), float(sims.max())) if len(sims) else sims


def stage_seeds(ctx: Context, tracer: Tracer, question: str, graph: PhraseGraph, facts: list[Fact],
                qvec: np.ndarray, cfg: HippoRAG2Config) -> Seeds:
    """Reset probabilities: each kept fact's phrases weighted by its score ÷ the passages they occur
    in, the top `linking_top_k` kept; every passage by its min-max dense score × `passage_node_weight`
    (§3 "Dense-Sparse Integration"; the code's `graph_search_with_fact_entities`)."""
    with tracer.stage("seeds", "Seeds: phrase and passage reset weights") as st:
        total: dict[int, float] = {}
        times: dict[int, int] = {}
        via: dict[int, list[str]] = {}
        missing = []
        for f in facts:
            for name in (f.subject, f.object):
                node = graph.node_of_phrase(name)
                if node is None:
                    missing.append(name)
                    continue
                n_pass = float(graph.phrase_passages[node])
                total[node] = total.get(node, 0.0) + f.score / (n_pass if n_pass > 0 else 1.0)
                times[node] = times.get(node, 0) + 1
                via.setdefault(node, []).append(f.id)
        mean = {n: total[n] / times[n] for n in total}
        ordered = sorted(mean.items(), key=lambda kv: -kv[1])
        phrases = dict(ordered[: cfg.linking_top_k])
        reset = np.zeros(graph.n_nodes)
        dense = _dense_scores(ctx, graph, qvec) if graph.passages else np.zeros(0)
        reset[len(graph.phrases):] = dense * cfg.passage_node_weight
        dense_by_id = {pid: float(d) for pid, d in zip(graph.passages, dense)}
        top_passages = sorted(dense_by_id.items(), key=lambda kv: -kv[1])[:5]
        phrase_mass, passage_mass = sum(phrases.values()), float(reset.sum())
        st.payload = {
            "phrase_seeds": [{"phrase": graph.phrases[n], "weight": round(w, 6),
                              "occurs_in_passages": int(graph.phrase_passages[n]),
                              "from_facts": [i.removeprefix("fact:") for i in via[n]]} for n, w in phrases.items()],
            "phrases_not_kept": [{"phrase": graph.phrases[n], "weight": round(w, 6)}
                                 for n, w in ordered[cfg.linking_top_k:]],
            "phrases_not_in_graph": missing,
            "passage_node_weight": cfg.passage_node_weight,
            "passage_seeds_top": [{"passage_id": p, "dense": round(d, 4),
                                   "weight": round(d * cfg.passage_node_weight, 6)} for p, d in top_passages],
            "reset_share": {"phrases": round(phrase_mass / ((phrase_mass + passage_mass) or 1.0), 4),
                            "passages": round(passage_mass / ((phrase_mass + passage_mass) or 1.0), 4)},
        }
        # The map prints a node's share of the reset in percent: on the scale `ppr` prints its
        # share of the mass, so a seed's two figures read side by side.
        pct = 100.0 / ((phrase_mass + passage_mass) or 1.0)
        g = st.graph()
        q = g.node("q", "question", question)
        for n, w in phrases.items():
            ph = g.node(_phrase_id(graph, n), "entity", graph.phrases[n], _pct(w * pct), seed=True)
            for fid in via[n]:
                f = next(f for f in facts if f.id == fid)
                g.edge(g.node(fid, "triple", f.text, round(f.score, 4)), ph, "seeds", "seed", _pct(w * pct))
        if cfg.passage_node_weight > 0:
            for pid, d in top_passages[:3]:
                share = _pct(d * cfg.passage_node_weight * pct)
                g.edge(q, g.node(pid, "passage", "", share), "dense seed", f"dense {d:.2f}", share)
        if not phrases and not reset.any():
            st.empty("no phrase of a kept fact is a node of the graph, and passage seeds are off")
        for n, w in phrases.items():
            reset[n] = w
    return Seeds(phrases, reset, dense_by_id)


def stage_ppr(ctx: Context, tracer: Tracer, graph: PhraseGraph, seeds: Seeds, k: int,
              cfg: HippoRAG2Config) -> list[Hit]:
    """Personalized PageRank from the seeds; passages ranked by their mass (§3 "Online Retrieval";
    the code's `run_ppr`). Each ranked passage names the seed most of its mass came from, and the
    path a walk from that seed most likely took."""
    with tracer.stage("ppr", f"Personalized PageRank (damping {cfg.damping})") as st:
        n_ph = len(graph.phrases)
        sources: dict[str, np.ndarray] = {}
        for node, w in seeds.phrases.items():
            r = np.zeros(graph.n_nodes)
            r[node] = w
            sources[str(node)] = r
        passage_reset = seeds.passages.copy()
        passage_reset[:n_ph] = 0.0
        if passage_reset.any():
            sources["dense"] = passage_reset
        x, parts = ppr.attributed(graph, sources, cfg.damping)
        passage_mass = x[n_ph:]
        order = np.argsort(-passage_mass, kind="stable")[:k]
        hits = [Hit(graph.passages[j], float(passage_mass[j])) for j in order]
        titles = {r["passage_id"]: r["title"] for r in hits_payload(ctx, hits, limit=len(hits))}
        ranked_rows = []
        paths_for: dict[int, list[int]] = {}
        for rank, j in enumerate(order):
            node = n_ph + int(j)
            shares = sorted(((name, float(y[node])) for name, y in parts.items()), key=lambda kv: -kv[1])
            m = float(x[node]) or 1.0
            row = {"rank": rank + 1, "passage_id": graph.passages[j], "title": titles.get(graph.passages[j], ""),
                   "mass": float(f"{x[node]:.6g}"),
                   "mass_from": [{"seed": "its dense score" if name == "dense" else graph.phrases[int(name)],
                                  "share": round(v / m, 3)} for name, v in shares[:3] if v > 0]}
            # The path starts at the phrase seed that gave it most mass (a passage's own dense reset
            # may give more, but has no path to draw).
            phrase_shares = [name for name, v in shares if name != "dense" and v > 0]
            if phrase_shares and rank < cfg.trace_paths:
                paths_for.setdefault(int(phrase_shares[0]), []).append(node)
            ranked_rows.append(row)
        paths: dict[int, list[int]] = {}
        for source, targets in paths_for.items():
            paths.update(ppr.strongest_paths(graph, cfg.damping, source, targets))
        for row, j in zip(ranked_rows, order):
            path = paths.get(n_ph + int(j))
            if path:
                row["strongest_path"] = [graph.label(n) for n in path]
        phrase_order = np.argsort(-x[:n_ph], kind="stable")[: cfg.trace_phrases] if n_ph else []
        st.payload = {
            "damping": cfg.damping, "solver": f"scipy.sparse.linalg.bicgstab (rtol {ppr.RTOL})",
            "mass_on": {"phrases": round(float(x[:n_ph].sum()), 4), "passages": round(float(passage_mass.sum()), 4)},
            "phrases_by_mass": [{"phrase": graph.phrases[i], "mass": float(f"{x[i]:.6g}"),
                                 "seed": int(i) in seeds.phrases} for i in phrase_order],
            "ranked": ranked_rows,
        }
        # Drawn in percent of the mass: nodes hold it, edges carry it each step.
        g = st.graph()
        for i in phrase_order:
            g.node(_phrase_id(graph, int(i)), "entity", graph.phrases[int(i)], _pct(100 * x[i]),
                   seed=int(i) in seeds.phrases)
        for path in paths.values():
            for a, b in zip(path, path[1:]):
                ga = _draw(g, graph, a, x)
                gb = _draw(g, graph, b, x)
                g.edge(ga, gb, graph.kind(a, b), graph.kind(a, b), _pct(100 * ppr.flow(graph, x, cfg.damping, a, b)))
        for h in hits:
            g.node(h.id, "passage", titles.get(h.id, ""), _pct(100 * h.score))
        if not hits:
            st.empty("the graph has no passage node")
    return hits


def _pct(value: float) -> float:
    return float(f"{value:.4g}")


def _draw(g, graph: PhraseGraph, node: int, x: np.ndarray) -> str:
    if graph.is_passage(node):
        return g.node(graph.label(node), "passage", "", _pct(100 * x[node]))
    return g.node(_phrase_id(graph, node), "entity", graph.phrases[node], _pct(100 * x[node]))


def stage_dense_fallback(ctx: Context, tracer: Tracer, qvec: np.ndarray, k: int, why: str) -> list[Hit]:
    """No fact left to seed the graph: dense passage retrieval, as the reference code does
    ("No facts found after reranking, return DPR results")."""
    with tracer.stage("dense_fallback", f"Fallback: dense top {k}") as st:
        hits = ctx.store.knn("passages", qvec, k)
        st.message = why
        st.payload = {"why": why, "candidates": hits_payload(ctx, hits)}
        if not hits:
            st.empty("no passage retrieved")
    return hits
