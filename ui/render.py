"""Stage records → the app's HTML and plotly figures. Pure functions of the records; no method code.

The panels and columns themselves are retrieval/trace/html.py (the notebook shows them too);
this adds what only the page has: the stage-click script, subgraph iframes and the charts.
Every untrusted string goes through `esc`.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Optional

from retrieval.trace.html import (
    CSS,
    GOLD_COLOUR,
    MAX_ROWS,
    NODE_COLOURS,
    STATUS_MARK,
    column_html,
    error_html,
    esc,
    grid_html,
    live_html,
    machine_text,
    most_runs_machine,
    payload_html,
    ranking_html,
    shared_machine,
    stage_html,
)

__all__ = ["CSS", "FIRST_VIEW_GATE", "GOLD_COLOUR", "MAX_ROWS", "NODE_COLOURS", "STATUS_MARK",
           "LIVE_LINES_JS", "LIVE_MAP_HIDDEN", "LIVE_MAP_JS", "STAGE_CLICK_JS", "VIS_FILES", "VIS_ROUTE",
           "column_html", "comparison_figure", "error_html", "esc", "first_map", "graph_iframe", "grid_html",
           "hop_maps", "live_html", "live_lines", "live_map", "machine_text", "most_runs_machine", "payload_html",
           "ranking_html", "shared_machine", "stage_html",
           "vis_file"]
from retrieval.trace import hopmap_view
from retrieval.trace.model import RunResult, Stage, Subgraph

from . import early_map
from .picker import paper_order

STAGE_CLICK_JS = """() => {
  document.addEventListener('click', (e) => {
    const link = e.target.closest && e.target.closest('.ht-graph-link');
    if (!link) return;
    e.preventDefault(); e.stopPropagation();  // a click on it must not fold the stage
    const [method, stage] = link.dataset.stage.split(' · ');
    // The hop map that holds this method is told directly (no round trip) and brought into view;
    // the nearest one above the link (a tab may show several), else the Ask tab's.
    const maps = [...document.querySelectorAll('iframe.ht-hopmap')].filter((f) => {
      try { return JSON.parse(f.dataset.methods || '[]').includes(method); } catch (_) { return false; }
    });
    const frame = maps.filter((f) => f.offsetParent !== null)[0];
    if (frame) {
      frame.contentWindow.postMessage({hopmap: {method, stage}}, '*');
      frame.scrollIntoView({block: 'start', behavior: 'instant'});
      return;
    }
    const box = document.querySelector('#stage-click textarea, #stage-click input');
    if (!box) return;
    // A nonce after the tab makes a second click on the same stage a change too.
    box.value = link.dataset.stage + '\t' + Date.now();
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }, true);
}"""


# A live run's progress lines (tokens written, seconds waited) change ~2.5 times a second while
# nothing else in the columns does. Re-sending the whole grid for them was 167 of a together
# run's 200 updates and 43.5 MB of HTML the browser parsed again, on the cores the model writes
# on (probe of GRIEVER+GEAR+SAG+GRASP, 105 s): they go to a hidden box instead (`live_lines`), and
# this copies each into its column's running line. A column that gained a stage travels the same
# way, alone: re-sending the grid for it re-parsed every finished column (and the grid's
# stylesheet, which restyles the whole page) once a stage, 4x the HTML of the same methods asked
# one by one (7.9 MB against 1.9 MB for the stages of one stored GRIEVER+SAG+GEAR+GRASP session).
# Columns first: a replaced column brings the running line of its own moment, which the lines then
# bring up to date.
LIVE_LINES_JS = """() => {
  const box = document.querySelector('#live-lines');
  if (!box) return;
  const column = (m) => document.querySelector(`#columns .ht-col[data-method="${CSS.escape(m)}"]`);
  const copy = () => {
    for (const src of box.querySelectorAll('[data-column-for]')) {
      const col = column(src.dataset.columnFor);
      if (col && src.firstElementChild && col.outerHTML !== src.firstElementChild.outerHTML)
        col.replaceWith(src.firstElementChild.cloneNode(true));
    }
    for (const src of box.querySelectorAll('[data-live-for]')) {
      const col = column(src.dataset.liveFor);
      const line = col && col.querySelector('.ht-live');
      if (line && src.firstElementChild && line.innerHTML !== src.firstElementChild.innerHTML)
        line.replaceWith(src.firstElementChild.cloneNode(true));
    }
  };
  new MutationObserver(copy).observe(box, {childList: true, subtree: true, characterData: true});
}"""


def live_lines(live: dict[str, Stage], columns: Optional[dict[str, str]] = None) -> str:
    """Each running method's line (`live_html`), and the columns that changed since the last update
    (`column_html`, rendered by the caller), for LIVE_LINES_JS to put in the grid."""
    cols = "".join(f"<div data-column-for='{esc(m)}'>{h}</div>" for m, h in (columns or {}).items())
    items = "".join(f"<div data-live-for='{esc(m)}'>{live_html(st)}</div>" for m, st in live.items())
    return f"<style>#live-lines{{display:none}}</style>{cols}{items}"


# The first view (the showcase's hop map and columns) is in the page's config; the page's load
# events wait for its map to be drawn: their answers re-render components while the map's frame is
# drawing. The promise they wait on is made by the page's HTML (ui/early_map.py, which also starts
# that frame before Gradio runs); it opens at once on a link (?session=, ?experiment=: the page
# shows something else) or on a page with no map, and never later than 4 s after the page started.
FIRST_VIEW_GATE = """(...args) => {
  const go = () => args.length === 1 ? args[0] : args;
  if (!window.hoptraceFirstView || !document.querySelector('iframe.ht-hopmap')) return go();
  return window.hoptraceFirstView.then(go);
}"""


# vis-network as pyvis ships it, served by the app itself at this route (ui/app.py `serve`):
# no CDN, and no server path on the page.
VIS_ROUTE = "hoptrace-static"
VIS_FILES = ("vis-network.min.js", "vis-network.css")


# Figures the page shows, from docs/figures, served by the same route: a gr.Image would copy the
# file into Gradio's cache and put that server path on the page, which public mode must not show.
FIGURES = ("judge-queue-demo.png",)
FIGURES_DIR = Path(__file__).resolve().parent.parent / "docs" / "figures"


def vis_file(name: str) -> Path:
    import pyvis

    if name in FIGURES:
        return FIGURES_DIR / name
    if name not in VIS_FILES:
        raise FileNotFoundError(name)
    return Path(pyvis.__file__).parent / "templates" / "lib" / "vis-9.1.2" / name


def _script_json(value: Any) -> str:
    """JSON safe inside a <script>: no '<', '>' or '&' that could end it or open a comment."""
    return (json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def graph_iframe(g: Optional[Subgraph], gold: set[str], height: int = 420) -> str:
    """A pyvis network in a sandboxed iframe. pyvis builds the nodes, edges and options; the page
    is ours: pyvis's own template inlines vis-network (~0.7 MB in every update of every stage)
    and links Bootstrap from a CDN, where this loads vis-network from the app's own static
    route (cached by the browser after the first graph; works offline) and sends only data."""
    if g is None or not g.nodes:
        return "<div class='ht-meta'>This stage has no subgraph.</div>"
    from pyvis.network import Network

    net = Network(height=f"{height - 20}px", width="100%", directed=True)
    for n in g.nodes[:300]:
        is_gold = n.id in gold
        label = n.label if len(n.label) <= 60 else n.label[:59] + "…"
        score = f" ({n.score:.3f})" if isinstance(n.score, (int, float)) else ""
        # vis-network renders labels and string titles as text, not HTML
        net.add_node(n.id, label=("★ " if is_gold else "") + label, title=f"{n.type}: {n.label}{score}",
                     color=GOLD_COLOUR if is_gold else NODE_COLOURS.get(n.type, "#52525b"),
                     shape="box" if n.type in ("passage", "triple", "event", "proposition") else "dot",
                     borderWidth=3 if n.attrs.get("join") or n.attrs.get("frontier") else 1)
    ids = {n.id for n in g.nodes[:300]}
    for e in g.edges:
        if e.source in ids and e.target in ids:
            net.add_edge(e.source, e.target, label=e.label or e.type, title=e.type)
    net.set_options('{"physics": {"stabilization": {"iterations": 150}}, "edges": {"font": {"size": 10}, '
                    '"arrows": {"to": {"enabled": true, "scaleFactor": 0.5}}}, '
                    # vis hides labels smaller than 5 px on screen; a 40-node stage fits only zoomed out
                    '"nodes": {"font": {"size": 14}, "scaling": {"label": {"drawThreshold": 1}}}}')
    nodes, edges, *_ = net.get_network_data()
    # Relative URLs: an about:srcdoc document resolves them against the page's own base, so
    # they are right behind any proxy or root path (Spaces included).
    doc = ("<!doctype html><html><head><meta charset='utf-8'>"
           f"<link rel='stylesheet' href='{VIS_ROUTE}/vis-network.css'><script "
           f"src='{VIS_ROUTE}/vis-network.min.js'></script>"
           f"<style>html,body{{margin:0}}#g{{width:100%;height:{height - 20}px}}</style></head>"
           "<body><div id='g'></div><script>"
           f"new vis.Network(document.getElementById('g'), {{nodes: new vis.DataSet({_script_json(nodes)}), "
           f"edges: new vis.DataSet({_script_json(edges)})}}, {_script_json(net.options)});"
           "</script></body></html>")
    return (f"<iframe sandbox='allow-scripts' style='width:100%;height:{height}px;border:1px solid #e4e4e7' "
            f"srcdoc=\"{html.escape(doc, quote=True)}\"></iframe>")


def hop_maps(runs: dict[str, RunResult], gold: set[str], choice: Optional[str] = None,
             titles: Optional[dict] = None, partial: Optional[dict[str, list[Stage]]] = None,
             question: str = "", live_id: str = "") -> str:
    """The hop map viewer of a request's runs (retrieval/trace/hopmap_view.py), opened on `choice`
    ("method · stage"); `partial`: the stages so far of methods still running, which makes the
    maps live (a request being watched: laid out so that no node moves as stages arrive);
    `question`: the request's, for the methods still running; `live_id`: the request's session,
    for a live map that is given its later stages (`live_map`) instead of being sent again.
    vis-network comes from the app's own route, relative to the page (right behind any proxy)."""
    return hopmap_view.iframe(_viewer_runs(_shown(runs, partial, question), gold), *_method_stage(choice),
                              vis_src=f"{VIS_ROUTE}/vis-network.min.js", titles=titles,
                              live=partial is not None, live_id=live_id)


def _shown(runs: dict[str, RunResult], partial: Optional[dict[str, list[Stage]]], question: str) -> dict:
    shown = dict(runs)
    for m, stages in (partial or {}).items():
        if m not in shown and stages:
            shown[m] = RunResult(method=m, question=question, stages=list(stages))
    return shown


def live_map(runs: dict[str, RunResult], gold: set[str], partial: dict[str, list[Stage]], changed: set[str],
             choice: str, live_id: str, seq: int, titles: Optional[dict] = None, question: str = "") -> str:
    """A run's later stages for its live hop map (`hop_maps(live_id=…)`, already on the page):
    the maps of the `changed` methods, in a hidden box that LIVE_MAP_JS hands to that frame."""
    shown = paper_order({m: r for m, r in _shown(runs, partial, question).items() if r.stages})
    data = hopmap_view.live_update([vr for vr in _viewer_runs(shown, gold) if vr.method in changed], list(shown),
                                   *_method_stage(choice), seq=seq, titles=titles)
    return (f"{LIVE_MAP_HIDDEN}<div data-hopmap-live='{data}' data-run='{esc(live_id)}' data-seq='{int(seq)}' "
            f"data-methods='{esc(json.dumps(list(shown)))}'></div>")


LIVE_MAP_HIDDEN = "<style>#live-map{display:none}</style>"
# A live run's hop map was a new frame for every stage with something to draw: the viewer's
# document, vis-network compiled again and every running method's map, ~0.24 browser CPU s a
# stage on the cores the model writes on, and 5.4 MB for a four-method request against 1.6 MB for
# its methods alone (throwaway replay of a showcase question, issue 88). The first stage makes the
# frame (marked `data-live`); each later one comes to this hidden box as the changed methods' maps
# (`live_map`), and this posts it to that frame once its viewer listens (`hopmapReady`).
LIVE_MAP_JS = """() => {
  const box = document.querySelector('#live-map');
  if (!box) return;
  const ready = new WeakSet();
  const send = () => {
    const item = box.querySelector('[data-hopmap-live]');
    if (!item) return;
    const frame = [...document.querySelectorAll('#graph iframe.ht-hopmap[data-live]')]
      .find((f) => f.dataset.live === item.dataset.run);
    if (!frame || !ready.has(frame.contentWindow) || frame.dataset.seq === item.dataset.seq) return;
    frame.dataset.seq = item.dataset.seq;
    frame.dataset.methods = item.dataset.methods;   // the stage links find the frame by its methods
    frame.contentWindow.postMessage({hopmapLive: item.dataset.hopmapLive}, '*');
  };
  // A viewer's document says when it listens; Gradio may load a new document into the same
  // element (its HTML is patched, not replaced), which then has had nothing yet.
  addEventListener('message', (e) => {
    if (!(e.data && e.data.hopmapReady && e.source)) return;
    const frame = [...document.querySelectorAll('#graph iframe.ht-hopmap')].find((f) => f.contentWindow === e.source);
    if (!frame) return;
    ready.add(e.source); delete frame.dataset.seq; send();
  });
  new MutationObserver(send).observe(box, {childList: true, subtree: true, attributes: true});
}"""


def first_map(runs: dict[str, RunResult], gold: set[str], choice: Optional[str] = None,
              titles: Optional[dict] = None) -> tuple[str, str]:
    """The first view's map as (the slot in the page, the document of the frame the page starts
    with its HTML and moves into the slot): ui/early_map.py."""
    shown = _viewer_runs(runs, gold)
    if not any(vr.run.stages for vr in shown):
        return hop_maps(runs, gold, choice, titles), ""
    doc = hopmap_view.document(shown, *_method_stage(choice), vis_src=f"{VIS_ROUTE}/vis-network.min.js",
                               titles=titles)
    return early_map.slot(shown), doc


def _viewer_runs(runs: dict[str, RunResult], gold: set[str]) -> list[hopmap_view.ViewerRun]:
    return [hopmap_view.ViewerRun(m, r, tuple(gold)) for m, r in paper_order(runs).items()]


def _method_stage(choice: Optional[str]) -> tuple[str, str]:
    method, stage = (choice.split(" · ", 1) + [""])[:2] if choice and " · " in choice else ("", "")
    return method, stage


# --- comparison charts ------------------------------------------------------------------------
TIMELINE_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880",
                   "#ff97ff", "#fecb52")  # plotly's default sequence: neighbouring stages differ


def comparison_figure(runs: dict[str, RunResult], gold: set[str]):
    """Per-stage latency per method (gantt-like bars from each stage's start), tokens, recall.
    Three panels laid out by hand: make_subplots and one trace a stage cost ~130 ms a request,
    more than the LLM-free methods' retrieval."""
    import plotly.graph_objects as go

    has_gold = bool(gold)
    domains = [(0.0, 0.56), (0.62, 0.80), (0.86, 1.0)] if has_gold else [(0.0, 0.7), (0.78, 1.0)]
    # The timeline's times are read against the machine that took them; one line names it.
    where_line = (shared_machine(r for r in runs.values() if r.stages)
                  or "measured on different machines: each column names its own")
    titles = [f"stage timeline (ms)<br><span style='font-size:12px'>{esc(where_line)}</span>", "tokens in / out"] \
        + (["recall@k"] if has_gold else [])
    data = []
    for method, run in runs.items():
        if not run.stages:
            continue
        t0 = run.stages[0].started_at
        data.append(go.Bar(y=[method] * len(run.stages), x=[max(st.latency_ms, 0.05) for st in run.stages],
                           base=[(st.started_at - t0) * 1000 for st in run.stages], orientation="h",
                           marker_color=[TIMELINE_COLORS[i % len(TIMELINE_COLORS)] for i in range(len(run.stages))],
                           text=[esc(st.name) for st in run.stages], textposition="none", showlegend=False,
                           name=method, hovertemplate=f"{esc(method)} · %{{text}}: %{{x:.1f}} ms<extra></extra>"))
    names = list(runs)
    data.append(go.Bar(x=names, y=[runs[n].tokens_in for n in names], name="tokens in", xaxis="x2", yaxis="y2"))
    data.append(go.Bar(x=names, y=[runs[n].tokens_out for n in names], name="tokens out", xaxis="x2", yaxis="y2"))
    layout = dict(height=330, barmode="overlay", margin=dict(l=10, r=10, t=56, b=10),
                  xaxis=dict(domain=domains[0]), yaxis=dict(anchor="x"),
                  xaxis2=dict(domain=domains[1], anchor="y2"), yaxis2=dict(anchor="x2"),
                  annotations=[dict(text=t, x=sum(d) / 2, y=1.0, xref="paper", yref="paper", xanchor="center",
                                    yanchor="bottom", showarrow=False, font=dict(size=14))
                               for t, d in zip(titles, domains)])
    if has_gold:
        rec = [sum(g in set(runs[n].ranked_ids()) for g in gold) / len(gold) for n in names]
        data.append(go.Bar(x=names, y=rec, name="recall", xaxis="x3", yaxis="y3"))
        layout.update(xaxis3=dict(domain=domains[2], anchor="y3"), yaxis3=dict(anchor="x3", range=[0, 1]))
    return go.Figure(data=data, layout=layout)
