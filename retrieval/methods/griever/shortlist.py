"""§4.2.3 same_as expansion and §4.2.4 / Algorithm 2 triple shortlisting."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from ...core.records import PartialTriple, SameAs, Triple
from ...store.base import Filter, SearchStore


def expand_same_as(store: SearchStore, entities: Iterable[str], retrieved: Optional[set[str]],
                   match: str = "record") -> list[SameAs]:
    """§4.2.3: synonyms of the entities from the same_as records that the retrieved passages
    select (all of such a record's aliases, wherever they occur); `retrieved=None` = no filter."""
    return store.same_as(list(entities), retrieved, match)


@dataclass
class Shortlist:
    all_triples: list[Triple]
    triples: list[Triple]                   # T after shortlisting
    partials: list[tuple[PartialTriple, float]] = field(default_factory=list)  # P_T with RRF scores
    join_entities: list[str] = field(default_factory=list)                   # E_j
    synonyms: list[SameAs] = field(default_factory=list)                     # expand_same_as(E), ⊇ E_j's
    filter: Optional[Filter] = None


def shortlist_triples(store: SearchStore, query: str, vector: np.ndarray, passages: list[str], t_max: int,
                      retrieved: Optional[set[str]], index: str = "partial_triples", enabled: bool = True,
                      depth_factor: int = 2, k_rrf: int = 60, match: str = "record") -> Shortlist:
    """Algorithm 2: the passages' triples, cut to those whose partial triples the query matches,
    with E_j (the complements that close a kept triple). expand_same_as(E_j) is the part of
    `synonyms` whose entity is in E_j (E_j ⊆ E), so it is not looked up twice."""
    T = store.triples_of_passages(passages)
    E = {t.subject for t in T} | {t.object for t in T}
    # E ∪ expand_same_as(E) once: E_j ⊆ E, so its synonyms are a subset of these.
    synonyms = expand_same_as(store, E, retrieved, match)
    E_all = E | {s.alias for s in synonyms}
    if not enabled:  # Table 3, w/o shortlisting: every triple goes to the scorer
        return Shortlist(T, T, [], sorted(E), synonyms)
    if index == "triples":  # Table 3, w/ full_triples: match whole triples instead of pairs
        flt = Filter.make(passage_ids=passages, subject=E_all)
        hits = store.hybrid("triples", query, vector, t_max, flt, depth=depth_factor * t_max, k_rrf=k_rrf)
        keep = {h.id for h in hits}
        shortlisted = [t for t in T if t.id in keep]
        joins = list(dict.fromkeys(e for t in shortlisted for e in (t.subject, t.object)))
        return Shortlist(T, shortlisted, [], joins, synonyms, flt)
    flt = Filter.make(passage_ids=passages, subject=E_all)
    hits = store.hybrid("partial_triples", query, vector, t_max, flt, depth=depth_factor * t_max, k_rrf=k_rrf)
    score = {h.id: h.score for h in hits}
    P = store.partial_triples([h.id for h in hits])
    fwd = {(p.subject, p.predicate) for p in P if not p.is_inverse}
    inv = {(p.subject, p.predicate) for p in P if p.is_inverse}
    shortlisted = [t for t in T if (t.subject, t.predicate) in fwd or (t.object, t.predicate) in inv]
    in_T = {(t.subject, t.predicate, t.object) for t in shortlisted}
    joins = []
    for p in P:  # E_j: the complements of matched pairs that close a shortlisted triple
        for o in p.objects:
            if ((p.subject, p.predicate, o) if not p.is_inverse else (o, p.predicate, p.subject)) in in_T:
                joins.append(o)
    return Shortlist(T, shortlisted, [(p, score[p.id]) for p in P], list(dict.fromkeys(joins)), synonyms, flt)
