"""One run read back: where did each gold passage appear, and where was it lost? (Across a data set:
traces/stats/funnel.py.)"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from .model import RunResult, Stage, dumps


def mentions(stage: Stage, passage_id: str) -> bool:
    if stage.subgraph and any(n.id == passage_id for n in stage.subgraph.nodes):
        return True
    return passage_id in json.dumps(stage.payload, default=str)


@dataclass
class GoldFate:
    passage_id: str
    rank: Optional[int]            # 1-based rank in the final list, None if missed
    last_seen: Optional[str]       # name of the last stage that held it (before "ranking")
    first_seen: Optional[str]


def gold_fates(run: RunResult, gold: Iterable[str]) -> list[GoldFate]:
    """For each gold passage: its final rank, or the last stage it was seen in before it was lost."""
    ranked = run.ranked_ids()
    out = []
    for pid in gold:
        seen = [s.name for s in run.stages if s.name != "ranking" and mentions(s, pid)]
        rank = ranked.index(pid) + 1 if pid in ranked else None
        out.append(GoldFate(pid, rank, seen[-1] if seen else None, seen[0] if seen else None))
    return out


_ROUND = re.compile(r"^(?:rrf|retrieve)_(\d+)$")  # GEAR's per-round C_q(n); GRIEVER's per-iteration R_i


def recall_by_round(run: RunResult, gold: Iterable[str]) -> list[tuple[int, float]]:
    """GEAR Fig. 2: the share of gold passages gathered by round n (cumulative over rounds)."""
    gold = list(gold)
    found: set[str] = set()
    out = []
    for st in run.stages:
        m = _ROUND.match(st.name)
        if m and gold:
            found |= {g for g in gold if mentions(st, g)}
            out.append((int(m.group(1)), len(found) / len(gold)))
    return out


def gold_presence(run: RunResult, gold: Iterable[str]) -> dict:
    """What a data-set funnel needs of one run, small enough to keep beside it: the stage names in
    order, and for each gold passage the stages that held it and its final rank.
    {"stages": [...], "gold": {pid: {"seen": [stage index, ...], "rank": int | None}}}"""
    gold = list(dict.fromkeys(gold))
    ranked = run.ranked_ids()
    seen: dict[str, list[int]] = {g: [] for g in gold}
    for i, st in enumerate(run.stages):
        if st.name == "ranking":
            held = set(ranked)  # the final list itself, not the longer list the stage may show
        else:
            nodes = {n.id for n in st.subgraph.nodes} if st.subgraph else set()
            text = dumps(st.payload).decode()  # once a stage, not once a gold passage
            held = {g for g in gold if g in nodes or g in text}
        for g in gold:
            if g in held:
                seen[g].append(i)
    return {"stages": [st.name for st in run.stages],
            "gold": {g: {"seen": seen[g], "rank": ranked.index(g) + 1 if g in ranked else None} for g in gold}}
