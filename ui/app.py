"""The HopTrace web app: ask, compare side by side, replay stored traces, benchmark, index.

Renders Stage records only (ui/render.py); runs methods through ui/ask.py; stores every
run with traces/store.py. `python app.py` or `hoptrace serve` starts it.
"""
from __future__ import annotations

import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

# Before gradio is imported: it reads this once. A public demo must not report its visitors'
# use to a third party, and offline the reporting only adds failing requests.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
import gradio as gr  # noqa: E402

from retrieval.bench.runner import run_bench
from retrieval.corpus.plain import load_plain_questions, plain_or_none
from retrieval.errors import HopTraceError, InputError
from retrieval.kb.presets import ExtractionPlan, build_from_files, ensure_demo
from retrieval.methods import METHODS, method_names
from retrieval.paths import resolve_kb
from retrieval import onnx_encoder, showcase as showcase_mod
from traces.experiments import Experiments, kb_fingerprint, method_spec, question_record
from traces.questionsets import BUILT_IN, QuestionSets, built_in
from traces.store import TraceStore

from . import evidence, judge_tab, render
from .ask import run_side_by_side, uses_llm
from .judging import JUDGE_KEYS_JS
from .picker import GROUPS, group_info
from .public import LimitError, PublicLimits, new_visitor_id, visitor_message
from .state import AppState

DEFAULT_METHODS = ["composed", "griever"]
RUN_COLUMNS = ["id", "when", "kb", "method", "question", "status", "ms", "tokens", "recall"]


def _columns(prog) -> str:
    return render.grid_html((render.column_html(m, prog.stages.get(m, []), prog.runs.get(m), prog.gold,
                                                running=not prog.done and m not in prog.runs,
                                                live=prog.live.get(m), cache=prog.html)
                             for m in prog.methods), prog.session_id)


def _graph_choices(runs: dict) -> list[str]:
    return [f"{m} · {s.name}" for m, run in runs.items() for s in run.stages if s.subgraph and s.subgraph.nodes]


def _pick_stage(runs: dict, choice: Optional[str]):
    if not choice or " · " not in choice:
        return None
    method, stage = choice.split(" · ", 1)
    run = runs.get(method)
    return next((s for s in run.stages if s.name == stage), None) if run else None


def _stored_session(traces: TraceStore, session_id: str) -> tuple[dict, set[str], str, str]:
    """Runs of a stored session exactly as saved (no recomputation): runs, gold, kb, question."""
    runs, gold, kb, question = {}, set(), "", ""
    for rid in traces.session_runs(session_id):
        run, info = traces.load_run(rid)
        runs[run.method] = run
        gold |= set(info["gold"])
        kb, question = info["kb"], run.question
    return runs, gold, kb, question


def _expired(what: str) -> str:
    return render.error_html(f"This {what} has expired: this demo keeps stored traces for a limited time and "
                             "space, and removed it. Run it again to see it.")


def _stored_runs(traces: TraceStore, run_ids: list[str]) -> tuple[dict, set[str]]:
    """Runs opened from an experiment, labelled by method as the drill-down showed them."""
    runs, gold = {}, set()
    for rid in run_ids:
        run, info = traces.load_run(rid)
        runs[run.method if run.method not in runs else f"{run.method} [{rid[:6]}]"] = run
        gold |= set(info["gold"])
    return runs, gold


SHOWCASE_PREFIX = "showcase:"
RUNS_PREFIX = "runs:"  # session_state of a pair opened from an experiment


def _load_showcase(kb: str):
    """The shipped recording, or None; a broken file must not stop the app (it says why)."""
    try:
        return showcase_mod.load_for(kb), ""
    except HopTraceError as e:
        return None, str(e)


def _showcase_grid(sc, item) -> str:
    note = (f"<div class='ht-recorded' id='recorded-banner'>▶ Recorded, not live: {render.esc(sc.banner)}. "
            f"Press <b>Run live</b> to run this question now.</div>")
    if item.stale:
        note += ("<div class='ht-meta'>Not shown, because the recording no longer matches this version: "
                 + ", ".join(f"{render.esc(m)} ({render.esc(why)})" for m, why in item.stale.items()) + "</div>")
    return note + _stored_grid(item.current_runs, set(item.gold))


def _stored_grid(runs: dict, gold: set[str], graph_links: bool = True) -> str:
    return render.grid_html(render.column_html(m, r.stages, r, gold, running=False, graph_links=graph_links)
                            for m, r in runs.items())


def build(state: AppState) -> gr.Blocks:
    kb_choices = state.kb_choices() or [("demo", "demo")]
    bad = state.kb_problems()
    first = next((v for _, v in kb_choices if v not in bad), None)
    if first is None:
        raise HopTraceError("no KB can be served: " + "; ".join(f"{n}: {why}" for n, why in bad.items()))
    demo_kb = state.kb(first)
    examples = [q.text for q in demo_kb.questions[:40]]
    all_methods = method_names()
    experiments = Experiments(state.traces)
    comparisons = evidence.ComparisonCache()

    with gr.Blocks(title="HopTrace") as app:
        gr.Markdown("# HopTrace\nPick methods, ask a multi-hop question, and watch every stage: what was "
                    "retrieved, filtered, rewritten and scored, and where a gold passage was lost.")
        with gr.Row():
            kb = gr.Dropdown(kb_choices, value=first, label="Knowledge base", scale=1, elem_id="kb")
            backends = gr.Markdown(_backends_line(state, demo_kb), elem_id="backends")
        session_state = gr.State("")
        # The visitor's id lives in their browser; in public mode it decides whose runs they see.
        visitor = gr.BrowserState("", storage_key="hoptrace-visitor")

        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Ask", id="ask"):
                sc, sc_error = _load_showcase("demo")
                with gr.Row(visible=sc is not None or bool(sc_error)):
                    sc_pick = gr.Dropdown([it.label for it in sc.items] if sc else [], value=None, scale=4,
                                          label=(f"Showcase: open a recorded run instantly ({sc.banner})" if sc
                                                 else f"Showcase unavailable: {sc_error}"), elem_id="showcase")
                    live_btn = gr.Button("Run live", elem_id="run-live", scale=1)
                question = gr.Textbox(label="Question", value=examples[0] if examples else "", lines=2, elem_id="question")
                example = gr.Dropdown(examples, label="Example questions (gold passages known)", value=None)
                with gr.Row():
                    pickers = _method_pickers(state.llm_settings.backend if state.llm is not None else "none")
                    k = gr.Slider(1, 20, value=5, step=1, label="k (passages)")
                    iterations = gr.Slider(1, 4, value=2, step=1, label="GRIEVER iterations (n_i)")
                    with_answer = gr.Checkbox(False, label="End with an answer (LLM, top-5 passages)", elem_id="answer")
                run_btn = gr.Button("Run", variant="primary", elem_id="run")
                link = gr.Markdown(elem_id="session-link")
                columns = gr.HTML(elem_id="columns")
                with gr.Accordion("Subgraph", open=True):
                    gr.HTML("<style>#stage-click{display:none}</style>")
                    stage_click = gr.Textbox(elem_id="stage-click", show_label=False, container=False)
                    graph_pick = gr.Dropdown([], label="Stage (or click a stage's graph link in its column)",
                                             elem_id="graph-pick", allow_custom_value=True)
                    graph = gr.HTML(elem_id="graph")
                comparison = gr.Plot(label="Comparison", elem_id="comparison")

            with gr.Tab("Traces", id="traces"):
                with gr.Row():
                    f_method = gr.Dropdown(["any"] + all_methods, value="any", label="Method")
                    f_text = gr.Textbox(label="Question contains")
                    f_btn = gr.Button("Refresh", elem_id="refresh-runs")
                runs_table = gr.Dataframe(headers=RUN_COLUMNS, interactive=False, wrap=True, elem_id="runs-table")
                with gr.Row():
                    run_a = gr.Textbox(label="Run id", elem_id="run-a")
                    run_b = gr.Textbox(label="Second run id (side by side)")
                    show_btn = gr.Button("Show stored run(s)", elem_id="show-runs")
                stored = gr.HTML(elem_id="stored")
                stored_plot = gr.Plot()
                with gr.Row():
                    export_ids = gr.Textbox(label="Export: run ids (comma-separated) or a session id")
                    export_btn = gr.Button("Export JSON")
                export_file = gr.File(label="Export")

            with gr.Tab("Benchmark", id="benchmark") as bench_tab:
                with gr.Row():
                    b_methods = gr.CheckboxGroup(all_methods, value=["bm25", "dense", "composed", "griever"],
                                                 label="Methods", elem_id="bench-methods")
                    b_limit = gr.Number(value=20, precision=0, label="Questions (max)", elem_id="bench-limit")
                    b_set = gr.Dropdown([BUILT_IN], value=BUILT_IN, label="Question set (Index tab adds yours)",
                                        elem_id="bench-set", allow_custom_value=True)
                b_btn = gr.Button("Run benchmark", variant="primary", elem_id="bench-run")
                b_table = gr.Dataframe(interactive=False, elem_id="bench-table")
                with gr.Row():
                    b_plot_lat = gr.Plot(label="recall@5 vs latency", elem_id="bench-latency")
                    b_plot_tok = gr.Plot(label="recall@5 vs tokens")
                gr.Markdown("**Reproduce a paper**: the rows of its tables that HopTrace implements, on this KB, "
                            "beside the paper's own figures, and whether each of its claims holds here.")
                with gr.Row():
                    r_paper = gr.Dropdown(["griever", "gear", "sag", "grasp"], value="griever", label="Paper",
                                          elem_id="repro-paper")
                    r_with_llm = gr.Checkbox(value=False, label="Include the rows that need the LLM (minutes a question "
                                                                "on 2 CPU cores)", elem_id="repro-with-llm")
                    r_llm_limit = gr.Number(value=5, precision=0, label="Questions for LLM rows (max)",
                                            elem_id="repro-llm-limit")
                r_btn = gr.Button("Reproduce", elem_id="repro-run")
                r_out = gr.HTML(elem_id="repro-out")
                r_plot = gr.Plot(label="ours vs paper", elem_id="repro-plot")
                gr.Markdown("**Experiments**: every benchmark and reproduction above (and `hoptrace bench` / "
                            "`reproduce` on this machine) keeps each question's trace. Pick one and two of its "
                            "methods: their difference with its uncertainty, where each lost the gold, and the "
                            "questions one by one. A click on a question opens both stored runs side by side in "
                            "the Ask tab.")
                with gr.Row():
                    e_pick = gr.Dropdown([], label="Experiment", scale=3, elem_id="exp-pick")
                    # Custom values pass: an event sent with the previous experiment's metric or methods
                    # (recall@5 of a gold experiment, then one without gold) is mapped to a valid one
                    # by show_experiment instead of failing Gradio's check of the choices.
                    e_metric = gr.Dropdown(["recall@5"], value="recall@5", label="Metric", scale=1,
                                           elem_id="exp-metric", allow_custom_value=True)
                    e_a = gr.Dropdown([], label="Method A", scale=1, elem_id="exp-a", allow_custom_value=True)
                    e_b = gr.Dropdown([], label="Method B", scale=1, elem_id="exp-b", allow_custom_value=True)
                    e_refresh = gr.Button("Refresh list", scale=0, elem_id="exp-refresh")
                e_summary = gr.HTML(elem_id="exp-summary")
                with gr.Row():
                    e_means = gr.Plot(label="means with 95 % intervals", elem_id="exp-means-plot")
                    e_groups = gr.Plot(label="by hop count / question type", elem_id="exp-groups")
                e_funnel = gr.Plot(label="where the gold is lost", elem_id="exp-funnel")
                e_rows = gr.Dataframe(headers=evidence.ROW_COLUMNS, interactive=False, wrap=True,
                                      column_widths=evidence.ROW_WIDTHS,
                                      elem_id="exp-rows", label="Questions (largest difference first; click a "
                                                                "header to sort, a row to open both runs)")

            j_pick = judge_tab.build_tab(state, experiments, visitor)

            with gr.Tab("Index", id="index"):
                gr.Markdown("Upload a corpus in HippoRAG format (`[{\"title\", \"text\"}]`) and, optionally, "
                            "questions. It is built with the LLM-free extractor (or imported OpenIE triples) "
                            "and becomes a knowledge base you can ask.")
                with gr.Row():
                    up_corpus = gr.File(label="Corpus JSON", file_types=[".json", ".gz"], elem_id="up-corpus")
                    up_questions = gr.File(label="Questions (optional): with gold (MuSiQue, HotpotQA, 2Wiki JSON) or "
                                                 "without (.txt, .json, .csv)", file_types=[".json", ".gz", ".txt", ".csv"],
                                           elem_id="up-questions")
                    up_openie = gr.File(label="OpenIE JSON (optional)", file_types=[".json", ".gz"])
                with gr.Row():
                    up_name = gr.Textbox(label="KB name", value="my_corpus", elem_id="up-name")
                    up_extractor = gr.Radio(["auto", "rules", "openie", "llm"], value="auto", label="Extractor",
                                            info="llm: GEAR triples, SAG events and GRASP propositions made by the "
                                                 "configured LLM (slow on CPU: ~30 s a passage)")
                up_btn = gr.Button("Build", variant="primary", elem_id="up-build")
                up_log = gr.Markdown(elem_id="up-log")
                gr.Markdown("**Your questions, no gold needed**: a `.txt` file (one question a line), a JSON list "
                            "of strings or of `{id, question[, answer]}`, or a CSV with a `question` column, added "
                            "as a question set to the knowledge base picked at the top. Bench it in the Benchmark "
                            "tab, then pool and judge the runs in the Judge tab.")
                with gr.Row():
                    qs_file = gr.File(label="Questions (.txt, .json, .csv)", file_types=[".txt", ".json", ".csv"],
                                      elem_id="qs-file")
                    qs_name = gr.Textbox(label="Question set name", value="my_questions", elem_id="qs-name")
                    qs_btn = gr.Button("Add questions", elem_id="qs-add")
                qs_log = gr.Markdown(elem_id="qs-log")
                qs_list = gr.Markdown(elem_id="qs-list")

        # --- Ask -------------------------------------------------------------------------
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
                yield render.error_html(str(e)), "", gr.update(), None, "", ""

        def _ask_stream(kb_name, q, chosen, k_value, n_iter, answer, who):
            graph_sent, first = None, True
            stream = run_side_by_side(state, kb_name, q, list(chosen), int(k_value),
                                      {"n_iterations": int(n_iter)}, answer=bool(answer), owner=who or "")
            for prog in stream:
                url = _session_url(prog.session_id)
                latest = prog.latest
                # The first update clears what an earlier run or a recording left in the graph,
                # stage picker and comparison, so nothing stale sits beside a live run.
                fresh, first = first, False
                # The graph iframe inlines vis-network (~0.5 MB): send it only when it changes.
                graph_out = "" if fresh else gr.update()
                if latest and latest[1].subgraph and latest[1].subgraph.nodes and latest is not graph_sent:
                    graph_sent = latest
                    graph_out = render.graph_iframe(latest[1].subgraph, prog.gold)
                if not prog.done:
                    yield (_columns(prog), graph_out,
                           gr.update(choices=[], value=None) if fresh else gr.update(),
                           None if fresh else gr.update(),
                           f"Session `{prog.session_id}` (running…)", prog.session_id), False
                else:
                    choices = _graph_choices(prog.runs)
                    yield (_columns(prog), graph_out,
                           gr.update(choices=choices, value=choices[-1] if choices else None),
                           render.comparison_figure(prog.runs, prog.gold),
                           f"Session `{prog.session_id}` · [link to this comparison]({url})", prog.session_id), True

        def ask_picked(kb_name, q, k_value, n_iter, answer, who, request: gr.Request, *picked):
            yield from ask(kb_name, q, [m for chosen in picked for m in chosen], k_value, n_iter, answer, who,
                           request)

        run_btn.click(ask_picked, [kb, question, k, iterations, with_answer, visitor, *pickers], api_name="ask",
                      outputs=[columns, graph, graph_pick, comparison, link, session_state],
                      concurrency_limit=8, concurrency_id="ask")
        live_btn.click(ask_picked, [kb, question, k, iterations, with_answer, visitor, *pickers],
                       [columns, graph, graph_pick, comparison, link, session_state],
                       concurrency_limit=8, concurrency_id="ask")

        def open_recorded(label):
            """A showcase question from the recording: no model runs, so it opens at once."""
            item = sc.find(label) if sc and label else None
            if item is None:
                return (gr.update(),) * (7 + len(pickers))
            runs = item.current_runs
            choices = _graph_choices(runs)
            st = _pick_stage(runs, choices[-1]) if choices else None
            picked = [gr.update(value=[m for m in _picker_names(pk) if m in runs]) if runs else gr.update()
                      for pk in pickers]
            return ("demo", item.question, _showcase_grid(sc, item),
                    gr.update(choices=choices, value=choices[-1] if choices else None),
                    render.graph_iframe(st.subgraph if st else None, set(item.gold)),
                    render.comparison_figure(runs, set(item.gold)), SHOWCASE_PREFIX + label, *picked)

        sc_pick.change(open_recorded, sc_pick, [kb, question, columns, graph_pick, graph, comparison,
                                                session_state, *pickers])

        def pick_graph(choice, sid):
            if not sid:
                return ""
            if sid.startswith(SHOWCASE_PREFIX):
                item = sc.find(sid[len(SHOWCASE_PREFIX):]) if sc else None
                st = _pick_stage(item.current_runs, choice) if item else None
                return render.graph_iframe(st.subgraph if st else None, set(item.gold) if item else set())
            if sid.startswith(RUNS_PREFIX):
                runs, gold = _stored_runs(state.traces, sid[len(RUNS_PREFIX):].split(","))
            else:
                runs, gold, _, _ = _stored_session(state.traces, sid)
            st = _pick_stage(runs, choice)
            return render.graph_iframe(st.subgraph if st else None, gold)

        graph_pick.change(pick_graph, [graph_pick, session_state], graph)
        # A click on a stage's graph link in a column picks that stage (render.STAGE_CLICK_JS).
        stage_click.change(lambda clicked: gr.update(value=clicked.split("\t")[0]) if clicked else gr.update(),
                           stage_click, graph_pick)
        app.load(None, js=render.STAGE_CLICK_JS)
        app.load(None, js=JUDGE_KEYS_JS)

        def reopen(request: gr.Request):
            """`?session=ID` reopens a stored comparison exactly as it was."""
            sid = (request.query_params.get("session") if request else None) or ""
            if sid and state.traces.session(sid) is None and state.traces.was_pruned(sid):
                return (gr.update(), _expired("comparison"), gr.update(), gr.update(), gr.update(), "")
            if not sid or state.traces.session(sid) is None:
                return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), ""
            runs, gold, _, q = _stored_session(state.traces, sid)
            choices = _graph_choices(runs)
            st = _pick_stage(runs, choices[-1]) if choices else None
            return (q, _stored_grid(runs, gold), gr.update(choices=choices, value=choices[-1] if choices else None),
                    render.graph_iframe(st.subgraph if st else None, gold),
                    render.comparison_figure(runs, gold), sid)

        app.load(reopen, None, [question, columns, graph_pick, graph, comparison, session_state])

        def reopen_experiment(who, request: gr.Request):
            """`?experiment=ID` opens the Benchmark tab on that experiment. The whole id is a
            capability in public mode, as a session link is: it opens for whoever has it."""
            eid = ((request.query_params.get("experiment") if request else None) or "").strip()
            mine = evidence.choices(experiments, state.owner_filter(who))
            if not eid:
                return gr.update(), gr.update(choices=mine), gr.update(), gr.update(choices=mine)
            try:
                exp = evidence.find(experiments, eid, state.owner_filter(who) if state.public.enabled else None)
            except HopTraceError:
                if state.traces.was_pruned(eid):
                    return (gr.Tabs(selected="benchmark"), gr.update(choices=mine), _expired("experiment"),
                            gr.update(choices=mine))
                return gr.update(), gr.update(choices=mine), gr.update(), gr.update(choices=mine)
            pick = _experiment_pick(exp, who)
            return gr.Tabs(selected="benchmark"), pick, gr.update(), pick

        # --- Traces ------------------------------------------------------------------------
        def list_runs(method, text, who):
            rows = state.traces.list_runs(None if method == "any" else method, text or None,
                                          owner=state.owner_filter(who))
            return [[r.id, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at)), r.kb, r.method,
                     r.question, r.status, round(r.latency_ms, 1), r.tokens_in + r.tokens_out,
                     "" if r.recall is None else round(r.recall, 3)] for r in rows]

        f_btn.click(list_runs, [f_method, f_text, visitor], runs_table)

        def arrive(who):
            """A first visit gets its id (kept in the browser) before the Traces tab lists anything."""
            return who or new_visitor_id()

        loaded = app.load(arrive, visitor, visitor)
        loaded.then(list_runs, [f_method, f_text, visitor], runs_table)
        loaded.then(reopen_experiment, visitor, [tabs, e_pick, e_summary, j_pick])
        # In public mode the KBs this visitor built join the list; other visitors' never do.
        loaded.then(lambda who: gr.update(choices=state.kb_choices(who)), visitor, kb)
        def backends_for(name):
            try:
                return _backends_line(state, state.kb(name))
            except HopTraceError as e:
                return f"<span class='ht-err'>{render.esc(e)}</span>"

        app.load(backends_for, kb, backends)
        if state.export is not None:  # a failing collector shows in the header at the next ask
            for btn in (run_btn, live_btn):
                btn.click(backends_for, kb, backends, queue=False, show_progress="hidden")

        def show(a, b):
            ids = [x.strip() for x in (a, b) if x and x.strip()]
            if not ids:
                return render.error_html("enter a run id from the table"), None
            runs, gold = {}, set()
            try:
                for rid in ids:
                    run, info = state.traces.load_run(rid)
                    runs[f"{run.method} [{rid[:6]}]"] = run
                    gold |= set(info["gold"])
            except HopTraceError as e:
                return render.error_html(str(e)), None
            return _stored_grid(runs, gold, graph_links=False), render.comparison_figure(runs, gold)

        show_btn.click(show, [run_a, run_b], [stored, stored_plot])

        def pick_row(evt: gr.SelectData, a):
            """Clicking a row fills the first free run id box (two clicks: side by side)."""
            rid = str(evt.row_value[0]) if evt.row_value else ""
            return (a, rid) if a and a != rid else (rid, gr.update())

        runs_table.select(pick_row, [run_a], [run_a, run_b]).then(show, [run_a, run_b], [stored, stored_plot])

        def export(ids_text, who):
            ids = [x.strip() for x in (ids_text or "").split(",") if x.strip()]
            if len(ids) == 1 and state.traces.session(ids[0]):
                ids = state.traces.session_runs(ids[0])
            if not ids:
                raise gr.Error("enter run ids or a session id")
            try:
                data = state.traces.export(ids, owner=state.owner_filter(who))
            except HopTraceError as e:
                raise gr.Error(str(e))
            path = Path(tempfile.mkdtemp(prefix="hoptrace-export-")) / "traces.json"
            path.write_text(data)
            return str(path)

        export_btn.click(export, [export_ids, visitor], export_file)

        # --- Benchmark -----------------------------------------------------------------------
        def set_questions(open_kb, set_name, who):
            if not set_name or set_name == BUILT_IN:
                if not open_kb.questions:
                    raise gr.Error(f"KB {open_kb.name} has no questions of its own: add a question set in the Index "
                                   "tab and pick it here")
                return open_kb.questions
            sets = QuestionSets(state.traces)
            try:
                return sets.questions(sets.get(open_kb.name, set_name, state.owner_filter(who)))
            except HopTraceError as e:
                raise gr.Error(str(e))

        def set_choices(kb_name, who, value=None):
            names = [BUILT_IN] + [s.name for s in QuestionSets(state.traces).list(kb_name, state.owner_filter(who))]
            return gr.update(choices=names, value=value if value in names else BUILT_IN)

        def sets_listing(kb_name, who) -> str:
            """The KB's question sets with their source and size (the Index tab)."""
            try:
                own = state.kb(kb_name).questions
            except HopTraceError:
                own = []
            sets = ([built_in(kb_name, own)] if own else []) + QuestionSets(state.traces).list(
                kb_name, state.owner_filter(who))
            if not sets:
                return f"KB **{render.esc(kb_name)}** has no questions yet: add a set above."
            return f"Question sets of **{render.esc(kb_name)}**:\n\n" + "\n".join(
                f"- {render.esc(s.describe())}" for s in sets)

        kb.change(lambda k, who, cur: set_choices(k, who, cur), [kb, visitor, b_set], b_set)
        kb.change(sets_listing, [kb, visitor], qs_list)
        app.load(lambda k, who: set_choices(k, who), [kb, visitor], b_set)
        app.load(sets_listing, [kb, visitor], qs_list)

        def add_questions(kb_name, file, set_name, who, request: gr.Request):
            if file is None:
                raise gr.Error("upload a questions file first")
            try:
                state.check_kb(kb_name, who)
                state.throttle(who, request)
                questions = load_plain_questions(Path(file))
                qs = QuestionSets(state.traces).add(kb_name, set_name, questions, Path(file).name,
                                                    owner=state.owner_id(who))
            except HopTraceError as e:
                if not state.public.show_paths:
                    raise gr.Error(visitor_message(str(e), {file: Path(file).name}))
                raise gr.Error(str(e))
            return (f"Added to **{render.esc(kb_name)}**: {render.esc(qs.describe())}. Pick it in the Benchmark "
                    "tab's *Question set*.", set_choices(kb_name, who, qs.name))

        qs_btn.click(add_questions, [kb, qs_file, qs_name, visitor], [qs_log, b_set]).then(
            sets_listing, [kb, visitor], qs_list)

        def bench(kb_name, chosen, limit, set_name, who, request: gr.Request, progress=gr.Progress()):
            if not chosen:
                raise gr.Error("pick at least one method")
            try:
                state.check_kb(kb_name, who)
                state.public.check_bench(int(limit or 1))
                state.public.check_methods(list(chosen), uses_llm)
                state.throttle(who, request)
            except HopTraceError as e:
                raise gr.Error(str(e))
            try:
                open_kb = state.kb(kb_name)
            except HopTraceError as e:
                raise gr.Error(str(e))
            questions = set_questions(open_kb, set_name, who)[: max(1, int(limit or 1))]
            exp = _start_experiment("app", open_kb, list(chosen), {}, questions, who,
                                    {"methods": ",".join(chosen), "limit": int(limit or 1),
                                     "question_set": set_name or BUILT_IN})
            try:
                with state.llm_slot(request, list(chosen)):
                    res = run_bench(open_kb.ctx, kb_name, questions, list(chosen), progress=False,
                                    on_progress=lambda d, t, m: progress(d / t, desc=f"{m}: {d}/{t}"),
                                    sink=experiments.sink(exp))
            except LimitError as e:
                experiments.finish(exp, {}, status="failed")
                raise gr.Error(str(e))
            except Exception:
                experiments.finish(exp, {}, status="failed")
                raise
            experiments.finish(exp, res.to_json(include_per_question=False))
            cols = [c for c in ("recall@5", "recall@10", "anyhit@5") if any(c in r for r in res.methods.values())]
            cols += ["latency_ms_p50", "tokens_per_question"]
            table = [[m] + [row.get(c) for c in cols] for m, row in res.methods.items()]
            return (gr.update(value=table, headers=["method"] + cols), _scatter(res, "latency_ms_p50"),
                    _scatter(res, "tokens_per_question"),
                    gr.update(choices=evidence.choices(experiments, state.owner_filter(who)), value=exp.id))

        def _start_experiment(kind, open_kb, labels, specs, questions, who, args):
            from retrieval.methods import make_method
            spec = {"methods": {}, "ks": [2, 5, 10, 15], "protocol": "per-k",
                    "questions": [question_record(q) for q in questions], "args": args}
            for label in labels:
                name, settings = specs.get(label, (label, {}))
                spec["methods"][label] = method_spec(make_method(name, open_kb.ctx, **settings), name, settings)
            llm = open_kb.ctx.llm.describe() if open_kb.ctx.llm else "none"
            return experiments.start(kind, open_kb.name, kb_fingerprint(open_kb.ctx.store), llm, spec,
                                     owner=who or "")

        b_btn.click(bench, [kb, b_methods, b_limit, b_set, visitor], [b_table, b_plot_lat, b_plot_tok, e_pick],
                    concurrency_limit=1, concurrency_id="bench")

        def reproduce_paper(kb_name, paper, limit, with_llm, llm_limit, who, request: gr.Request):
            from retrieval.bench.reproduce import figure, render as render_rep, reproduce
            try:
                state.public.check_bench(int(limit or 1))
                if with_llm:
                    state.public.check_bench(int(llm_limit or 1))
                state.check_kb(kb_name, who)
                state.throttle(who, request)
            except HopTraceError as e:
                raise gr.Error(str(e))
            try:
                open_kb = state.kb(kb_name)
            except HopTraceError as e:
                raise gr.Error(str(e))
            questions = open_kb.questions[: max(1, int(limit or 1))]
            if not questions:
                raise gr.Error(f"KB {kb_name} has no questions with gold passages")
            from retrieval.bench.reproduce import select_rows
            include = bool(with_llm) and open_kb.ctx.llm is not None
            rows = select_rows(paper, include)
            exp = _start_experiment("reproduce", open_kb, [r.key for r in rows],
                                    {r.key: (r.method, dict(r.settings)) for r in rows}, questions, who,
                                    {"paper": paper, "limit": int(limit or 1), "llm_rows": include,
                                     "llm_limit": int(llm_limit or 1)})
            try:
                with state.llm_slot(request, [r.method for r in rows if include]):
                    rep = reproduce(open_kb.ctx, kb_name, questions, paper, progress=False, include_llm=include,
                                    llm_limit=max(1, int(llm_limit or 1)), sink=experiments.sink(exp))
            except HopTraceError as e:
                experiments.finish(exp, {}, status="failed")
                raise gr.Error(str(e))
            experiments.finish(exp, rep.to_json())
            note = "" if include else ("<p>The rows that need an LLM were left out"
                                       + ("" if open_kb.ctx.llm is not None else " (no LLM is configured)") + ".</p>")
            return (f"{note}<pre>{render.esc(render_rep(rep))}</pre>", figure(rep),
                    gr.update(choices=evidence.choices(experiments, state.owner_filter(who)), value=exp.id))

        r_btn.click(reproduce_paper, [kb, r_paper, b_limit, r_with_llm, r_llm_limit, visitor], [r_out, r_plot, e_pick],
                    concurrency_limit=1, concurrency_id="bench")

        # --- Experiments: compare two methods, drill down to a question's two stored runs -------
        def show_experiment(exp_id, metric, a, b, who, current_kb=None):
            """Fills the experiment's views; the method and metric pickers follow the experiment."""
            if not exp_id:
                return (gr.update(),) * 11
            exp = None
            try:
                exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
                metrics = evidence.metrics(experiments, exp, state.owner_id(who))
                if not metrics:
                    raise InputError(f"experiment {exp.id[:12]}'s questions have no gold: pool and judge its runs "
                                     "in the Judge tab, then compare it here on the judgments")
                metric = metric if metric in metrics else next(
                    (m for m in ("recall@5", "ndcg@5") if m in metrics), metrics[0])
                v = evidence.view(comparisons, experiments, exp, metric, a, b, state.owner_id(who))
            except HopTraceError as e:
                return ((evidence.error(e),) + (None,) * 3 + (gr.update(value=[]),) + (gr.update(),) * 4
                        + (_experiment_pick(exp, who) if exp else gr.update(), _follow_kb(exp, who, current_kb)))
            # The header's KB follows the experiment, so the next Run asks the KB its runs came from.
            return (v.summary_html, v.means_fig, v.groups_fig, v.funnel_fig, gr.update(value=v.rows),
                    gr.update(choices=metrics, value=metric), gr.update(choices=exp.methods, value=v.a),
                    gr.update(choices=exp.methods, value=v.b), gr.update(value=exp.id),
                    _experiment_pick(exp, who), _follow_kb(exp, who, current_kb))

        def _experiment_pick(exp, who):
            """An experiment picker on `exp`: the visitor's list, with `exp` added when a link opened it."""
            mine = evidence.choices(experiments, state.owner_filter(who))
            if exp.id not in {v for _, v in mine}:
                mine = [(exp.describe(), exp.id)] + mine
            return gr.update(choices=mine, value=exp.id)

        def _follow_kb(exp, who, current_kb):
            if exp is None or exp.kb == current_kb or exp.kb not in state.kb_names(who):
                return gr.update()
            return gr.update(value=exp.kb)

        exp_outputs = [e_summary, e_means, e_groups, e_funnel, e_rows, e_metric, e_a, e_b, e_pick, j_pick, kb]
        for trigger in (e_pick.input, e_metric.input, e_a.input, e_b.input):
            trigger(show_experiment, [e_pick, e_metric, e_a, e_b, visitor, kb], exp_outputs)
        e_pick.change(show_experiment, [e_pick, e_metric, e_a, e_b, visitor, kb], exp_outputs)
        # Back from the Judge tab, the metrics include the judged ones the new grades allow.
        bench_tab.select(show_experiment, [e_pick, e_metric, e_a, e_b, visitor, kb], exp_outputs)
        e_refresh.click(lambda who: (gr.update(choices=evidence.choices(experiments, state.owner_filter(who))),) * 2,
                        visitor, [e_pick, j_pick])

        def open_question(evt: gr.SelectData, exp_id, metric, a, b, who):
            """A row's two stored runs, exactly as stored (nothing re-runs), in the Ask tab's columns."""
            qid = str(evt.row_value[0]) if evt.row_value else ""
            try:
                exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
                runs, gold, q, ids = evidence.open_pair(comparisons, experiments, exp, metric, a, b, qid,
                                                        state.owner_id(who))
            except HopTraceError as e:
                return (gr.update(),) * 5 + (evidence.error(e),) + (gr.update(),) * (2 + len(pickers))
            choices = _graph_choices(runs)
            st = _pick_stage(runs, choices[-1]) if choices else None
            scores = " · ".join(f"{render.esc(m)} {render.esc(metric)} {v}" for m, v in zip((a, b), evt.row_value[3:5]))
            note = (f"<div class='ht-recorded' id='experiment-banner'>Stored runs of experiment "
                    f"<code>{render.esc(exp.id[:12])}</code>, not re-run: question {render.esc(qid)} · {scores}. "
                    f"A method that cut one longer ranking shows all of it; a missed gold passage names the last "
                    f"stage that held it.</div>")
            picked = [gr.update(value=[m for m in _picker_names(pk) if m in (a, b)]) for pk in pickers]
            return (gr.Tabs(selected="ask"), q, note + _stored_grid(runs, gold),
                    gr.update(choices=choices, value=choices[-1] if choices else None),
                    render.graph_iframe(st.subgraph if st else None, gold), gr.update(),
                    render.comparison_figure(runs, gold), RUNS_PREFIX + ",".join(ids), *picked)

        e_rows.select(open_question, [e_pick, e_metric, e_a, e_b, visitor],
                      [tabs, question, columns, graph_pick, graph, e_summary, comparison, session_state, *pickers])

        # --- Index ---------------------------------------------------------------------------
        def index(corpus, qfile, openie, name, extractor, who, request: gr.Request,
                  progress=gr.Progress(track_tqdm=True)):
            if corpus is None:
                raise gr.Error("upload a corpus file first")
            name = (name or "").strip()
            if not name.replace("_", "").replace("-", "").isalnum():
                raise gr.Error("KB name: letters, digits, - and _ only")
            try:
                state.public.check_extractor(extractor)
                if state.public.enabled and resolve_kb(name).exists():
                    # A visitor must not add passages to a KB others use (the demo included).
                    raise LimitError(f"a KB named {name!r} exists already; on this public demo pick a new name")
                state.throttle(who, request)
                plan = ExtractionPlan(extractor, Path(openie) if openie else None, llm=state.llm_settings)
                # Questions without gold are read before the build (a bad file fails fast) and become a
                # question set once it is done; a gold-format file goes into the KB as before.
                plain = plain_or_none(Path(qfile)) if qfile else None
                report = build_from_files(resolve_kb(name), Path(corpus), Path(qfile) if qfile and plain is None
                                          else None, plan.openie, name=name, progress=True, plan=plan,
                                          max_passages=state.public.passage_cap())
                added = (QuestionSets(state.traces).add(name, Path(qfile).stem[:60] or "questions", plain,
                                                        Path(qfile).name, owner=state.owner_id(who))
                         if plain else None)
            except HopTraceError as e:
                if not state.public.show_paths:  # name each file as the visitor named it
                    raise gr.Error(visitor_message(str(e), {f: Path(f).name for f in (corpus, qfile, openie) if f}))
                raise gr.Error(str(e))
            state.forget(name)
            if state.public.enabled:
                state.kb_owners.claim(name, who or "")
            d = report.as_dict()
            msg = (f"Built **{render.esc(name)}**: {d['passages_total']} passages ({d['passages_added']} new), "
                   f"{d['questions']} questions, {d['seconds']} s. Pick it under *Knowledge base*.")
            if added is not None:
                msg += f" Question set added: {render.esc(added.describe())}."
            for run in report.llm:
                msg += (f"\n\n- LLM {render.esc(run['layer'])}: {run['passages']} passages, {run['tokens_in']:,} tokens in / "
                        f"{run['tokens_out']:,} out, {run['seconds']} s, **{run['failed']} failed**")
            return msg, gr.update(choices=state.kb_choices(who), value=name)

        up_btn.click(index, [up_corpus, up_questions, up_openie, up_name, up_extractor, visitor], [up_log, kb],
                     concurrency_limit=1, concurrency_id="index")
    return app


def _backends_line(state: AppState, open_kb) -> str:
    llm_methods = ", ".join(n for n, m in METHODS.items() if m.uses_llm)
    where = f" · traces in `{render.esc(str(state.traces.path))}`" if state.public.show_paths else ""
    # A trace file kept aside at start is said once, here: names only, never a directory.
    recovered = (f"\n\n<span class='ht-err' id='traces-recovered'>⚠ {render.esc(state.traces.recovered)}</span>"
                 if state.traces.recovered else "")
    failing = state.export.status() if state.export is not None else None
    exporting = (f"\n\n<span class='ht-err' id='export-failing'>⚠ {render.esc(_export_line(state, failing))}</span>"
                 if failing else "")
    return (f"**Embedder** {open_kb.ctx.embedder.name} · **LLM** {render.esc(state.llm_line())} — used by "
            f"{llm_methods} and the answer step{where}{recovered}{exporting}")


def _export_line(state: AppState, status: str) -> str:
    # The collector's URL is the operator's; a public page says only that export fails.
    return status if state.public.show_paths else "span export is failing; runs are still stored"


def _method_pickers(llm: str) -> list:
    """One checkbox group per paper, its ablations folded beneath it; each group's info line gives
    the paper tables and the expected time of each method (ui/picker.py). Wrapped in #methods so
    every method's checkbox is found under one selector."""
    out = []
    with gr.Column(elem_id="methods", scale=2):
        for g in GROUPS:
            out.append(gr.CheckboxGroup(list(g.methods), value=[m for m in g.methods if m in DEFAULT_METHODS],
                                        label=f"{g.title} · {g.tables}", info=group_info(g.methods, llm),
                                        elem_classes=["ht-picker"]))
            if g.ablations:
                with gr.Accordion(f"{g.title} ablations", open=False, elem_classes=["ht-ablations"]):
                    out.append(gr.CheckboxGroup(list(g.ablations), value=[], show_label=False,
                                                info=group_info(g.ablations, llm), elem_classes=["ht-picker"]))
    return out


def _picker_names(picker) -> list[str]:
    return [c[1] if isinstance(c, (tuple, list)) else c for c in picker.choices]


def _scatter(res, x_key: str):
    import plotly.graph_objects as go

    names = list(res.methods)
    if not all("recall@5" in res.methods[n] for n in names):
        return None   # questions without gold: no recall to plot until the pool is judged (Judge tab)
    fig = go.Figure(go.Scatter(x=[res.methods[n][x_key] for n in names], y=[res.methods[n]["recall@5"] for n in names],
                               mode="markers+text", text=names, textposition="top center"))
    fig.update_layout(xaxis_title=x_key, yaxis_title="recall@5", height=320, margin=dict(l=10, r=10, t=30, b=10))
    return fig


def _session_url(session_id: str) -> str:
    """Relative, so it is right behind any host or proxy (Spaces included)."""
    return f"?session={session_id}"


def main(host: str | None = None, port: int | None = None, llm_settings=None, profile: str | None = None,
         public: bool | None = None, otlp: str | None = None) -> None:
    t0 = time.time()
    onnx_encoder.serving_mode()
    ensure_demo()
    state = AppState(llm_settings=llm_settings, profile=profile, public=PublicLimits.from_env(public), otlp=otlp)
    state.start_llm()
    app = build(state)
    mode = "public mode (visitors kept apart, caps on)" if state.public.enabled else "local mode"
    if state.export is not None:
        mode += f", spans to {state.export.url}"
    print(f"HopTrace ready in {time.time() - t0:.1f} s, {mode} (KBs: {', '.join(state.kb_names())})", flush=True)
    serve(app, state, server_name=host or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
          server_port=port or int(os.environ.get("GRADIO_SERVER_PORT", "7860")))


def serve(app: gr.Blocks, state: AppState, prevent_thread_lock: bool = False, **launch: object) -> None:
    """Queue and launch as every entry point must (the app, the tests, bench-app): the theme
    with system fonts (Gradio's default theme fetches Google Fonts: the page must make no
    request outside this server), the upload cap of public mode, and the route that serves
    vis-network to the graph iframes."""
    # uvicorn would take the client's address from X-Forwarded-For whenever the connection comes from
    # loopback; public mode decides itself whether that header is trusted (PublicLimits.trust_proxy),
    # so the socket's peer must reach it unchanged. An operator's own FORWARDED_ALLOW_IPS wins.
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                              font_mono=["ui-monospace", "SFMono-Regular", "monospace"])
    app.queue(default_concurrency_limit=2, max_size=32).launch(
        theme=theme, show_error=True, max_file_size=state.public.upload_cap(), prevent_thread_lock=True, **launch)
    _add_vis_route(app.server_app)
    if not prevent_thread_lock:
        app.block_thread()


def _add_vis_route(server) -> None:
    """Added once the server exists (Starlette reads its routes per request): a fixed name, so
    the page never shows where the file lives on the server."""
    from fastapi import HTTPException
    from fastapi.responses import FileResponse

    def vis(name: str):
        try:
            return FileResponse(render.vis_file(name), headers={"Cache-Control": "public, max-age=86400"})
        except FileNotFoundError:
            raise HTTPException(404, "not found") from None

    server.add_api_route(f"/{render.VIS_ROUTE}/{{name}}", vis, methods=["GET"], include_in_schema=False)
