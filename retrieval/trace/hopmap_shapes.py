"""How a method's trace reads as a hop map: its layers left to right, what a lane is called, and
which lane each stage belongs to. Keyed by method name, so a method knows nothing of its drawing;
a method without a shape (a plugin) gets the default one."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Stage

ROUND = re.compile(r"_(\d+)$")      # "shortlist_2": GRIEVER's iteration, GEAR's round
SUB = re.compile(r"^sub(\d+)_")     # "sub2_rewrite": GRASP's sub-agent


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
    # query to triple → recognition memory keeps facts → their phrases seed PPR → mass on phrases → passages
    "hipporag2": Shape(layers=(("question", ("question",)), ("facts (score)", ("triple",)),
                               ("phrases (% of reset · of PPR mass)", ("entity",)), ("passages", ("passage",))),
                       lane="hop",
                       roles=(("seeds", "entity", "PPR seed"), ("ppr", "entity", "reached by PPR")),
                       selects=(("recognition_memory", "LLM-selected"),)),
}
SHAPES["naivege"] = SHAPES["gear"]


def shape_for(method: str) -> Shape:
    """A method's shape by its name or the name it was derived from ("griever-no-rewrite" → griever)."""
    base = method.split(" [")[0].strip().lower()
    for name in sorted(SHAPES, key=len, reverse=True):
        if base == name or base.startswith(name + "-") or base.startswith(name + "_"):
            return SHAPES[name]
    return DEFAULT_SHAPE



def stage_lanes(stages: list[Stage], shape: Shape) -> tuple[list[int], list[str]]:
    """Each stage's lane, and the lanes' names. A stage's round comes from `_N` or `subN_` in its
    name; a stage without one belongs to the lane before it, those before any numbered stage to
    "start", those after the last numbered one to "end"."""
    raw = []
    for st in stages:
        name = st.name.split(".")[-1]   # a nested method's stages: "griever.shortlist_1"
        m = SUB.match(name) or ROUND.search(name)
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
