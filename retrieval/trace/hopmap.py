"""One run's stages as one hop map: a layered graph a reader replays stage by stage.

Every stage's subgraph is merged into one graph whose nodes keep their place: layers from left to
right (the question; its clauses, sub-queries or plan steps; what each hop reached: triples,
events, propositions, entities; the passages) and, top to bottom, one lane per hop (a GRIEVER
iteration, a GEAR round, a GRASP sub-agent). For each node the map records the stage that added
it and the stage that pruned it; for each gold passage the stage that dropped it; the edges on
the shortest path from the question to each gold passage are marked. Pure: a function of the
RunResult, so the app, the Traces tab, the Benchmark drill-down and the notebook draw the same
map (retrieval/trace/hopmap_view.py draws it).

This module reads a run into the map. How a method's trace is read into lanes and layers is
`SHAPES` in hopmap_shapes.py; the map's records are in hopmap_records.py, its places in
hopmap_layout.py, what was pruned and the paths to gold in hopmap_gold.py.
"""
from __future__ import annotations

from typing import Iterable, Optional

from .hopmap_gold import gold_drops, mark_gold_paths, prune
from .hopmap_layout import LINE_CHARS, NODE_W, TOP_N, cut, layout, two_lines
from .hopmap_records import HopMap, MapEdge, MapNode, MapStage, MoreNode
from .hopmap_shapes import SHAPES, SUB, Shape, shape_for
from .hopmap_shapes import stage_lanes as lanes_of
from .model import RunResult, Stage

__all__ = ["HopMap", "MapEdge", "MapNode", "MapStage", "MoreNode", "SHAPES", "Shape", "build", "cut", "shape_for",
           "two_lines", "LINE_CHARS", "NODE_W", "TOP_N"]

_QUERY_KINDS = ("question", "query", "subquestion")


class _Keys:
    """A node's identity across stages. Stage-local ids are reused for other things ("q" is a
    rewritten query in GEAR's round 2, "pt:0" another triple each round), and one thing gets
    several ids ("q2" and "q" for one rewrite): queries are keyed by their text, passages by id,
    anything else by id unless its label disagrees (one label containing the other agrees:
    "published by" and the whole triple)."""

    def __init__(self) -> None:
        self.labels: dict[str, list[str]] = {}

    def key(self, node_id: str, kind: str, label: str) -> str:
        if kind in _QUERY_KINDS:
            return "q::" + " ".join(label.lower().split())
        if kind == "passage" or not label:
            return f"{kind}::{node_id}"
        seen = self.labels.setdefault(f"{kind}::{node_id}", [])
        low = label.lower()
        for i, other in enumerate(seen):
            if low == other or low in other or other in low:
                if len(low) > len(other):
                    seen[i] = low
                return f"{kind}::{node_id}#{i}"
        seen.append(low)
        return f"{kind}::{node_id}#{len(seen) - 1}"


def _synthetic(st: Stage, method_shape: Shape) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """Nodes a stage implies without drawing them: GRASP's rewritten statement and its DONE /
    QUERY_AGAIN decision, GEAR's reason step. (key, kind, label, [(source key, edge kind)])."""
    p, name = st.payload, st.name.split(".")[-1]
    out = []
    m = SUB.match(name)
    if name.endswith("_rewrite") and m and p.get("statement"):
        out.append((f"q::{' '.join(str(p['statement']).lower().split())}", "query", str(p["statement"]),
                    [(f"plan-step::{m.group(1)}", "rewrites")]))
    if "_evaluate_" in name and p.get("action"):
        action = str(p["action"])
        detail = p.get("answer") if action == "DONE" else p.get("next_statement")
        out.append((f"decision::{name}", "decision", f"{action}: {detail or ''}".strip(": "), []))
    if name.startswith("reason_") and "answerable" in p:
        verdict = "answerable" if p.get("answerable") else "not yet: " + str(p.get("next_question") or "")
        out.append((f"decision::{name}", "decision", verdict, []))
    return out


def build(run: RunResult, gold: Iterable[str] = (), top_n: int = TOP_N, titles: Optional[dict] = None,
          live: bool = False) -> HopMap:
    """The hop map of one run. `titles`: passage id → title, for gold passages no stage drew.
    `live`: a run being watched as its stages arrive, laid out so that what later stages learn
    moves nothing already drawn (see hopmap_layout.layout)."""
    gold = list(dict.fromkeys(gold))
    shape = shape_for(run.method)
    kinds_layer = {k: i for i, (_, kinds) in enumerate(shape.layers) for k in kinds}
    fallback_layer = len(shape.layers) - 2 if len(shape.layers) > 2 else 0
    stage_lanes, lane_names = lanes_of(run.stages, shape)
    keys = _Keys()
    nodes: dict[str, MapNode] = {}
    edges: dict[tuple[str, str, str], MapEdge] = {}
    stages: list[MapStage] = []
    question_key = "q::" + " ".join(run.question.lower().split()) if run.question.strip() else None
    plan_steps: dict[str, str] = {}   # GRASP's step number → its node key
    last_statement: dict[str, str] = {}   # GRASP's sub-agent number → its latest statement's key

    def add(i: int, key: str, kind: str, label: str, score=None) -> MapNode:
        n = nodes.get(key)
        if n is None:
            if kind == "passage" and not label:
                label = (titles or {}).get(key.split("::", 1)[1], "")
            n = nodes[key] = MapNode(key=key, kind=kind, label=cut(label or key.split("::", 1)[1]),
                                     full=label, layer=kinds_layer.get(kind, fallback_layer),
                                     lane=stage_lanes[i], added=i)
            for prefix, rkind, role in shape.roles:
                if kind == rkind and run.stages[i].name.split(".")[-1].startswith(prefix):
                    n.role = role
        elif label and len(label) > len(n.full):
            n.full, n.label = label, cut(label)
        # The run's own question is the question wherever a stage draws it (GEAR's first query
        # is the question itself): in its layer from the first stage, not moved there later.
        if kind == "question" or (kind in _QUERY_KINDS and key == question_key):
            n.kind, n.layer = "question", kinds_layer.get("question", 0)
        if not n.seen or n.seen[-1] != i:
            n.seen.append(i)
        if isinstance(score, (int, float)) and (n.score is None or score > n.score):
            n.score = float(score)
        return n

    for i, st in enumerate(run.stages):
        ms = MapStage(i, st.name, st.title, stage_lanes[i], st.status, st.latency_ms, st.tokens_in + st.tokens_out)
        stages.append(ms)
        local: dict[str, str] = {}
        g = st.subgraph
        if g is not None and g.nodes:
            ms.has_graph = True
            for nd in g.nodes:
                key = keys.key(nd.id, nd.type, nd.label)
                local[nd.id] = key
                node = add(i, key, nd.type, nd.label, nd.score)
                if nd.attrs.get("join") and not node.role:
                    node.role = "joined (E_i)"
                if nd.type == "subquestion" and st.name == "plan":
                    plan_steps[str(len(plan_steps) + 1)] = key
                pid = nd.attrs.get("passage")
                if isinstance(pid, str) and pid and nd.type != "passage":
                    # An event or proposition names the passage it came from: the hop to it.
                    pkey = f"passage::{pid}"
                    add(i, pkey, "passage", "")
                    if (key, pkey, "from_passage") not in edges:
                        edges[(key, pkey, "from_passage")] = MapEdge(key, pkey, "from_passage", "from passage", i)
            for e in g.edges:
                s, t = local.get(e.source), local.get(e.target)
                if s is None or t is None or s == t:
                    continue
                ek = (s, t, e.type)
                if ek not in edges:
                    edges[ek] = MapEdge(s, t, e.type, e.label or e.type, i, e.weight)
                elif isinstance(e.weight, (int, float)) and (edges[ek].weight is None or e.weight > edges[ek].weight):
                    edges[ek].weight = e.weight
        if g is not None and g.nodes and isinstance(st.payload.get("ranked_propositions"), list):
            _rank_votes(st.payload, g, local, nodes, edges)
        sub = SUB.match(st.name.split(".")[-1])
        statement = st.payload.get("statement")
        if sub and isinstance(statement, str) and statement and g is not None and g.nodes:
            # A sub-agent's search: its statement (a QUERY_AGAIN's new one too) → what it found.
            skey = keys.key("", "query", statement)
            add(i, skey, "query", statement)
            last_statement[sub.group(1)] = skey
            targets = {local[e.target] for e in g.edges if e.target in local}
            for key in dict.fromkeys(local.values()):
                if key not in targets and nodes[key].kind not in _QUERY_KINDS and (skey, key, "searched") not in edges:
                    edges[(skey, key, "searched")] = MapEdge(skey, key, "searched", "searched", i)
        for key, kind, label, links in _synthetic(st, shape):
            if kind == "decision" and sub and sub.group(1) in last_statement:
                links = [*links, (last_statement[sub.group(1)], "decides")]
            if kind == "query" and sub:
                last_statement[sub.group(1)] = key
            ms.has_graph = True
            add(i, key, kind, label)
            for src, ekind in links:
                src = plan_steps.get(src.split("::", 1)[1], src) if src.startswith("plan-step::") else src
                if src in nodes and (src, key, ekind) not in edges:
                    edges[(src, key, ekind)] = MapEdge(src, key, ekind, ekind, i)
        chosen = st.payload.get("selected")
        if "_select_" in st.name and isinstance(chosen, list):
            # GRASP's entity selection names what it kept: those of this lane's entities are marked.
            names = {str(x).lower() for x in chosen}
            for n in nodes.values():
                if n.kind == "entity" and n.lane == stage_lanes[i] and n.full.lower() in names and not n.chosen:
                    n.chosen, n.chosen_at = "LLM-selected", i
        for prefix, role in shape.selects:
            if st.name.split(".")[-1].startswith(prefix) and g is not None:
                for nd in g.nodes:
                    n = nodes[local[nd.id]]
                    if n.kind in ("event", "passage", "triple") and n.added < i and not n.chosen:
                        n.chosen, n.chosen_at = role, i

    ranked = run.ranked_ids()
    known = {**(titles or {}), **{r.passage_id: r.title for r in run.ranked if r.title}}
    for n in nodes.values():
        pid = n.key.split("::", 1)[1]
        if n.kind == "passage" and known.get(pid) and (not n.full or pid.startswith(n.full.rstrip("…"))):
            n.full, n.label = known[pid], cut(known[pid])
    for r, pid in enumerate(ranked):
        n = nodes.get(f"passage::{pid}")
        if n is not None:
            n.rank = r + 1
    gold_set = set(gold)
    for pid in gold:
        n = nodes.get(f"passage::{pid}")
        if n is not None:
            n.gold = True

    prune(nodes, stages, set(ranked))
    gold_drops(run, gold, nodes, stages, titles or {})
    for pid in gold:
        # A run still arriving has not missed what it has not reached yet.
        if f"passage::{pid}" not in nodes and stages and (run.ranked or not live):
            # Never reached: still drawn where the passages are, so the map shows what it missed.
            label = (titles or {}).get(pid) or pid
            nodes[f"passage::{pid}"] = MapNode(key=f"passage::{pid}", kind="passage", label=cut(label), full=label,
                                               layer=kinds_layer.get("passage", len(shape.layers) - 1),
                                               lane=max(stage_lanes) if live else 0,   # live: below, moving nothing
                                               added=0, gold=True, missed=True)
    edge_list = list(edges.values())
    mark_gold_paths(nodes, edge_list, run)
    # Only lanes that hold nodes are drawn (GEAR's "start" holds only its profile stage).
    used = sorted({n.lane for n in nodes.values()})
    renumber = {old: new for new, old in enumerate(used)}
    for n in nodes.values():
        n.lane = renumber[n.lane]
    for ms in stages:
        ms.lane = renumber.get(ms.lane, -1)
    hm = HopMap(method=run.method, question=run.question, layers=[t for t, _ in shape.layers],
                lanes=[lane_names[i] for i in used], nodes=[], edges=edge_list, stages=stages, more=[],
                top_n=top_n, gold_total=len(gold_set), gold_found=sum(1 for p in ranked if p in gold_set))
    layout(hm, list(nodes.values()), live)
    return hm


def _rank_votes(payload: dict, g, local: dict[str, str], nodes: dict[str, MapNode],
                edges: dict[tuple[str, str, str], MapEdge]) -> None:
    """GRASP §3.3 RankVote, as weights: each passage's score (the sum of its propositions' votes
    w_j = 1/(1+R(p_j)), or 1 each when uniform) on the passage, each proposition's w_j on its edge
    to the passage. The stage's subgraph draws the links; its payload holds the votes."""
    for p in payload.get("passages") or []:
        if not isinstance(p, dict):
            continue
        n, v = nodes.get(f"passage::{p.get('passage_id')}"), p.get("votes")
        if n is not None and isinstance(v, (int, float)) and (n.votes is None or v > n.votes):
            n.votes = float(v)
    by_text = {nd.label: local[nd.id] for nd in g.nodes if nd.type == "proposition" and nd.id in local}
    links: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for e in g.edges:
        s, t = local.get(e.source), local.get(e.target)
        if (s, t, e.type) in edges:
            links.setdefault((s, t), []).append((s, t, e.type))
    for rp in payload["ranked_propositions"]:
        if not isinstance(rp, dict) or not isinstance(rp.get("w"), (int, float)):
            continue
        for ek in links.get((by_text.get(rp.get("proposition")), f"passage::{rp.get('passage_id')}"), ()):
            edges[ek].weight = max(float(rp["w"]), edges[ek].weight or 0.0)
