"""One run's stages as one hop map: a layered graph a reader replays stage by stage.

Every stage's subgraph is merged into one graph whose nodes keep their place: layers from left to
right (the question; its clauses, sub-queries or plan steps; what each hop reached: triples,
events, propositions, entities; the passages) and, top to bottom, one lane per hop (a GRIEVER
iteration, a GEAR round, a GRASP sub-agent). For each node the map records the stage that added
it and the stage that pruned it; for each gold passage the stage that dropped it; the edges on
the shortest path from the question to each gold passage are marked. Pure: a function of the
RunResult, so the app, the Traces tab, the Benchmark drill-down and the notebook draw the same
map (retrieval/trace/hopmap_view.py draws it).

How a method's trace is read into lanes and layers is this module's `SHAPES` table, keyed by
method name: a method knows nothing of its drawing, and a method without a shape (a plugin) gets
the default one.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .gold import gold_fates
from .model import RunResult, Stage

TOP_N = 6          # nodes shown per lane and layer before "+M more" (HOPTRACE_HOPMAP_TOP_N overrides)
ALL_MAX = 40       # with "all nodes" on, at most this many a cell: past it a map is a wall, not a view
LABEL_CHARS = 44   # a node's label is cut here; the full text is its tooltip and its detail pane
LINE_CHARS = 18    # two lines of this many characters fit a node's box at 14 px (measured in Chromium)

# Layout in vis-network's canvas units (1 unit = 1 px at zoom 1).
NODE_W = 176
COL_GAP = 30
ROW_H = 56
LANE_GAP = 34
TOP = 40


@dataclass(frozen=True)
class Shape:
    """How one method's trace reads as a map: its layers left to right (node kinds), what a lane is
    called, which stages select among what came before (for SAG: seed / expanded / selected)."""
    layers: tuple[tuple[str, tuple[str, ...]], ...]   # (layer title, node kinds in it)
    lane: str = "hop"                                  # "iteration 1", "round 1", "sub-agent 1"
    roles: tuple[tuple[str, str, str], ...] = ()       # (stage name prefix, node kind, role of what it adds)
    selects: tuple[tuple[str, str], ...] = ()          # (stage name prefix, role of what it keeps)


DEFAULT_SHAPE = Shape(layers=(("question", ("question",)), ("queries · steps", ("subquestion", "query", "decision")),
                              ("triples · events", ("triple", "event", "proposition")),
                              ("entities", ("entity",)), ("passages", ("passage",))))

SHAPES: dict[str, Shape] = {
    # §4.2 clause splits and rewrites → §4.3 shortlisted, scored triples → joined entities E_i → §4.4 passages
    "griever": Shape(layers=(("question", ("question",)), ("clauses · rewrites", ("subquestion", "query", "decision")),
                             ("triples (score)", ("triple",)), ("entities · E_i", ("entity",)),
                             ("passages", ("passage",))), lane="iteration",
                     roles=(("join", "entity", "joined (E_i)"),)),
    # §3 base retrieval and rewrites → beams of triples (tripleLink, Algorithm 1) → gist memory → passageLink
    "gear": Shape(layers=(("question", ("question",)), ("queries · reasons", ("subquestion", "query", "decision")),
                          ("triples · memory", ("triple",)), ("entities", ("entity",)),
                          ("passages", ("passage",))), lane="round",
                  roles=(("triple_link", "triple", "linked"), ("beam_search", "triple", "beam"),
                         ("gist_memory", "triple", "in memory"))),
    # §3.5 U_q → Û_q → seed events E_R → expanded E_cand → LLM-selected E* → chunks
    "sag": Shape(layers=(("question", ("question",)), ("U_q · Û_q", ("subquestion", "query", "decision")),
                         ("entities", ("entity",)), ("events", ("event",)),
                         ("chunks", ("passage",))), lane="hop",
                 roles=(("seed_events", "event", "seed event"), ("expansion", "event", "expanded event")),
                 selects=(("rerank", "LLM-selected"),)),
    # §3 plan → per sub-agent: rewritten statement → propositions → selected entities → RankVote passages
    "grasp": Shape(layers=(("question", ("question",)), ("plan", ("subquestion",)),
                           ("statements", ("query", "decision")), ("propositions", ("proposition",)),
                           ("entities", ("entity",)), ("passages", ("passage",))), lane="sub-agent"),
}
SHAPES["naivege"] = SHAPES["gear"]

_ROUND = re.compile(r"_(\d+)$")
_SUB = re.compile(r"^sub(\d+)_")
_QUERY_KINDS = ("question", "query", "subquestion")


@dataclass
class MapNode:
    key: str
    kind: str
    label: str                       # cut to LABEL_CHARS
    full: str                        # the whole text (tooltip, detail pane)
    layer: int
    lane: int
    added: int                       # index of the stage that first held it
    seen: list[int] = field(default_factory=list)   # every stage index that held it
    pruned: Optional[int] = None     # the stage that dropped it (it is not in any later one)
    score: Optional[float] = None    # the largest score a stage gave it
    votes: Optional[float] = None    # a passage's largest RankVote score (GRASP)
    gold: bool = False
    dropped_gold: Optional[int] = None  # a gold passage: the stage that lost it
    rank: Optional[int] = None       # a passage's final rank (1-based)
    role: str = ""                   # what its adding stage made it (seed event, beam, joined …)
    chosen: str = ""                 # a later stage that kept it (LLM-selected, RankVote pick)
    chosen_at: Optional[int] = None  # that stage's index
    hidden: bool = False             # beyond the top N of its cell: shown under "+M more"
    missed: bool = False             # a gold passage no stage reached: drawn as the target it was
    x: float = 0.0
    y: float = 0.0
    x_all: float = 0.0               # its place with every cell expanded
    y_all: float = 0.0


@dataclass
class MapEdge:
    source: str
    target: str
    kind: str
    label: str
    added: int
    weight: Optional[float] = None
    gold_path: bool = False


@dataclass
class MapStage:
    index: int
    name: str
    title: str
    lane: int
    status: str
    latency_ms: float
    tokens: int
    added: int = 0                   # nodes it added
    pruned: int = 0                  # nodes it dropped
    gold_dropped: list[str] = field(default_factory=list)   # gold passages' labels
    has_graph: bool = False


@dataclass
class MoreNode:
    """The "+M more" of one cell (layer × lane) whose nodes beyond the top N are hidden."""
    key: str
    layer: int
    lane: int
    count: int
    x: float
    y: float
    first: int                       # the earliest stage any hidden node appears in


@dataclass
class HopMap:
    method: str
    question: str
    layers: list[str]
    lanes: list[str]
    nodes: list[MapNode]
    edges: list[MapEdge]
    stages: list[MapStage]
    more: list[MoreNode]
    top_n: int
    gold_total: int = 0
    gold_found: int = 0
    lane_y: list[tuple[float, float]] = field(default_factory=list)       # compact: (top, bottom)
    lane_y_all: list[tuple[float, float]] = field(default_factory=list)   # expanded
    layer_x: list[float] = field(default_factory=list)
    beyond: dict = field(default_factory=dict)   # (lane, layer) → nodes past ALL_MAX, left out of the map


def shape_for(method: str) -> Shape:
    """A method's shape by its name or the name it was derived from ("griever-no-rewrite" → griever)."""
    base = method.split(" [")[0].strip().lower()
    for name in sorted(SHAPES, key=len, reverse=True):
        if base == name or base.startswith(name + "-") or base.startswith(name + "_"):
            return SHAPES[name]
    return DEFAULT_SHAPE


def cut(text: str, n: int = LABEL_CHARS) -> str:
    text = " ".join(str(text).split())
    if text.startswith("(") and text.endswith(")") and text.count(", ") >= 2:   # a triple "(s, r, o)"
        text = text[1:-1].replace(", ", " · ")
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def two_lines(text: str, width: int = LINE_CHARS) -> str:
    """A label on at most two lines of `width` characters, broken between words where it can and
    cut with "…": a box of fixed size holds it, so no two labels overlap."""
    rest = " ".join(str(text).split())
    lines = []
    while rest and len(lines) < 2:
        if len(rest) <= width:
            lines.append(rest)
            rest = ""
            break
        if len(lines) == 1:                     # the last line: as much as fits, then "…"
            lines.append(rest[: width - 1].rstrip() + "…")
            rest = ""
            break
        cut_at = rest.rfind(" ", 0, width + 1)
        if cut_at < width // 3:                 # no break worth taking: break the word
            cut_at = width
        lines.append(rest[:cut_at].rstrip())
        rest = rest[cut_at:].lstrip()
    return "\n".join(lines)


def _stage_lanes(stages: list[Stage], shape: Shape) -> tuple[list[int], list[str]]:
    """Each stage's lane, and the lanes' names. A stage's round comes from `_N` or `subN_` in its
    name; a stage without one belongs to the lane before it, those before any numbered stage to
    "start", those after the last numbered one to "end"."""
    raw = []
    for st in stages:
        name = st.name.split(".")[-1]   # a nested method's stages: "griever.shortlist_1"
        m = _SUB.match(name) or _ROUND.search(name)
        raw.append(int(m.group(1)) if m else None)
    numbered = [i for i, r in enumerate(raw) if r is not None]
    if not numbered:
        return [0] * len(stages), ["run"]
    rounds = sorted({r for r in raw if r is not None})
    names = ["start"] + [f"{shape.lane} {r}" for r in rounds] + ["end"]
    lane_of = {r: i + 1 for i, r in enumerate(rounds)}
    out, cur = [], 0
    for i, r in enumerate(raw):
        if r is not None:
            cur = lane_of[r]
        elif i > numbered[-1]:
            cur = len(names) - 1
        out.append(cur)
    return out, names


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
    m = _SUB.match(name)
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
    moves nothing already drawn (see `_layout`)."""
    gold = list(dict.fromkeys(gold))
    shape = shape_for(run.method)
    kinds_layer = {k: i for i, (_, kinds) in enumerate(shape.layers) for k in kinds}
    fallback_layer = len(shape.layers) - 2 if len(shape.layers) > 2 else 0
    stage_lanes, lane_names = _stage_lanes(run.stages, shape)
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
        sub = _SUB.match(st.name.split(".")[-1])
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
                    if n.kind in ("event", "passage") and n.added < i and not n.chosen:
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

    _prune(nodes, stages, set(ranked))
    _gold_drops(run, gold, nodes, stages, titles or {})
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
    _mark_gold_paths(nodes, edge_list, run)
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
    _layout(hm, list(nodes.values()), live)
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


def _prune(nodes: dict[str, MapNode], stages: list[MapStage], final: set[str]) -> None:
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


def _gold_drops(run: RunResult, gold: list[str], nodes: dict[str, MapNode], stages: list[MapStage],
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


def _mark_gold_paths(nodes: dict[str, MapNode], edges: list[MapEdge], run: RunResult) -> None:
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


def _importance(n: MapNode) -> tuple:
    """Which nodes of a cell are shown first: gold, ranked, kept to the end, chosen by a later
    stage, then by score and order."""
    return (not n.gold, n.rank is None, n.pruned is not None, not n.chosen, -(n.score or 0.0), n.added, n.label)


def _layout(hm: HopMap, nodes: list[MapNode], live: bool = False) -> None:
    """Fixed places: x by layer, y by lane then importance within the cell. The same run gives the
    same places, and a node's place does not depend on the stage shown. Two layouts: the compact
    one (top N a cell, "+M more") and the one with every cell expanded.

    `live`: importance is only known at the end (the ranking, what later stages keep), so a run
    being watched orders each cell by arrival and gives every lane the height of a full cell:
    a stage that arrives adds below what is drawn and moves nothing (the compact layout)."""
    cells: dict[tuple[int, int], list[MapNode]] = {}
    for n in nodes:   # in the order the stages added them
        cells.setdefault((n.lane, n.layer), []).append(n)
    gold_path_nodes = {k for e in hm.edges if e.gold_path for k in (e.source, e.target)}
    dropped: set[str] = set()
    for key, cell in cells.items():
        if not live:
            cell.sort(key=lambda n: (n.key not in gold_path_nodes and not n.gold, *_importance(n)))
        if len(cell) > max(ALL_MAX, hm.top_n):
            hm.beyond[key] = len(cell) - max(ALL_MAX, hm.top_n)
            dropped |= {n.key for n in cell[max(ALL_MAX, hm.top_n):]}
            del cell[max(ALL_MAX, hm.top_n):]
    if dropped:   # what is past the cap leaves the map, its edges with it; "+M more" still counts it
        nodes = [n for n in nodes if n.key not in dropped]
        hm.edges = [e for e in hm.edges if e.source not in dropped and e.target not in dropped]
    hm.layer_x = [TOP + 60 + li * (NODE_W + COL_GAP) for li in range(len(hm.layers))]
    for compact in (True, False):
        y = TOP
        spans = []
        for lane in range(len(hm.lanes)):
            rows = 0
            for li in range(len(hm.layers)):
                cell = cells.get((lane, li), [])
                shown = min(len(cell), hm.top_n) + (1 if len(cell) > hm.top_n else 0) if compact else len(cell)
                rows = max(rows, hm.top_n + 1 if live and compact else shown)
            top = y
            for li in range(len(hm.layers)):
                cell = cells.get((lane, li), [])
                for r, n in enumerate(cell):
                    if compact:
                        n.hidden = r >= hm.top_n
                        n.x, n.y = hm.layer_x[li], top + (min(r, hm.top_n)) * ROW_H
                    else:
                        n.x_all, n.y_all = hm.layer_x[li], top + r * ROW_H
                if compact and len(cell) > hm.top_n:
                    hidden = cell[hm.top_n:]
                    hm.more.append(MoreNode(f"more::{lane}::{li}", li, lane,
                                            len(hidden) + hm.beyond.get((lane, li), 0), hm.layer_x[li],
                                            top + hm.top_n * ROW_H, min(n.added for n in hidden)))
            bottom = top + max(rows, 1) * ROW_H
            spans.append((top - ROW_H / 2 + 4, bottom - ROW_H / 2 - 4))
            y = bottom + LANE_GAP
        if compact:
            hm.lane_y = spans
        else:
            hm.lane_y_all = spans
    hm.nodes = sorted(nodes, key=lambda n: (n.lane, n.layer, n.y))
