"""The browser tests' shared parts: one Chromium (the hop-map tests' too) and one in-process app (with a public-mode
twin that also carries the operator's own methods, and one with the shipped showcase) for every
test_app_*.py file. Those files are one unit of work for pytest-xdist (tests/conftest.py), so these
session fixtures are built once per run, on one worker.

The app runs on a test KB: the small MuSiQue slice plus one passage whose title is an HTML
injection. Screenshots are taken only when $HOPTRACE_SCREENSHOTS names a folder, never into the
repository."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import pytest

from appbench.page import ARGS, CHROMIUM, serve_free
from browser.flows import (
    EVIL,
    LAB_METHODS,
    browser_contexts,
)


@pytest.fixture(scope="session")
def shots() -> Optional[Path]:
    """HOPTRACE_SCREENSHOTS, the folder the tests' screenshots go to, or None: then none is taken
    (`browser.flows.snap`). Set it to look at the pages after a UI change."""
    if not os.environ.get("HOPTRACE_SCREENSHOTS"):
        return None
    d = Path(os.environ["HOPTRACE_SCREENSHOTS"])
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def app_url(small_kb, embedder, tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    import sqlite3

    from retrieval.core.paths import kb_dir
    from retrieval.core.records import Passage
    from retrieval.kb.build import build_kb
    from retrieval.kb.extract.rules import RulesExtractor
    from ui.app import build
    from ui.state import AppState

    evil = Passage.make(EVIL, "An injected title: onerror handlers must never run in HopTrace's pages.")
    home = tmp_path_factory.mktemp("browser-home")
    kb = home / "demo.sqlite"
    # The session's small KB (conftest.py), copied rather than built again; unnamed, as the demo
    # KB a user builds is (its name would reach GEAR's per-dataset settings and the refusals).
    shutil.copyfile(small_kb, kb)
    with sqlite3.connect(kb) as con:
        con.execute("DELETE FROM meta WHERE key = 'name'")
    build_kb(kb, [evil], [RulesExtractor(n_process=1)], embedder, progress=False)  # appended
    shutil.copyfile(kb, kb_dir() / "demo.sqlite")
    from retrieval import showcase
    from traces.storage import shipped as shipped_experiment

    shipped, shipped_dir = showcase.SHOWCASE_DIR, shipped_experiment.SHIPPED_DIR
    try:
        _record_showcase(home)
        _record_experiment(home)
        state = AppState(trace_path=home / "traces.sqlite")
        app = build(state)   # the Ask tab reads the recording here, once; the lab installs the experiment
        _second_experiment(state)
    finally:
        # The module's global is shared by every test of the session: the shipped recording's
        # test read this one instead, and passed in the suite while it failed alone.
        showcase.SHOWCASE_DIR, shipped_experiment.SHIPPED_DIR = shipped, shipped_dir
    url = serve_free(app, state)
    yield url
    app.close()


def _answering_ctx():
    """The test KB with the scripted test double of the LLM (tests/llm_double.py) for the answer step."""
    from llm_double import scripted_llm

    from retrieval.core.paths import kb_dir
    from retrieval.encoders.embedder import get_embedder
    from retrieval.methods import Context
    from retrieval.store import open_store

    store = open_store(str(kb_dir() / "demo.sqlite"))
    llm, _ = scripted_llm({"answer": [json.dumps({"answer": "Ostrevan"})] * 60})
    return Context(store, get_embedder(store.info().embed_model), llm)


class QuietWatch:
    """A test double of the recorder's idle watch (retrieval/core/idle.py): every unit reads idle,
    judged by the real verdict from quiet readings. The lab's view is tested here; the real watch,
    a disturbed unit included, is tested in tests/test_shipped_experiment.py. With the real one, a
    busy CI machine discarded a method's units three times and the leaderboard lacked that row."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        from retrieval.core import idle
        self.conditions = idle.judge(None, 20.0, 20.0, [0.0])


def _record_experiment(home: Path) -> None:
    """The lab's shipped experiment: three LLM-free methods on four questions, each run ending with
    an answer, recorded by the real recorder (its idle watch a test double) and written where the
    app installs it."""
    from traces.storage import recording, shipped
    from traces.storage.experiments import Experiments
    from traces.storage.store import TraceStore

    ctx = _answering_ctx()
    experiments = Experiments(TraceStore(home / "recording.sqlite"))
    qs = recording.order_questions(ctx.store.questions(), [], 4)
    exp = recording.start(experiments, ctx, "demo", qs, LAB_METHODS, llm_questions=4)
    recording.close_sitting(experiments, exp, recording.record_sitting(experiments, exp, ctx, qs, minutes=10,
                                                                       watch=QuietWatch), qs)
    shipped.SHIPPED_DIR = home / "experiments"
    shipped.write(experiments, exp, shipped.path_for("demo"))


def _second_experiment(state) -> None:
    """A later experiment of two of its methods on the same questions, to compare with it."""
    from traces.storage import recording
    from traces.storage.experiments import Experiments

    ctx = _answering_ctx()
    experiments = Experiments(state.traces)
    qs = recording.order_questions(ctx.store.questions(), [], 4)
    exp = recording.start(experiments, ctx, "demo", qs, LAB_METHODS[:2], llm_questions=4)
    recording.close_sitting(experiments, exp, recording.record_sitting(experiments, exp, ctx, qs, minutes=10,
                                                                       watch=QuietWatch), qs)


def _record_showcase(home: Path) -> None:
    """A showcase recording for the app to open: composed and SAG on two questions, SAG's LLM
    answered by the scripted test double (tests/llm_double.py)."""
    import dataclasses
    import json

    from llm_double import scripted_llm

    from retrieval import showcase
    from retrieval.core.paths import kb_dir
    from retrieval.encoders.embedder import get_embedder
    from retrieval.methods import Context
    from retrieval.store import open_store

    store = open_store(str(kb_dir() / "demo.sqlite"))
    ents = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})
    llm, _ = scripted_llm({"query entities": [ents] * 2, "rerank": ['{"selected": [1, 2]}'] * 2})
    ctx = Context(store, get_embedder(store.info().embed_model), llm)
    showcase.SHOWCASE_DIR = home / "showcase"
    showcase.record(dataclasses.replace(ctx), "demo", showcase.choose_questions(store.questions(), 2),
                    ["composed", "sag"], k=5)


@pytest.fixture(scope="session")
def chromium():
    """One Chromium for the browser tests: a launch costs ~1.5 s and they made 30. Each test opens
    its own contexts (`browser_contexts`), so no cookie, localStorage or page passes between tests."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture()
def page(chromium, app_url, request):
    """A visitor's tab on the Ask page (/), or on the lab (/lab) for a test marked
    `@pytest.mark.starts_on_lab`: one page load, not the Ask page's first (~2 s a load here)."""
    lab = request.node.get_closest_marker("starts_on_lab") is not None
    with browser_contexts(chromium) as browser:
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs: list[str] = []
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        pg.dialogs = dialogs
        # Every request the page makes outside this server (fonts, CDNs, analytics): none allowed.
        pg.external = []
        pg.on("request", lambda r: None if r.url.startswith((app_url, "data:", "blob:", "about:"))
              else pg.external.append(r.url))
        pg.goto(app_url + ("lab" if lab else ""), wait_until="domcontentloaded")
        pg.wait_for_selector("#tabs" if lab else "#run", timeout=60_000)
        yield pg
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            # A wait that timed out says only that: the toasts on the page say why (an error the
            # app raised shows there, not in the worker's log).
            print("toasts on the page when the test failed:", pg.locator(".toast-body").all_inner_texts())
        # Checked after every test that used this page, over all it did: nothing left the server.
        assert pg.external == [], pg.external


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (`rep_call`), for the `page` fixture's teardown."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def installed_traces(app_url, tmp_path_factory) -> Path:
    """A trace file with the shipped experiment installed, as an app's first start leaves it
    (~10 CPU s to install): the apps below start on a copy each, so it is installed once. The
    install itself is what the app_url app and tests/test_shipped_experiment.py test. After
    app_url, which points the shipped folder at its own small recording while it builds."""
    from traces.storage.shipped import install_for
    from traces.storage.store import TraceStore

    path = tmp_path_factory.mktemp("installed") / "traces.sqlite"
    assert install_for(TraceStore(path), ["demo"]), "the shipped experiment of the demo KB"
    return path


def _traces_copy(installed: Path, folder: Path) -> Path:
    """A copy through SQLite's backup: whole, with what the source's write-ahead log still holds."""
    import sqlite3

    out = folder / "traces.sqlite"
    src, dst = sqlite3.connect(installed), sqlite3.connect(out)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return out


def public_app(tmp_path_factory, installed: Path, name: str, **limits):
    """The same KBs served in public mode, with a trace file of its own: (app, url)."""
    from dataclasses import replace

    from ui.app import build
    from ui.public import PublicLimits
    from ui.state import AppState

    state = AppState(trace_path=_traces_copy(installed, tmp_path_factory.mktemp(name)),
                     public=replace(PublicLimits.from_env(public=True), **limits))
    app = build(state)
    url = serve_free(app, state)
    return app, url


@pytest.fixture(scope="module")
def visitors_url(app_url, installed_traces, tmp_path_factory):
    """One public-mode app for every visitor test of test_app_visitors.py (an app's build and
    start is ~8 CPU s; three were built): room for 100 requests a minute, so the hostile uploads,
    not the rate limit, are what is tested (test_public_limits.py tests the limits), and the
    operator's own methods: one that works, one that sleeps past the cut-off, and one that fails
    to load. The caps the visitor tests check (LLM methods a request, no server path) are the
    defaults."""
    import ui.ask
    from retrieval.methods.plugins import load_plugin

    folder = tmp_path_factory.mktemp("plugins")
    (folder / "mine.py").write_text('"""Dense, then BM25 for what dense missed."""\n\n'
                                    "def retrieve(question, k, kb):\n"
                                    "    hits = dict(kb.dense(question, k))\n"
                                    "    hits.update({p: s for p, s in kb.bm25(question, k) if p not in hits})\n"
                                    "    return [{'id': p, 'score': s} for p, s in list(hits.items())[:k]]\n")
    (folder / "sleepy.py").write_text("import time\n\ndef retrieve(question, k, kb):\n    time.sleep(6)\n"
                                      "    return kb.bm25(question, k)\n")
    (folder / "broken.py").write_text("import no_such_library_here\n")
    for name in ("mine.py", "sleepy.py", "broken.py"):
        load_plugin(str(folder / name))
    limit = ui.ask.PLUGIN_LIMIT_S
    ui.ask.PLUGIN_LIMIT_S = 2.0
    app, url = public_app(tmp_path_factory, installed_traces, "visitors", requests_per_minute=100,
                          requests_per_minute_per_address=100)
    yield url
    app.close()
    ui.ask.PLUGIN_LIMIT_S = limit


@pytest.fixture(scope="module")
def shipped_url(app_url, installed_traces, tmp_path_factory):
    """The app as a first visitor meets it: the shipped showcase (five methods) on the test KB."""
    from ui.app import build
    from ui.state import AppState

    state = AppState(trace_path=_traces_copy(installed_traces, tmp_path_factory.mktemp("shipped")))
    app = build(state)
    url = serve_free(app, state)
    yield url
    app.close()


