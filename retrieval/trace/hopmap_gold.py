"""What a hop map says of loss: the stage that pruned each node, the stage that lost each gold
passage, and the shortest path from the question to each gold passage."""
from __future__ import annotations

from collections import deque

from .gold import gold_fates
from .hopmap_layout import cut
from .hopmap_records import MapEdge, MapNode, MapStage
from .model import RunResult


def prune(nodes: dict[str, MapNode], stages: list[MapStage], final: set[str]) -> None:
    """A node is pruned by the first stage after its last sighting that holds nodes of its kind in
    its lane (GRIEVER's join keeps E_i of the shortlist's entities, SAG's rerank keeps E* of the
    expanded events, GEAR's gist memory keeps some of the beams' triples). A passage not in the
    final ranking is pruned by the next stage holding passages in any lane, else by the ranking."""
    held: dict[tuple[int, str], set[int]] = {}   # (lane, kind) → stage indexes holding that kind
    held_passages: set[int] = set()
    for n in nodes.values():
        for i in n.seen:
            held.setdefault((stages[i].lane, n.kind), set()).add(i)
            if n.kind == "passage":
                held_passages.add(i)
    last_stage = len(stages) - 1
    for n in nodes.values():
        if n.kind in ("question", "decision"):
            continue
        last = n.seen[-1]
        if n.kind == "passage":
            if n.key.split("::", 1)[1] in final:
                continue
            later = sorted(i for i in held_passages if i > last)
            n.pruned = later[0] if later else (last_stage if last < last_stage else None)
        else:
            later = sorted(i for i in held.get((stages[last].lane, n.kind), ()) if i > last)
            n.pruned = later[0] if later else None
        if n.pruned is not None:
            stages[n.pruned].pruned += 1
    for n in nodes.values():
        stages[n.added].added += 1   # (a never-reached gold passage is added after this count)


def gold_drops(run: RunResult, gold: list[str], nodes: dict[str, MapNode], stages: list[MapStage],
                titles: dict) -> None:
    """Each gold passage a stage held and a later one lost: marked at the stage that lost it."""
    for fate in gold_fates(run, gold):
        if fate.rank is not None or fate.last_seen is None:
            continue
        n = nodes.get(f"passage::{fate.passage_id}")
        label = (n.full if n else "") or titles.get(fate.passage_id) or fate.passage_id
        names = [s.name for s in stages]
        last = max(i for i, s in enumerate(names) if s == fate.last_seen)
        at = n.pruned if n is not None and n.pruned is not None else min(last + 1, len(stages) - 1)
        if n is not None:
            n.dropped_gold = at
        stages[at].gold_dropped.append(cut(label))


def mark_gold_paths(nodes: dict[str, MapNode], edges: list[MapEdge], run: RunResult) -> None:
    """The shortest path (edges taken either way) from the question to each gold passage drawn,
    without the final ranking's question → passage edges, which would make every path one hop; a
    gold passage reached only there keeps that edge."""
    root = next((n.key for n in nodes.values() if n.kind == "question"), None)
    if root is None:
        return
    final_stages = {i for i, st in enumerate(run.stages) if st.name in ("ranking", "final_rrf")}
    reached: set[str] = set()   # gold passages whose path is marked (the final edges only for the rest)
    for use_final in (False, True):
        adj: dict[str, list[tuple[str, int]]] = {}
        for ei, e in enumerate(edges):
            if e.added in final_stages and not use_final:
                continue
            adj.setdefault(e.source, []).append((e.target, ei))
            adj.setdefault(e.target, []).append((e.source, ei))
        parent: dict[str, tuple[str, int]] = {}
        seen = {root}
        todo = deque([root])
        while todo:
            cur = todo.popleft()
            for nxt, ei in adj.get(cur, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    parent[nxt] = (cur, ei)
                    todo.append(nxt)
        for n in nodes.values():
            if not n.gold or n.key not in parent or n.key in reached:
                continue
            reached.add(n.key)
            cur = n.key
            while cur in parent:
                cur, ei = parent[cur]
                edges[ei].gold_path = True
