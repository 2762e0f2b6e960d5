"""The lab's experiment view: the page opens on the shipped experiment (traces/storage/shipped.py)
with no click — its leaderboard, trade-off, intervals, hops, gold funnel, answer split and the
questions, each question opening its stored runs on the Ask page — then every experiment as a
table, two of them compared, and the view as an HTML report. ui/evidence.py computes; this wires."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from retrieval.core.errors import HopTraceError, InputError

from .. import evidence, pages
from .shared import _expired, script_box

# Opens a row's pair on the Ask page; this page's address first becomes the experiment's own, so
# the browser's Back comes back to it.
OPEN_LINK_JS = """(link) => {
  if (!link) return;
  const exp = new URLSearchParams(link.slice(link.indexOf('?'))).get('experiment');
  history.replaceState(null, '', '?' + new URLSearchParams({experiment: exp}));
  location.assign(link);
}"""
# The view's state in the address, so a link or a reload opens the same view.
KEEP_ADDRESS_JS = """(exp, metric, a, b) => {
  if (exp) history.replaceState(null, '', '?' + new URLSearchParams({experiment: exp, metric: metric || '',
                                                                       a: a || '', b: b || ''}));
}"""
NO_EXPERIMENT = ("No experiment to show yet: fold out **New benchmark** below (or run `hoptrace bench`) and its "
                 "leaderboard, charts and questions open here.")


def _plot(label: str, elem_id: str) -> gr.Plot:
    # Hidden until it has a figure: an empty frame says nothing to a visitor.
    return gr.Plot(label=label, elem_id=elem_id, visible=False)


# A click on a cell of the answer split or a bar of the funnel lists that cell's or stage's
# questions, as picking it in "Show questions" does: the page tells the server through a hidden box
# (a Plot has no click event in Gradio; plotly's own `plotly_click` is read on the chart's element).
SPLIT_CLICK_JS = """() => {
  const send = (v) => {
    const box = document.querySelector('#exp-split-click textarea, #exp-split-click input');
    if (!box || !v) return;
    box.value = v + '\t' + Date.now();   // a nonce: the same cell clicked again is a change too
    box.dispatchEvent(new Event('input', {bubbles: true}));
  };
  document.addEventListener('click', (e) => {
    const cell = e.target.closest && e.target.closest('#exp-answer-split [data-split]');
    if (cell) send(cell.dataset.split);
  });
  const onClick = (d) => {
    const p = d && d.points && d.points[0];
    if (p && p.data && p.data.name && !String(p.y).startsWith('top ')) send('lost|' + p.data.name + '|' + p.y);
  };
  // Each new figure (another pair, a filter) is drawn anew and loses its listeners: hooked again.
  const hook = () => {
    const plot = document.querySelector('#exp-funnel .js-plotly-plot');
    if (!plot || !plot.on || !plot._ev || plot._ev.listeners('plotly_click').includes(onClick)) return;
    plot.on('plotly_click', onClick);
  };
  new MutationObserver(hook).observe(document.body, {subtree: true, childList: true});
}"""


def _first_board(shell) -> str:
    """The shipped experiment's leaderboard, in the page as served: the lab's first panel shows
    before any event's reply (the load's reply, with every chart, took 2.5-3 s to arrive here)."""
    ids = getattr(shell.state, "shipped", None) or []
    if not ids:
        return ""
    try:
        return evidence.leaderboard_html(shell.experiments.get(ids[0]))
    except HopTraceError:
        return ""


def layout(shell) -> SimpleNamespace:
    """The view's components, in page order (inside the lab's first tab)."""
    with gr.Row(equal_height=True):
        e_pick = gr.Dropdown([], label="Experiment", scale=4, elem_id="exp-pick")
        # Custom values pass: an event sent with the previous experiment's metric or methods
        # (recall@5 of a gold experiment, then one without gold) is mapped to a valid one
        # by show_experiment instead of failing Gradio's check of the choices.
        e_metric = gr.Dropdown(["recall@5"], value="recall@5", label="Metric", scale=1,
                               elem_id="exp-metric", allow_custom_value=True)
        e_refresh = gr.Button("Refresh list", scale=0, elem_id="exp-refresh")
    e_empty = gr.Markdown(NO_EXPERIMENT, visible=False, elem_id="exp-empty")
    e_board = gr.HTML(_first_board(shell), elem_id="exp-board")
    with gr.Row():
        e_tradeoff = _plot("quality against cost a question", "exp-tradeoff-plot")
        e_means = _plot("means with 95 % intervals", "exp-means-plot")
    gr.Markdown("**Two methods, question by question**: pick A and B; the charts, the verdict and the "
                "questions follow. A click on a question opens both stored runs' hop maps on the Ask page.",
                elem_id="exp-pair-help")
    with gr.Row():
        e_a = gr.Dropdown([], label="Method A", scale=1, elem_id="exp-a", allow_custom_value=True)
        e_b = gr.Dropdown([], label="Method B", scale=1, elem_id="exp-b", allow_custom_value=True)
        e_split = gr.Dropdown([("all compared questions", evidence.ALL_QUESTIONS)], value=evidence.ALL_QUESTIONS,
                              label="Show questions (an answer-split cell or a funnel stage)", scale=2,
                              elem_id="exp-split", allow_custom_value=True)
    with gr.Row():
        e_groups = _plot("by hop count / question type", "exp-groups")
        e_funnel = _plot("where the gold is lost", "exp-funnel")
    e_summary = gr.HTML(elem_id="exp-summary")
    e_rows = gr.Dataframe(headers=evidence.ROW_COLUMNS, interactive=False, wrap=True, visible=False,
                          column_widths=evidence.ROW_WIDTHS,
                          elem_id="exp-rows", label="Questions (largest difference first; click a "
                                                    "header to sort, a row to open both runs)")
    e_open = script_box("exp-open")
    e_split_click = script_box("exp-split-click")
    with gr.Accordion("Experiments: every one stored, two compared, the report", open=False, elem_id="exp-list-fold"):
        e_table = gr.Dataframe(headers=evidence.EXPERIMENT_COLUMNS, interactive=False, wrap=True,
                               column_widths=evidence.EXPERIMENT_WIDTHS,
                               elem_id="exp-table", label="Newest first; a click opens one above")
        with gr.Row(equal_height=True):
            x_old = gr.Dropdown([], label="Compare the experiment above with (before)", scale=3,
                                elem_id="exp-against")
            x_btn = gr.Button("Compare", scale=0, elem_id="exp-against-run")
            x_report = gr.Button("HTML report of the view", scale=0, elem_id="exp-report-run")
        x_out = gr.HTML(elem_id="exp-against-out")
        x_file = gr.File(label="report", visible=False, elem_id="exp-report")
    return SimpleNamespace(e_pick=e_pick, e_metric=e_metric, e_refresh=e_refresh, e_empty=e_empty, e_board=e_board,
                           e_tradeoff=e_tradeoff, e_means=e_means, e_a=e_a, e_b=e_b, e_split=e_split,
                           e_groups=e_groups, e_funnel=e_funnel, e_summary=e_summary, e_rows=e_rows, e_open=e_open,
                           e_split_click=e_split_click,
                           e_table=e_table, x_old=x_old, x_btn=x_btn, x_report=x_report, x_out=x_out, x_file=x_file)


def _fig(fig):
    return gr.update(value=fig, visible=fig is not None)


def wire(shell) -> None:
    """Its handlers; `?experiment=ID` (with metric, a, b) opens that view, else the shipped one."""
    state, v, experiments, comparisons = shell.state, shell.bench, shell.experiments, shell.comparisons
    visitor, kb = shell.visitor, shell.kb

    def public_owner(who):
        return state.owner_filter(who) if state.public.enabled else None

    def show(exp_id, metric, a, b, who, current_kb=None, split=evidence.ALL_QUESTIONS, follow=True):
        """Fills the view; the pickers follow the experiment, and with `follow` the header's KB too."""
        if not exp_id:
            return (gr.update(),) * len(outputs)
        exp = None
        try:
            exp = evidence.find(experiments, exp_id, public_owner(who))
            metrics = evidence.metrics(experiments, exp, state.owner_id(who))
            if not metrics:
                raise InputError(f"experiment {exp.id[:12]}'s questions have no gold: pool and judge its runs "
                                 "in the Judge tab, then compare it here on the judgments")
            metric = metric if metric in metrics else next(
                (m for m in ("recall@5", "ndcg@5") if m in metrics), metrics[0])
            if not a and not b:
                a, b = evidence.default_pair(comparisons, experiments, exp, metric, state.owner_id(who))
            view = evidence.view(comparisons, experiments, exp, metric, a, b, state.owner_id(who), split)
        except HopTraceError as e:
            hidden = gr.update(visible=False)
            pick = _pick(exp, who) if exp else gr.update()
            return ((gr.update(visible=False), evidence.error(e) if exp is None else evidence.leaderboard_html(exp))
                    + (hidden,) * 4 + (evidence.error(e), gr.update(value=[], visible=False))
                    + (gr.update(),) * 3 + (pick, _follow_kb(exp, who, current_kb) if follow else gr.update(),
                                            gr.update(), _pick(exp, who) if exp else gr.update()))
        split_values = [val for _, val in view.splits]
        pick = _pick(exp, who)
        # The header's KB follows the experiment, so the next Run asks the KB its runs came from.
        return (gr.update(visible=False), view.leaderboard_html, _fig(view.tradeoff_fig), _fig(view.means_fig),
                _fig(view.groups_fig), _fig(view.funnel_fig), view.summary_html,
                gr.update(value=view.rows, visible=True), gr.update(choices=metrics, value=metric),
                gr.update(choices=view.methods, value=view.a), gr.update(choices=view.methods, value=view.b),
                pick, _follow_kb(exp, who, current_kb) if follow else gr.update(),
                gr.update(choices=view.splits, value=split if split in split_values else evidence.ALL_QUESTIONS),
                # Its own update: Gradio changes an update as it applies it, so one shared by two
                # components reached the second empty.
                _pick(exp, who))

    def _pick(exp, who):
        """An experiment picker on `exp`: the visitor's list and the shipped ones, with `exp` added
        when a link opened it."""
        mine = choices(who)
        if exp.id not in {val for _, val in mine}:
            mine = [(exp.describe(), exp.id)] + mine
        return gr.update(choices=mine, value=exp.id)

    def choices(who):
        shipped = getattr(state, "shipped", [])
        mine = evidence.choices(experiments, state.owner_filter(who))
        have = {val for _, val in mine}
        return mine + [(experiments.get(i).describe() + " · shipped", i) for i in shipped if i not in have]

    def _follow_kb(exp, who, current_kb):
        if exp is None or exp.kb == current_kb or exp.kb not in state.kb_names(who):
            return gr.update()
        return gr.update(value=exp.kb)

    outputs = [v.e_empty, v.e_board, v.e_tradeoff, v.e_means, v.e_groups, v.e_funnel, v.e_summary, v.e_rows,
               v.e_metric, v.e_a, v.e_b, v.e_pick, kb, v.e_split, shell.j_pick]
    inputs = [v.e_pick, v.e_metric, v.e_a, v.e_b, visitor, kb, v.e_split]
    for trigger in (v.e_metric.input, v.e_a.input, v.e_b.input, v.e_split.input):
        trigger(show, inputs, outputs).then(None, [v.e_pick, v.e_metric, v.e_a, v.e_b], None, js=KEEP_ADDRESS_JS)
    # A click on the answer split or the funnel (SPLIT_CLICK_JS) lists its questions like a pick.
    shell.app.load(None, js=SPLIT_CLICK_JS)
    def clicked(exp_id, metric, a, b, who, current_kb, box):
        if not box:
            return (gr.update(),) * len(outputs)
        return show(exp_id, metric, a, b, who, current_kb, box.split("\t")[0])

    v.e_split_click.change(clicked, inputs[:-1] + [v.e_split_click], outputs).then(
        None, [v.e_pick, v.e_metric, v.e_a, v.e_b], None, js=KEEP_ADDRESS_JS)
    # A visitor's pick opens its view; a pick made by a handler (the table, a finished benchmark)
    # chains `show` itself, so no view is computed twice.
    v.e_pick.input(show, inputs, outputs)
    def refresh(exp_id, metric, a, b, who, current_kb, split):
        """Back from the Judge tab, the metrics include the judged ones the new grades allow; the
        header's KB stays (the Index tab may have just moved it to a new KB)."""
        return show(exp_id, metric, a, b, who, current_kb, split, follow=False)

    shell.bench.bench_tab.select(refresh, inputs, outputs)

    def table(who):
        rows = evidence.experiment_rows(experiments, state.owner_filter(who), getattr(state, "shipped", []))
        listed = choices(who)
        return (gr.update(value=rows), gr.update(choices=listed), gr.update(choices=list(listed)),
                gr.update(choices=list(listed)))

    v.e_refresh.click(table, visitor, [v.e_table, v.e_pick, v.x_old, shell.j_pick])

    def open_row(evt: gr.SelectData, who):
        """A row of the experiments table opens its view above."""
        exp_id = str(evt.row_value[-1]) if evt.row_value else ""
        exp = evidence.find(experiments, exp_id, public_owner(who))
        return _pick(exp, who)

    def show_new(exp_id, metric, who, current_kb):
        """A new experiment's view, on its own default pair (not the last view's)."""
        return show(exp_id, metric, None, None, who, current_kb)

    # What a handler that picks an experiment chains (this table, a finished benchmark or reproduction).
    shell.show_picked = (show_new, [v.e_pick, v.e_metric, visitor, kb], outputs)
    v.e_table.select(open_row, visitor, v.e_pick).success(*shell.show_picked)

    def against(exp_id, old_id, metric, who):
        """Every refusal in words, in the panel (an uncaught error is Gradio's bare "Error" badge)."""
        try:
            if not old_id:
                raise InputError("pick the experiment to compare with (the one before the change)")
            new = evidence.find(experiments, exp_id, public_owner(who))
            old = evidence.find(experiments, old_id, public_owner(who))
            return evidence.across_html(experiments, old, new, metric)
        except HopTraceError as e:
            return evidence.error(e)

    v.x_btn.click(against, [v.e_pick, v.x_old, v.e_metric, visitor], v.x_out)

    def others(exp_id, who):
        """The compare list without the experiment that is open: compared with itself nothing changes."""
        return gr.update(choices=[c for c in choices(who) if c[1] != exp_id], value=None)

    v.e_pick.change(others, [v.e_pick, visitor], v.x_old)

    def report(exp_id, metric, who):
        exp = evidence.find(experiments, exp_id, public_owner(who))
        return gr.update(value=evidence.report_file(comparisons, experiments, exp, metric, state.owner_id(who)),
                         visible=True)

    v.x_report.click(report, [v.e_pick, v.e_metric, visitor], v.x_file)

    def open_question(evt: gr.SelectData, exp_id, metric, a, b, who):
        """A row's two stored runs, exactly as stored (nothing re-runs), open in the Ask page's
        columns (ui/pages.py `pair_link`); one that cannot open says why here."""
        qid = str(evt.row_value[0]) if evt.row_value else ""
        try:
            exp = evidence.find(experiments, exp_id, public_owner(who))
            evidence.open_pair(comparisons, experiments, exp, metric, a, b, qid, state.owner_id(who))
        except HopTraceError as e:
            return evidence.error(e), ""
        return gr.update(), pages.pair_link(exp.id, metric, a, b, qid)

    v.e_rows.select(open_question, [v.e_pick, v.e_metric, v.e_a, v.e_b, visitor], [v.e_summary, v.e_open]).then(
        None, v.e_open, None, js=OPEN_LINK_JS)

    def arrive(who, current_kb, request: gr.Request):
        """`?experiment=ID` opens that experiment (the whole id is a capability in public mode, as a
        session link is), with the address's metric and pair; without one, the shipped experiment,
        else the newest. The view comes with this one reply: the first view waits for no second."""
        q = request.query_params if request else {}
        eid = (q.get("experiment") or "").strip()
        listed = choices(who)
        rows = evidence.experiment_rows(experiments, state.owner_filter(who), getattr(state, "shipped", []))
        keep = (gr.update(choices=listed), gr.update(value=rows))
        nothing = (gr.update(),) * len(outputs)
        if not eid:
            default = next(iter(getattr(state, "shipped", [])), None) or next((val for _, val in listed), None)
            if default is None:
                return (gr.update(visible=True),) + nothing[1:] + (gr.update(),) + keep
            # The page's own first view: it leaves the visitor's KB as it is (a link's experiment moves it).
            first = list(show(default, None, None, None, who, current_kb, follow=False))
            # The Judge tab's picker gets the list only: a value would make it open (and compute)
            # the shipped experiment's pool on every visit to the lab.
            first[outputs.index(shell.j_pick)] = gr.update(choices=list(listed))
            return tuple(first) + (gr.update(),) + keep
        try:
            evidence.find(experiments, eid, public_owner(who))
        except HopTraceError:
            if state.traces.was_pruned(eid):
                expired = list(nothing)
                expired[outputs.index(v.e_summary)] = _expired("experiment")
                return tuple(expired) + (gr.Tabs(selected="benchmark"),) + keep
            return nothing + (gr.update(),) + keep
        return (show(eid, q.get("metric"), q.get("a"), q.get("b"), who, current_kb)
                + (gr.Tabs(selected="benchmark"),) + keep)

    shell.loaded.then(arrive, [visitor, kb], outputs + [shell.tabs, v.x_old, v.e_table])
