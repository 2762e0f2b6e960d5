"""Query-time expansion (SAG §3.4): reverse joins event → entity frontier → new events, H hops.

Written over two join functions so it can run on a hand-made table as well as the KB.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable


@dataclass
class Hop:
    hop: int
    frontier: list[int]                       # entities explored this hop, after pruning
    pruned: list[int] = field(default_factory=list)  # frontier entities over the budget
    new_events: list[int] = field(default_factory=list)
    via: dict[int, list[int]] = field(default_factory=dict)  # new event → frontier entities that reached it


def expand(seed_events: Iterable[int], seed_entities: Iterable[int],
           entities_of_events: Callable[[list[int]], dict[int, list[int]]],
           events_of_entities: Callable[[list[int]], dict[int, list[int]]],
           hops: int, budget: int, rank_entities: Callable[[list[int]], list[int]]) -> list[Hop]:
    """Each hop explores only entities and events not seen before (§3.4). The frontier is the
    entities of the newest events minus every entity already used; `rank_entities` orders it so
    the pruning budget keeps the best."""
    seen_events = list(dict.fromkeys(seed_events))
    seen_set = set(seen_events)
    used_entities = set(seed_entities)
    newest = list(seen_events)
    out: list[Hop] = []
    for h in range(1, hops + 1):
        links = entities_of_events(newest)
        frontier = list(dict.fromkeys(e for ev in newest for e in links.get(ev, []) if e not in used_entities))
        ranked = rank_entities(frontier) if frontier else []
        keep, pruned = ranked[:budget], ranked[budget:]
        used_entities.update(frontier)  # pruned ones are not explored later either
        reached = events_of_entities(keep) if keep else {}
        hop = Hop(h, keep, pruned)
        for ent in keep:
            for ev in reached.get(ent, []):
                if ev not in seen_set:
                    seen_set.add(ev)
                    hop.new_events.append(ev)
                    hop.via[ev] = [ent]
                elif ev in hop.via and ent not in hop.via[ev]:
                    hop.via[ev].append(ent)
        out.append(hop)
        newest = hop.new_events
        if not newest:
            break
    return out
