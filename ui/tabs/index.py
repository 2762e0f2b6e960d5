"""The Index tab: a corpus uploaded and built into a KB, question sets added to a KB, and questions
generated from a KB's graph and reviewed (qgen.py)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from retrieval.core.errors import HopTraceError, InputError
from retrieval.core.paths import resolve_kb
from retrieval.corpus.plain import load_plain_questions, plain_or_none
from retrieval.kb.embed import default_precision
from retrieval.kb.presets import ExtractionPlan, build_from_files
from retrieval.kb.readiness import readiness_line
from retrieval.methods import targets
from traces.storage.questionsets import QuestionSets, built_in

from .. import messages, pages, render
from ..public import LimitError
from . import qgen


def layout(shell) -> SimpleNamespace:
    """The tab's components, in page order."""
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
                                         "configured LLM (slow on CPU: ~15 s a passage with the embedded model)")
            here = default_precision()
            up_precision = gr.Radio([(f"default ({here} here)", "default"), "fp32", "bf16", "int8"],
                                    value="default", label="Encoder",
                                    info="bf16: the same model under bf16 autocast, vectors within cosine "
                                         "0.9999 of fp32's, ~1.45x faster on CPUs with AVX512-BF16 (the "
                                         "default there). int8: the same model quantised, ~2.2x faster; R@5 "
                                         "0.1–0.9 points lower on average, not significantly "
                                         "(docs/profiles.md). Default: an int8 KB stays int8",
                                    elem_id="up-precision")
        serve_all = list(targets())
        up_methods = gr.CheckboxGroup(serve_all, value=serve_all, label="Methods to build for",
                                      info="Only their layers are built, and each is served as soon as its "
                                           "layers are whole (bm25 within seconds, dense next); the header "
                                           "says when each will be. Build again with others ticked to add "
                                           "just their layers.", elem_id="up-methods")
        up_btn = gr.Button("Build", variant="primary", elem_id="up-build")
        up_log = gr.Markdown(elem_id="up-log", min_height=90)  # room for the build's progress line
        gr.Markdown("**Your questions, no gold needed**: a `.txt` file (one question a line), a JSON list "
                    "of strings or of `{id, question[, answer]}`, or a CSV with a `question` column, added "
                    "as a question set to the knowledge base picked at the top. Bench it in the Experiments "
                    "tab, then pool and judge the runs in the Judge tab.")
        with gr.Row():
            qs_file = gr.File(label="Questions (.txt, .json, .csv)", file_types=[".txt", ".json", ".csv"],
                              elem_id="qs-file")
            qs_name = gr.Textbox(label="Question set name", value="my_questions", elem_id="qs-name")
            qs_btn = gr.Button("Add questions", elem_id="qs-add")
        qs_log = gr.Markdown(elem_id="qs-log")
        qs_list = gr.Markdown(elem_id="qs-list")
        gen = qgen.layout_section()
    return SimpleNamespace(gen=gen, up_corpus=up_corpus, up_questions=up_questions, up_openie=up_openie,
                           up_name=up_name, up_extractor=up_extractor, up_precision=up_precision,
                           up_methods=up_methods, up_btn=up_btn,
                           up_log=up_log,
                           qs_file=qs_file, qs_name=qs_name, qs_btn=qs_btn, qs_log=qs_log, qs_list=qs_list)


def wire(shell) -> None:
    """Its handlers: question sets listed and added, a corpus built."""
    app = shell.app
    state = shell.state
    kb = shell.kb
    visitor = shell.visitor
    b_set = shell.bench.b_set
    up_corpus = shell.index.up_corpus
    up_questions = shell.index.up_questions
    up_openie = shell.index.up_openie
    up_name = shell.index.up_name
    up_extractor = shell.index.up_extractor
    up_precision = shell.index.up_precision
    up_methods = shell.index.up_methods
    up_btn = shell.index.up_btn
    up_log = shell.index.up_log
    qs_file = shell.index.qs_file
    qs_name = shell.index.qs_name
    qs_btn = shell.index.qs_btn
    qs_log = shell.index.qs_log
    qs_list = shell.index.qs_list
    set_choices = shell.set_choices

    def sets_listing(kb_name, who) -> str:
        """The KB's question sets with their source and size (the Index tab)."""
        try:
            own = state.kb(kb_name).questions
        except HopTraceError:
            own = []
        sets = ([built_in(kb_name, own)] if own else []) + QuestionSets(state.traces).list(
            kb_name, state.owner_filter(who))
        if not sets:
            return f"KB **{messages.md(kb_name)}** has no questions yet: add a set above."
        return f"Question sets of **{messages.md(kb_name)}**:\n\n" + "\n".join(
            f"- {messages.md(s.describe())}" for s in sets)

    kb.change(lambda k, who, cur: set_choices(k, who, cur), [kb, visitor, b_set], b_set)
    kb.change(sets_listing, [kb, visitor], qs_list)
    app.load(lambda k, who: set_choices(k, who), [kb, visitor], b_set, js=render.FIRST_VIEW_GATE)
    app.load(sets_listing, [kb, visitor], qs_list, js=render.FIRST_VIEW_GATE)

    def add_questions(kb_name, file, set_name, who, request: gr.Request):
        if file is None:
            raise InputError("upload a questions file first")
        state.check_kb(kb_name, who)
        state.throttle(who, request)
        questions = load_plain_questions(Path(file))
        qs = QuestionSets(state.traces).add(kb_name, set_name, questions, Path(file).name,
                                            owner=state.owner_id(who))
        return (f"Added to **{messages.md(kb_name)}**: {messages.md(qs.describe())}. Pick it in the Experiments "
                "tab's *Question set*.", set_choices(kb_name, who, qs.name))

    # The log is emptied first: a refusal's error badge must not sit above the last success's message.
    qs_btn.click(lambda: "", None, qs_log, queue=False, show_progress="hidden").then(
        add_questions, [kb, qs_file, qs_name, visitor], [qs_log, b_set]).then(
        sets_listing, [kb, visitor], qs_list)

    def index(corpus, qfile, openie, name, extractor, precision, methods, who, request: gr.Request,
              progress=gr.Progress()):  # noqa: B008  (Gradio injects its progress tracker through this default)
        if corpus is None:
            raise InputError("upload a corpus file first")
        if not methods:
            raise InputError("tick at least one method to build for")
        name = (name or "").strip()
        if not name.replace("_", "").replace("-", "").isalnum():
            raise InputError(f"KB name {name!r}: letters, digits, - and _ only")
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
                                  max_passages=state.public.passage_cap(),
                                  listener=lambda st: progress(st.fraction, desc=messages.progress_text(
                                      st.line(), state.public.show_paths)),
                                  # "default" asks for nothing: an append to an int8 KB then
                                  # stays int8 instead of being refused.
                                  precision=None if precision == "default" else precision,
                                  targets=targets(methods))
        added = (QuestionSets(state.traces).add(name, Path(qfile).stem[:60] or "questions", plain,
                                                Path(qfile).name, owner=state.owner_id(who))
                 if plain else None)
        state.forget(name)
        if state.public.enabled:
            state.kb_owners.claim(name, who or "")
        d = report.as_dict()
        msg = (f"Built **{messages.md(name)}**: {d['passages_total']} passages ({d['passages_added']} new), "
               f"{d['questions']} questions, {d['seconds']} s; {messages.md(readiness_line(report.ready_at))}"
               + (f", encoder {messages.md(report.encoder)}" if report.encoder else "")
               + f". [Ask it]({pages.kb_link(name)}) on the Ask page, or bench it here.")
        if added is not None:
            msg += f" Question set added: {messages.md(added.describe())}."
        for run in report.llm:
            msg += (f"\n\n- LLM {messages.md(run['layer'])}: {run['passages']} passages, {run['tokens_in']:,} tokens "
                    f"in / "
                    f"{run['tokens_out']:,} out, {run['seconds']} s, **{run['failed']} failed**")
        return msg, gr.update(choices=state.kb_choices(who), value=name)

    # The header and pickers follow the build's readiness while it runs (ui/app.py `_wire_readiness`).
    up_btn.click(*shell.watch_builds, queue=False, show_progress="hidden")
    up_btn.click(index, [up_corpus, up_questions, up_openie, up_name, up_extractor, up_precision, up_methods,
                         visitor],
                 [up_log, kb], show_progress_on=[up_log],  # under the button, not over the KB picker
                 concurrency_limit=1, concurrency_id="index").then(*shell.builds_done, queue=False,
                                                                   show_progress="hidden")
