"""SAG's online stages, one per link of the auditable chain (§3.5):
q → U_q → Û_q → E_R → E_cand → Ê → E* → C_out.

Every stage records the statements the store executed (SQL with bound parameters, row
counts, milliseconds) in its payload under "sql". The question's text only ever reaches SQL
as a bound parameter.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ...core.records import Event
from ...kb.normalize import normalize_entity
from ...store.base import Hit
from ...trace.model import Stage, Tracer
from ..baselines import hits_payload
from ..context import Context
from .config import SagConfig
from .expand import Hop, expand
from .prompts import ENTITY_SCHEMA, entity_messages, parse_entities, rerank_messages, rerank_parser, rerank_schema


def _sql(st: Stage, log) -> None:
    st.payload["sql"] = [asdict(s) for s in log]


def _entity_names(ctx: Context, ids) -> dict[int, str]:
    return {i: name for i, name, _ in ctx.store.entities(list(ids))}


def _event_graph(st: Stage, events: list[Event], frontier: frozenset = frozenset(), limit: int = 40) -> None:
    """Events as hyperedge nodes joined to their entities (§3.2's latent hyperedges)."""
    g = st.graph()
    for ev in events[:limit]:
        eid = g.node(f"ev:{ev.id}", "event", ev.summary[:80], passage=ev.passage_id)
        for link in ev.entities[:12]:
            ent = g.node(f"e:{link.name}", "entity", link.name, frontier=link.name in frontier, etype=link.type)
            g.edge(eid, ent, "mentions", link.type or "")


def stage_query_entities(ctx: Context, tracer: Tracer, question: str) -> list[tuple[str, str]]:
    """U_q: the query's key entities, by the LLM f_entity (§3.3 Path A) or, without one, spaCy NER."""
    with tracer.stage("query_entities", "U_q: entities in the question") as st:
        if ctx.llm is not None:
            ents = ctx.llm.json(st, "query entities", entity_messages(question), ENTITY_SCHEMA, parse_entities,
                                max_tokens=200)
            how = "LLM (few-shot)"
        else:
            from ...kb.extract.rules import SPACY_TO_SAG, load_spacy
            doc = load_spacy()(question)
            ents = list(dict.fromkeys((e.text.strip(), SPACY_TO_SAG.get(e.label_, "label")) for e in doc.ents
                                      if e.text.strip()))
            ents += [(c.text.strip(), "topic") for c in doc.noun_chunks
                     if c.root.pos_ == "PROPN" and (c.text.strip(), "topic") not in ents
                     and all(c.text.strip() != n for n, _ in ents)]
            how = "spaCy NER (no LLM configured)"
        st.payload = {"how": how, "entities": [{"name": n, "type": t} for n, t in ents]}
        g = st.graph()
        q = g.node("q", "question", question)
        for n, t in ents:
            g.edge(q, g.node(f"e:{n}", "entity", n, etype=t), "mentions", t)
        if not ents:
            st.empty("no entity was found in the question (Path A has nothing to join on)")
    return ents


def stage_entity_expansion(ctx: Context, tracer: Tracer, entities: list[tuple[str, str]],
                           cfg: SagConfig) -> dict[int, tuple[str, float]]:
    """Û_q ⊇ U_q: KB entities with the same normalised name or vector similarity ≥ 0.9 (§3.3)."""
    with tracer.stage("entity_expansion", f"Û_q: KB entities matching U_q (cos ≥ {cfg.entity_threshold})") as st, \
            ctx.store.recording() as log:
        out: dict[int, tuple[str, float]] = {}
        rows = []
        exact = ctx.store.entities_by_norm({normalize_entity(n) for n, _ in entities})
        vectors = ctx.embedder.encode([n for n, _ in entities]) if entities else []
        for (name, etype), vec in zip(entities, vectors):
            matched: dict[int, float] = {i: 1.0 for i in exact.get(normalize_entity(name), [])}
            near: dict[int, float] = {}
            for h in ctx.store.knn("entities", vec, cfg.k_seed):
                if h.score >= cfg.entity_threshold:
                    matched.setdefault(int(h.id), round(float(h.score), 4))
                elif h.score >= cfg.entity_threshold - cfg.near_miss_margin and int(h.id) not in matched:
                    near[int(h.id)] = round(float(h.score), 4)
            names = _entity_names(ctx, {**matched, **near})
            rows.append({"query_entity": name, "type": etype,
                         "matches": [{"entity": names.get(i, str(i)), "similarity": s} for i, s in matched.items()],
                         "near_misses": [{"entity": names.get(i, str(i)), "similarity": s}
                                         for i, s in list(near.items())[:8]]})
            for i, s in matched.items():
                if i not in out or out[i][1] < s:
                    out[i] = (names.get(i, str(i)), s)
        st.payload = {"expanded": rows, "n_entities": len(out), "threshold": cfg.entity_threshold,
                      "near_miss_band": [round(cfg.entity_threshold - cfg.near_miss_margin, 4), cfg.entity_threshold]}
        _sql(st, log)
        g = st.graph()
        for r in rows:
            src = g.node(f"q:{r['query_entity']}", "query", r["query_entity"])
            for m in r["matches"]:
                g.edge(src, g.node(f"e:{m['entity']}", "entity", m["entity"]), "same_as", f"{m['similarity']:.2f}",
                       m["similarity"])
        if not out:
            st.empty("no KB entity matches a question entity" if entities else "no question entity to match")
    return out


def stage_seed_events(ctx: Context, tracer: Tracer, qvec: np.ndarray, entities: dict[int, tuple[str, float]],
                      cfg: SagConfig) -> list[int]:
    """E_R = E_R^entity ∪ E_R^direct: SQL join from Û_q (eq. 1) and event vectors ≥ τ (eq. 2)."""
    with tracer.stage("seed_events", "E_R: seed events (entity join ∪ event vectors)") as st, \
            ctx.store.recording() as log:
        by_entity = ctx.store.events_of_entities(list(entities)) if entities else {}
        path_a = list(dict.fromkeys(ev for ent in entities for ev in by_entity.get(ent, [])))
        vector_hits = ctx.store.knn("events", qvec, cfg.k_seed)
        path_b = [int(h.id) for h in vector_hits if h.score >= cfg.event_threshold]
        near = [h for h in vector_hits if cfg.event_threshold - cfg.near_miss_margin <= h.score < cfg.event_threshold
                and int(h.id) not in path_a][:10]
        seeds = list(dict.fromkeys(path_a + path_b))
        events = {e.id: e for e in ctx.store.events(seeds + [int(h.id) for h in near])}
        sims = dict(zip(seeds, ctx.store.similarities("events", qvec, seeds))) if seeds else {}
        st.payload = {
            "path_a_entity_join": len(path_a), "path_b_vector": len(path_b), "union": len(seeds),
            "events": [{"event": events[i].summary, "passage_id": events[i].passage_id,
                        "path": "A+B" if i in path_a and i in path_b else ("A" if i in path_a else "B"),
                        "similarity": round(float(sims[i]), 4)} for i in seeds[:60] if i in events],
            "tau": cfg.event_threshold,
            "near_misses_below_tau": [{"event": events[int(h.id)].summary, "passage_id": events[int(h.id)].passage_id,
                                       "similarity": round(float(h.score), 4)} for h in near if int(h.id) in events],
        }
        _sql(st, log)
        _event_graph(st, [events[i] for i in seeds if i in events])
        if not seeds:
            st.empty("the entity join returned no event and no event passed τ = "
                     f"{cfg.event_threshold}")
    return seeds


def stage_expansion(ctx: Context, tracer: Tracer, qvec: np.ndarray, seeds: list[int], seed_entities: list[int],
                    cfg: SagConfig) -> list[Hop]:
    """E_E: reverse joins to an entity frontier, then new events through it, H hops (§3.4, eq. 3)."""
    with tracer.stage("expansion", f"E_cand: query-time expansion, H = {cfg.hops}") as st, \
            ctx.store.recording() as log:
        if cfg.hops <= 0:
            st.status, st.message = "skipped", "H = 0: expansion is off (Table 4 ablation)"
            return []

        def rank(entity_ids: list[int]) -> list[int]:
            # The frontier budget keeps the entities nearest the query (the paper leaves the order open).
            sims = ctx.store.similarities("entities", qvec, entity_ids)
            return [entity_ids[j] for j in np.argsort(-np.asarray(sims), kind="stable")]

        hops = expand(seeds, seed_entities, ctx.store.entities_of_events, ctx.store.events_of_entities,
                      cfg.hops, cfg.frontier_budget, rank)
        names = _entity_names(ctx, {e for h in hops for e in h.frontier + h.pruned[:200]})
        new = [ev for h in hops for ev in h.new_events]
        events = {e.id: e for e in ctx.store.events(new[:200])}
        st.payload = {
            "hops": [{"hop": h.hop, "frontier": [names.get(e, e) for e in h.frontier[:50]],
                      "frontier_size": len(h.frontier), "pruned": len(h.pruned),
                      "pruned_entities": [names.get(e, e) for e in h.pruned[:200]],
                      "budget": cfg.frontier_budget, "new_events": len(h.new_events),
                      "examples": [{"event": events[ev].summary, "via": [names.get(e, e) for e in h.via[ev]]}
                                   for ev in h.new_events[:15] if ev in events]} for h in hops],
            "candidates": len(seeds) + len(new),
        }
        _sql(st, log)
        _event_graph(st, [events[ev] for ev in new[:40] if ev in events],
                     frozenset(names.get(e) for h in hops for e in h.frontier))
        if not new:
            st.empty("expansion found no new event (the frontier entities link only to events already seen)"
                     if hops and hops[0].frontier else "the seed events have no entity left to explore")
    return hops


def stage_coarse_rank(ctx: Context, tracer: Tracer, qvec: np.ndarray, candidates: list[int],
                      cfg: SagConfig) -> list[Hit]:
    """Ê: the K_cand candidate events most similar to the query (§3.4 coarse ranking)."""
    with tracer.stage("coarse_rank", f"Ê: top {cfg.k_cand} candidate events by similarity") as st:
        sims = ctx.store.similarities("events", qvec, candidates) if candidates else []
        order = np.argsort(-np.asarray(sims), kind="stable")[: cfg.k_cand] if candidates else []
        hits = [Hit(candidates[j], float(sims[j])) for j in order]
        events = {e.id: e for e in ctx.store.events([h.id for h in hits])}
        st.payload = {"candidates": len(candidates), "kept": len(hits),
                      "events": [{"rank": i + 1, "event": events[h.id].summary, "similarity": round(h.score, 4)}
                                 for i, h in enumerate(hits[:50]) if h.id in events]}
        if not hits:
            st.empty("no candidate event to rank")
    return hits


def stage_rerank(ctx: Context, tracer: Tracer, question: str, cands: list[Hit], cfg: SagConfig,
                 reranker: str) -> list[int]:
    """E* = Rerank(Ê, q): one joint LLM selection of K_event events (§3.4); with `none`, the
    first K_event of Ê's coarse order (no reranker)."""
    title = "E*: LLM selects events jointly" if reranker == "llm" else "E*: no rerank (coarse order kept)"
    with tracer.stage("rerank", title) as st:
        if cfg.k_event <= 0:  # Table 7's first row: nothing to select, so no tokens spent selecting it
            st.status, st.message = "skipped", "K_event = 0: the structural path is off (pure semantic retrieval)"
            st.payload = {"reranker": reranker, "k_event": cfg.k_event, "selected": []}
            return []
        events = {e.id: e for e in ctx.store.events([h.id for h in cands])}
        listed = [h.id for h in cands if h.id in events]
        if not listed:
            st.empty("no candidate event to select from")
            return []
        if reranker == "llm":
            def words(s: str) -> str:
                w = s.split()
                return s if len(w) <= cfg.event_max_words else " ".join(w[: cfg.event_max_words]) + " …"
            # `l` stays: a rename would change SAG's code fingerprint and mark the shipped showcase stale
            msgs = rerank_messages(question, [(words(events[i].summary), [l.name for l in events[i].entities])  # noqa: E741
                                              for i in listed], cfg.k_event, cfg.rerank_entities)
            picked = ctx.llm.json(st, "rerank", msgs, rerank_schema(cfg.k_event), rerank_parser(len(listed),
                                                                                                cfg.k_event),
                                  max_tokens=60)
            chosen = [listed[i - 1] for i in picked]
        else:
            chosen = listed[: cfg.k_event]  # cosine order from the coarse ranking
        st.payload = {"reranker": reranker, "from": len(listed), "k_event": cfg.k_event,
                      "selected": [{"event": events[i].summary, "passage_id": events[i].passage_id} for i in chosen]}
        _event_graph(st, [events[i] for i in chosen])
        if not chosen:
            st.empty("the reranker selected no event")
    return chosen


def stage_direct_chunks(ctx: Context, tracer: Tracer, qvec: np.ndarray, k_direct: int) -> list[Hit]:
    """C^direct = Embed_top-K(q): the K_direct chunks nearest the query vector (§3.4 Path B)."""
    with tracer.stage("direct_chunks", f"C^direct: top {k_direct} chunks by query vector") as st:
        hits = ctx.store.knn("passages", qvec, k_direct) if k_direct > 0 else []
        st.payload = {"k_direct": k_direct, "chunks": hits_payload(ctx, hits)}
        if not hits:
            st.empty("K_direct = 0: the semantic path is off" if k_direct <= 0 else "no chunk retrieved")
    return hits


def stage_merge(ctx: Context, tracer: Tracer, chosen_events: list[int], direct: list[Hit], k_out: int) -> list[Hit]:
    """C_out = TopK_{K_out}(C^event ∪ C^direct), de-duplicated (eq. 4); event chunks first, as
    Table 7's R@2 jump at K_event = 2 implies."""
    with tracer.stage("merge", f"C_out: event chunks ∪ direct chunks, top {k_out}") as st:
        events = {e.id: e for e in ctx.store.events(chosen_events)}
        c_event = list(dict.fromkeys(events[ev].passage_id for ev in chosen_events if ev in events))
        order: dict[str, str] = {pid: "event" for pid in c_event}
        duplicates = []
        for h in direct:
            if h.id in order:
                duplicates.append(h.id)
            else:
                order[h.id] = "direct"
        merged = list(order.items())[:k_out]
        hits = [Hit(pid, 1.0 - i / max(1, len(merged))) for i, (pid, _) in enumerate(merged)]
        payload = hits_payload(ctx, hits)
        for row, (_, src) in zip(payload, merged):
            row["from"] = src
        kept = {pid for pid, _ in merged}
        st.payload = {"k_out": k_out, "k_event_events": len(chosen_events), "c_event": len(c_event),
                      "c_direct": len(direct), "from_events": sum(1 for _, s in merged if s == "event"),
                      "from_direct": sum(1 for _, s in merged if s == "direct"),
                      "direct_filled": [r["title"] for r in payload if r["from"] == "direct"],
                      "direct_already_event_chunks": duplicates,
                      "cut_by_k_out": [pid for pid in order if pid not in kept],
                      "chunks": payload}
        if not hits:
            st.empty("both paths are empty")
    return hits
