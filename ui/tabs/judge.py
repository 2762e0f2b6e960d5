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

GRADE_LABELS = ["0 · unrelated", "1 · related, no help", "2 · part of the answer / a hop", "3 · answers it"]
AUTO_JUDGES = {"none (I grade them myself)": None, "the answer rule (LLM-free, instant)": "answer",
               "the LLM": "llm"}


def build_tab(state, experiments: Experiments, visitor):
    """The tab's components and handlers; returns the experiment picker (the Benchmark tab keeps it in step)."""
    with gr.Tab("Judge", id="judge"):
        gr.Markdown(
            "**Judge an experiment that has no gold.** Its methods' top passages are pooled per question (TREC "
            "depth-k pooling) and graded 0–3: by you here, by the answer rule where the questions give answers, "
            "or by the LLM. Then the Benchmark tab compares the methods on the judgments (nDCG@k, P@k, "
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
        j_progress = gr.Markdown(elem_id="judge-progress")
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

    def show(exp_id: str, cur: dict, who: str, last_html: str = ""):
        c = Cursor.from_state(cur)
        try:
            d = desk(exp_id, who)
        except HopTraceError as e:
            return (gr.update(value=""), render.error_html(str(e)), last_html, {})
        if c.experiment_id != d.exp.id:
            c = Cursor(d.exp.id, d.first_unjudged())
        c.pos = max(0, min(c.pos, len(d.pool.pairs) - 1))
        return (f"**{d.progress()}** by you · {len(d.pool.pairs)} pooled pairs of "
                f"{len(d.pool.by_question())} questions · methods {messages.md(', '.join(d.pool.methods))}",
                d.pair_html(c.pos, passages_of(d, c.pos)), last_html, c.to_state())

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

    def step(exp_id, cur, who, delta: int):
        c = Cursor.from_state(cur)
        c.pos += delta
        return show(exp_id, c.to_state(), who)

    def grade(exp_id, cur, who, g: int):
        c = Cursor.from_state(cur)
        d = desk(exp_id, who)
        if c.experiment_id != d.exp.id:
            return show(exp_id, cur, who)
        d.grade(c.pos, g)
        last = d.reveal_html(c.pos, "Just graded")
        c.last, c.pos = c.pos, d.first_unjudged(c.pos + 1 if c.pos + 1 < len(d.pool.pairs) else 0)
        return show(exp_id, c.to_state(), who, last)

    outs = [j_progress, j_pair, j_last, cursor]
    j_go.click(pool_and_judge, [j_pick, j_depth, j_auto, visitor], j_log, concurrency_limit=1,
               concurrency_id="bench").then(lambda e, c, w: show(e, {}, w), [j_pick, cursor, visitor], outs)
    j_pick.change(lambda e, w: show(e, {}, w), [j_pick, visitor], outs)
    for i, b in enumerate(grade_btns):
        b.click(lambda e, c, w, g=i: grade(e, c, w, g), [j_pick, cursor, visitor], outs, show_progress="hidden")
    skip_btn.click(lambda e, c, w: step(e, c, w, 1), [j_pick, cursor, visitor], outs, show_progress="hidden")
    back_btn.click(lambda e, c, w: step(e, c, w, -1), [j_pick, cursor, visitor], outs, show_progress="hidden")
    return j_pick

