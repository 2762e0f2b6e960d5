"""The Index tab's question generation: multi-hop questions with gold composed from the KB picked
at the top (retrieval/qgen/), then reviewed one at a time: keep, edit or drop.

Laid out inside the Index tab (`layout_section`), wired after every tab exists (`wire`)."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from retrieval.core.errors import HopTraceError, InputError
from retrieval.core.paths import resolve_kb
from traces.storage.generations import Generations, Row, generate_set

from .. import messages, render
from ..public import LimitError

NONE = "(no generated set yet)"


def layout_section() -> SimpleNamespace:
    gr.Markdown("**No questions yet? Generate them from this KB's graph.** Two passages joined through a bridge "
                "entity (A states a fact whose object is what B is about), three-hop chains and comparisons "
                "become questions whose gold is those passages, in hop order. A question is dropped when it names "
                "its bridge, when its answer is not in its gold, when it repeats another, when the LLM cannot "
                "answer it from all its passages, or when the LLM answers it from one passage alone. On the "
                "embedded 1.5B model each kept question takes ~15–30 s; read them below before you trust them.")
    with gr.Row():
        n = gr.Number(value=20, precision=0, label="Questions to keep", elem_id="gen-n", scale=1)
        name = gr.Textbox(value="generated", label="Set name (the same name resumes)", elem_id="gen-name", scale=2)
        mode = gr.Radio(["template", "llm", "template-only"], value="template", label="Written by",
                        elem_id="gen-mode", scale=2,
                        info="template: from the two triples, the LLM only rephrasing (it never sees the bridge); "
                             "llm: the LLM writes from the passages")
        checks = gr.Radio(["full", "LLM-free"], value="full", label="Checks", elem_id="gen-checks", scale=1,
                          info="LLM-free: no answerability or shortcut check (with template-only, no LLM at all)")
        go = gr.Button("Generate questions", variant="primary", elem_id="gen-go", scale=1)
    log = gr.Markdown(elem_id="gen-log")
    gr.Markdown("**Review generated questions**: each with its gold passages. Keep it, edit its wording or "
                "answer, or drop it; the set in the Experiments tab's *Question set* follows at once.")
    with gr.Row():
        pick_set = gr.Dropdown([NONE], value=NONE, label="Generated set", elem_id="gen-set", scale=1,
                               allow_custom_value=True)
        pick_q = gr.Dropdown([], label="Question", elem_id="gen-q", scale=3, allow_custom_value=True)
    view = gr.HTML(elem_id="gen-view")
    with gr.Row():
        edit_q = gr.Textbox(label="Question (edit to reword)", elem_id="gen-edit-q", scale=3)
        edit_a = gr.Textbox(label="Answer", elem_id="gen-edit-a", scale=1)
    with gr.Row():
        keep = gr.Button("Keep", elem_id="gen-keep")
        save = gr.Button("Save edit", elem_id="gen-save")
        drop = gr.Button("Drop", variant="stop", elem_id="gen-drop")
    review_log = gr.Markdown(elem_id="gen-review-log")
    return SimpleNamespace(n=n, name=name, mode=mode, checks=checks, go=go, log=log, pick_set=pick_set,
                           pick_q=pick_q, view=view,
                           edit_q=edit_q, edit_a=edit_a, keep=keep, save=save, drop=drop, review_log=review_log)


def _label(r: Row) -> str:
    state = ("kept" if r.status == "kept" else r.status) + (" ✓" if r.reviewed else "")
    return f"{r.qid} · {state} · {r.question or r.template}"[:160]


def _view(open_kb, r: Row) -> str:
    passages = {p.id: p for p in open_kb.ctx.store.passages(r.gold)}
    hops = "".join(
        f"<div class='ht-passage'><b>Hop {i}: {render.esc(passages[pid].title if pid in passages else pid)}</b>"
        f"<br>{render.esc(passages[pid].text if pid in passages else '(not in this KB)')}</div>"
        for i, pid in enumerate(r.gold, 1))
    why = f" · dropped: {render.esc(r.reason)}" if not r.kept else ""
    return (f"<div id='gen-question'><b>Question</b>: {render.esc(r.question or '(none)')}<br>"
            f"<b>Answer</b>: {render.esc(r.answer)} · {render.esc(r.kind)}, {r.hops} hops{why}<br>"
            f"<span class='ht-meta'>template: {render.esc(r.template)}"
            + (f" · bridge: {render.esc(', '.join(r.bridges))}" if r.bridges else "") + f"</span></div>{hops}")


def wire(shell) -> None:
    state, kb, visitor = shell.state, shell.kb, shell.visitor
    g = shell.index.gen
    b_set = shell.bench.b_set

    def sets_of(kb_name, who, value=None):
        names = Generations(state.traces).generated_sets(kb_name, state.owner_filter(who)) or [NONE]
        return gr.update(choices=names, value=value if value in names else names[-1])

    def rows_of(kb_name, set_name, who):
        if not set_name or set_name == NONE:
            return []
        return Generations(state.traces).rows(kb_name, set_name, state.owner_id(who))

    def questions_of(kb_name, set_name, who, qid=None):
        rows = rows_of(kb_name, set_name, who)
        # Kept first (what the set holds), then the dropped with their reasons.
        rows = [r for r in rows if r.kept] + [r for r in rows if not r.kept]
        choices = [(_label(r), r.qid) for r in rows]
        ids = [r.qid for r in rows]
        return gr.update(choices=choices, value=qid if qid in ids else (ids[0] if ids else None))

    def show(kb_name, set_name, qid, who):
        row = next((r for r in rows_of(kb_name, set_name, who) if r.qid == qid), None)
        if row is None:
            return "", "", ""
        try:
            open_kb = state.kb(kb_name)
        except HopTraceError as e:
            return render.error_html(str(e)), row.question, row.answer
        return _view(open_kb, row), row.question, row.answer

    def run(kb_name, n, name, mode, checks, who, request: gr.Request, progress=gr.Progress()):  # noqa: B008  (Gradio's progress tracker)
        n = int(n or 0)
        state.public.check_generate(n)
        state.check_kb(kb_name, who)
        state.throttle(who, request)
        llm_free = checks == "LLM-free" and mode == "template-only"
        if state.llm is None and not llm_free:
            raise LimitError("question generation needs an LLM, and none is configured for this app (--llm none); "
                             "Written by template-only with LLM-free checks needs none")
        kept = [0]

        def tick(gq):
            kept[0] += gq.kept
            progress(min(kept[0] / max(n, 1), 1.0), desc=messages.progress_text(f"{kept[0]}/{n} kept"))

        # ~20 s of LLM work a kept question on the embedded model: what the queue admits against.
        with state.llm_slot(request, [], extra_s=0.0 if llm_free else 20.0 * n):
            rep = generate_set(state.traces, kb_name, resolve_kb(kb_name), name, n,
                               None if llm_free else state.llm, mode, owner=state.owner_id(who), on_result=tick,
                               local_model=not llm_free and state.llm_settings.backend == "local",
                               llm_checks=checks != "LLM-free")
        msg = "<br>".join(messages.md(line) for line in rep.lines())
        if rep.qset is not None and rep.qset.meta.get("note"):
            msg += f"<br><i>{messages.md(rep.qset.meta['note'])}</i>"
        return msg, sets_of(kb_name, who, rep.name), shell.set_choices(kb_name, who, rep.name)

    g.go.click(run, [kb, g.n, g.name, g.mode, g.checks, visitor], [g.log, g.pick_set, b_set],
               concurrency_limit=1, concurrency_id="index")
    kb.change(lambda k, who: sets_of(k, who), [kb, visitor], g.pick_set)
    shell.app.load(lambda k, who: sets_of(k, who), [kb, visitor], g.pick_set, js=render.FIRST_VIEW_GATE)
    g.pick_set.change(questions_of, [kb, g.pick_set, visitor], g.pick_q)
    g.pick_q.change(show, [kb, g.pick_set, g.pick_q, visitor], [g.view, g.edit_q, g.edit_a])

    def act(action):
        def handler(kb_name, set_name, qid, question, answer, who):
            if not qid:
                raise InputError("pick a question first")
            row = Generations(state.traces).review(kb_name, set_name, state.owner_id(who), qid, action,
                                                   question, answer)
            done = {"keep": "kept", "edit": "saved", "drop": "dropped"}[action]
            return (f"{messages.md(row.qid)} {done}.", questions_of(kb_name, set_name, who, qid),
                    shell.set_choices(kb_name, who, set_name))
        return handler

    for btn, action in ((g.keep, "keep"), (g.save, "edit"), (g.drop, "drop")):
        btn.click(act(action), [kb, g.pick_set, g.pick_q, g.edit_q, g.edit_a, visitor],
                  [g.review_log, g.pick_q, b_set]).then(show, [kb, g.pick_set, g.pick_q, visitor],
                                                         [g.view, g.edit_q, g.edit_a])
