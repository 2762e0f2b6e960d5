"""The Traces tab: stored runs listed, opened side by side, exported as JSON."""
from __future__ import annotations

import time
from types import SimpleNamespace

import gradio as gr

from retrieval.core.errors import HopTraceError, InputError

from .. import downloads, render
from .shared import _gold_titles, _stored_grid

RUN_COLUMNS = ["id", "when", "kb", "method", "question", "status", "ms", "tokens", "recall"]


def layout(shell) -> SimpleNamespace:
    """The tab's components, in page order."""
    all_methods = shell.all_methods
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
            export_ids = gr.Textbox(label="Export: run ids (comma-separated) or a session id", elem_id="export-ids")
            export_btn = gr.Button("Export JSON", elem_id="export-run")
        export_file = gr.File(label="Export", elem_id="export-file")
    return SimpleNamespace(f_method=f_method, f_text=f_text, f_btn=f_btn, runs_table=runs_table, run_a=run_a,
                           run_b=run_b, show_btn=show_btn, stored=stored, stored_plot=stored_plot,
                           export_ids=export_ids, export_btn=export_btn, export_file=export_file)


def wire(shell) -> None:
    """Its handlers: list, open side by side, export."""
    state = shell.state
    visitor = shell.visitor
    f_method = shell.traces.f_method
    f_text = shell.traces.f_text
    f_btn = shell.traces.f_btn
    runs_table = shell.traces.runs_table
    run_a = shell.traces.run_a
    run_b = shell.traces.run_b
    show_btn = shell.traces.show_btn
    stored = shell.traces.stored
    stored_plot = shell.traces.stored_plot
    export_ids = shell.traces.export_ids
    export_btn = shell.traces.export_btn
    export_file = shell.traces.export_file
    def list_runs(method, text, who):
        rows = state.traces.list_runs(None if method == "any" else method, text or None,
                                      owner=state.owner_filter(who))
        return [[r.id, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at)), r.kb, r.method,
                 r.question, r.status, round(r.latency_ms, 1), r.tokens_in + r.tokens_out,
                 "" if r.recall is None else round(r.recall, 3)] for r in rows]

    f_btn.click(list_runs, [f_method, f_text, visitor], runs_table)


    def show(a, b):
        ids = [x.strip() for x in (a, b) if x and x.strip()]
        if not ids:
            return render.error_html("enter a run id from the table"), None
        runs, gold, kb_name = {}, set(), ""
        try:
            for rid in ids:
                run, info = state.traces.load_run(rid)
                runs[f"{run.method} [{rid[:6]}]"] = run
                gold |= set(info["gold"])
                kb_name = info["kb"]
        except HopTraceError as e:
            return render.error_html(str(e)), None
        titles = _gold_titles(state, kb_name, gold)
        # The same views as the Ask tab: each run's hop map, then its column, whose stage links
        # show that stage in the map above.
        return (render.hop_maps(runs, gold, None, titles) + _stored_grid(runs, gold, titles=titles),
                render.comparison_figure(runs, gold))

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
            raise InputError("enter run ids or a session id")
        owner = state.owner_filter(who)
        data = state.traces.export(ids, owner=owner)
        tag = downloads.tag(owner, ",".join(ids))
        return str(downloads.write(f"hoptrace-traces-{tag}.json", lambda p: p.write_text(data)))

    export_btn.click(export, [export_ids, visitor], export_file)
    shell.list_runs = list_runs
