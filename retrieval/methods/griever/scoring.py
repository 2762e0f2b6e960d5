"""§4.4 Scoring: partial triples (eq. 1), triples (eq. 2), paths and passages."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from ...core.records import Triple
from .matcher import Match


def partial_score(entity_score: float, predicate_score: float, freq: int) -> float:
    """Eq. (1): s_u = (s_e + s_p) / (2 · (1 + log freq(e, p)))."""
    return (entity_score + predicate_score) / (2.0 * (1.0 + math.log(max(1, freq))))


@dataclass
class ScoredTriple:
    triple: Triple
    score: float                  # eq. (2)
    side: str                     # "subject" or "object": whose partial triple gave the max
    entity: str                   # the matched entity of that partial triple
    join_entity: str              # the other entity: what the next hop joins on (§4.5)
    entity_match: Optional[Match]
    predicate_match: Optional[Match]
    partials: dict = field(default_factory=dict)  # side → {"entity_score", "predicate_score", "freq", "score"}


def score_triple(t: Triple, entity: dict[str, Match], predicate: dict[str, Match],
                 freq: dict[tuple[str, str, bool], int]) -> ScoredTriple:
    """Eq. (2): the max over the triple's two partial triples (s, p) and (p, o)."""
    pm = predicate.get(t.predicate)
    s_p = pm.score if pm else 0.0
    partials = {}
    for side, ent, inverse in (("subject", t.subject, False), ("object", t.object, True)):
        em = entity.get(ent)
        s_e = em.score if em else 0.0
        f = freq.get((ent, t.predicate, inverse), 1)
        partials[side] = {"entity_score": round(s_e, 4), "predicate_score": round(s_p, 4), "freq": f,
                          "score": partial_score(s_e, s_p, f)}
    side = max(partials, key=lambda k: partials[k]["score"])
    ent, join = (t.subject, t.object) if side == "subject" else (t.object, t.subject)
    return ScoredTriple(t, partials[side]["score"], side, ent, join, entity.get(ent), pm, partials)


@dataclass
class Path:
    triples: list[ScoredTriple]

    @property
    def score(self) -> float:
        """The running path score: the mean of its triples' scores (§4.4)."""
        return sum(t.score for t in self.triples) / len(self.triples)


def _entities(st: ScoredTriple) -> set[str]:
    return {st.triple.subject, st.triple.object}


def extend_paths(paths: list[Path], new: list[ScoredTriple], aliases: dict[str, set[str]]) -> list[Path]:
    """G_q ← extend_subgraph(G_q + T): a path grows by a triple that shares an entity (or an
    alias of one) with its last triple; every new triple also starts a path of its own."""
    grown = []
    for path in paths:
        last = set()
        for e in _entities(path.triples[-1]):
            last |= {e} | aliases.get(e, set())
        for st in new:
            if _entities(st) & last and st.triple not in [p.triple for p in path.triples]:
                grown.append(Path(path.triples + [st]))
    return paths + grown + [Path([st]) for st in new]


def passage_scores(paths: list[Path]) -> dict[str, tuple[float, Path]]:
    """Passage score = max over paths through one of its triples of s_t × path score (§4.4)."""
    best: dict[str, tuple[float, Path]] = {}
    for path in paths:
        ps = path.score
        for st in path.triples:
            value = st.score * ps
            pid = st.triple.passage_id
            if pid not in best or value > best[pid][0]:
                best[pid] = (value, path)
    return best


def final_ranking(cosine: dict[str, float], path_score: dict[str, float], mode: str,
                  path_weight: float) -> list[tuple[str, float]]:
    """The retrieved passages, best first, with their final scores. "paths" (§4.4): by passage
    score, passages no path reaches after all of those, ties by retrieval cosine.
    "retrieval+paths" (§4.2.2: retrieval scores "can be used in the final ranking and combined with
    other types of scoring"): cosine to the query that retrieved the passage + path_weight ×
    passage score."""
    if mode == "paths":
        order = sorted(cosine, key=lambda pid: (path_score.get(pid, 0.0), cosine[pid]), reverse=True)
        return [(pid, path_score.get(pid, 0.0) + 1e-3 * cosine[pid]) for pid in order]
    score = {pid: c + path_weight * path_score.get(pid, 0.0) for pid, c in cosine.items()}
    return sorted(score.items(), key=lambda kv: kv[1], reverse=True)


@dataclass
class JoinSet:
    """E_i of Algorithm 1 (the entities the next hop must contain) and how it came from E_j."""
    entities: list[str]                        # E_i: join entities, then their aliases
    aliases: list                              # SameAs records that added a name to E_i
    dropped: dict[str, str]                    # E_j entity → why it is not in E_i


def select_join_entities(scored: list[ScoredTriple], E_j: list[str], synonyms: list, mode: str = "scored",
                         min_score: float = 0.0) -> JoinSet:
    """(scored_triples, E_i) ← score_triples(q, T), Algorithm 1: each scored triple joins on the
    entity its best partial triple (eq. 2) did not match; E_i keeps those that are in E_j
    (Algorithm 2's complements), with the same_as aliases of those kept. `mode="every"` is our earlier
    reading: the other entity of every scored triple, in E_j or not."""
    in_E_j = set(E_j)
    chosen: list[str] = []
    for x in sorted(scored, key=lambda x: -x.score):
        if x.score < min_score:
            continue
        if mode == "every" or x.join_entity in in_E_j:
            chosen.append(x.join_entity)
    chosen = list(dict.fromkeys(chosen))
    picked = set(chosen)
    dropped: dict[str, str] = {}
    best_side = {}
    for x in scored:
        best_side.setdefault(x.entity, x)
    for e in E_j:
        if e in picked:
            continue
        x = best_side.get(e)
        if x is not None and x.score >= min_score:
            dropped[e] = (f"the query matched it in ({x.triple.subject}) -[{x.triple.predicate}]-> "
                          f"({x.triple.object}), so that triple joins on {x.join_entity!r} instead")
        else:
            dropped[e] = (f"its triples scored below join_min_score = {min_score}" if min_score > 0
                          else "no scored triple joins on it")
    aliases = [s for s in synonyms if s.entity in picked and s.alias not in picked]
    names = list(dict.fromkeys(chosen + [s.alias for s in aliases]))
    return JoinSet(names, aliases, dropped)
