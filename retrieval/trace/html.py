"""Run records → escaped HTML: stage panels, a method's column, the ranking with its missed gold.

Pure functions of the records, below both the UI (ui/render.py adds the page script, subgraphs
and plotly) and the notebook (RunResult._repr_html_), so the core never imports the UI.

Passages, titles, questions and LLM output are untrusted: every string goes through
`esc` before it reaches HTML (gr.HTML drops <script> but keeps event-handler attributes).
"""
from __future__ import annotations

import html
import json
import time
from collections import Counter
from typing import Any, Iterable, Optional

from ..core.money import cost_text
from .gold import gold_fates, recall_by_round
from .model import RunResult, Stage, reused_ms

MAX_ROWS = 25
RANKING_ROWS = 5   # a column's ranking shows this many rows, the rest folded
STATUS_MARK = {"ok": "✓", "empty": "∅", "error": "✗", "skipped": "–"}
NODE_COLOURS = {"question": "#6d28d9", "query": "#a78bfa", "passage": "#2563eb", "entity": "#059669",
                "triple": "#d97706", "event": "#db2777", "proposition": "#0891b2", "subquestion": "#7c3aed"}
GOLD_COLOUR = "#f59e0b"

CSS = """
.ht-grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:10px}
.ht-col{border:1px solid #d4d4d8;border-radius:8px;padding:8px;min-width:0}
.ht-col h3{margin:0 0 2px 0}
.ht-stage{border-left:3px solid #a1a1aa;margin:1px 0;padding:0 5px;line-height:1.4}
.ht-stage.ok{border-color:#16a34a}.ht-stage.empty{border-color:#f59e0b}.ht-stage.error{border-color:#dc2626}
.ht-stage>summary{cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.ht-stage[open]>summary{white-space:normal}
.ht-stale{background:#fff7ed;border:1px solid #f97316;border-radius:4px;padding:1px 4px;font-size:.8em;margin:2px 0;
  line-height:1.3}
.ht-meta{color:#71717a;font-size:.85em}
details.ht-fold{margin:4px 0}details.ht-fold>summary{cursor:pointer;font-size:.9em;color:#3f3f46}
details.ht-fold>summary b{color:#18181b}
.ht-table{border-collapse:collapse;font-size:.82em;width:100%;table-layout:fixed}
table.ht-table td,table.ht-table th{border:0!important;border-bottom:1px solid #e4e4e7!important;
  padding:1px 4px!important;text-align:left;overflow-wrap:break-word;line-height:1.35}
table.ht-table tr.ht-group td{background:#f4f4f5;color:#3f3f46;font-weight:600;padding-top:4px!important}
sup.ht-apart{cursor:help;color:#b45309;font-weight:700}
.ht-gold{background:#fef3c7}
td.ht-pick{cursor:pointer;color:#1d4ed8}
td.ht-pick:hover{background:#eff6ff}
table.ht-ranking td.ht-cut{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.ht-ranking td:last-child,table.ht-ranking th{white-space:nowrap}
.ht-missed{color:#b91c1c}
.ht-err{color:#b91c1c;font-weight:600}
.ht-nested{display:inline-block;vertical-align:top}.ht-nested>summary{cursor:pointer;color:#3f3f46}
.ht-nested[open]{display:block;border-left:2px solid #e4e4e7;padding-left:6px}
.ht-card{border:1px solid #e4e4e7;border-radius:4px;margin:3px 0;padding:2px 4px;font-size:.9em}
.ht-live{border-color:#2563eb;background:#eff6ff}
.ht-dot{display:inline-block;width:.6em;height:.6em;border-radius:50%;background:#2563eb;margin-right:.3em;
  vertical-align:middle}
.ht-recorded{background:#fef9c3;border:1px solid #eab308;border-radius:6px;padding:2px 8px;margin-bottom:4px}
.ht-graph-link{color:#1d4ed8;cursor:pointer;text-decoration:underline;font-size:.85em;font-weight:600}
"""

# The page script that turns a click on a stage's "graph" link into a Stage pick: it writes
# the link's data-stage into the hidden #stage-click box, whose input event the app handles.

def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


INLINE_CHARS = 120  # a nested value shorter than this as JSON stays on one line


def _fmt(v: Any, gold: set[str] = frozenset()) -> str:
    """One payload value. Nested dicts and lists longer than a line fold into a <details>
    whose body renders all of it: folded, never cut."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, ensure_ascii=False, default=str)
        if len(text) <= INLINE_CHARS or not v:
            return esc(text)
        body = payload_html(v, gold) if isinstance(v, dict) else _list_html("", v, gold)
        return (f"<details class='ht-nested'><summary>{esc(text[:INLINE_CHARS - 1])}…</summary>"
                f"{body}</details>")
    return esc(v)


def _is_gold_row(row: dict, gold: set[str]) -> bool:
    return any(isinstance(v, str) and v in gold for v in row.values())


def _rows_html(cols: list, rows: list[dict], gold: set[str]) -> str:
    return "".join(f"<tr class='{'ht-gold' if _is_gold_row(row, gold) else ''}'>"
                   + "".join(f"<td>{_fmt(row.get(c, ''), gold)}</td>" for c in cols) + "</tr>" for row in rows)


def _is_nested(v: Any) -> bool:
    return isinstance(v, (dict, list)) and len(json.dumps(v, ensure_ascii=False, default=str)) > INLINE_CHARS


def _cards_html(label: str, rows: list[dict], gold: set[str]) -> str:
    """Rows that hold nested structures (a beam's candidate extensions, a hop's examples) as
    full-width cards: a table cell would squeeze their inner tables to a few characters."""
    def card(row: dict) -> str:
        flat = {k: v for k, v in row.items() if not _is_nested(v)}
        head = " · ".join(f"<b>{esc(k)}</b> {_fmt(v, gold)}" for k, v in flat.items())
        nested = payload_html({k: v for k, v in row.items() if k not in flat}, gold)
        return f"<div class='ht-card {'ht-gold' if _is_gold_row(row, gold) else ''}'>{head}{nested}</div>"
    rest = rows[MAX_ROWS:]
    more = (f"<details><summary class='ht-meta'>… {len(rest)} more</summary>{''.join(map(card, rest))}</details>"
            if rest else "")
    return f"<div>{label}{''.join(map(card, rows[:MAX_ROWS]))}{more}</div>"


def _list_html(key: str, value: list, gold: set[str]) -> str:
    label = f"<b>{esc(key)}</b> ({len(value)})" if key else f"({len(value)})"
    if value and all(isinstance(x, dict) for x in value) and any(_is_nested(v) for x in value for v in x.values()):
        return _cards_html(label, value, gold)
    if value and all(isinstance(x, dict) for x in value):
        cols = list(dict.fromkeys(c for row in value for c in row))
        head = "".join(f"<th>{esc(c)}</th>" for c in cols)
        rest = value[MAX_ROWS:]
        more = (f"<details><summary class='ht-meta'>… {len(rest)} more</summary><table class='ht-table'>"
                f"<tr>{head}</tr>{_rows_html(cols, rest, gold)}</table></details>") if rest else ""
        return (f"<div>{label}<table class='ht-table'><tr>{head}</tr>{_rows_html(cols, value[:MAX_ROWS], gold)}"
                f"</table>{more}</div>")
    items = ", ".join(_fmt(x, gold) for x in value[:MAX_ROWS])
    rest = value[MAX_ROWS:]
    more = (f" <details style='display:inline'><summary class='ht-meta'>… +{len(rest)}</summary>"
            + ", ".join(_fmt(x, gold) for x in rest) + "</details>") if rest else ""
    return f"<div>{label}: {items}{more}</div>"


def payload_html(payload: dict, gold: set[str]) -> str:
    parts = []
    for key, value in payload.items():
        if key == "traceback":
            parts.append(f"<details><summary>traceback</summary><pre>{esc(value)}</pre></details>")
        elif isinstance(value, list):
            parts.append(_list_html(key, value, gold))
        else:
            parts.append(f"<div><b>{esc(key)}</b>: {_fmt(value, gold)}</div>")
    return "".join(parts)


# A folded stage's body while it is on its way (`stage_html(body=False)`).
BODY_TO_COME = "<div class='ht-meta'>its records are on their way…</div>"


def stage_html(st: Stage, gold: set[str], open_: bool = False, method: str = "", body: bool = True) -> str:
    """One stage folded to one line (mark, its map link, name, latency, tokens; the title on hover
    and first in the opened body). `body=False`: the line alone, the body to come (a page's
    first view sends the lines first)."""
    mark = STATUS_MARK.get(st.status, "?")
    graph = ""
    if st.subgraph and st.subgraph.nodes:
        size = f"{len(st.subgraph.nodes)}n/{len(st.subgraph.edges)}e"
        # A click on it shows this stage in the hop map (the app's page script reads data-stage,
        # which is also the Stage picker's own choice string).
        graph = (f"<a class='ht-graph-link' data-stage='{esc(f'{method} · {st.name}')}' "
                 f"title='show this stage in the hop map ({size})'>map</a> " if method else "")
    msg = (f"<div class='{'ht-err' if st.status == 'error' else 'ht-meta'}'>{esc(st.message)}</div>"
           if st.message else "")
    calls = "".join(
        f"<details><summary>LLM call {i + 1}: {esc(c.model)} · {c.tokens_in}/{c.tokens_out} tok · "
        f"{c.latency_ms:.0f} ms</summary><pre>{esc(c.prompt)}</pre><hr><pre>{esc(c.completion)}</pre></details>"
        for i, c in enumerate(st.llm_calls))
    inside = f"<div><b>{esc(st.title)}</b></div>{msg}{payload_html(st.payload, gold)}{calls}" if body else BODY_TO_COME
    return (f"<details class='ht-stage {esc(st.status)}' {'open' if open_ else ''}>"
            f"<summary title='{esc(st.title)}'>{mark} {graph}<span class='ht-meta'>{esc(st.name)} · "
            f"{_latency(st.latency_ms, reused_ms(st))}{_waited(st)} · tok {st.tokens_in}/{st.tokens_out}</span>"
            f"</summary>{inside}</details>")


def _waited(st: Stage) -> str:
    """How much of a stage's time was waiting for the model rather than its own work."""
    wait = getattr(st, "wait_ms", 0.0) or 0.0
    if wait < 100:
        return ""
    return f" ({wait / 1000:.1f} s waiting for the LLM, {max(0.0, st.latency_ms - wait) / 1000:.1f} s working)"


def machine_text(run: RunResult) -> str:
    """Where a run's latencies were measured, as its column and timeline say it: a time without its
    machine cannot be read (machines here differ 2x), nor one taken beside other work."""
    if not run.machine:
        return "on a machine not recorded"
    if run.load == "idle":
        return f"recorded on {run.machine}, idle"
    if run.load:
        return f"recorded on {run.machine}, {run.load}: slower than alone"
    return f"on {run.machine}"


def _latency(ms: float, reused: float) -> str:
    """A latency, naming the part reused from another method of the request (trace.charge_reused)."""
    if reused <= 0:
        return f"{ms:.1f} ms"
    return (f"<span title='counted as if this method ran alone: it reused work of another method "
            f"of this request (the question's encoding) and is charged what that cost'>"
            f"{ms:.1f} ms (incl. {reused:.1f} ms shared)</span>")


def passage_titles(run: RunResult) -> dict[str, str]:
    """Passage id → title as the run itself drew them (ranking, stage subgraphs)."""
    out: dict[str, str] = {}
    for st in run.stages:
        for n in (st.subgraph.nodes if st.subgraph else ()):
            if n.type == "passage" and n.label and not n.id.startswith(n.label.rstrip("…")):
                out.setdefault(n.id, n.label)
    out.update({r.passage_id: r.title for r in run.ranked if r.title})
    return out


def ranking_html(run: RunResult, gold: set[str], titles: Optional[dict] = None) -> str:
    """The final ranking, gold starred; each missed gold passage named by its title (from the run,
    else `titles`: the KB's), with the stage that last held it."""
    names = {**(titles or {}), **passage_titles(run)}
    def row(i: int, r) -> str:
        title = f"{'★ ' if r.passage_id in gold else ''}{r.title}"
        return (f"<tr class='{'ht-gold' if r.passage_id in gold else ''}'><td>{i + 1}</td>"
                f"<td class='ht-cut' title='{esc(title)}'>{esc(title)}</td><td>{r.score:.3f}</td></tr>")

    # The first RANKING_ROWS rows, the rest folded: five columns side by side stay short.
    head = ("<tr><th style='width:1.8em'>#</th><th>passage</th><th style='width:3.6em'>score</th></tr>")
    rows = "".join(row(i, r) for i, r in enumerate(run.ranked[:RANKING_ROWS]))
    rest = run.ranked[RANKING_ROWS:]
    if rest:
        rows += (f"<tr><td colspan='3'><details><summary class='ht-meta'>… {len(rest)} more</summary>"
                 f"<table class='ht-table'>{''.join(row(i + RANKING_ROWS, r) for i, r in enumerate(rest))}"
                 "</table></details></td></tr>")
    missed = ""
    if gold:
        fates = [f for f in gold_fates(run, gold) if f.rank is None]
        if fates:
            items = "".join(f"<li class='ht-missed' title='{esc(f.passage_id)}'>★ "
                            f"{esc(names.get(f.passage_id) or f.passage_id)}: "
                            + (f"last seen in <b>{esc(f.last_seen)}</b>" if f.last_seen else "never retrieved")
                            + "</li>" for f in fates)
            missed = f"<div><b>Missed gold passages</b><ul>{items}</ul></div>"
        found = len(gold) - len(fates)
        rounds = recall_by_round(run, gold)
        by_round = (" · recall by round: " + ", ".join(f"{n}: {r:.2f}" for n, r in rounds)) if len(rounds) > 1 else ""
        missed = f"<div class='ht-meta'>gold found: {found}/{len(gold)}{by_round}</div>" + missed
    return f"<table class='ht-table ht-ranking'>{head}{rows}</table>{missed}"


# A waiting column's "waiting N s so far" moves in steps of this many seconds, not every second.
# Asked together, two columns wait for minutes. In `bench-app --together 5 --crossover` (2-core AMD
# EPYC, avx2) the browser spent 1.2-6.2 CPU s more on a together ask than on the three alone asks
# summed, and the model up to 5.2 % longer on the same calls; in one live ask, alternated 15-s
# windows with the waiting lines held still took the browser from 2.05 to 1.38 CPU s and gave the
# model 27.9 CPU s against 26.7 (docs/measurements/app-latency.md).
QUEUED_STEP_S = 10


def live_html(st: Stage) -> str:
    """The stage a method is in now, with what its LLM call is doing (Stage.progress)."""
    p = st.progress
    elapsed = max(0.0, time.time() - st.started_at)
    what = p.get("llm")
    purpose = esc(p.get("purpose", ""))
    if what == "queued":   # a method waiting for its turn at the model (ui/llm_order.py)
        waited = int(elapsed // QUEUED_STEP_S * QUEUED_STEP_S)
        return (f"<div class='ht-stage ht-live ht-queued'><span class='ht-meta'>{esc(p.get('text', ''))} · "
                f"waiting {waited} s so far</span></div>")
    if what == "waiting":
        n = int(p.get("ahead", 1))
        doing = f"waiting for the LLM ({n} request{'s' if n != 1 else ''} ahead) · {purpose}"
    elif what == "reading":
        doing = f"LLM reading the prompt · {purpose}"
    elif what == "writing":
        cap = f" of at most {int(p['max_tokens'])}" if p.get("max_tokens") else ""
        n = int(p.get("tokens_out", 0))
        doing = f"LLM writing · {purpose} · {n} token{'' if n == 1 else 's'} so far{cap}"
    else:
        doing = "running"
    # The running mark is a dot drawn by CSS (.ht-dot), not an emoji: where the visitor's machine has
    # no emoji font (the headless Chromium here) an hourglass showed as an empty box.
    return (f"<div class='ht-stage ht-live'><span class='ht-dot' aria-hidden='true'></span><b>{esc(st.title)}</b> "
            f"<span class='ht-meta'>{esc(st.name)} · {doing} · {elapsed:.1f} s</span></div>")


def column_html(method: str, stages: list[Stage], run: Optional[RunResult], gold: set[str],
                running: bool, live: Optional[Stage] = None, graph_links: bool = True,
                cache: Optional[dict] = None, note: str = "", titles: Optional[dict] = None,
                bodies: bool = True, machine: bool = True) -> str:
    """`graph_links`: each stage's graph size is a link that draws it (the Ask tab's columns).
    `bodies=False`: each stage's line without its body (`stage_html`).
    `cache`: a finished stage does not change, so a live view renders each one once, not once
    an update (keyed by the stage object, which the cache's owner keeps alive). `note`: a line
    under the name (a recording made by other code says so). `titles`: the KB's passage titles,
    for a missed gold passage no stage drew. `machine=False`: the grid names the machine once, for
    every column (`shared_machine`), so the header keeps its height."""
    head = f"<h3>{esc(method)}</h3>" + (f"<div class='ht-stale'>{esc(note)}</div>" if note else "")
    if run is not None:
        status = "ok" if run.status == "ok" else f"<span class='ht-err'>error: {esc(run.error)}</span>"
        reused = sum(reused_ms(st) for st in run.stages)
        cost = f" · {esc(cost_text(run.cost))}" if run.cost else ""
        head += (f"<div class='ht-meta'>{status} · {_latency(run.latency_ms, reused)} · tokens {run.tokens_in}/"
                 f"{run.tokens_out}{cost}</div>")
        if machine:
            head += f"<div class='ht-meta ht-machine'>{esc(machine_text(run))}</div>"
        if run.answer is not None:
            head += f"<div class='ht-answer'><b>Answer</b>: {esc(run.answer)}</div>"
    elif running:
        queued = live is not None and live.progress.get("llm") == "queued" and not stages
        head += ("<div class='ht-meta'>waiting for its turn at the model</div>" if queued else
                 f"<div class='ht-meta'>running… {len(stages)} stage(s) so far</div>")
    def one(s: Stage) -> str:
        if cache is None:
            return stage_html(s, gold, method=method if graph_links else "", body=bodies)
        key = (id(s), method, bodies)
        if key not in cache:
            cache[key] = stage_html(s, gold, method=method if graph_links else "", body=bodies)
        return cache[key]

    body = "".join(one(s) for s in stages)
    if live is not None and run is None:
        body += live_html(live)
    tail = ranking_html(run, gold, titles) if run is not None and run.ranked else ""
    return f"<div class='ht-col' data-method='{esc(method)}'>{head}{body}{tail}</div>"


def shared_machine(runs: Iterable[Optional[RunResult]]) -> str:
    """The one `machine_text` every run has, or "" when they differ (each column then names its own)."""
    texts = {machine_text(r) for r in runs if r is not None}
    return texts.pop() if len(texts) == 1 else ""


def most_runs_machine(runs: Iterable[Optional[RunResult]]) -> str:
    """The `machine_text` more runs share than any other, or "" when none is (a tie, or one run
    each). A stored grid names it once and only a column measured elsewhere names its own, so one
    method recorded again on another machine does not add a line to every column."""
    counts = Counter(machine_text(r) for r in runs if r is not None)
    top = counts.most_common(2)
    if not top or top[0][1] < 2 or (len(top) > 1 and top[1][1] == top[0][1]):
        return ""
    return top[0][0]


def grid_html(columns: Iterable[str], session_id: str = "", machine: str = "") -> str:
    """`machine`: where every column's times were measured (`shared_machine`), one line above them."""
    where = f"<div class='ht-meta ht-machine' id='grid-machine'>Times {esc(machine)}</div>" if machine else ""
    return (f"<style>{CSS}</style>{where}<div class='ht-grid' data-session='{esc(session_id)}'>"
            f"{''.join(columns)}</div>")


def error_html(message: str) -> str:
    return f"<style>{CSS}</style><div class='ht-err'>{esc(message)}</div>"


# --- subgraphs ------------------------------------------------------------------------------
