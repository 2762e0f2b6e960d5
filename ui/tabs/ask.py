"""The Ask tab: pick methods, ask, and watch each method's stages side by side; open a recorded
showcase run or a stored session instead."""
from __future__ import annotations

import time
from contextlib import ExitStack
from types import SimpleNamespace
from typing import Optional

import gradio as gr

from retrieval import showcase as showcase_mod
from retrieval.core.errors import HopTraceError
from retrieval.methods import origin
from retrieval.methods.plugins import problems, user_methods

from .. import evidence, messages, pages, render
from ..ask import run_side_by_side
from ..picker import GROUPS, group_info, paper_order
from .shared import (
    RUNS_PREFIX,
    SHOWCASE_PREFIX,
    _drawn_titles,
    _expired,
    _gold_titles,
    _graph_choices,
    _picker_names,
    _showcase_grid,
    _stored_grid,
    _stored_runs,
    _stored_session,
    script_box,
)

DEFAULT_METHODS = ["composed", "griever"]


def _column(prog, m: str, titles=None, common: str = "") -> str:
    """One method's column as the grid shows it (`common`: the machine the grid names for all)."""
    return render.column_html(m, prog.stages.get(m, []), prog.runs.get(m), prog.gold,
                              running=not prog.done and m not in prog.runs, live=prog.live.get(m),
                              cache=prog.html, titles=titles, machine=not common)


def _columns(prog, titles=None) -> str:
    common = render.shared_machine(prog.runs.values())
    return render.grid_html((_column(prog, m, titles, common) for m in prog.methods), prog.session_id,
                            machine=common)


# A live run's chart is drawn again when a method ends, else at most this often. Drawn at every
# stage it was a plotly redraw of 53 ms (one method) to 72 ms (four) of the browser's time on the
# cores the model writes on, ~37 times a four-method question; it sits below the columns and the
# hop map, which follow every stage.
CHART_REFRESH_S = 30.0


def _chart_due(chart_at: Optional[tuple[float, int]], ended: int) -> bool:
    """Whether a live run's chart is drawn again now that a stage has arrived (`chart_at`: when it
    was last drawn and with how many runs ended, None before): its first stage, a method that ended
    since the last drawing, or CHART_REFRESH_S since it."""
    return chart_at is None or ended != chart_at[1] or time.time() - chart_at[0] >= CHART_REFRESH_S


def _grid_shape(prog) -> tuple:
    """What only a whole new grid shows: the session, its methods, and the machine named above them."""
    return prog.session_id, tuple(prog.methods), render.shared_machine(prog.runs.values())


def _column_shape(prog, m: str) -> tuple:
    """What of a column changes other than its running line: its stages, whether it has ended, and
    whether it is running or waiting for its turn (the head says which)."""
    return (len(prog.stages.get(m, [])), m in prog.runs,
            None if m not in prog.live else prog.live[m].progress.get("llm") == "queued")


def _grid_update(prog, titles, sent: Optional[tuple]) -> tuple:
    """(the grid, or gr.update() to keep it; the columns that changed, for the live box; what is on
    the page now). A whole grid only when it is new or its header changed; otherwise the columns
    that changed travel alone (render.LIVE_LINES_JS)."""
    grid, shapes = _grid_shape(prog), {m: _column_shape(prog, m) for m in prog.methods}
    if sent is None or sent[0] != grid:
        return _columns(prog, titles), {}, (grid, shapes)
    changed = {m: _column(prog, m, titles, grid[2]) for m in prog.methods if shapes[m] != sent[1].get(m)}
    return gr.update(), changed, (grid, shapes)


def _load_showcase(kb: str):
    """The shipped recording, or None; a broken file must not stop the app (it says why)."""
    try:
        return showcase_mod.load_for(kb), ""
    except HopTraceError as e:
        return None, str(e)




def _method_pickers(llm: str, show_paths: bool = True) -> list:
    """One checkbox group per paper, side by side, its ablations folded beneath it; each group's
    info line gives the paper tables and the expected time of each method (ui/picker.py). Wrapped
    in #methods so every method's checkbox is found under one selector."""
    out = []
    with gr.Row(elem_id="methods", equal_height=False):
        for g in GROUPS:
            with gr.Column(min_width=180):
                out.append(gr.CheckboxGroup(list(g.methods), value=[m for m in g.methods if m in DEFAULT_METHODS],
                                            label=f"{g.title} · {g.tables}", info=group_info(g.methods, llm),
                                            elem_classes=["ht-picker"]))
                if g.ablations:
                    with gr.Accordion(f"{g.title} ablations", open=False, elem_classes=["ht-ablations"]):
                        out.append(gr.CheckboxGroup(list(g.ablations), value=[], show_label=False,
                                                    info=group_info(g.ablations, llm), elem_classes=["ht-picker"]))
        with gr.Column(min_width=180, visible=bool(user_methods() or problems())):
            out.append(_yours_picker(show_paths))
    return out


def picker_infos(state, kb_name: str) -> list:
    """Each picker's info line for KB `kb_name`: the expected times, then the state of each of its
    methods the KB cannot serve yet ("griever: ready in ~40 s"), as a build makes it."""
    llm = state.llm_settings.backend if state.llm is not None else "none"
    groups = [names for g in GROUPS for names in ((g.methods, g.ablations) if g.ablations else (g.methods,))]
    waiting = state.not_ready(kb_name, [m for names in groups for m in names])
    out = []
    for names in groups:
        states = [f"{m}: {waiting[m]}" for m in names if m in waiting]
        out.append(gr.update(info=group_info(names, llm) + (" — not ready on this KB: " + " · ".join(states)
                                                              if states else "")))
    return out + [gr.update()]  # Yours: a plugin's state shows in its column


def _yours_picker(show_paths: bool):
    """The operator's own methods (HOPTRACE_PLUGINS, HOPTRACE_METHOD_URLS, installed entry points),
    each with where it came from, and the plugins that failed to load with their reason. Always
    built, hidden when empty, so the page has the same components whatever is installed. A visitor
    cannot add to it: nothing on the page loads code or takes a URL."""
    mine = user_methods()
    info = " · ".join(f"{n}: {origin(n)}" for n in mine)
    failed = [messages.plain(f"{p.plugin}: {p.reason}", show_paths) for p in problems()]
    if failed:
        info += (" · " if info else "") + "not loaded: " + "; ".join(failed)
    return gr.CheckboxGroup(mine, value=[], label="Yours · your own retrievers", info=info or None,
                            elem_classes=["ht-picker"], elem_id="methods-yours", visible=bool(mine or failed))




def _session_url(session_id: str) -> str:
    """Relative, so it is right behind any host or proxy (Spaces included)."""
    return f"?session={session_id}"



def first_view(state, sc) -> dict:
    """What the tab opens on before any click: the showcase's first question, its columns and hop
    maps, from the shipped recording (no model runs). A page without a recording opens on the form.
    The map is a slot the page fills with a frame of `graph_doc` it started early (ui/early_map.py)."""
    item = sc.items[0] if sc and sc.items else None
    if item is None:
        return {}
    titles = _gold_titles(state, sc.kb, item.gold)
    choices = _graph_choices(item.runs)
    graph, graph_doc = render.first_map(item.runs, set(item.gold), _default_choice(item.runs), titles)
    # The page's config carries the stages' lines alone: Gradio's first render of 260 KB of
    # columns held the first view back ~0.1 s; the bodies follow at load (`reopen`).
    return {"item": item, "label": item.label, "question": item.question,
            "columns": _showcase_grid(sc, item, titles, bodies=False), "columns_full": _showcase_grid(sc, item, titles),
            "choices": choices,
            "graph": graph, "graph_doc": graph_doc, "session": SHOWCASE_PREFIX + item.label}


def _default_choice(runs: dict) -> str:
    """The view a request opens on: the first paper method's last stage (a baseline's map is one
    stage of passages, the least of the story)."""
    for m, run in paper_order(runs).items():
        if run.stages and m not in ("bm25", "dense", "composed", "rrf_hybrid"):
            return f"{m} · {run.stages[-1].name}"
    m, run = next(iter(runs.items()), ("", None))
    return f"{m} · {run.stages[-1].name}" if run is not None and run.stages else ""


def layout(shell) -> SimpleNamespace:
    """The tab's components, in page order: the showcase picker, the hop maps and the columns of
    the run on show (a recorded one before any click), then the form to ask a question."""
    state = shell.state
    examples = shell.examples
    with gr.Tab("Ask", id="ask"):
        sc, sc_error = _load_showcase("demo")
        first = first_view(state, sc)
        with gr.Row(visible=sc is not None or bool(sc_error)):
            sc_pick = gr.Dropdown([it.label for it in sc.items] if sc else [], value=first.get("label"), scale=4,
                                  label=("Showcase: recorded runs of every method, opened at once" if sc
                                         else f"Showcase unavailable: {sc_error}"), elem_id="showcase")
            live_btn = gr.Button("Run live", elem_id="run-live", scale=1)
        # The hop map and the columns are in the page itself, so the first view needs no request
        # (measured: columns 2.7 s after the page was asked for when a load event sent them, with
        # the map's components at 1.9 s); the chart, below them, comes after (`first_chart`).
        graph = gr.HTML(first.get("graph", ""), elem_id="graph")
        columns = gr.HTML(first.get("columns", ""), elem_id="columns")
        live_lines = gr.HTML(render.live_lines({}), elem_id="live-lines", container=False, padding=False)
        live_map = gr.HTML(render.LIVE_MAP_HIDDEN, elem_id="live-map", container=False, padding=False)
        link = gr.Markdown(elem_id="session-link")
        question = gr.Textbox(label="Question", value=first.get("question") or (examples[0] if examples else ""),
                              lines=1, elem_id="question")
        with gr.Row():
            example = gr.Dropdown(examples, label="Example questions (gold passages known)", value=None, scale=4)
            run_btn = gr.Button("Run", variant="primary", elem_id="run", scale=1)
        pickers = _method_pickers(state.llm_settings.backend if state.llm is not None else "none",
                                  state.public.show_paths)
        with gr.Row():
            k = gr.Slider(1, 20, value=5, step=1, label="k (passages)")
            iterations = gr.Slider(1, 4, value=2, step=1, label="GRIEVER iterations (n_i)")
            with_answer = gr.Checkbox(False, label="End with an answer (LLM, top-5 passages)", elem_id="answer")
        comparison = gr.Plot(label="Timings, tokens and recall of the run on show", elem_id="comparison")
        stage_click = script_box("stage-click")
        # The stage on show, as "method · stage": the state a re-render of the hop map opens on.
        graph_pick = gr.Dropdown(first.get("choices", []), value=_default_choice(first["item"].runs) if first else None,
                                 elem_id="graph-pick", allow_custom_value=True, visible=False)
    shell.first_session = first.get("session", "")
    shell.first_view = first
    shell.app.first_map_doc = first.get("graph_doc", "")
    return SimpleNamespace(sc=sc, sc_error=sc_error, sc_pick=sc_pick, live_btn=live_btn, question=question,
                           example=example, pickers=pickers, k=k, iterations=iterations, with_answer=with_answer,
                           run_btn=run_btn, link=link, columns=columns, live_lines=live_lines, live_map=live_map,
                           stage_click=stage_click,
                           graph_pick=graph_pick, graph=graph, comparison=comparison)



def _chart(fig):
    """The run's chart, shown only with something to draw."""
    return gr.update(value=fig, visible=fig is not None)


def _live_figure(prog, question: str):
    """The chart of a run still going: each method's stages that have arrived (finished runs whole);
    recall waits for the end, when every method has a ranking. None before any stage has arrived."""
    from retrieval.trace.model import RunResult

    runs = {m: prog.runs.get(m) or RunResult(m, question, stages=list(prog.stages.get(m) or []))
            for m in prog.methods if prog.runs.get(m) or prog.stages.get(m)}
    return render.comparison_figure(runs, set()) if runs else None

def wire(shell) -> None:
    """Its handlers: a live run, a recorded one, a stage's subgraph, `?session=` reopened."""
    app = shell.app
    state = shell.state
    kb = shell.kb
    session_state = shell.session_state
    visitor = shell.visitor
    sc = shell.ask.sc
    sc_pick = shell.ask.sc_pick
    live_btn = shell.ask.live_btn
    question = shell.ask.question
    example = shell.ask.example
    pickers = shell.ask.pickers
    k = shell.ask.k
    iterations = shell.ask.iterations
    with_answer = shell.ask.with_answer
    run_btn = shell.ask.run_btn
    link = shell.ask.link
    columns = shell.ask.columns
    live_lines = shell.ask.live_lines
    live_map = shell.ask.live_map
    stage_click = shell.ask.stage_click
    graph_pick = shell.ask.graph_pick
    graph = shell.ask.graph
    comparison = shell.ask.comparison
    example.change(lambda x: x or gr.update(), example, question)

    def ask(kb_name, q, chosen, k_value, n_iter, answer, who, request=None):
        try:
            state.throttle(who, request)
            # In public mode one address holds at most one request with LLM work at a time.
            with ExitStack() as held:
                held.enter_context(state.llm_slot(request, list(chosen), bool(answer)))
                for out, done in _ask_stream(kb_name, q, chosen, k_value, n_iter, answer, who):
                    if done:
                        # Released before the last update reaches the visitor: a client that
                        # asks again as soon as it has its answer must find the slot free (the
                        # soak's LLM visitors did not, and were refused).
                        held.close()
                    yield out
        except HopTraceError as e:
            yield (render.error_html(str(e)), "", gr.update(), _chart(None), "", "", render.live_lines({}),
                   render.LIVE_MAP_HIDDEN)

    def _ask_stream(kb_name, q, chosen, k_value, n_iter, answer, who):
        graph_sent, first, charted, columns_sent = None, True, None, None
        chart_at = None               # when the chart was drawn, and with how many runs ended
        mapped: dict[str, int] = {}   # the stages of each method the live hop map has (none: no frame yet)
        seq = 0                       # the frame's updates so far: a late one is dropped (hopmap.js)
        stream = run_side_by_side(state, kb_name, q, list(chosen), int(k_value),
                                  {"n_iterations": int(n_iter)}, answer=bool(answer), owner=who or "")
        titles = None
        for prog in stream:
            url = _session_url(prog.session_id)
            latest = prog.latest
            if titles is None:
                titles = _gold_titles(state, kb_name, prog.gold)
            # The first update clears what an earlier run or a recording left in the hop map,
            # stage picker and comparison, so nothing stale sits beside a live run.
            fresh, first = first, False
            # The hop map changes only when a stage with something to draw arrived: it follows the
            # newest stage ("watch each stage render"). The first such stage makes the frame; each
            # later one goes to that frame as the maps that changed (render.LIVE_MAP_JS).
            graph_out = "" if fresh else gr.update()
            map_out = render.LIVE_MAP_HIDDEN if fresh else gr.update()
            if latest and latest[1].subgraph and latest[1].subgraph.nodes and latest is not graph_sent:
                graph_sent = latest
                titles = _drawn_titles(state, kb_name, prog.runs, titles)
                have = {m: len(prog.runs[m].stages if m in prog.runs else prog.stages.get(m) or [])
                        for m in prog.methods}
                choice = f"{latest[0]} · {latest[1].name}"
                if not mapped:
                    graph_out = render.hop_maps(prog.runs, prog.gold, choice, titles, partial=prog.stages,
                                                question=q, live_id=prog.session_id)
                else:
                    seq += 1
                    map_out = render.live_map(prog.runs, prog.gold, prog.stages,
                                              {m for m, n in have.items() if n != mapped.get(m)}, choice,
                                              prog.session_id, seq, titles, q)
                mapped = have
            if not prog.done:
                # The chart is drawn from the stages that have arrived, and hidden until one has: a
                # live run showed an empty "Timings, tokens and recall" frame until it ended.
                chart = gr.update()
                if latest is not charted and _chart_due(chart_at, len(prog.runs)):
                    charted, chart_at = latest, (time.time(), len(prog.runs))
                    chart = _chart(_live_figure(prog, q))
                elif fresh:
                    chart = _chart(None)
                # The running lines, and the columns that gained a stage, go alone (render.LIVE_LINES_JS).
                grid, changed, columns_sent = _grid_update(prog, titles, columns_sent)
                yield (grid, graph_out, gr.update(choices=[], value=None) if fresh else gr.update(), chart,
                       f"Session `{prog.session_id}` (running…)", prog.session_id,
                       render.live_lines(prog.live, changed), map_out), False
            else:
                choices = _graph_choices(prog.runs)
                pick = _default_choice(prog.runs)
                # Done: laid out once more, by importance (gold, ranked, kept first), with each
                # lane only as tall as it needs; while it ran nothing moved (render.hop_maps partial).
                yield (_columns(prog, titles), render.hop_maps(prog.runs, prog.gold, pick, titles),
                       gr.update(choices=choices, value=pick or None),
                       _chart(render.comparison_figure(prog.runs, prog.gold)),
                       f"Session `{prog.session_id}` · [link to this comparison]({url})", prog.session_id,
                       render.live_lines({}), render.LIVE_MAP_HIDDEN), True

    def ask_picked(kb_name, q, k_value, n_iter, answer, who, request: gr.Request, *picked):
        yield from ask(kb_name, q, [m for chosen in picked for m in chosen], k_value, n_iter, answer, who,
                       request)

    run_btn.click(ask_picked, [kb, question, k, iterations, with_answer, visitor, *pickers], api_name="ask",
                  outputs=[columns, graph, graph_pick, comparison, link, session_state, live_lines, live_map],
                  concurrency_limit=8, concurrency_id="ask")
    live_btn.click(ask_picked, [kb, question, k, iterations, with_answer, visitor, *pickers],
                   [columns, graph, graph_pick, comparison, link, session_state, live_lines, live_map],
                   concurrency_limit=8, concurrency_id="ask")
    # The run is watched where its hop maps are: the form sits below the columns.
    for btn in (run_btn, live_btn):
        btn.click(None, js="() => { const g = document.querySelector('#graph');"
                           " if (g) g.scrollIntoView({block: 'start'}); }")

    def open_recorded(label):
        """A showcase question from the recording: no model runs, so it opens at once."""
        item = sc.find(label) if sc and label else None
        if item is None:
            return (gr.update(),) * (7 + len(pickers))
        runs = item.runs
        choices = _graph_choices(runs)
        pick = _default_choice(runs)
        titles = _gold_titles(state, sc.kb, item.gold)
        picked = [gr.update(value=[m for m in _picker_names(pk) if m in runs]) if runs else gr.update()
                  for pk in pickers]
        return ("demo", item.question, _showcase_grid(sc, item, titles),
                gr.update(choices=choices, value=pick or None),
                render.hop_maps(runs, set(item.gold), pick, titles),
                _chart(render.comparison_figure(runs, set(item.gold))), SHOWCASE_PREFIX + label, *picked)

    sc_pick.change(open_recorded, sc_pick, [kb, question, columns, graph_pick, graph, comparison,
                                            session_state, *pickers])

    def pick_graph(choice, sid):
        """The hop maps of the run on show, opened on `choice` (a stage link the page could not
        send to a hop map directly)."""
        if not sid:
            return gr.update()
        if sid.startswith(SHOWCASE_PREFIX):
            item = sc.find(sid[len(SHOWCASE_PREFIX):]) if sc else None
            if item is None:
                return gr.update()
            return render.hop_maps(item.runs, set(item.gold), choice, _gold_titles(state, sc.kb, item.gold))
        if sid.startswith(RUNS_PREFIX):
            runs, gold = _stored_runs(state.traces, sid[len(RUNS_PREFIX):].split(","))
        else:
            runs, gold, _, _ = _stored_session(state.traces, sid)
        return render.hop_maps(runs, gold, choice)

    # A click on a stage's map link in a column shows it in the hop map on the page that holds its
    # method, in the browser (render.STAGE_CLICK_JS); this box is the fallback when none does.
    stage_click.change(lambda clicked, sid: pick_graph(clicked.split("\t")[0], sid) if clicked else gr.update(),
                       [stage_click, session_state], graph)
    app.load(None, js=render.STAGE_CLICK_JS)
    app.load(None, js=render.LIVE_LINES_JS)
    app.load(None, js=render.LIVE_MAP_JS)


    def reopen(who, request: gr.Request):
        """`?session=ID` reopens a stored comparison exactly as it was; `?experiment=ID&question=Q`
        with the metric and the two methods (the lab page's drill-down, ui/pages.py) opens that
        question's two stored runs of the experiment."""
        keep = (gr.update(),) * (6 + len(pickers))
        query = request.query_params if request else {}
        pair = pages.pair_asked(query)
        if pair is not None:
            return open_pair(who, *pair)
        sid = query.get("session") or ""
        if sid and state.traces.session(sid) is None and state.traces.was_pruned(sid):
            return (gr.update(), _expired("comparison"), gr.update(), "", gr.update(), "") + keep[6:]
        if not sid or state.traces.session(sid) is None:   # the first view stays: its stages' bodies now
            return (gr.update(), first_columns() or gr.update()) + keep[2:]
        runs, gold, kb_name, q = _stored_session(state.traces, sid)
        choices = _graph_choices(runs)
        pick = _default_choice(runs)
        titles = _gold_titles(state, kb_name, gold)
        return (q, _stored_grid(runs, gold, titles=titles), gr.update(choices=choices, value=pick or None),
                render.hop_maps(runs, gold, pick, titles), _chart(render.comparison_figure(runs, gold)), sid) + keep[6:]

    def first_columns():
        """The first view's columns with their stages' bodies (its config carried the lines)."""
        return shell.first_view["columns_full"] if shell.first_view else ""

    def open_pair(who, exp_id, qid, metric, a, b):
        """An experiment's question: its two stored runs, exactly as stored (nothing re-runs)."""
        owner = state.owner_id(who)
        try:
            exp = evidence.find(shell.experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
            runs, gold, q, ids = evidence.open_pair(shell.comparisons, shell.experiments, exp, metric, a, b, qid, owner)
            note = evidence.pair_note(shell.comparisons, shell.experiments, exp, metric, a, b, qid, owner)
        except HopTraceError as e:   # the link's problem, over the first view it leaves on show
            return (gr.update(), evidence.error(e) + first_columns(), *(gr.update(),) * (4 + len(pickers)))
        choices = _graph_choices(runs)
        titles = _gold_titles(state, exp.kb, gold)
        first = next((f"{m} · {r.stages[-1].name}" for m, r in runs.items() if r.stages), None)
        picked = [gr.update(value=[m for m in _picker_names(pk) if m in (a, b)]) for pk in pickers]
        return (q, note + _stored_grid(runs, gold, titles=titles), gr.update(choices=choices, value=first),
                render.hop_maps(runs, gold, first, titles), _chart(render.comparison_figure(runs, gold)),
                RUNS_PREFIX + ",".join(ids), *picked)

    def first_chart(sid):
        """The first view's chart, once its hop map is drawn (render.FIRST_VIEW_GATE): plotly's
        drawing kept the map waiting (drawn 5.5-7 s after the page was asked for, 3.3-4 s without)."""
        first = shell.first_view
        if not first or sid != first["session"]:
            return gr.update()
        item = first["item"]
        return _chart(render.comparison_figure(paper_order(item.runs), set(item.gold)))

    app.load(reopen, shell.visitor, [question, columns, graph_pick, graph, comparison, session_state, *pickers],
             js=render.FIRST_VIEW_GATE, show_progress="hidden").then(first_chart, session_state, comparison,
                                                                show_progress="hidden")
