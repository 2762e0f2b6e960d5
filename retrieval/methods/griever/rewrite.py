"""§4.5 Heuristic query rewriting."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .clauses import CONNECTORS
from .scoring import ScoredTriple

_ABSORB_BEFORE = {"the", "a", "an", *CONNECTORS}
_MAX_GAP_WORDS = 4  # entity and relation mentions closer than this are removed as one phrase


@dataclass
class Rewrite:
    before: str
    after: str
    removed: list[str]
    inserted: str
    reason: str  # why this rewrite, or why none

    @property
    def changed(self) -> bool:
        return self.after != self.before


def _absorb_left(q: str, start: int) -> int:
    """Pull the cut left over a determiner or relative connector right before it
    ("the publisher of …" → the whole phrase goes, not "publisher of …")."""
    m = re.search(r"(\w+)\s+$", q[:start])
    while m and m.group(1).lower() in _ABSORB_BEFORE:
        start = m.start(1)
        m = re.search(r"(\w+)\s+$", q[:start])
    return start


def rewrite_query(q: str, best: Optional[ScoredTriple], min_entity: float, min_predicate: float) -> Rewrite:
    """Remove the matched entity mention (and the relation words, when matched), and put the
    triple's unmatched entity in their place: "Who married the publisher of The North Star?"
    with (The North Star, published by, Frederick Douglass) → "Who married Frederick Douglass?"."""
    if best is None or best.entity_match is None:
        return Rewrite(q, q, [], "", "no scored triple: query kept")
    em, pm = best.entity_match, best.predicate_match
    if em.score < min_entity:
        return Rewrite(q, q, [], "", f"best entity match {em.score:.2f} < {min_entity}: query kept")
    # (start, end, replacement): the entity mention gets the join entity, relation words go
    cuts = [(em.span[0], em.span[1], best.join_entity)]
    if pm is not None and pm.score >= min_predicate:
        disjoint = pm.span[1] <= em.span[0] or pm.span[0] >= em.span[1]
        gap = q[min(em.span[1], pm.span[1]):max(em.span[0], pm.span[0])]
        if disjoint and len(gap.split()) <= _MAX_GAP_WORDS:
            cuts = [(min(em.span[0], pm.span[0]), max(em.span[1], pm.span[1]), best.join_entity)]
        elif disjoint:
            cuts.append((pm.span[0], pm.span[1], ""))
    cuts.sort()
    removed = [q[a:b] for a, b, _ in cuts]
    out, cursor = [], 0
    for a, b, replacement in cuts:
        a = _absorb_left(q, a)
        out += [q[cursor:a], replacement]
        cursor = b
    out.append(q[cursor:])
    after = re.sub(r"\s+", " ", "".join(out)).strip()
    after = re.sub(r"\s+([?.,!])", r"\1", after)
    return Rewrite(q, after, removed, best.join_entity,
                   f"matched {em.name!r} via {em.ngram!r} ({em.score:.2f})"
                   + (f" and relation {pm.name!r} via {pm.ngram!r} ({pm.score:.2f})" if pm else ""))
