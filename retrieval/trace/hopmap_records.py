"""The records of a hop map: its nodes, edges, stages and "+M more" cells (retrieval/trace/hopmap.py
builds them, hopmap_layout.py places them, hopmap_view.py draws them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


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
    beyond: dict = field(default_factory=dict)   # (lane, layer) → nodes past ALL_MAX (hopmap_layout), left out
