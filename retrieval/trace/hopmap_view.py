"""Hop maps → the viewer: one sandboxed HTML document (vis-network with fixed places, a stage list,
step buttons and a slider, a legend, PNG / SVG export), per run or per side-by-side request.

Below the UI so the app, the Traces tab, the Benchmark drill-down and the notebook all show the
same view. vis-network comes from the app's own route (`vis_src`) or, in a notebook, inline from
pyvis's bundled copy: nothing is fetched from outside. Every string reaches the document as
JSON inside a <script type=application/json> block (no '<', '>' or '&' left to end it) and is
set as text by the viewer's script (hopmap.js).
"""
from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from . import hopmap
from .hopmap import HopMap
from .model import RunResult

FONT_PX = 14          # node labels in canvas units
MIN_SCALE = 12.5 / FONT_PX  # the view never zooms out further: labels stay at least 12 px
HEIGHT = 620          # the iframe's height in the page
GUTTER = 14

_JS = Path(__file__).with_name("hopmap.js")


@dataclass
class ViewerRun:
    """One column of the viewer: a method's run with the gold it is judged against."""
    method: str
    run: RunResult
    gold: tuple[str, ...] = ()


def top_n() -> int:
    """Nodes shown per lane and layer before "+M more": HOPTRACE_HOPMAP_TOP_N, else hopmap.TOP_N."""
    raw = os.environ.get("HOPTRACE_HOPMAP_TOP_N", "").strip()
    if not raw:
        return hopmap.TOP_N
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from ..core.errors import ConfigError
        raise ConfigError(f"HOPTRACE_HOPMAP_TOP_N={raw!r}: give a whole number of nodes, 1 or more")
    return n


def _map_json(name: str, hm: HopMap) -> dict:
    def r(v: Optional[float]) -> Optional[float]:
        return None if v is None else round(float(v), 4)

    index = {n.key: i for i, n in enumerate(hm.nodes)}

    return {
        "method": name, "question": hm.question, "layers": hm.layers, "lanes": hm.lanes, "top_n": hm.top_n,
        "gold_total": hm.gold_total, "gold_found": hm.gold_found, "layer_x": hm.layer_x,
        "lane_y": hm.lane_y, "lane_y_all": hm.lane_y_all,
        "stages": [{"name": s.name, "title": s.title, "lane": s.lane, "status": s.status,
                    "latency_ms": round(s.latency_ms, 1), "tokens": s.tokens, "added": s.added, "pruned": s.pruned,
                    "gold_dropped": s.gold_dropped, "has_graph": s.has_graph} for s in hm.stages],
        # Short keys and nodes by their index: a five-method request sends a few hundred nodes in
        # every update, twice escaped (srcdoc, then Gradio's JSON).
        "nodes": [{"id": i, "k": n.kind, "l": hopmap.two_lines(_scored(n), hopmap.LINE_CHARS - 2 * _marks(n)),
                   "f": n.full, "x": round(n.x), "y": round(n.y), "xa": round(n.x_all), "ya": round(n.y_all),
                   "a": n.added, "s": n.seen, "p": n.pruned, "sc": r(n.score), "v": r(n.votes), "g": n.gold,
                   "d": n.dropped_gold, "r": n.rank, "ro": n.role, "ch": n.chosen, "ca": n.chosen_at, "h": n.hidden}
                  for i, n in enumerate(hm.nodes)],
        "edges": [{"id": i, "f": index[e.source], "t": index[e.target], "k": e.kind, "l": e.label, "a": e.added,
                   "w": r(e.weight) if isinstance(e.weight, (int, float)) else None, "gp": e.gold_path}
                  for i, e in enumerate(hm.edges)],
        "more": [{"id": f"more:{i}", "x": round(m.x), "y": round(m.y), "n": m.count, "a": m.first}
                 for i, m in enumerate(hm.more)],
    }


def _marks(n) -> int:
    """How many marks the viewer may put before a node's label (gold, dropped, role, chosen)."""
    return sum(bool(x) for x in (n.gold, n.dropped_gold is not None or n.missed, n.role in ROLE_MARKS,
                                 n.chosen in ROLE_MARKS))


ROLE_MARKS = ("seed event", "joined (E_i)", "in memory", "LLM-selected", "PPR seed")  # hopmap.js ROLE


def _scored(n) -> str:
    """A node's label with the score its stage gave it in front (triples, propositions, entities,
    events), or a passage's RankVote score."""
    text = hopmap.cut(n.full or n.label, 200)
    if n.votes is not None:
        return f"{n.votes:.2f} votes · {text}"
    if n.score is not None and n.kind in ("triple", "proposition", "entity", "event"):
        return f"{n.score:.2f} · {text}"
    return text


def _packed(value) -> str:
    """The data as base64 of its UTF-8 JSON: nothing in it can end the <script> it sits in, and it
    is a third the size of the JSON once escaped into an iframe's srcdoc (every quote → &quot;)."""
    return base64.b64encode(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()).decode()


def unpacked(doc: str) -> dict:
    """The data a viewer document holds (for tests and tools)."""
    raw = doc.split("<script type='application/json' id='hopmap-data'>", 1)[1].split("</script>", 1)[0]
    return json.loads(base64.b64decode(raw))


@lru_cache(maxsize=1)
def _inline_vis() -> str:
    import pyvis

    return (Path(pyvis.__file__).parent / "templates" / "lib" / "vis-9.1.2" / "vis-network.min.js").read_text()


CSS = """
html,body{margin:0;font:14px system-ui,sans-serif;color:#18181b;background:#fff}
#top{display:flex;gap:6px;align-items:center;flex-wrap:wrap;padding:4px 6px;border-bottom:1px solid #e4e4e7}
#methods button,.ctl button{font:600 14px system-ui,sans-serif;border:1px solid #a1a1aa;background:#fff;
  border-radius:6px;padding:3px 9px;cursor:pointer}
#methods button.on{background:#1e3a8a;color:#fff;border-color:#1e3a8a}
#main{display:flex;height:calc(100% - 150px)}
#side{width:200px;min-width:200px;overflow:auto;border-right:1px solid #e4e4e7}
#stages{margin:0;padding:0 0 0 4px;list-style:none;font-size:13px}
#stages li{padding:3px 6px;cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;border-radius:4px}
#stages li:hover{background:#f4f4f5}#stages li.on{background:#1e3a8a;color:#fff}
#canvas{flex:1;min-width:0;height:100%}
.ctl{display:flex;gap:6px;align-items:center;padding:4px 6px;flex-wrap:wrap}
#slider{flex:1;min-width:160px}
#stage-name{font-weight:600;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:60%}
#save{margin-left:auto}
#stage-facts,#detail{color:#3f3f46;font-size:13px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#legend{display:flex;flex-wrap:wrap;gap:4px 12px;padding:2px 6px;font-size:13px;border-top:1px solid #e4e4e7}
.lg i{display:inline-block;width:18px;height:12px;border:1px solid;vertical-align:middle;margin-right:4px}
div.vis-tooltip{white-space:pre-line;font:13px system-ui,sans-serif;max-width:420px}
"""

BODY = """<div id='top'><span id='methods'></span><span class='ctl'>
<button id='prev' title='previous stage (←)'>◀</button><button id='play'>▶ play</button>
<button id='next' title='next stage (→)'>▶</button></span>
<input id='slider' type='range' min='0' max='0' value='0' aria-label='stage'>
<label title='every node of every cell, not only the top N'><input id='expand' type='checkbox'> all nodes</label></div>
<div class='ctl'><span id='stage-name'></span><span id='stage-facts'></span></div>
<div id='main'><div id='side'><ol id='stages'></ol></div><div id='canvas'></div></div>
<div class='ctl'><span id='detail'>Click a node for its full text; hover for where it came from.</span>
<span id='save' class='ctl'><button id='png'>Save PNG</button><button id='svg'>Save SVG</button></span></div>
<div id='legend'></div>"""


def _maps(runs: Iterable[ViewerRun], titles: Optional[dict], live: bool) -> list[dict]:
    n = top_n()
    return [_map_json(vr.method, hopmap.build(vr.run, vr.gold, top_n=n, titles=titles, live=live))
            for vr in runs if vr.run.stages]


def _opened_on(maps: list[dict], method: str, stage: str) -> tuple[str, int]:
    """The method and stage index a viewer shows: `method` at `stage`, its last stage when not given."""
    chosen = next((m for m in maps if m["method"] == method), maps[0] if maps else None)
    if chosen is None:
        return "", -1
    return chosen["method"], next((i for i, s in enumerate(chosen["stages"]) if s["name"] == stage),
                                  len(chosen["stages"]) - 1)


def document(runs: Iterable[ViewerRun], method: str = "", stage: str = "", vis_src: Optional[str] = None,
             titles: Optional[dict] = None, height: int = HEIGHT, live: bool = False) -> str:
    """The viewer's HTML document for these runs, opened on `method` at `stage` (its last stage
    when not given). `vis_src`: the URL of vis-network.min.js; None inlines it (notebooks).
    `live`: runs being watched as their stages arrive (hopmap.build)."""
    maps = _maps(runs, titles, live)
    shown, start = _opened_on(maps, method, stage)
    data = {"maps": maps, "method": shown, "stage": start, "font_px": FONT_PX,
            "min_scale": MIN_SCALE, "node_w": hopmap.NODE_W, "gutter": GUTTER, "head": 46}
    vis = (f"<script src='{html.escape(vis_src, quote=True)}'></script>" if vis_src
           else f"<script>{_inline_vis()}</script>")
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<style>{CSS}html,body{{height:{height - 4}px}}</style>{vis}</head><body>{BODY}"
            f"<script type='application/json' id='hopmap-data'>{_packed(data)}</script>"
            f"<script>{_JS.read_text()}</script></body></html>")


def live_update(changed: Iterable[ViewerRun], order: list[str], method: str, stage: str, seq: int,
                titles: Optional[dict] = None) -> str:
    """What a live viewer (an `iframe(live_id=…)`) is sent when stages arrive, instead of a new
    document: the maps of the runs in `changed` only, the tabs' `order`, and the stage to show;
    packed as the document's data is. hopmap.js merges it by method. `seq` counts the run's
    updates: one that arrives late is dropped."""
    maps = _maps(changed, titles, live=True)
    shown, start = _opened_on(maps, method, stage)
    return _packed({"maps": maps, "order": order, "method": shown, "stage": start, "seq": seq})


def iframe(runs: Iterable[ViewerRun], method: str = "", stage: str = "", vis_src: Optional[str] = None,
           titles: Optional[dict] = None, height: int = HEIGHT, live: bool = False, live_id: str = "") -> str:
    """The viewer in a sandboxed iframe (scripts and downloads only: no same-origin access, no
    forms, no navigation of the page). data-methods lets the page's stage links talk to it;
    `live_id` (a request's session) marks the frame its later stages are sent to (`live_update`)."""
    runs = list(runs)
    if not any(vr.run.stages for vr in runs):
        return "<div class='ht-meta'>No stage to draw yet.</div>"
    doc = document(runs, method, stage, vis_src, titles, height, live)
    methods = html.escape(json.dumps([vr.method for vr in runs if vr.run.stages]), quote=True)
    marked = f"data-live=\"{html.escape(live_id, quote=True)}\" " if live_id else ""
    return (f"<iframe class='ht-hopmap' sandbox='allow-scripts allow-downloads' data-methods=\"{methods}\" "
            f"{marked}title='hop map' style='width:100%;height:{height}px;border:1px solid #d4d4d8;border-radius:8px' "
            f"srcdoc=\"{html.escape(doc, quote=True)}\"></iframe>")
