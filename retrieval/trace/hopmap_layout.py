"""Where a hop map's nodes stand: fixed places by layer and lane, the top N of a cell shown and the
rest under "+M more", and labels cut to fit a node's box."""
from __future__ import annotations

from .hopmap_records import HopMap, MapNode, MoreNode

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



def importance(n: MapNode) -> tuple:
    """Which nodes of a cell are shown first: gold, ranked, kept to the end, chosen by a later
    stage, then by score and order."""
    return (not n.gold, n.rank is None, n.pruned is not None, not n.chosen, -(n.score or 0.0), n.added, n.label)


def layout(hm: HopMap, nodes: list[MapNode], live: bool = False) -> None:
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
            cell.sort(key=lambda n: (n.key not in gold_path_nodes and not n.gold, *importance(n)))
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
