"""A user retriever's hits, as given, mapped to this KB's passages.

A hit is a passage id, a title, or a dict `{"id" | "title" | "text", "score"}`. It maps by id,
else by exact title, else by normalised text (whitespace and case folded). What maps nowhere,
repeats a passage or lies past k stays in the trace, counted and named: a retriever with its own
index sees exactly which of its answers this KB does not hold.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InputError
from ...trace.model import RankedPassage
from .kbview import KBView

SHOWN = 20  # unmapped hits named in a stage's payload; the count is always whole


@dataclass
class Mapped:
    ranked: list[RankedPassage] = field(default_factory=list)
    by: dict[str, int] = field(default_factory=dict)          # "id" | "title" | "text" → hits mapped so
    unmapped: list[dict] = field(default_factory=list)         # {rank, hit, why}
    duplicates: list[dict] = field(default_factory=list)       # {rank, passage_id, first_rank}
    returned: int = 0
    beyond_k: int = 0

    def problems(self, k: int) -> list[str]:
        """What the retriever is told, one sentence a kind."""
        out = []
        if self.unmapped:
            out.append(f"{len(self.unmapped)} of {self.returned} hits are not in this KB")
        if self.duplicates:
            n = len(self.duplicates)
            out.append(f"{n} hit{'s' if n != 1 else ''} repeat{'' if n != 1 else 's'} a passage ranked higher "
                       "(kept once)")
        if self.beyond_k:
            out.append(f"{self.returned} hits returned for k = {k}; the first {k} count")
        return out

    def payload(self, k: int) -> dict:
        return {"returned": self.returned, "mapped": len(self.ranked), "mapped_by": self.by,
                "not_in_kb": len(self.unmapped), "not_in_kb_first": self.unmapped[:SHOWN],
                "duplicates": self.duplicates[:SHOWN], "beyond_k": self.beyond_k, "problems": self.problems(k)}


def _parse(hit: Any, rank: int) -> tuple[dict, float]:
    if isinstance(hit, str):
        return {"id": hit}, 0.0
    if isinstance(hit, (tuple, list)) and len(hit) == 2 and isinstance(hit[0], str):
        return {"id": hit[0]}, float(hit[1])
    if isinstance(hit, dict):
        keys = {k: str(hit[k]) for k in ("id", "title", "text") if hit.get(k) not in (None, "")}
        if not keys:
            raise InputError(f"hit {rank} has none of 'id', 'title', 'text': {str(hit)[:120]}")
        try:
            score = float(hit.get("score", 0.0) or 0.0)
        except (TypeError, ValueError):
            raise InputError(f"hit {rank}: 'score' should be a number, got {hit.get('score')!r:.60}") from None
        return keys, score
    raise InputError(f"hit {rank} should be a passage id, a title or a dict with id / title / text, "
                     f"got {type(hit).__name__}")


def map_hits(hits: Any, kb: KBView, k: int) -> Mapped:
    """Hits in rank order → the KB's ranking, keeping what did not map."""
    if not isinstance(hits, (list, tuple)):
        raise InputError(f"a retriever should return a list of hits, best first; got {type(hits).__name__}")
    out = Mapped(returned=len(hits), beyond_k=max(0, len(hits) - k))
    seen: dict[str, int] = {}
    n = len(hits)
    parsed = [_parse(hit, rank) for rank, hit in enumerate(hits, 1)]
    known = kb.existing([keys["id"] for keys, _ in parsed if "id" in keys])
    for rank, (keys, score) in enumerate(parsed, 1):
        pid, how = None, None
        by_title = kb.ids_by_title(keys["title"]) if "title" in keys else []
        by_text = kb.id_by_text(keys["text"]) if "text" in keys else None
        if "id" in keys and keys["id"] in known:
            pid, how = keys["id"], "id"
        elif by_title and (len(by_title) == 1 or by_text not in by_title):
            pid, how = by_title[0], "title"
        elif by_text:   # also where several passages share the title: the text says which
            pid, how = by_text, "text"
        if pid is None:
            out.unmapped.append({"rank": rank, "hit": {k: v[:200] for k, v in keys.items()},
                                 "why": "no passage with this " + "/".join(keys)})
            continue
        if pid in seen:
            out.duplicates.append({"rank": rank, "passage_id": pid, "first_rank": seen[pid]})
            continue
        seen[pid] = rank
        out.by[how] = out.by.get(how, 0) + 1
        # A retriever that gives no scores still ranks: its order becomes a falling score.
        out.ranked.append(RankedPassage(pid, round(score if score else (n - rank + 1) / n, 6)))
    titles = {p.id: p.title for p in kb.passages([r.passage_id for r in out.ranked])}
    for r in out.ranked:
        r.title = titles.get(r.passage_id, "")
    return out
