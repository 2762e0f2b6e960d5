"""The lab's Experiments tab: the experiment view (ui/tabs/experiment.py) above two folded forms,
methods benched on a question set and a paper's tables reproduced; what either runs is stored
as an experiment and opens in the view."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from retrieval.bench import protocol as how_asked
from retrieval.bench.runner import run_bench
from retrieval.core.errors import InputError
from traces.storage.experiments import kb_fingerprint, method_spec, question_record
from traces.storage.questionsets import BUILT_IN, QuestionSets

from .. import evidence, messages, render
from ..ask import uses_llm


def _scatter(res, x_key: str):
    import plotly.graph_objects as go

    names = list(res.methods)
    if not all("recall@5" in res.methods[n] for n in names):
        return None   # questions without gold: no recall to plot until the pool is judged (Judge tab)
    fig = go.Figure(go.Scatter(x=[res.methods[n][x_key] for n in names], y=[res.methods[n]["recall@5"] for n in names],
                               mode="markers+text", text=names, textposition="top center"))
    fig.update_layout(xaxis_title=x_key, yaxis_title="recall@5", height=320, margin=dict(l=10, r=10, t=30, b=10))
    return fig



def _shown(fig):
    return gr.update(value=fig, visible=fig is not None)


def _cell(row: dict, c: str):
    """A table cell: money as dollars or "price unknown", a measure with its spread over repetitions."""
    from retrieval.core.money import usd_text

    if c == "usd_per_question":
        return usd_text(row.get(c))
    v, sd = row.get(c), row.get(f"{c}_sd")
    return v if sd is None or v is None else f"{v} ± {sd}"


def layout(shell) -> SimpleNamespace:
    """The tab's components, in page order: the experiment view first (ui/tabs/experiment.py),
    then the two forms that make experiments, folded."""
    from . import experiment

    all_methods = shell.all_methods
    with gr.Tab("Experiments", id="benchmark") as bench_tab:
        view = experiment.layout(shell)
        with gr.Accordion("New benchmark: methods on a question set", open=False, elem_id="bench-fold"):
            with gr.Row():
                b_methods = gr.CheckboxGroup(all_methods, value=["bm25", "dense", "composed", "griever"],
                                             label="Methods", elem_id="bench-methods")
                b_limit = gr.Number(value=20, precision=0, label="Questions (max)", elem_id="bench-limit")
                b_set = gr.Dropdown([BUILT_IN], value=BUILT_IN, label="Question set (Index tab adds yours)",
                                    elem_id="bench-set", allow_custom_value=True)
            with gr.Row():
                b_answer = gr.Checkbox(value=False, label="End with an answer (EM / F1, and where answers were "
                                                          "lost; needs the LLM)", elem_id="bench-answer")
                b_repeat = gr.Number(value=1, precision=0, minimum=1, maximum=5,
                                     label="Repetitions (spread, stability)", elem_id="bench-repeat")
                b_budget = gr.Number(value=0, precision=0, minimum=0, label="Context budget in tokens (0 = off)",
                                     elem_id="bench-budget")
            b_btn = gr.Button("Run benchmark", variant="primary", elem_id="bench-run")
            gr.Markdown("When it finishes, its experiment opens in the view above.", elem_id="bench-help")
            b_table = gr.Dataframe(interactive=False, elem_id="bench-table", visible=False)
            with gr.Row():
                b_plot_lat = gr.Plot(label="recall@5 vs latency", elem_id="bench-latency", visible=False)
                b_plot_tok = gr.Plot(label="recall@5 vs tokens", elem_id="bench-tokens", visible=False)
        with gr.Accordion("Reproduce a paper: its tables' rows on this KB, beside the paper's figures", open=False,
                          elem_id="repro-fold"):
            with gr.Row():
                r_paper = gr.Dropdown(["griever", "gear", "sag", "grasp"], value="griever", label="Paper",
                                      elem_id="repro-paper")
                r_with_llm = gr.Checkbox(value=False, label="Include the rows that need the LLM (minutes a "
                                                            "question on 2 CPU cores)", elem_id="repro-with-llm")
                r_llm_limit = gr.Number(value=5, precision=0, label="Questions for LLM rows (max)",
                                        elem_id="repro-llm-limit")
            r_btn = gr.Button("Reproduce", elem_id="repro-run")
            r_out = gr.HTML(elem_id="repro-out")
            r_plot = gr.Plot(label="ours vs paper", elem_id="repro-plot", visible=False)
    return SimpleNamespace(**vars(view), b_methods=b_methods, b_limit=b_limit, b_set=b_set, b_btn=b_btn,
                           b_table=b_table, b_answer=b_answer, b_repeat=b_repeat, b_budget=b_budget,
                           b_plot_lat=b_plot_lat, b_plot_tok=b_plot_tok, r_paper=r_paper, r_with_llm=r_with_llm,
                           r_llm_limit=r_llm_limit, r_btn=r_btn, r_out=r_out, r_plot=r_plot, bench_tab=bench_tab)


def wire(shell) -> None:
    """Its handlers; `?experiment=ID` opens an experiment here."""
    from . import experiment

    experiment.wire(shell)   # first: the forms chain its view (shell.show_picked)
    state = shell.state
    kb = shell.kb
    visitor = shell.visitor
    experiments = shell.experiments
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
    b_answer = shell.bench.b_answer
    b_repeat = shell.bench.b_repeat
    b_budget = shell.bench.b_budget
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
        deepest = max(res.ks)
        heads = [how_asked.label(c, res.protocol, deepest) for c in cols]   # each recall names how it was asked
        return (gr.update(value=table, headers=["method"] + heads, visible=True),
                _shown(_scatter(res, "latency_ms_p50")), _shown(_scatter(res, "tokens_per_question")),
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
                concurrency_limit=1, concurrency_id="bench").success(*shell.show_picked)

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
        return (f"{note}<pre>{render.esc(render_rep(rep))}</pre>", _shown(figure(rep)),
                gr.update(choices=evidence.choices(experiments, state.owner_filter(who)), value=exp.id))

    r_btn.click(reproduce_paper, [kb, r_paper, b_limit, r_with_llm, r_llm_limit, visitor], [r_out, r_plot, e_pick],
                concurrency_limit=1, concurrency_id="bench").success(*shell.show_picked)


    shell.set_choices = set_choices
