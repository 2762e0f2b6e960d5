"""The HopTrace web app: ask, compare side by side, replay stored traces, benchmark, judge, index.

This file assembles the two pages (ui/pages.py: Ask and Traces at /, Experiments, Judge and Index at
/lab), each with its header (KB picker, backends line) and its tabs, one module per tab under
ui/tabs/ (each a `layout` of components, then a `wire` of handlers, since a handler may update
another tab of its page), and what happens when a visitor arrives. Renders Stage records only (ui/render.py);
runs methods through ui/ask.py; stores every run with traces/storage/store.py. `python app.py` or
`hoptrace serve` starts it.
"""
from __future__ import annotations

import functools
import os
import secrets
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import gradio as gr
from starlette.middleware import Middleware

from retrieval.core.envvars import whole_number
from retrieval.core.errors import HopTraceError
from retrieval.corpus.datasets import DEMO
from retrieval.encoders import onnx as onnx_encoder
from retrieval.kb.presets import build_dataset, demo_complete, demo_path
from retrieval.methods import METHODS, method_names, targets
from retrieval.methods.plugins import load_and_report
from traces.storage.experiments import Experiments
from traces.storage.shipped import install_for

from . import early_map, evidence, idle_frames, messages, pages, render, static_cache
from .judging import JUDGE_KEYS_JS
from .lifecycle import stop_on_signals
from .llm_order import Estimates
from .public import PublicLimits, new_visitor_id
from .public import banner as public_banner
from .state import AppState
from .storage import trace_location
from .tabs import ask, benchmark, index, judge, qgen, traces


def first_kb(state: AppState) -> str:
    """The KB the page opens on: the demo, else the first one served."""
    bad = state.kb_problems()
    first = next((v for _, v in state.kb_choices() if v not in bad), None)
    if first is None:
        raise HopTraceError("no KB can be served: " + "; ".join(f"{n}: {why}" for n, why in bad.items()))
    return first


def build(state: AppState) -> gr.Blocks:
    kb_choices = state.kb_choices() or [("demo", "demo")]
    first = first_kb(state)
    demo_kb = state.kb(first, warm=False)  # warmed after the page is up (main)
    # What every tab of the Ask page may read: the state, the header's components and the other
    # tabs' components (the lab page gets its own, below).
    shell = SimpleNamespace(state=state, examples=[q.text for q in demo_kb.questions[:40]],
                            all_methods=method_names(), experiments=Experiments(state.traces),
                            comparisons=evidence.ComparisonCache())
    # The lab opens on the shipped experiment: installed once per version, its first view computed ahead.
    shipped = install_for(state.traces, [v for _, v in kb_choices])
    state.shipped = [e.id for e in shipped]
    if shipped:   # what a waiting LLM column's estimate rests on before this machine has run the method
        from retrieval.core.idle import calibrate

        state.estimates = Estimates(shipped[0], calibrate)
    threading.Thread(target=evidence.warm, args=(shell.comparisons, shell.experiments, state.shipped),
                     name="warm-lab", daemon=True).start()

    # fill_width: the hop maps need the whole width of a 1440 px screen for five or six layers.
    with gr.Blocks(title="HopTrace", fill_width=True) as app:
        shell.app = app
        # One secret for the visitor's id on both pages: each page's BrowserState must read what
        # the other stored (with a secret each, the lab page gave a visitor a second id).
        secret = secrets.token_urlsafe(16)
        _header(shell, kb_choices, first, demo_kb, secret)
        with gr.Tabs(elem_id="tabs") as shell.tabs:
            shell.ask = ask.layout(shell)
            shell.traces = traces.layout(shell)
        # Which run the Ask tab shows: a session id, a recording's question, an experiment's pair
        # (ui/tabs/shared.py prefixes); it opens on the showcase's first question.
        shell.session_state = gr.State(getattr(shell, "first_session", ""))

        ask.wire(shell)
        traces.wire(shell)
        backends_for = _wire_arrival(shell, shell.ask.pickers)
        shell.loaded.then(shell.list_runs, [shell.traces.f_method, shell.traces.f_text, shell.visitor],
                          shell.traces.runs_table)
        if state.export is not None:  # a failing collector shows in the header at the next ask
            for btn in (shell.ask.run_btn, shell.ask.live_btn):
                btn.click(backends_for, shell.kb, shell.backends, queue=False, show_progress="hidden")

    # The experiment tools are a page of their own (ui/pages.py says why), with its own header.
    lab = SimpleNamespace(state=state, all_methods=shell.all_methods, experiments=shell.experiments,
                          comparisons=shell.comparisons, app=app)
    with app.route(pages.LAB_NAME, pages.LAB):
        _header(lab, kb_choices, first, demo_kb, secret)
        with gr.Tabs(elem_id="tabs") as lab.tabs:
            lab.bench = benchmark.layout(lab)
            lab.j_pick = judge.build_tab(state, lab.experiments, lab.visitor)
            lab.index = index.layout(lab)
        app.load(None, js=JUDGE_KEYS_JS)
        _wire_arrival(lab, [])
        benchmark.wire(lab)
        index.wire(lab)
        qgen.wire(lab)
    # Every handler's errors reach the page as text, refusals through one helper (ui/messages.py).
    return messages.guard(app, state.public.show_paths)


def _header(page, kb_choices, first: str, demo_kb, secret: str) -> None:
    """A page's top: the title, the pages, the KB picker, the backends line and the About fold,
    and the visitor's id (kept in their browser; in public mode it decides whose runs they see)."""
    state = page.state
    gr.Navbar(main_page_name=pages.HOME_NAME, elem_id="pages")
    gr.Markdown("# HopTrace\nWatch multi-hop retrievers work, hop by hop: each method's stages as one map "
                "of what it retrieved, kept, pruned and rewrote, and where it reached or lost the gold passage.")
    if state.public.enabled:
        gr.Markdown(public_banner(state.public, os.environ.get("SPACE_ID", "")), elem_id="public-banner")
    with gr.Row(equal_height=True):
        page.kb = gr.Dropdown(kb_choices, value=first, label="Knowledge base", scale=1, elem_id="kb")
        with gr.Column(scale=4):
            page.backends = gr.Markdown(_backends_line(state, demo_kb), elem_id="backends")
            with gr.Accordion("About this server", open=False, elem_id="about"):
                page.about = gr.Markdown(_about_text(state, demo_kb), elem_id="about-text")
    page.visitor = gr.BrowserState("", storage_key="hoptrace-visitor", secret=secret)


def _wire_arrival(shell, pickers: list) -> Callable:
    """A visitor's arrival on a page: their id, their KBs, the backends line; `pickers`, the
    method pickers the readiness of a building KB also updates. Returns the backends line of a
    KB, for the page's other handlers."""
    app, state, kb, visitor, backends = shell.app, shell.state, shell.kb, shell.visitor, shell.backends

    def arrive(who):
        """A first visit gets its id (kept in the browser) before the Traces tab lists anything."""
        return who or new_visitor_id()

    shell.loaded = app.load(arrive, visitor, visitor, js=render.FIRST_VIEW_GATE)

    def kbs(who, request: gr.Request):
        """In public mode the KBs this visitor built join the list; other visitors' never do.
        `?kb=NAME` opens the page on that KB (ui/pages.py `kb_link`) when it is theirs to see."""
        choices = state.kb_choices(who)
        asked = (request.query_params.get("kb") if request else None) or ""
        if asked in {v for _, v in choices}:
            return gr.update(choices=choices, value=asked)
        return gr.update(choices=choices)

    shell.loaded.then(kbs, visitor, kb)

    def backends_for(name):
        try:
            return _backends_line(state, state.kb(name))
        except HopTraceError as e:
            return f"<span class='ht-err'>{render.esc(e)}</span>"

    def about_for(name):
        try:
            return _about_text(state, state.kb(name, warm=False))
        except HopTraceError as e:
            return f"<span class='ht-err'>{render.esc(e)}</span>"

    timer = _wire_readiness(shell, backends_for, pickers)

    def header(name):
        """The header, and the readiness timer on only if a build is alive: one request at arrival."""
        return backends_for(name), gr.Timer(active=bool(state.building_kbs()))

    # No progress shown while they wait for the first map: the header would look busy for it.
    app.load(header, kb, [backends, timer], js=render.FIRST_VIEW_GATE, show_progress="hidden")
    app.load(about_for, kb, shell.about, js=render.FIRST_VIEW_GATE, show_progress="hidden")
    return backends_for


ARM_S = 60.0   # how long a page that started a build polls before the build's status shows up


def _wire_readiness(shell, backends_for, pickers: list) -> gr.Timer:
    """While a build makes a KB, the header, the KB list and the method pickers say each method's
    state ("griever: ready in ~40 s"), refreshed every two seconds; nothing is sent when nothing
    changed.

    The timer runs only while a build is alive (found at arrival, on a KB pick, or started by the
    Index tab, `shell.watch_builds`): each tick made the page work (its renderer at 12 % of a core
    on an idle tab, 1.2 CPU s in 10 s) and the server answer, for every open tab, all day."""
    state, kb, visitor, backends = shell.state, shell.kb, shell.visitor, shell.backends
    last = gr.State(None)
    armed = gr.State(0.0)   # when this page started a build: its status file may come seconds later
    timer = gr.Timer(2.0, active=False)

    def refresh(name, who, before, armed_at):
        building = tuple(state.building_kbs())
        if building or (armed_at and state.builds_ended_at.get(who or "", 0.0) >= armed_at):
            # The build's status is seen (from here it keeps the timer on, until it ends), or this
            # visitor's build has ended since the page armed: a tick sent before `builds_done` turned
            # the timer off carried the old arming, and its answer turned it on again for ARM_S.
            armed_at = 0.0
        seen = (name, state.readiness(name), building)
        tick = gr.Timer(active=bool(building) or time.time() - (armed_at or 0.0) < ARM_S)
        if seen == before:
            return (tick, armed_at) + (gr.skip(),) * (3 + len(pickers))
        return (tick, armed_at, seen, backends_for(name), gr.update(choices=state.kb_choices(who)),
                *(ask.picker_infos(state, name) if pickers else ()))

    outputs = [timer, armed, last, backends, kb, *pickers]
    kb.change(refresh, [kb, visitor, last, armed], outputs, queue=False, show_progress="hidden")
    timer.tick(refresh, [kb, visitor, last, armed], outputs, queue=False, show_progress="hidden")
    # What the Index tab's Build chains first: the timer on, and kept on until the build's status
    # appears (a big upload is read before the build writes it).
    shell.watch_builds = (lambda: (gr.Timer(active=True), time.time()), None, [timer, armed])
    # What it chains after the build's handler ends: a build of three passages ended between two
    # ticks, never seen, and the page polled for ARM_S more.
    def builds_done(who):
        state.builds_ended_at[who or ""] = time.time()
        return gr.Timer(active=bool(state.building_kbs())), 0.0

    shell.builds_done = (builds_done, [visitor], [timer, armed])
    return timer   # turned on at arrival by the header's load (`_wire_arrival`) when a build is alive


def _backends_line(state: AppState, open_kb) -> str:
    """The header a visitor reads: which LLM, which KB, which methods are ready, and any warning
    about their runs. The server's particulars are in the About fold (`_about_text`)."""
    if state.llm is None:
        llm = "none (GEAR runs as NaiveGE; SAG and GRASP need one)"
    else:
        kind = (f"embedded on {state.llm.started_server() or 'llama-server'}, no API key"
                if state.llm_settings.backend == "local" else "API")
        status = state.llm_status if not state.llm.health().startswith("exited") else "server exited"
        llm = f"{state.llm_settings.model} ({kind}, {status})"
    # A trace file kept aside at start is said once, here: names only, never a directory.
    recovered = (f"\n\n<span class='ht-err' id='traces-recovered'>⚠ {render.esc(state.traces.recovered)}</span>"
                 if state.traces.recovered else "")
    failing = state.export.status() if state.export is not None else None
    exporting = (f"\n\n<span class='ht-err' id='export-failing'>⚠ {render.esc(_export_line(state, failing))}</span>"
                 if failing else "")
    if not state.traces_kept:
        recovered += ("\n\n<span class='ht-err' id='traces-not-kept'>⚠ runs are stored in the container and lost "
                      "when it restarts (no persistent storage)</span>")
    elif state.public.enabled and state.traces_persistent:
        recovered += "\n\n<span id='traces-kept'>runs are kept across restarts (persistent storage)</span>"
    ready = state.readiness(open_kb.name)
    methods = (f"<span id='kb-readiness'>{render.esc(ready)}</span>" if ready
               else f"<span id='kb-readiness'>all {len(METHODS)} ready</span>")
    return (f"**LLM** {render.esc(llm)} · **KB** {render.esc(open_kb.name)} · **Methods** {methods}"
            f"{recovered}{exporting}")


@functools.lru_cache(maxsize=None)
def _version(pkg: str) -> str:
    """An installed package's version, read once: the About fold is filled at every page load."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return "not installed"


def _server_version(state: AppState) -> str:
    """The embedded model's server and build, once started (llama-server reports it in /props)."""
    return (state.llm.started_server() if state.llm else "") or "llama-server (not started)"


def _about_text(state: AppState, open_kb) -> str:
    """The "About this server" fold: the model's file and server process, the embedder, versions,
    where traces are kept (paths only where this server may show them)."""
    v = _version
    llm_methods = ", ".join(n for n, m in METHODS.items() if m.uses_llm)
    lines = [f"**LLM** {render.esc(state.llm_line())} — used by {render.esc(llm_methods)} and the answer step",
             f"**Embedder** {render.esc(open_kb.ctx.embedder.name)}",
             f"**Versions** hoptrace {v('hoptrace')} · gradio {v('gradio')} · {render.esc(_server_version(state))}"
             f" · sentence-transformers {v('sentence-transformers')} · vis-network 9.1.2 (pyvis {v('pyvis')})"]
    if state.public.show_paths:
        lines.append(f"**Traces** `{render.esc(str(state.traces.path))}`")
    return "\n\n".join(lines)


def _export_line(state: AppState, status: str) -> str:
    # The collector's URL is the operator's; a public page says only that export fails.
    return status if state.public.show_paths else "span export is failing; runs are still stored"



def main(host: str | None = None, port: int | None = None, llm_settings=None, profile: str | None = None,
         public: bool | None = None, otlp: str | None = None) -> None:
    t0 = time.time()
    port = port or whole_number("GRADIO_SERVER_PORT", 7860, 1, 65535)   # a bad value is named before anything starts
    # The operator's own methods (HOPTRACE_PLUGINS, HOPTRACE_METHOD_URLS, entry points); one that
    # fails is named here and in the Ask tab's "Yours" group, and everything else runs.
    load_and_report()
    onnx_encoder.serving_mode()
    page_up = threading.Event()
    building = not demo_complete()
    demo_served = start_demo(page_up)
    where = trace_location()
    print(f"hoptrace: traces in {where.path}: {where.why}", flush=True)
    state = AppState(trace_path=where.path, llm_settings=llm_settings, profile=profile,
                     public=PublicLimits.from_env(public), otlp=otlp)
    state.traces_kept, state.traces_persistent = where.kept, where.persistent
    state.start_llm()
    demo_served()
    app = build(state)
    if not building:
        # The first question is not charged for loading the KB's vectors and the query encoder.
        state.kb(first_kb(state)).ctx.warm()
    # While the demo builds, BM25 answers before the query encoder has loaded: the page opens
    # first. No thread is started here to load it: two threads importing the same packages for
    # the first time can deadlock in Python's import locks (seen: the demo build's imports against
    # a warm-up's), so the build loads it and a first dense question shares it (get_embedder).
    mode = "public mode (visitors kept apart, caps on)" if state.public.enabled else "local mode"
    if state.export is not None:
        mode += f", spans to {state.export.url}"
    print(f"HopTrace ready in {time.time() - t0:.1f} s, {mode} (KBs: {', '.join(state.kb_names())})", flush=True)
    page_up.set()
    stop_on_signals(state)  # process 1 of a container ignores SIGTERM without this (ui/lifecycle.py)
    serve(app, state, server_name=host or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
          server_port=port)


def start_demo(page_up: threading.Event | None = None) -> Callable[[], None]:
    """On a first start, the demo KB is built in the background and the page opens as soon as its
    passages are stored (bm25 answers then); every other method joins as its layers land
    (retrieval/kb/publish.py) and the header says when each will. A start after one that was
    stopped mid-build resumes it the same way. Returns a wait for the demo to be served (at once
    when it is whole). The build's first encoding waits for `page_up` (at most a minute): the page
    comes first, then the cores go to the build."""
    if demo_complete():
        return lambda: None
    failed: list[BaseException] = []

    def hold(_status) -> None:
        if page_up is not None and not page_up.is_set():
            page_up.wait(60)

    def run() -> None:
        # The build yields the cores to visitors: a question asked while it encodes is answered
        # at full speed (threads, and the workers it starts, inherit this nice value on Linux).
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (AttributeError, OSError):
            pass
        try:
            # progress: a plain line every 10 s in the app's log (retrieval/core/progress_bar.py)
            build_dataset(DEMO, progress=True, targets=targets(), listener=hold)
            print("hoptrace: the demo KB is built; every method is served", flush=True)
        except BaseException as e:  # the page keeps what was published; the log says why the rest is not
            failed.append(e)
            print(f"hoptrace: the demo KB's build stopped: {e}", file=sys.stderr, flush=True)

    worker = threading.Thread(target=run, daemon=True, name="demo-build")
    worker.start()

    def served() -> None:
        while not demo_path().exists():
            if failed:
                raise failed[0]
            if not worker.is_alive():
                raise HopTraceError("the demo KB's build ended without serving it; see the log above")
            time.sleep(0.05)
        print("hoptrace: serving the demo KB while it builds (bm25 first, then each method as its layers land)",
              flush=True)

    return served


# The bar of the two pages (ui/pages.py) sits on the title's row, at its right, instead of a row of
# its own above it: a run of five methods then still fits in two screens. A narrow screen keeps
# the row, where the bar would cover the title. In the head, not `css=`: Gradio scopes a media
# query's rules to its own container, which the bar is outside of.
PAGE_HEAD = ("<style>@media (min-width:720px){.nav-holder{position:absolute;top:0;right:0;"
             "border-bottom:0!important;z-index:10}}</style>")


def serve(app: gr.Blocks, state: AppState, prevent_thread_lock: bool = False, **launch: object) -> None:
    """Queue and launch as every entry point must (the app, the tests, bench-app): the theme
    with system fonts (Gradio's default theme fetches Google Fonts: the page must make no
    request outside this server), the upload cap of public mode, the routes that serve
    vis-network to the graph iframes and the first view's map frame, and the script in the page's
    HTML that starts that frame before Gradio runs (ui/early_map.py)."""
    # uvicorn would take the client's address from X-Forwarded-For whenever the connection comes from
    # loopback; public mode decides itself whether that header is trusted (PublicLimits.trust_proxy),
    # so the socket's peer must reach it unchanged. An operator's own FORWARDED_ALLOW_IPS wins.
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                              font_mono=["ui-monospace", "SFMono-Regular", "monospace"])
    first_doc = getattr(app, "first_map_doc", "")
    app.queue(default_concurrency_limit=2, max_size=32).launch(
        theme=theme, head=PAGE_HEAD, show_error=True, max_file_size=state.public.upload_cap(), prevent_thread_lock=True,
        app_kwargs={"middleware": [Middleware(static_cache.StaticCache, mounts=_static_mounts()),
                                   Middleware(pages.ExperimentLinks),
                                   Middleware(early_map.HeadMiddleware, scripts={
                                       "/": early_map.head(bool(first_doc)) + idle_frames.SCRIPT,
                                       f"/{pages.LAB}": idle_frames.SCRIPT})]},
        **launch)
    _add_vis_route(app.server_app)
    _add_first_map_route(app.server_app, first_doc)
    if not prevent_thread_lock:
        app.block_thread()


def _static_mounts() -> tuple:
    """What ui/static_cache.py serves from memory: Gradio's hashed front-end files, and
    vis-network (the map frames' script, compressed once instead of at every request)."""
    from gradio.route_utils import BUILD_PATH_LIB

    return (("/assets/", Path(BUILD_PATH_LIB), "public, max-age=31536000, immutable", None),
            (f"/{render.VIS_ROUTE}/", render.vis_file(render.VIS_FILES[0]).parent, "public, max-age=86400",
             frozenset(render.VIS_FILES)))


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


def _add_first_map_route(server, doc: str) -> None:
    """The document of the first view's map frame, which the page starts with its HTML
    (ui/early_map.py); the same for every visitor: the shipped recording's first question."""
    from fastapi import HTTPException
    from fastapi.responses import HTMLResponse

    def first_map():
        if not doc:
            raise HTTPException(404, "no first view")
        return HTMLResponse(doc, headers=early_map.FRAME_HEADERS)

    server.add_api_route(f"/{early_map.ROUTE}", first_map, methods=["GET"], include_in_schema=False)
