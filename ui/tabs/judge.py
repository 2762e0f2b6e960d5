"""The Judge tab: pool an experiment, let the answer rule or the LLM grade the pool, and grade it by
hand one pair at a time (ui/judging.py). Built inside ui/app.py's Blocks."""
from __future__ import annotations

import gradio as gr

from retrieval.core.errors import HopTraceError
from traces.judging import measured
from traces.judging.service import ensure_pool, judge_experiment
from traces.storage.experiments import Experiments

from .. import evidence, messages, render
from ..judging import Cursor, JudgeDesk
from ..public import LimitError

# The simulated person's curves on the demo (docs/judging.md, "The queue"), shown beside the queue.
FIGURE = render.FIGURES_DIR / render.FIGURES[0]
QUEUE_INFO = ("Each pair weighs how much its grade can move a difference between two methods at P@5, times the "
              "chance your grade differs from the automatic one; pairs in every method's top 5 or in none weigh "
              "nothing. Method pairs your grades have settled stop adding weight.")
GRADE_LABELS = ["0 · unrelated", "1 · related, no help", "2 · part of the answer / a hop", "3 · answers it"]
AUTO_JUDGES = {"none (I grade them myself)": None, "the answer rule (LLM-free, instant)": "answer",
               "the LLM": "llm"}


def build_tab(state, experiments: Experiments, visitor):
    """The tab's components and handlers; returns the experiment picker (the Experiments tab keeps it in step)."""
    with gr.Tab("Judge", id="judge"):
        gr.Markdown(
            "**Judge an experiment that has no gold.** Its methods' top passages are pooled per question (TREC "
            "depth-k pooling) and graded 0–3: by you here, by the answer rule where the questions give answers, "
            "or by the LLM. Then the Experiments tab compares the methods on the judgments (nDCG@k, P@k, "
            "judged recall@k) with intervals and paired tests, as it does on gold. "
            f"<br><i>{render.esc(measured.why_default(None))}.</i>")
        with gr.Row():
            j_pick = gr.Dropdown([], label="Experiment", scale=3, elem_id="judge-exp")
            j_depth = gr.Number(value=10, precision=0, label="Pool depth (each method's top N)",
                                elem_id="judge-depth", scale=1)
            j_auto = gr.Dropdown(list(AUTO_JUDGES), value="none (I grade them myself)", label="Judge the pool with",
                                 elem_id="judge-auto", scale=2)
            j_go = gr.Button("Pool and judge", variant="primary", elem_id="judge-go", scale=1)
        j_log = gr.Markdown(elem_id="judge-log")
        with gr.Row():
            j_order = gr.Radio([("the queue: pairs whose grade can change a verdict first", "queue"),
                                ("pool order", "pool")], value="queue", label="Ask me in", elem_id="judge-order",
                               info=QUEUE_INFO, scale=3)
            if FIGURE.exists():
                with gr.Accordion("How much sooner the queue reaches gold's verdicts (simulated person)",
                                  open=False):
                    gr.HTML(f"<img src='{render.VIS_ROUTE}/{FIGURE.name}' alt='verdicts as gold's against "
                            "grades given, queue vs pool vs random order, on the demo' style='max-width:100%'>"
                            "<div class='ht-meta'>docs/judging.md, \"The queue\": the demo, 2Wiki and HotpotQA"
                            "</div>", elem_id="judge-queue-figure")
        j_progress = gr.Markdown(elem_id="judge-progress")
        j_verdicts = gr.HTML(elem_id="judge-verdicts-box")
        j_pair = gr.HTML(elem_id="judge-pair")
        with gr.Row():
            grade_btns = [gr.Button(label, elem_id=f"judge-g{i}") for i, label in enumerate(GRADE_LABELS)]
        with gr.Row():
            back_btn = gr.Button("← Back (b)", elem_id="judge-back", size="sm")
            skip_btn = gr.Button("Skip (s) →", elem_id="judge-skip", size="sm")
            gr.Markdown("Keys: **0–3** grade · **s** skip · **b** back", elem_id="judge-keys")
        j_last = gr.HTML(elem_id="judge-last")
        cursor = gr.State({})

    def desk(exp_id: str, who: str) -> JudgeDesk:
        exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
        return JudgeDesk(experiments, exp, state.owner_id(who))

    def passages_of(d: JudgeDesk, pos: int) -> dict:
        kb = state.kb(d.exp.kb)
        pid = d.pool.pairs[pos].passage_id
        return {p.id: p for p in kb.ctx.store.passages([pid])}

    def show(exp_id: str, cur: dict, who: str, last_html: str = "", order: str = "queue", d=None):
        """The pair at the cursor; `d`, the desk a grade or skip already opened (one read of the grades)."""
        c = Cursor.from_state(cur)
        try:
            d = d or desk(exp_id, who)
        except HopTraceError as e:
            return (gr.update(value=""), render.error_html(str(e)), last_html, {}, "")
        if c.experiment_id != d.exp.id:
            c = Cursor(d.exp.id, d.next_in_queue() if order == "queue" else d.first_unjudged())
        c.pos = max(0, min(c.pos, len(d.pool.pairs) - 1))
        return (f"**{d.progress()}** by you · {len(d.pool.pairs)} pooled pairs of "
                f"{len(d.pool.by_question())} questions · methods {messages.md(', '.join(d.pool.methods))}"
                + (" · asked in queue order" if order == "queue" else " · asked in pool order"),
                d.pair_html(c.pos, passages_of(d, c.pos)), last_html, c.to_state(), d.verdicts_html())

    def pool_and_judge(exp_id, depth, auto, who, request: gr.Request, progress=gr.Progress()):  # noqa: B008  (Gradio injects its progress tracker through this default)
        exp = evidence.find(experiments, exp_id, state.owner_filter(who) if state.public.enabled else None)
        state.throttle(who, request)
        depth = int(depth or 10)
        open_kb = state.kb(exp.kb)
        pool = ensure_pool(experiments, exp, depth)
        judge = AUTO_JUDGES.get(auto)
        msg = (f"Pooled **{len(pool.pairs)}** pairs: depth {depth} of {messages.md(', '.join(pool.methods))} over "
               f"{len(pool.by_question())} questions.")
        owner = state.owner_id(who)
        if judge == "answer":
            rep = judge_experiment(experiments, exp, open_kb.ctx.store, "answer", depth, owner=owner)
            msg += " " + messages.md(" · ".join(rep.lines()[1:]))
        elif judge == "llm":
            if state.llm is None:
                raise LimitError("no LLM is configured for this app (--llm none)")
            est = judge_experiment(experiments, exp, open_kb.ctx.store, "llm", depth, llm=state.llm, owner=owner,
                                   estimate_only=True)
            state.public.check_judge_pairs(est.pooled - est.already)
            secs = est.estimate.seconds or 0.0
            warn = measured.warning(state.llm)
            with state.llm_slot(request, [], extra_s=secs):
                rep = judge_experiment(experiments, exp, open_kb.ctx.store, "llm", depth, llm=state.llm,
                                       owner=owner,
                                       progress=lambda i, n: progress(i / n, desc=messages.progress_text(
                                           f"LLM judge: {i}/{n} requests")))
            msg += " " + messages.md(" · ".join(rep.lines()[1:]))
            msg += f"<br><i>{messages.md(warn)}</i>" if warn else ""
        return msg

    def step(exp_id, cur, who, delta: int, order: str):
        c = Cursor.from_state(cur)
        d = None
        if delta < 0:
            c.back()
        elif order == "queue" and c.experiment_id:
            d = desk(exp_id, who)
            c.move(d.next_in_queue(after=c.pos))   # skip: the queue's next pair
        else:
            c.move(c.pos + 1)
        return show(exp_id, c.to_state(), who, order=order, d=d)

    def grade(exp_id, cur, who, g: int, order: str):
        c = Cursor.from_state(cur)
        d = desk(exp_id, who)
        if c.experiment_id != d.exp.id:
            return show(exp_id, cur, who, order=order)
        d.grade(c.pos, g)
        last = d.reveal_html(c.pos, "Just graded")
        c.last = c.pos
        c.move(d.next_in_queue() if order == "queue"
               else d.first_unjudged(c.pos + 1 if c.pos + 1 < len(d.pool.pairs) else 0))
        return show(exp_id, c.to_state(), who, last, order, d)

    outs = [j_progress, j_pair, j_last, cursor, j_verdicts]
    j_go.click(pool_and_judge, [j_pick, j_depth, j_auto, visitor], j_log, concurrency_limit=1,
               concurrency_id="bench").then(lambda e, c, w, o: show(e, {}, w, order=o),
                                            [j_pick, cursor, visitor, j_order], outs)
    j_pick.change(lambda e, w, o: show(e, {}, w, order=o), [j_pick, visitor, j_order], outs)
    j_order.change(lambda e, w, o: show(e, {}, w, order=o), [j_pick, visitor, j_order], outs)
    for i, b in enumerate(grade_btns):
        b.click(lambda e, c, w, o, g=i: grade(e, c, w, g, o), [j_pick, cursor, visitor, j_order], outs,
                show_progress="hidden")
    skip_btn.click(lambda e, c, w, o: step(e, c, w, 1, o), [j_pick, cursor, visitor, j_order], outs,
                   show_progress="hidden")
    back_btn.click(lambda e, c, w, o: step(e, c, w, -1, o), [j_pick, cursor, visitor, j_order], outs,
                   show_progress="hidden")
    return j_pick

