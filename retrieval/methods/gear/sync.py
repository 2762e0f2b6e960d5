"""Knowledge synchronisation (§4.1): read passages into proximal triples (eq. 1 / eq. 4),
then link each to its most similar KB triple (tripleLink, eq. 2)."""
from __future__ import annotations

from typing import Optional

from ...core.records import Triple
from ...store.base import Hit
from ...trace.model import Tracer
from ..context import Context
from .config import GearConfig
from .prompts import TRIPLE, parse_read, read_messages, read_schema


def add_triple_node(g, key: str, s: str, p: str, o: str, score=None, **attrs) -> str:
    """A triple as a node joined to its subject and object entities."""
    tid = g.node(key, "triple", f"({s}, {p}, {o})", score, **attrs)
    g.edge(g.node(f"e:{s}", "entity", s), tid, "subject")
    g.edge(tid, g.node(f"e:{o}", "entity", o), "object", p)
    return tid


def stage_read(ctx: Context, tracer: Tracer, question: str, passages_hits: list[Hit], memory: list[TRIPLE],
               cfg: GearConfig, name: str = "read", what: str = "base passages", already_read: Optional[set] = None,
               limit: Optional[int] = None) -> list[TRIPLE]:
    """read(C'_q, q[, G]) → proximal triples T'_q (eq. 1; with the gist memory, eq. 4)."""
    skipped = [h.id for h in passages_hits if already_read is not None and h.id in already_read]
    todo = [h for h in passages_hits if h.id not in set(skipped)]
    limit = limit if limit is not None else cfg.read_passages
    unread = todo[limit:] if limit is not None else []
    todo = todo[:limit] if limit is not None else todo
    title = f"Read {len(todo)} {what} → proximal triples" + (" (with gist memory)" if memory else "")
    with tracer.stage(name, title) as st:
        passages = ctx.store.passages([h.id for h in todo])
        if already_read is not None:
            already_read.update(p.id for p in passages)
        st.payload = {"question": question, "passages_read": [p.title for p in passages],
                      "max_words": cfg.read_max_words, "max_triples": cfg.max_triples}
        if skipped:  # profile `local`, reread = False: their facts are already in the gist memory
            st.payload["skipped_read_before"] = [p.title for p in ctx.store.passages(skipped)]
        if unread:
            st.payload["not_read_over_limit"] = [p.title for p in ctx.store.passages([h.id for h in unread])]
        if not passages:
            st.empty("no passage left to read")
            return []
        msgs = read_messages(question, passages, memory, cfg.read_max_words, cfg.max_triples)
        triples = ctx.llm.json(st, "read", msgs, read_schema(cfg.max_triples), parse_read,
                               max_tokens=60 + 45 * cfg.max_triples)
        new = [t for t in triples if t not in set(memory)]
        st.payload.update({"proximal_triples": [list(t) for t in new], "dropped_as_known": len(triples) - len(new)})
        g = st.graph()
        for i, (s, p, o) in enumerate(new):
            add_triple_node(g, f"pt:{i}", s, p, o, proximal=True)
        if not new:
            st.empty("the LLM found no new fact in the passages")
    return new


def stage_triple_link(ctx: Context, tracer: Tracer, proximal: list[TRIPLE], name: str = "triple_link") -> list[Triple]:
    """tripleLink (eq. 2): each proximal triple → the most similar triple in the KB index T."""
    with tracer.stage(name, f"tripleLink: {len(proximal)} proximal triples → KB triples") as st:
        if not proximal:
            st.empty("no proximal triple to link")
            return []
        vectors = ctx.embedder.encode([" ".join(t) for t in proximal])
        best = [ctx.store.knn("triples", v, 1) for v in vectors]
        kb = {t.id: t for t in ctx.store.triples([h[0].id for h in best if h])}
        linked: list[Triple] = []
        rows = []
        g = st.graph()
        for i, (pt, hits) in enumerate(zip(proximal, best)):
            t = kb.get(hits[0].id) if hits else None
            rows.append({"proximal": list(pt), "linked": [t.subject, t.predicate, t.object] if t else None,
                         "similarity": round(hits[0].score, 4) if hits else None,
                         "passage_id": t.passage_id if t else None})
            src = add_triple_node(g, f"pt:{i}", *pt, proximal=True)
            if t is not None:
                dst = add_triple_node(g, f"t:{t.id}", t.subject, t.predicate, t.object, hits[0].score)
                g.edge(src, dst, "linked", f"{hits[0].score:.2f}", hits[0].score)
                if t not in linked:
                    linked.append(t)
        st.payload = {"links": rows}
    return linked


def stage_gist_memory(tracer: Tracer, memory: list[TRIPLE], added: list[TRIPLE], n: int) -> list[TRIPLE]:
    """Gist memory G^(n) = G^(n-1) ∘ T^G_q(n) (eq. 5)."""
    with tracer.stage(f"gist_memory_{n}", f"Gist memory after round {n}") as st:
        memory = memory + [t for t in added if t not in memory]
        st.payload = {"round": n, "added": [list(t) for t in added], "memory": [list(t) for t in memory]}
        g = st.graph()
        for i, t in enumerate(memory):
            add_triple_node(g, f"m:{i}", *t, new=t in added)
        if not memory:
            st.empty("nothing learnt yet")
    return memory


