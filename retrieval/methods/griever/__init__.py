"""GRIEVER (Melo et al.): the LLM-free multi-step graph retriever, Algorithm 1.

Each iteration: retrieve passages (Composed first, then RRF under the sub-graph filter),
shortlist their triples through the partial_triples index, score them with the n-gram
entity matcher, rewrite the query onto the join entity, and narrow the next retrieval to
new passages that contain a join entity. Passages are finally ranked by triple paths.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ...store.base import Filter
from ...trace.model import RankedPassage, Tracer
from ..base import Method, final_stage
from .clauses import split_relative_clauses
from .config import GrieverConfig
from .matcher import match, query_ngrams, span_vector
from .retrieve import Retrieved, combine, composed, rrf_hybrid
from .rewrite import rewrite_query
from .scoring import (
    JoinSet,
    Path,
    ScoredTriple,
    extend_paths,
    final_ranking,
    passage_scores,
    score_triple,
    select_join_entities,
)
from .shortlist import Shortlist, shortlist_triples

__all__ = ["Griever", "GrieverConfig"]

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="griever")


def _triple_id(t) -> str:
    return f"t{t.id}"


class Griever(Method):
    name, title, Config = "griever", "GRIEVER", GrieverConfig
    layers = ("passages", "partial_triples", "triples", "entities", "predicates", "same_as")  # §4.1
    vectors = ("passages", "partial_triples", "entities", "predicates")

    @classmethod
    def units_for(cls, config) -> tuple[str, ...]:
        """The w/ full_triples ablation shortlists over the triples' vectors too (Table 3)."""
        extra = ("triples vectors",) if getattr(config, "shortlist_index", "") == "triples" else ()
        return super().units_for(config) + extra

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        cfg: GrieverConfig = self.config
        cfg.check()
        # LLM-free, so the base class opens no profile stage for it: which ranking ran (the paper's
        # or ours) is named here.
        self.profile_stage(tracer)
        store = self.ctx.store
        q = question
        retrieved: dict[str, float] = {}        # R: passage → cosine to the query that found it
        paths: list[Path] = []                  # G_q
        aliases: dict[str, set[str]] = {}
        flt: Filter | None = None               # F
        titles: dict[str, str] = {}
        enc = None
        hop_of: dict[str, int] = {}             # passage → the iteration that retrieved it

        for i in range(1, cfg.n_iterations + 1):
            # BM25 needs no vectors: it runs on the other core while the encoder works.
            if flt is None:
                subs = self._split(tracer, q)
                sparse = [_pool.submit(store.bm25, "passages", sub.text, self._sparse_depth(k), None)
                          for sub in subs]
            else:
                sparse = [_pool.submit(store.bm25, "passages", q, cfg.rrf_depth_factor * k, flt)]
            if i == 1 or q != enc.text:
                with tracer.stage("encode" if i == 1 else f"encode_{i}",
                                  "Encode question (one pass: sentence + token vectors)" if i == 1
                                  else f"Encode rewritten query (iteration {i})") as st:
                    enc = self.ctx.embedder.encode_query(q)
                    st.payload = {"model": self.ctx.embedder.name, "query": q, "tokens": len(enc.token_spans),
                                  "concurrent": "BM25 ran alongside on another thread"}
                    if enc.shared:
                        st.payload["shared"] = "encoded once for this request by another method, reused here"
            # --- §4.2.1 / §4.2.2: passages ---------------------------------------------
            if flt is None:
                R_i = self._first_retrieval(tracer, q, enc, k, i, subs, [f.result() for f in sparse])
            else:
                with tracer.stage(f"retrieve_{i}", f"RRF retrieval under the sub-graph filter (iteration {i})") as st:
                    R_i = rrf_hybrid(store, q, enc.vector, k, flt, cfg.rrf_depth_factor * k, cfg.k_rrf,
                                     sparse[0].result())
                    st.payload = {"query": q, **R_i.detail}
                    self._passage_graph(st, q, R_i, titles)
                    if not R_i.hits:
                        st.empty("no new passage contains a join entity of the previous hop")
            for pid, s in R_i.cosine.items():
                retrieved[pid] = max(s, retrieved.get(pid, -1.0))
                hop_of.setdefault(pid, i)
            if not R_i.hits:
                break
            # --- §4.2.3 + §4.2.4: shortlist -------------------------------------------------
            scope = set(retrieved) if cfg.same_as_scope == "retrieved" else None
            with tracer.stage(f"shortlist_{i}", f"Shortlist triples via {cfg.shortlist_index} (iteration {i})") as st:
                sl = shortlist_triples(store, q, enc.vector, [h.id for h in R_i.hits], cfg.t_max, scope,
                                       cfg.shortlist_index, cfg.shortlist, cfg.rrf_depth_factor, cfg.k_rrf,
                                       cfg.same_as_match)
                self._shortlist_payload(st, sl)
                if not sl.triples:
                    st.empty("the retrieved passages have no triple whose partial triple matches the query")
            with tracer.stage(f"same_as_{i}", f"Synonyms of the triples' entities (iteration {i})") as st:
                st.payload = {"scope": cfg.same_as_scope, "match": cfg.same_as_match,
                              "synonyms": [self._alias_payload(s, retrieved) for s in sl.synonyms]}
                g = st.graph()
                for s in sl.synonyms:
                    g.edge(g.node("e:" + s.entity, "entity", s.entity), g.node("e:" + s.alias, "entity", s.alias),
                           "same_as", f"{s.similarity:.2f}", s.similarity)
                    aliases.setdefault(s.entity, set()).add(s.alias)
                if not sl.synonyms:
                    st.empty("no same_as record of these entities passed the retrieved-passage filter"
                             if scope is not None else "these entities have no same_as record")
            # --- §4.3 + §4.4: match and score ----------------------------------------------
            with tracer.stage(f"match_{i}", f"Entity and relation matching on query n-grams (iteration {i})") as st:
                scored = self._score(st, enc, sl, aliases)
            with tracer.stage(f"score_{i}", f"Triple scores, eq. (1)-(2) (iteration {i})") as st:
                scored.sort(key=lambda x: -x.score)
                st.payload = {"triples": [self._scored_payload(x) for x in scored[:25]]}
                self._triple_graph(st, scored[:25])
                paths = extend_paths(paths, scored, aliases)
                if not scored:
                    st.empty("no triple to score")
            # --- Algorithm 1: E_i from the scored triples, within Algorithm 2's E_j ------------
            with tracer.stage(f"join_{i}", f"Join entities E_i for the next hop (iteration {i})") as st:
                joins = select_join_entities(scored, sl.join_entities, sl.synonyms, cfg.join_entities,
                                             cfg.join_min_score)
                E_i = joins.entities
                self._join_payload(st, sl, joins, retrieved)
                if not E_i:
                    st.empty("no scored triple joins on an entity of E_j")
            if i < cfg.n_iterations:
                with tracer.stage(f"rewrite_{i}", f"Heuristic query rewrite (after iteration {i})") as st:
                    rw = rewrite_query(q, scored[0] if scored else None, cfg.rewrite_min_score,
                                       cfg.predicate_min_score)
                    st.payload = {"before": rw.before, "after": rw.after, "removed": rw.removed,
                                  "inserted": rw.inserted, "reason": rw.reason}
                    g = st.graph()
                    g.edge(g.node("q_before", "query", rw.before), g.node("q_after", "query", rw.after),
                           "rewritten_to", rw.inserted)
                    if not rw.changed:
                        st.empty(rw.reason)
                    q = rw.after
                with tracer.stage(f"filter_{i}", f"Sub-graph filter for iteration {i + 1}") as st:
                    flt = Filter.make(ids_not_in=retrieved, triple_entities=E_i)
                    st.payload = {"join_entities": E_i[:50], "n_join_entities": len(E_i),
                                  "exclude_passages": len(retrieved), "filter": flt.describe()}
                    if not E_i:
                        st.empty("no join entity: the next retrieval cannot be constrained")
                        flt = Filter.make(ids_not_in=retrieved)

        with tracer.stage("paths", "Paths and passage scores (§4.4)") as st:
            by_passage = passage_scores(paths)
            path_score = {pid: v for pid, (v, _) in by_passage.items()}
            st.payload = {"n_paths": len(paths), "best_paths": [
                {"passage_id": pid, "title": titles.get(pid, ""), "passage_score": round(v, 5),
                 "path": [f"({x.triple.subject}) -[{x.triple.predicate}]-> ({x.triple.object})" for x in p.triples],
                 "path_score": round(p.score, 4)}
                for pid, (v, p) in sorted(by_passage.items(), key=lambda kv: -kv[1][0])[:15]],
                # every candidate of the final ranking, so a lost gold passage can be traced to its hop
                "candidates": [{"passage_id": pid, "hop": hop_of[pid],
                                "passage_score": round(path_score.get(pid, 0.0), 6),
                                "cosine": round(retrieved[pid], 4)} for pid in retrieved]}
            g = st.graph()
            # pid and v stay named: a rename would change GRIEVER's code fingerprint and mark the shipped showcase stale
            for pid, (v, p) in sorted(by_passage.items(), key=lambda kv: -kv[1][0])[:10]:  # noqa: B007
                for a, b in zip(p.triples, p.triples[1:]):
                    g.edge(g.node(_triple_id(a.triple), "triple", a.triple.text, a.score),
                           g.node(_triple_id(b.triple), "triple", b.triple.text, b.score), "path")
                for x in p.triples:
                    g.edge(g.node(_triple_id(x.triple), "triple", x.triple.text, x.score),
                           g.node(x.triple.passage_id, "passage", titles.get(x.triple.passage_id, "")), "from_passage")
        ranked = final_ranking(retrieved, path_score, cfg.final_ranking, cfg.path_weight)[:k]
        titles.update({p.id: p.title for p in store.passages([pid for pid, _ in ranked if pid not in titles])})
        final = [RankedPassage(pid, round(v, 6), titles.get(pid, "")) for pid, v in ranked]
        how = (f"retrieval cosine + {cfg.path_weight} × (max over paths of triple score × path score)"
               if cfg.final_ranking == "retrieval+paths" else
               "max over paths of triple score × path score, ties (no path) by retrieval cosine")
        return final_stage(tracer, final, question, how)

    # --- stages' helpers -----------------------------------------------------------------
    def _sparse_depth(self, k: int) -> int:
        cfg: GrieverConfig = self.config
        return k * cfg.c if cfg.first_retriever == "composed" else cfg.rrf_depth_factor * k

    def _split(self, tracer: Tracer, q: str):
        with tracer.stage("clause_split", "Relative clause splitting (§4.2.1)") as st:
            subs = split_relative_clauses(q) if self.config.split_clauses else split_relative_clauses(q)[:1]
            st.payload = {"sub_queries": [{"text": s.text, "connector": s.connector} for s in subs]}
            g = st.graph()
            root = g.node("q", "question", q)
            for j, s in enumerate(subs[1:], 1):
                g.edge(root, g.node(f"sq{j}", "query", s.text), "split_at", s.connector)
        return subs

    def _first_retrieval(self, tracer: Tracer, q: str, enc, k: int, i: int, subs, sparse) -> Retrieved:
        """Composed (or, ablated, RRFHybrid) per sub-query; sub-query vectors are pooled from
        the question's token vectors, so splitting costs no encoder pass."""
        cfg: GrieverConfig = self.config
        store = self.ctx.store
        with tracer.stage(f"retrieve_{i}", f"{cfg.first_retriever} retrieval per sub-query (iteration {i})") as st:
            runs = []
            for sub, hits in zip(subs, sparse):
                vec = enc.vector if sub.start == 0 else span_vector(enc, sub.start)
                if cfg.first_retriever == "rrf_hybrid":
                    runs.append(rrf_hybrid(store, sub.text, vec, k, None, cfg.rrf_depth_factor * k, cfg.k_rrf, hits))
                else:
                    runs.append(composed(store, sub.text, vec, k, cfg.c, hits))
            R = combine(runs, k) if len(runs) > 1 else runs[0]
            st.payload = {"per_sub_query": [{"sub_query": s.text, **r.detail} for s, r in zip(subs, runs)],
                          "combined": [{"passage_id": h.id, "dense": round(h.score, 4)} for h in R.hits]}
            self._passage_graph(st, q, R, {})
            if not R.hits:
                st.empty("BM25 found no passage sharing a word with the question")
        return R

    def _passage_graph(self, st, q: str, R: Retrieved, titles: dict[str, str]) -> None:
        titles.update({p.id: p.title for p in self.ctx.store.passages([h.id for h in R.hits if h.id not in titles])})
        g = st.graph()
        root = g.node("q", "query", q)
        for h in R.hits:
            g.edge(root, g.node(h.id, "passage", titles.get(h.id, ""), R.cosine.get(h.id)), "retrieved",
                   f"{R.cosine.get(h.id, 0):.3f}")

    def _shortlist_payload(self, st, sl: Shortlist) -> None:
        st.payload = {
            "triples_in_passages": len(sl.all_triples), "shortlisted": len(sl.triples),
            "filter": sl.filter.describe() if sl.filter else None,
            "partial_triples": [{"content": p.content, "inverse": p.is_inverse, "complements": p.objects[:5],
                                 "rrf": round(s, 5)} for p, s in sl.partials],
            "triples": [f"({t.subject}) -[{t.predicate}]-> ({t.object})" for t in sl.triples[:40]],
            "join_entities": sl.join_entities[:30]}
        g = st.graph()
        for t in sl.triples[:40]:
            g.edge(g.node("e:" + t.subject, "entity", t.subject), g.node("e:" + t.object, "entity", t.object),
                   "triple", t.predicate)
        for e in sl.join_entities[:30]:
            if any(n.id == "e:" + e for n in g.nodes):
                next(n for n in g.nodes if n.id == "e:" + e).attrs["join"] = True

    @staticmethod
    def _alias_payload(s, retrieved: dict) -> dict:
        inside = [p for p in s.passage_ids if p in retrieved]
        return {"entity": s.entity, "alias": s.alias, "similarity": round(s.similarity, 4),
                "alias_in_retrieved": bool(inside),
                "alias_passages": (inside or s.passage_ids)[:3]}

    def _join_payload(self, st, sl: Shortlist, joins: JoinSet, retrieved: dict) -> None:
        cfg: GrieverConfig = self.config
        st.payload = {
            "E_j": sl.join_entities[:50], "E_i": joins.entities[:50], "n_E_j": len(sl.join_entities),
            "n_E_i": len(joins.entities), "mode": cfg.join_entities, "join_min_score": cfg.join_min_score,
            "why_not_in_E_i": [{"entity": e, "why": w} for e, w in list(joins.dropped.items())[:30]],
            "aliases_added": [self._alias_payload(s, retrieved) for s in joins.aliases],
            "aliases_only_outside_retrieved": sorted({s.alias for s in joins.aliases
                                                      if not any(p in retrieved for p in s.passage_ids)})}
        g = st.graph()
        for e in joins.entities:
            g.node("e:" + e, "entity", e, join=True)
        for s in joins.aliases:
            g.edge(g.node("e:" + s.entity, "entity", s.entity, join=True), "e:" + s.alias, "same_as",
                   f"{s.similarity:.2f}", s.similarity)
        for e in list(joins.dropped)[:20]:
            g.node("e:" + e, "entity", e, dropped=True)

    def _score(self, st, enc, sl: Shortlist, aliases: dict[str, set[str]]) -> list[ScoredTriple]:
        """§4.3: entity score = best n-gram similarity of the entity or any synonym; the
        predicate score the same for the relation; then eq. (1)–(2) per triple."""
        store = self.ctx.store
        ngrams = query_ngrams(enc, self.config.max_ngram)
        entities = list(dict.fromkeys(e for t in sl.triples for e in (t.subject, t.object)))
        owners, names = [], []
        for e in entities:
            for n in [e, *sorted(aliases.get(e, ()))]:
                owners.append(e)
                names.append(n)
        ids = store.entity_ids(names)
        rows = [(o, n) for o, n in zip(owners, names) if n in ids]
        ent_vecs = store.vectors("entities", [ids[n] for _, n in rows])
        ent_match = match(ngrams, [n for _, n in rows], ent_vecs, [o for o, _ in rows])
        preds = list(dict.fromkeys(t.predicate for t in sl.triples))
        pids = store.predicate_ids(preds)
        preds = [p for p in preds if p in pids]
        pred_match = match(ngrams, preds, store.vectors("predicates", [pids[p] for p in preds]))
        keys = {(t.subject, t.predicate, False) for t in sl.triples} | {(t.object, t.predicate,
                                                                         True) for t in sl.triples}
        freq = store.partial_triple_freqs(keys)
        scored = [score_triple(t, ent_match, pred_match, freq) for t in sl.triples]
        st.payload = {
            "n_grams": len(ngrams.texts),
            "entities": [{"entity": m.name, "score": round(m.score, 4), "ngram": m.ngram,
                          **({"via_synonym": m.via} if m.via != m.name else {})}
                         for m in sorted(ent_match.values(), key=lambda m: -m.score)[:25]],
            "relations": [{"predicate": m.name, "score": round(m.score, 4), "ngram": m.ngram}
                          for m in sorted(pred_match.values(), key=lambda m: -m.score)[:15]]}
        g = st.graph()
        for m in sorted(ent_match.values(), key=lambda m: -m.score)[:12]:
            g.edge(g.node("n:" + m.ngram, "query", m.ngram), g.node("e:" + m.name, "entity", m.name, m.score),
                   "matches", f"{m.score:.2f}", m.score)
        return scored

    @staticmethod
    def _scored_payload(x: ScoredTriple) -> dict:
        return {"triple": f"({x.triple.subject}) -[{x.triple.predicate}]-> ({x.triple.object})",
                "passage_id": x.triple.passage_id, "score": round(x.score, 4), "best_partial": x.side,
                "join_entity": x.join_entity, "partials": x.partials}

    @staticmethod
    def _triple_graph(st, scored: list[ScoredTriple]) -> None:
        g = st.graph()
        for x in scored:
            t = x.triple
            tid = g.node(_triple_id(t), "triple", t.predicate, x.score)
            g.edge(g.node("e:" + t.subject, "entity", t.subject), tid, "subject")
            g.edge(tid, g.node("e:" + t.object, "entity", t.object), "object")
            g.edge(tid, g.node(t.passage_id, "passage", t.passage_id[:14]), "from_passage")
