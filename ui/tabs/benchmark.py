"""The Benchmark tab: methods benched on a question set, a paper's tables reproduced, and stored
experiments compared with their drill-down to a question's two stored runs."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from retrieval.bench.runner import run_bench
from retrieval.core.errors import HopTraceError, InputError
from traces.storage.experiments import kb_fingerprint, method_spec, question_record
from traces.storage.questionsets import BUILT_IN, QuestionSets

from .. import evidence, messages, pages, render
from ..ask import uses_llm
from .shared import _expired, script_box


def _scatter(res, x_key: str):
    import plotly.graph_objects as go

    names = list(res.methods)
    if not all("recall@5" in res.methods[n] for n in names):
        return None   # questions without gold: no recall to plot until the pool is judged (Judge tab)
    fig = go.Figure(go.Scatter(x=[res.methods[n][x_key] for n in names], y=[res.methods[n]["recall@5"] for n in names],
                               mode="markers+text", text=names, textposition="top center"))
    fig.update_layout(xaxis_title=x_key, yaxis_title="recall@5", height=320, margin=dict(l=10, r=10, t=30, b=10))
    return fig



def _cell(row: dict, c: str):
    """A table cell: money as dollars or "price unknown", a measure with its spread over repetitions."""
    from retrieval.core.money import usd_text

    if c == "usd_per_question":
        return usd_text(row.get(c))
    v, sd = row.get(c), row.get(f"{c}_sd")
    return v if sd is None or v is None else f"{v} ± {sd}"


# Opens a row's pair on the Ask page; this page's address first becomes the experiment's own, so
# the browser's Back comes back to it.
OPEN_LINK_JS = """(link) => {
  if (!link) return;
  const exp = new URLSearchParams(link.slice(link.indexOf('?'))).get('experiment');
  history.replaceState(null, '', '?' + new URLSearchParams({experiment: exp}));
  location.assign(link);
}"""


def layout(shell) -> SimpleNamespace:
    """The tab's components, in page order."""
    all_methods = shell.all_methods
    with gr.Tab("Benchmark", id="benchmark") as bench_tab:
        with gr.Row():
            b_methods = gr.CheckboxGroup(all_methods, value=["bm25", "dense", "composed", "griever"],
                                         label="Methods", elem_id="bench-methods")
            b_limit = gr.Number(value=20, precision=0, label="Questions (max)", elem_id="bench-limit")
            b_set = gr.Dropdown([BUILT_IN], value=BUILT_IN, label="Question set (Index tab adds yours)",
                                elem_id="bench-set", allow_custom_value=True)
        with gr.Row():
            b_answer = gr.Checkbox(value=False, label="End with an answer (EM / F1, and where answers were lost; "
                                                      "needs the LLM)", elem_id="bench-answer")
            b_repeat = gr.Number(value=1, precision=0, minimum=1, maximum=5, label="Repetitions (spread, stability)",
                                 elem_id="bench-repeat")
            b_budget = gr.Number(value=0, precision=0, minimum=0, label="Context budget in tokens (0 = off)",
                                 elem_id="bench-budget")
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
        with gr.Row():
            e_tradeoff = gr.Plot(label="quality against cost a question", elem_id="exp-tradeoff-plot")
            e_funnel = gr.Plot(label="where the gold is lost", elem_id="exp-funnel")
        e_split = gr.Dropdown([("all compared questions", evidence.ALL_QUESTIONS)], value=evidence.ALL_QUESTIONS,
                              label="Show questions", elem_id="exp-split", allow_custom_value=True)
        e_rows = gr.Dataframe(headers=evidence.ROW_COLUMNS, interactive=False, wrap=True,
                              column_widths=evidence.ROW_WIDTHS,
                              elem_id="exp-rows", label="Questions (largest difference first; click a "
                                                        "header to sort, a row to open both runs)")
        e_open = script_box("exp-open")
    return SimpleNamespace(b_methods=b_methods, b_limit=b_limit, b_set=b_set, b_btn=b_btn, b_table=b_table,
                           b_answer=b_answer, b_repeat=b_repeat, b_budget=b_budget, e_tradeoff=e_tradeoff,
                           e_split=e_split,
                           b_plot_lat=b_plot_lat, b_plot_tok=b_plot_tok, r_paper=r_paper, r_with_llm=r_with_llm,
                           r_llm_limit=r_llm_limit, r_btn=r_btn, r_out=r_out, r_plot=r_plot, e_pick=e_pick,
                           e_metric=e_metric, e_a=e_a, e_b=e_b, e_refresh=e_refresh, e_summary=e_summary,
                           e_means=e_means, e_groups=e_groups, e_funnel=e_funnel, e_rows=e_rows, e_open=e_open,
                           bench_tab=bench_tab)


def wire(shell) -> None:
    """Its handlers; `?experiment=ID` opens an experiment here."""
    state = shell.state
    kb = shell.kb
    visitor = shell.visitor
    tabs = shell.tabs
    experiments = shell.experiments
    comparisons = shell.comparisons
    j_pick = shell.j_pick
    loaded = shell.loaded
    b_methods = shell.bench.b_methods
    b_limit = shell.bench.b_limit
    b_set = shell.bench.b_set
    b_btn = shell.bench.b_btn
    b_table = shell.bench.b_table
    b_plot_lat = shell.bench.b_plot_lat
    b_plot_tok = shell.bench.b_plot_tok
    r_paper = shell.bench.r_paper
    r_with_llm = shell.bench.r_with_llm
    r_llm_limit = shell.bench.r_llm_limit
    r_btn = shell.bench.r_btn
    r_out = shell.bench.r_out
    r_plot = shell.bench.r_plot
    e_pick = shell.bench.e_pick
    e_metric = shell.bench.e_metric
    e_a = shell.bench.e_a
    e_b = shell.bench.e_b
    e_refresh = shell.bench.e_refresh
    e_summary = shell.bench.e_summary
    e_means = shell.bench.e_means
    e_groups = shell.bench.e_groups
    e_funnel = shell.bench.e_funnel
    e_rows = shell.bench.e_rows
    e_open = shell.bench.e_open
    bench_tab = shell.bench.bench_tab
    b_answer = shell.bench.b_answer
    b_repeat = shell.bench.b_repeat
    b_budget = shell.bench.b_budget
    e_tradeoff = shell.bench.e_tradeoff
    e_split = shell.bench.e_split
    def set_questions(open_kb, set_name, who):
        if not set_name or set_name == BUILT_IN:
            if not open_kb.questions:
                raise InputError(f"KB {open_kb.name} has no questions of its own: add a question set in the Index "
                                 "tab and pick it here")
            return open_kb.questions
        sets = QuestionSets(state.traces)
        return sets.questions(sets.get(open_kb.name, set_name, state.owner_filter(who)))

    def set_choices(kb_name, who, value=None):
        names = [BUILT_IN] + [s.name for s in QuestionSets(state.traces).list(kb_name, state.owner_filter(who))]
        return gr.update(choices=names, value=value if value in names else BUILT_IN)


    def bench(kb_name, chosen, limit, set_name, answer, repeat, budget, who, request: gr.Request,
              progress=gr.Progress()):  # noqa: B008  (Gradio injects its progress tracker through this default)
        if not chosen:
            raise InputError("pick at least one method")
        repeat, budget = int(repeat or 1), int(budget or 0) or None
        if not 1 <= repeat <= 5:
            raise InputError(f"repetitions must be between 1 and 5, got {repeat}")
        if budget is not None and budget < 1:
            raise InputError(f"the context budget must be a positive number of tokens (0 = off), got {budget}")
        state.check_kb(kb_name, who)
        state.public.check_bench(int(limit or 1) * repeat)
        state.public.check_methods(list(chosen), uses_llm)
        state.throttle(who, request)
        open_kb = state.kb(kb_name)
        questions = set_questions(open_kb, set_name, who)[: max(1, int(limit or 1))]
        answer = bool(answer)
        if answer and open_kb.ctx.llm is None:
            raise InputError("an answer needs an LLM, and this server has none configured")
        exp = _start_experiment("app", open_kb, list(chosen), {}, questions, who,
                                {"methods": ",".join(chosen), "limit": int(limit or 1),
                                 "question_set": set_name or BUILT_IN, "answer": answer, "repeat": repeat,
                                 "budget": budget})
        try:
            with state.llm_slot(request, list(chosen), answer=answer):
                res = run_bench(open_kb.ctx, kb_name, questions, list(chosen), progress=False,
                                on_progress=lambda d, t, m: progress(d / t, desc=messages.progress_text(
                                    f"{m}: {d}/{t}", state.public.show_paths)),
                                sink=experiments.sink(exp), answer=answer, repeat=repeat, budget=budget)
        except Exception:
            experiments.finish(exp, {}, status="failed")
            raise
        experiments.finish(exp, res.to_json(include_per_question=False))
        wanted = ("recall@5", "recall@10", f"recall@{budget}tok", "anyhit@5", "stable@5", "em", "f1")
        cols = [c for c in wanted if any(c in r for r in res.methods.values())]
        cols += ["usd_per_question"] + (["cpu_s_per_question"] if any("cpu_s_per_question" in r for r in
                                                                      res.methods.values()) else [])
        cols += ["latency_ms_p50", "tokens_per_question"]
        table = [[m] + [_cell(row, c) for c in cols] for m, row in res.methods.items()]
        # The experiment's view below (trade-off, answer split, spread) opens on this run.
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

    b_btn.click(bench, [kb, b_methods, b_limit, b_set, b_answer, b_repeat, b_budget, visitor],
                [b_table, b_plot_lat, b_plot_tok, e_pick],
                concurrency_limit=1, concurrency_id="bench")

    def reproduce_paper(kb_name, paper, limit, with_llm, llm_limit, who, request: gr.Request):
        from retrieval.bench.reproduce import figure, reproduce
        from retrieval.bench.reproduce import render as render_rep
        state.public.check_bench(int(limit or 1))
        if with_llm:
            state.public.check_bench(int(llm_limit or 1))
        state.check_kb(kb_name, who)
        state.throttle(who, request)
        open_kb = state.kb(kb_name)
        questions = open_kb.questions[: max(1, int(limit or 1))]
        if not questions:
            raise InputError(f"KB {kb_name} has no questions with gold passages")
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
        except Exception:
            experiments.finish(exp, {}, status="failed")
            raise
        experiments.finish(exp, rep.to_json())
        note = "" if include else ("<p>The rows that need an LLM were left out"
                                   + ("" if open_kb.ctx.llm is not None else " (no LLM is configured)") + ".</p>")
        return (f"{note}<pre>{render.esc(render_rep(rep))}</pre>", figure(rep),
                gr.update(choices=evidence.choices(experiments, state.owner_filter(who)), value=exp.id))

    r_btn.click(reproduce_paper, [kb, r_paper, b_limit, r_with_llm, r_llm_limit, visitor], [r_out, r_plot, e_pick],
                concurrency_limit=1, concurrency_id="bench")


    def show_experiment(exp_id, metric, a, b, who, current_kb=None, split=evidence.ALL_QUESTIONS):
        """Fills the experiment's views; the method and metric pickers follow the experiment."""
        if not exp_id:
            return (gr.update(),) * 13
        exp = None
        try:
            exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
            metrics = evidence.metrics(experiments, exp, state.owner_id(who))
            if not metrics:
                raise InputError(f"experiment {exp.id[:12]}'s questions have no gold: pool and judge its runs "
                                 "in the Judge tab, then compare it here on the judgments")
            metric = metric if metric in metrics else next(
                (m for m in ("recall@5", "ndcg@5") if m in metrics), metrics[0])
            v = evidence.view(comparisons, experiments, exp, metric, a, b, state.owner_id(who), split)
        except HopTraceError as e:
            return ((evidence.error(e),) + (None,) * 3 + (gr.update(value=[]),) + (gr.update(),) * 4
                    + (_experiment_pick(exp, who) if exp else gr.update(), _follow_kb(exp, who, current_kb))
                    + (None, gr.update()))
        split_values = [val for _, val in v.splits]
        # The header's KB follows the experiment, so the next Run asks the KB its runs came from.
        return (v.summary_html, v.means_fig, v.groups_fig, v.funnel_fig, gr.update(value=v.rows),
                gr.update(choices=metrics, value=metric), gr.update(choices=exp.methods, value=v.a),
                gr.update(choices=exp.methods, value=v.b), gr.update(value=exp.id),
                _experiment_pick(exp, who), _follow_kb(exp, who, current_kb), v.tradeoff_fig,
                gr.update(choices=v.splits, value=split if split in split_values else evidence.ALL_QUESTIONS))

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

    exp_outputs = [e_summary, e_means, e_groups, e_funnel, e_rows, e_metric, e_a, e_b, e_pick, j_pick, kb,
                   e_tradeoff, e_split]
    exp_inputs = [e_pick, e_metric, e_a, e_b, visitor, kb, e_split]
    for trigger in (e_pick.input, e_metric.input, e_a.input, e_b.input, e_split.input):
        trigger(show_experiment, exp_inputs, exp_outputs)
    e_pick.change(show_experiment, exp_inputs, exp_outputs)
    # Back from the Judge tab, the metrics include the judged ones the new grades allow.
    bench_tab.select(show_experiment, exp_inputs, exp_outputs)
    e_refresh.click(lambda who: (gr.update(choices=evidence.choices(experiments, state.owner_filter(who))),) * 2,
                    visitor, [e_pick, j_pick])

    def open_question(evt: gr.SelectData, exp_id, metric, a, b, who):
        """A row's two stored runs, exactly as stored (nothing re-runs), open in the Ask page's
        columns (ui/pages.py `pair_link`); one that cannot open says why here."""
        qid = str(evt.row_value[0]) if evt.row_value else ""
        try:
            exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
            evidence.open_pair(comparisons, experiments, exp, metric, a, b, qid, state.owner_id(who))
        except HopTraceError as e:
            return evidence.error(e), ""
        return gr.update(), pages.pair_link(exp.id, metric, a, b, qid)

    e_rows.select(open_question, [e_pick, e_metric, e_a, e_b, visitor], [e_summary, e_open]).then(
        None, e_open, None, js=OPEN_LINK_JS)

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

    loaded.then(reopen_experiment, visitor, [tabs, e_pick, e_summary, j_pick])
    shell.set_choices = set_choices
