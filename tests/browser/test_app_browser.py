"""The app in real headless Chromium (Debian's), driven by playwright.

The app runs in-process on a test KB: the small MuSiQue slice plus one passage whose
title is an HTML injection. Screenshots go to $HOPTRACE_SCREENSHOTS (default: a temp
folder), never into the repository.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from embedded import TEST_MODEL

from appbench.page import ARGS, CHROMIUM, free_port, serve_free
from ui import early_map

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=alert(1)>"
Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """HOPTRACE_SCREENSHOTS, or pytest's own folder (it keeps the last few runs', not every run's)."""
    d = Path(os.environ.get("HOPTRACE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
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


LAB_METHODS = ["bm25", "composed", "griever"]


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


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module: a launch costs ~1.5 s and the module made 30. Each test opens
    its own contexts (`_opened`), so no cookie, localStorage or page passes between tests."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


class _Contexts:
    """The module's browser as one test sees it: what it opens is closed when the test ends."""

    def __init__(self, browser):
        self.browser, self.opened = browser, []

    def new_context(self, **kw):
        self.opened.append(self.browser.new_context(**kw))
        return self.opened[-1]

    def new_page(self, **kw):
        return self.new_context(**kw).new_page()


@contextmanager
def _opened(browser):
    ctx = _Contexts(browser)
    try:
        yield ctx
    finally:
        for c in ctx.opened:
            c.close()


@pytest.fixture()
def page(chromium, app_url, request):
    """A visitor's tab on the Ask page (/), or on the lab (/lab) for a test marked
    `@pytest.mark.starts_on_lab`: one page load, not the Ask page's first (~2 s a load here)."""
    lab = request.node.get_closest_marker("starts_on_lab") is not None
    with _opened(chromium) as browser:
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
        # Checked after every test that used this page, over all it did: nothing left the server.
        assert pg.external == [], pg.external


# Ask and Traces are tabs of the page at /, Experiments, Judge and Index of the page at /lab (ui/pages.py).
LAB_TABS = {"Experiments", "Judge", "Index"}


def _tab(page, name: str, query: str = "") -> None:
    """Opens a tab, going to its page first when it is on the other one."""
    on_lab = page.evaluate("location.pathname").rstrip("/").endswith("/lab")
    if (name in LAB_TABS) != on_lab or query:
        page.goto(page.evaluate("location.origin") + ("/lab" if name in LAB_TABS else "/") + query,
                  wait_until="domcontentloaded")
        page.wait_for_selector("#tabs", timeout=60_000)
    page.get_by_role("tab", name=name).click()
    if name == "Experiments":   # the forms that make experiments are folded under the view
        for fold, inside in (("#bench-fold", "#bench-run"), ("#repro-fold", "#repro-run")):
            if not page.locator(inside).is_visible():
                page.locator(f"{fold} .label-wrap").first.click()
                page.wait_for_selector(inside, state="visible", timeout=10_000)


def _set_question(page, text: str) -> None:
    page.fill("#question textarea", text)


def _set_methods(page, wanted: set[str]) -> None:
    for label in page.locator("#methods label").all():
        name = label.inner_text().strip()
        box = label.locator("input")
        if box.is_checked() != (name in wanted):
            label.click()


def _first_run_id(page) -> str:
    import re

    ids = re.findall(r"\b[0-9a-f]{16}\b", page.locator("#runs-table").inner_text())
    assert ids, "the traces table lists no run"
    return ids[0]


def _run(page, methods: set[str]) -> None:
    _set_methods(page, methods)
    page.click("#run")
    for m in methods:
        page.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=120_000)


def test_ask_streams_stages_graph_and_comparison(page, shots):
    _set_question(page, Q)
    _run(page, {"griever", "composed"})
    griever = page.locator("#columns .ht-col[data-method='griever']")
    names = griever.locator(".ht-stage summary .ht-meta").all_inner_texts()
    for stage in ("clause_split", "shortlist_1", "match_1", "rewrite_1", "retrieve_2", "paths", "ranking"):
        assert any(n.startswith(stage + " ") for n in names), stage
    assert page.locator("#columns .ht-col[data-method='composed'] .ht-stage").count() == 4
    assert "gold found: 2/2" in griever.inner_text()
    page.wait_for_selector("#graph iframe", timeout=30_000)
    frame = page.frame_locator("#graph iframe")
    frame.locator("canvas").first.wait_for(timeout=30_000)  # vis-network drew offline
    page.wait_for_selector("#comparison .js-plotly-plot", timeout=30_000)
    page.screenshot(path=str(shots / "ask.png"), full_page=True)
    link = page.locator("#session-link").inner_text()
    assert "Session" in link


def test_traces_view_rerenders_a_stored_run_and_the_session_link_reopens(page, app_url, shots):
    _set_question(page, Q)
    _run(page, {"griever"})
    live = page.locator("#columns .ht-col[data-method='griever'] .ht-stage").count()
    session = page.locator("#session-link code").inner_text().strip()
    _tab(page, "Traces")
    page.click("#refresh-runs")
    page.wait_for_function("document.querySelector('#runs-table') && "
                           "document.querySelector('#runs-table').innerText.includes('griever')", timeout=30_000)
    run_id = _first_run_id(page)
    page.fill("#run-a textarea, #run-a input", run_id)
    page.click("#show-runs")
    page.wait_for_selector("#stored .ht-col .ht-stage", timeout=30_000)
    assert page.locator("#stored .ht-col .ht-stage").count() == live
    page.screenshot(path=str(shots / "traces.png"), full_page=True)
    page.goto(f"{app_url}?session={session}", wait_until="domcontentloaded")
    page.wait_for_selector("#columns .ht-col[data-method='griever'] .ht-stage", timeout=60_000)
    assert page.locator("#columns .ht-col[data-method='griever'] .ht-stage").count() == live


def test_an_injected_title_renders_as_text_everywhere(page, shots):
    _set_question(page, "injected title onerror handlers never run")
    _run(page, {"bm25", "griever"})
    cols = page.locator("#columns")
    assert EVIL in cols.inner_text()                      # shown, as text
    assert cols.locator("img").count() == 0               # never parsed as an element
    _tab(page, "Traces")
    page.click("#refresh-runs")
    page.wait_for_function("document.querySelector('#runs-table').innerText.includes('injected')", timeout=30_000)
    run_id = _first_run_id(page)
    page.fill("#run-a textarea, #run-a input", run_id)
    page.click("#show-runs")
    page.wait_for_selector("#stored .ht-col", timeout=30_000)
    assert EVIL in page.locator("#stored").inner_text()
    assert page.locator("#stored img").count() == 0
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "xss.png"), full_page=True)
    assert page.dialogs == [], f"a script ran: {page.dialogs}"


@pytest.mark.starts_on_lab
def test_benchmark_tab_repeats_with_a_context_budget_and_shows_the_trade_off(page, shots):
    """Repetitions and a context budget from the tab: the table gives the spread and stable@5,
    the experiment's view the trade-off table, the verdicts over repetitions and quality
    against cost a question."""
    _tab(page, "Experiments")
    page.fill("#bench-limit input", "3")
    page.fill("#bench-repeat input", "2")
    page.fill("#bench-budget input", "400")
    page.click("#bench-run")
    page.wait_for_function("document.querySelector('#exp-summary') && "
                           "document.querySelector('#exp-summary').innerText.includes('The whole trade-off')",
                           timeout=180_000)
    table = page.locator("#bench-table").inner_text()
    assert "recall@400tok" in table and "stable@5" in table and "± 0.0" in table
    trade = page.locator("#exp-tradeoff").inner_text()
    assert "recall@400tok" in trade and "$ / question" in trade and "stable@5" in trade
    assert "was the same in all 2 repetitions" in page.locator("#exp-summary").inner_text()
    page.wait_for_selector("#exp-tradeoff-plot .js-plotly-plot", timeout=30_000)
    page.locator("#exp-tradeoff-plot").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "bench-tradeoff.png"))


@pytest.mark.starts_on_lab
def test_benchmark_tab_reproduces_a_paper(page, shots):
    _tab(page, "Experiments")
    page.fill("#bench-limit input", "3")
    page.click("#repro-run")
    page.wait_for_function("document.querySelector('#repro-out') && "
                           "document.querySelector('#repro-out').innerText.includes('claims (')", timeout=180_000)
    out = page.locator("#repro-out").inner_text()
    assert "R@5 ours | paper" in out and "GRIEVER Table 1" in out
    # three questions cannot settle a claim: the verdict says so, with the numbers behind it
    assert "inconclusive" in out and "win/tie/loss" in out
    page.wait_for_selector("#repro-plot .js-plotly-plot", timeout=30_000)
    page.screenshot(path=str(shots / "reproduce.png"), full_page=True)


@pytest.mark.starts_on_lab
def test_an_experiment_drills_down_to_two_stored_runs_side_by_side(page, app_url, shots):
    """A benchmark from the tab: its table of every method and its latency plot; it becomes an
    experiment: the comparison with its uncertainty, the funnel, the per-question table; a row
    opens both stored runs in the Ask tab, and ?experiment=ID reopens it."""
    _tab(page, "Experiments")
    page.fill("#bench-limit input", "4")
    page.click("#bench-run")
    # The view leaves the shipped experiment (kind bench) for this benchmark's (kind app).
    page.wait_for_function("document.querySelector('#exp-summary') && "
                           "document.querySelector('#exp-summary').innerText.includes(' · app · KB') && "
                           "document.querySelector('#exp-summary').innerText.includes('95 % CI')", timeout=180_000)
    # The benchmark's own table and latency plot (what a bench from the tab shows before its view).
    page.wait_for_function("document.querySelector('#bench-table') && "
                           "document.querySelector('#bench-table').innerText.includes('tokens_per_question')",
                           timeout=30_000)
    table = page.locator("#bench-table").inner_text()
    for method in ("bm25", "dense", "composed", "griever"):
        assert method in table
    page.wait_for_selector("#bench-latency .js-plotly-plot", timeout=30_000)
    page.screenshot(path=str(shots / "bench.png"), full_page=True)
    summary = page.locator("#exp-summary").inner_text()
    # The view opens on the best method against BM25, the baseline every paper reports.
    assert "B = bm25" in summary and "paired randomization p" in summary
    page.wait_for_selector("#exp-funnel .js-plotly-plot", timeout=30_000)
    funnel = page.locator("#exp-funnel").inner_text()
    assert "Where the gold is lost" in funnel and "top 5" in funnel
    # Gradio's table draws its rows as role=row elements (a hidden <tbody> only measures widths)
    page.wait_for_function("document.querySelectorAll('#exp-rows [role=row][data-index]').length === 4",
                           timeout=30_000)
    page.screenshot(path=str(shots / "experiment.png"), full_page=True)
    exp_id = page.locator("#exp-summary code").inner_text().strip()
    assert len(exp_id) == 32
    question = page.locator("#exp-rows [data-testid=cell-0-1]").inner_text().strip()
    page.locator("#exp-rows [data-testid=cell-0-1]").click()
    page.wait_for_selector("#experiment-banner", timeout=30_000)
    assert page.locator("#columns .ht-col").count() == 2
    pair = re.search(r"A = (\S+) vs B = (\S+):", summary).groups()
    for m in pair:
        assert page.locator(f"#columns .ht-col[data-method='{m}'] table.ht-ranking").count() == 1
    assert page.locator("#question textarea").input_value().strip() == question
    assert "gold found:" in page.locator("#columns").inner_text()
    page.screenshot(path=str(shots / "experiment-drilldown.png"), full_page=True)
    # the row opened the Ask page (ui/pages.py); Back returns to the experiment
    assert page.evaluate("location.pathname") == "/"
    page.go_back(wait_until="domcontentloaded")
    page.wait_for_function("document.querySelector('#exp-summary') && "
                           f"document.querySelector('#exp-summary').innerText.includes('{exp_id}')", timeout=60_000)
    # a link to a question the experiment does not have says so, over the first view
    page.goto(f"{app_url}?experiment={exp_id}&question=nope&metric=recall%405&a=bm25&b=griever",
              wait_until="domcontentloaded")
    page.wait_for_function("document.querySelector('#columns') && "
                           "document.querySelector('#columns').innerText.includes(\"question 'nope' is not in\")",
                           timeout=60_000)
    # the experiment's link, at /, reopens it in the Benchmark tab of the lab page
    page.goto(f"{app_url}?experiment={exp_id}", wait_until="domcontentloaded")
    assert page.evaluate("location.pathname") == "/lab"
    page.wait_for_function("document.querySelector('#exp-summary') && "
                           f"document.querySelector('#exp-summary').innerText.includes('{exp_id}')", timeout=60_000)
    page.wait_for_function("document.querySelectorAll('#exp-rows [role=row][data-index]').length === 4",
                           timeout=30_000)


EMPTY_PANELS_JS = """() => [...document.querySelectorAll('[aria-label="Empty value"], .empty, .js-plotly-plot')]
  .filter(e => e.offsetParent !== null && (e.matches('.js-plotly-plot') ? !e.querySelector('.main-svg') : true))
  .length"""


def test_the_lab_opens_on_the_shipped_experiment_with_no_empty_panel(chromium, app_url, shots):
    """No click: the shipped experiment's leaderboard, trade-off, intervals, hops, funnel and
    questions; then the experiments table, two experiments compared, the report, and a question
    opened into the Ask page's hop maps."""
    with _opened(chromium) as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        t0 = time.perf_counter()
        page.goto(app_url + "lab", wait_until="domcontentloaded")
        page.wait_for_selector("#exp-pick", timeout=60_000)
        to_ready = time.perf_counter() - t0
        page.wait_for_selector("#exp-leaderboard table", timeout=60_000)
        to_board = time.perf_counter() - t0
        plots = ("#exp-tradeoff-plot", "#exp-means-plot", "#exp-groups", "#exp-funnel")
        for sel in plots:
            page.wait_for_selector(f"{sel} .js-plotly-plot .main-svg", timeout=60_000)
        to_plots = time.perf_counter() - t0
        page.wait_for_function("document.querySelectorAll('#exp-rows [role=row][data-index]').length === 4",
                               timeout=30_000)
        board = page.locator("#exp-leaderboard").inner_text()
        assert all(m in board for m in LAB_METHODS) and "idle" in board and "each run ends with an answer" in board
        for col in ("recall@5", "recall@10", "EM", "F1", "s / question", "CPU s / question", "tokens / question",
                    "$ / question"):
            assert col in board, col
        empty = page.evaluate(EMPTY_PANELS_JS)
        height = page.evaluate("document.documentElement.scrollHeight")
        page.screenshot(path=str(shots / "lab-first-view.png"), full_page=True)
        print(f"lab: page ready {to_ready:.2f} s, leaderboard {to_board:.2f} s, every plot {to_plots:.2f} s, "
              f"{empty} empty panels, page {height} px")
        assert empty == 0
        # A count in the answer split lists its questions, as its cell picked in "Show questions" does.
        cell = page.locator("#exp-answer-split td.ht-pick").first
        method, n = cell.get_attribute("data-split").split("|")[0], int(cell.inner_text())
        cell.click()
        picked = json.dumps(method + ": ")
        page.wait_for_function(f"document.querySelector('#exp-split input').value.startsWith({picked})", timeout=30_000)
        rows_js = "document.querySelectorAll('#exp-rows [role=row][data-index]').length"
        page.wait_for_function(f"{rows_js} === {n}", timeout=30_000)
        # A bar of the funnel where gold was lost lists the questions that lost it there.
        page.locator("#exp-funnel").scroll_into_view_if_needed()
        bar = page.evaluate("""() => {
          const plot = document.querySelector('#exp-funnel .js-plotly-plot');
          for (const [t, tr] of plot._fullData.entries()) {
            const i = tr.customdata.findIndex((lost, j) => lost > 0 && j < tr.customdata.length - 1);
            if (i < 0) continue;
            const r = plot.querySelectorAll('.barlayer .trace')[t].querySelectorAll('.point path')[i]
              .getBoundingClientRect();
            return {x: r.left + r.width / 2, y: r.top + r.height / 2, stage: tr.y[i], lost: tr.customdata[i]};
          }
          return null;
        }""")
        assert bar, "no funnel bar where gold was lost"
        page.mouse.click(bar["x"], bar["y"])
        page.wait_for_function("document.querySelector('#exp-split input').value.includes('lost the gold at "
                               f"{bar['stage']}')", timeout=30_000)
        shown = int(re.search(r"\((\d+)\)$", page.locator("#exp-split input").input_value()).group(1))
        page.wait_for_function(f"{rows_js} === {shown}", timeout=30_000)
        # The experiments table, newest first: the later one opens its view above.
        page.locator("#exp-list-fold .label-wrap").first.click()
        page.wait_for_selector("#exp-table [data-testid=cell-1-8]", timeout=30_000)
        rows = page.locator("#exp-table [role=row][data-index]")
        texts = [rows.nth(i).inner_text() for i in range(rows.count())]
        shipped_row = next(i for i, t in enumerate(texts) if "shipped" in t)
        later_row = next(i for i, t in enumerate(texts) if "2: bm25, composed" in t)
        assert later_row < shipped_row   # newest first
        shipped_id = page.locator(f"#exp-table [data-testid=cell-{shipped_row}-8]").inner_text().strip()
        later_id = page.locator(f"#exp-table [data-testid=cell-{later_row}-8]").inner_text().strip()
        page.locator(f"#exp-table [data-testid=cell-{later_row}-3]").click()
        page.wait_for_function(f"document.querySelector('#exp-summary').innerText.includes('{later_id}')",
                               timeout=60_000)
        assert "griever" not in page.locator("#exp-leaderboard").inner_text()
        page.screenshot(path=str(shots / "lab-from-table.png"), full_page=True)
        # Compared with the shipped one: each shared method's change, its interval and paired test.
        page.locator("#exp-against input").click()
        page.get_by_role("option", name=re.compile(shipped_id[:12])).first.click()
        page.click("#exp-against-run")
        page.wait_for_selector("#exp-across table", timeout=60_000)
        across = page.locator("#exp-across").inner_text()
        assert "bm25" in across and "composed" in across and "change [95 % CI]" in across
        assert "griever" in across   # named as in one experiment only
        page.locator("#exp-across").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "lab-two-compared.png"))
        page.click("#exp-report-run")
        page.wait_for_selector("#exp-report a", timeout=60_000)
        assert ".html" in page.locator("#exp-report").inner_text()
        # A question of the shipped experiment opens both stored runs' hop maps on the Ask page.
        page.goto(app_url + "lab", wait_until="domcontentloaded")
        page.wait_for_function("document.querySelectorAll('#exp-rows [role=row][data-index]').length === 4",
                               timeout=60_000)
        page.locator("#exp-rows [data-testid=cell-0-1]").click()
        page.wait_for_selector("#experiment-banner", timeout=60_000)
        page.frame_locator("#graph iframe").locator("canvas").first.wait_for(timeout=60_000)
        assert page.evaluate("location.pathname") == "/" and page.locator("#columns .ht-col").count() == 2
        page.screenshot(path=str(shots / "lab-question-in-ask.png"))
        assert dialogs == []


@pytest.mark.starts_on_lab
def test_index_tab_builds_an_uploaded_corpus_that_can_then_be_asked(page, tmp_path, shots):
    import json

    corpus = tmp_path / "tiny.json"
    corpus.write_text(json.dumps([
        {"title": "Zorvath Bridge", "text": "Zorvath Bridge was designed by the engineer Mirela Quent in 1911."},
        {"title": "Mirela Quent", "text": "Mirela Quent was born in the town of Ostrevan."},
        {"title": "Ostrevan", "text": "Ostrevan is a market town on the river Lume."},
    ]))
    _tab(page, "Index")
    page.locator("#up-corpus input[type=file]").set_input_files(str(corpus))
    page.fill("#up-name textarea, #up-name input", "tiny_upload")
    page.click("#up-build")
    page.wait_for_function("document.querySelector('#up-log').innerText.includes('Built')", timeout=180_000)
    log = page.locator("#up-log").inner_text()
    assert "3 passages" in log
    from retrieval.kb.embed import default_precision  # the Encoder radio's "default": bf16 where the CPU has it

    assert f"encoder {'torch' if default_precision() == 'bf16' else 'onnxruntime'} {default_precision()} ×" in log
    page.screenshot(path=str(shots / "index.png"), full_page=True)
    # the log's link opens the Ask page on the new KB, in a tab of its own (the lab page stays)
    with page.context.expect_page() as opened:
        page.locator("#up-log a", has_text="Ask it").click()
    page = opened.value
    page.wait_for_load_state("domcontentloaded")
    assert page.evaluate("location.pathname") == "/"
    page.wait_for_function("document.querySelector('#kb input') && "
                           "document.querySelector('#kb input').value === 'tiny_upload'", timeout=60_000)
    _tab(page, "Ask")
    _set_question(page, "Where was the designer of Zorvath Bridge born?")
    _run(page, {"bm25", "griever"})
    text = page.locator("#columns .ht-col[data-method='griever']").inner_text()
    assert "Zorvath Bridge" in text and "Mirela Quent" in text


Q2 = "What is the name of the waterfall in the country where the Bubye River is found?"


def test_two_users_at_once_get_their_own_runs_and_traces(chromium, app_url, shots):
    """Two browsers ask different questions at the same moment; neither loses or mixes traces."""

    with _opened(chromium) as browser:
        pages = []
        for q in (Q, Q2):
            pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            pg.goto(app_url, wait_until="domcontentloaded")
            pg.wait_for_selector("#run", timeout=60_000)
            _set_question(pg, q)
            _set_methods(pg, {"griever", "naivege"})
            pages.append(pg)
        # the header names the LLM the LLM-using methods would call
        assert TEST_MODEL in pages[0].locator("#backends").inner_text()
        for pg in pages:  # click both before waiting for either
            pg.click("#run")
        for pg in pages:
            for m in ("griever", "naivege"):
                pg.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=120_000)
        sessions = [pg.locator("#session-link code").inner_text().strip() for pg in pages]
        assert sessions[0] != sessions[1]
        # GEAR's graph expansion (no LLM needed for NaiveGE) rendered its beam search
        naive = pages[0].locator("#columns .ht-col[data-method='naivege']").inner_text()
        assert "beam_search" in naive and "passage_map" in naive
        assert "Journal of Psychotherapy Integration" in pages[0].locator("#columns").inner_text()
        second = pages[1].locator("#columns").inner_text()
        assert "Bubye" in second or "Victoria" in second
        pages[1].screenshot(path=str(shots / "second-user.png"), full_page=True)
        # each session reopens with its own question and both methods
        for sid, q, pg in zip(sessions, (Q, Q2), pages):
            pg.goto(f"{app_url}?session={sid}", wait_until="domcontentloaded")
            pg.wait_for_selector("#columns .ht-col[data-method='naivege'] .ht-stage", timeout=60_000)
            assert pg.locator("#question textarea").input_value() == q
            assert pg.locator("#columns .ht-col[data-method='griever'] .ht-stage").count() > 5


def test_a_showcase_question_opens_at_once_from_the_recording(page, shots):
    import time

    page.click("#showcase input")
    t0 = time.time()
    page.locator("#showcase [role=option]").first.click()
    page.wait_for_selector("#recorded-banner", timeout=10_000)
    opened = time.time() - t0
    banner = page.locator("#recorded-banner").inner_text()
    assert "Recorded, not live" in banner and "scripted test double" in banner and "Run live" in banner
    for m in ("composed", "sag"):
        col = page.locator(f"#columns .ht-col[data-method='{m}']")
        assert col.locator("table.ht-ranking").count() == 1
    assert any(n.startswith("rerank ") for n in
               page.locator("#columns .ht-col[data-method='sag'] .ht-stage summary .ht-meta").all_inner_texts())
    assert opened < 5, f"opening a recorded question took {opened:.1f} s"
    page.screenshot(path=str(shots / "showcase.png"), full_page=True)


@pytest.mark.slow
def test_a_live_llm_stage_shows_its_progress_while_the_model_writes(page, shots):
    """SAG with the real embedded model: its LLM stages show what the model is doing, and
    nothing a recording left on the page sits beside the live run."""
    page.click("#showcase input")
    page.locator("#showcase [role=option]").first.click()
    page.wait_for_selector("#recorded-banner", timeout=10_000)
    page.wait_for_selector("#comparison .js-plotly-plot", timeout=10_000)
    _set_question(page, Q)
    _set_methods(page, {"sag"})
    page.click("#run")
    live = page.locator("#columns .ht-col[data-method='sag'] .ht-live")
    live.filter(has_text="so far").first.wait_for(timeout=300_000)
    text = live.first.inner_text()
    assert "LLM writing" in text and ("query entities" in text or "rerank" in text), text
    assert page.locator("#comparison .js-plotly-plot").count() == 0, "the recording's comparison is still shown"
    assert page.locator("#recorded-banner").count() == 0
    page.screenshot(path=str(shots / "live_progress.png"), full_page=True)
    page.wait_for_selector("#columns .ht-col[data-method='sag'] table.ht-ranking", timeout=600_000)
    assert page.locator("#columns .ht-col[data-method='sag'] .ht-live").count() == 0
    names = page.locator("#columns .ht-col[data-method='sag'] .ht-stage summary .ht-meta").all_inner_texts()
    assert names[0].startswith("profile ")


def _public_app(tmp_path_factory, name: str, **limits):
    """The same KBs served in public mode, with a trace file of its own: (app, url)."""
    from dataclasses import replace

    from ui.app import build
    from ui.public import PublicLimits
    from ui.state import AppState

    state = AppState(trace_path=tmp_path_factory.mktemp(name) / "traces.sqlite",
                     public=replace(PublicLimits.from_env(public=True), **limits))
    app = build(state)
    url = serve_free(app, state)
    return app, url


@pytest.fixture(scope="module")
def public_url(app_url, tmp_path_factory):
    app, url = _public_app(tmp_path_factory, "public")
    yield url
    app.close()


def test_public_mode_keeps_visitors_apart_and_names_its_caps(chromium, public_url, shots):

    with _opened(chromium) as browser:
        ann, bob = (browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(2))
        for pg in (ann, bob):
            pg.goto(public_url, wait_until="domcontentloaded")
            pg.wait_for_selector("#run", timeout=60_000)
            assert "traces in" not in pg.locator("#backends").inner_text()  # no server path on the page
        _set_question(ann, Q)
        _run(ann, {"bm25"})
        assert "/tmp/" not in ann.content()
        sid = ann.locator("#session-link code").inner_text().strip()
        assert len(sid) == 32

        def traces_tab(pg) -> str:
            _tab(pg, "Traces")
            pg.click("#refresh-runs")
            pg.wait_for_timeout(1500)
            return pg.locator("#runs-table").inner_text()

        assert "Journal of Psychotherapy Integration" in traces_tab(ann)
        assert "Journal of Psychotherapy Integration" not in traces_tab(bob)
        bob.screenshot(path=str(shots / "public-second-visitor-traces.png"), full_page=True)
        # the link opens Ann's comparison for Bob, read-only, without adding it to his list
        bob.goto(f"{public_url}?session={sid}", wait_until="domcontentloaded")
        bob.wait_for_selector("#columns .ht-col[data-method='bm25'] table.ht-ranking", timeout=60_000)
        assert "Journal of Psychotherapy Integration" not in traces_tab(bob)
        # a cap refuses with its limit named
        _tab(bob, "Ask")
        _set_methods(bob, {"gear", "sag", "grasp"})
        bob.click("#run")
        bob.wait_for_function("document.querySelector('#columns').innerText.includes('LLM methods a request')",
                              timeout=30_000)
        assert "at most 2 LLM methods a request" in bob.locator("#columns").inner_text()


def test_the_page_asks_nothing_outside_its_server_and_groups_methods_by_paper(page, shots):
    # What the page requests outside its server is asserted after every test by the `page`
    # fixture, over all the test did (no fixed wait for "networkidle", which Gradio's open
    # connection never reaches): here a run and its hop map, then the picker.
    _set_question(page, Q)
    _run(page, {"griever"})
    page.frame_locator("#graph iframe").locator("canvas").first.wait_for(timeout=30_000)
    picker = page.locator("#methods")
    text = picker.inner_text()
    from ui.picker import expected
    for title in ("Baselines", "GRIEVER · Tables 1, 3, 4", "GEAR · Tables 2, 4", "SAG · Tables 4, 6, 7",
                  "GRASP · Table 2, A.1.7", f"griever {expected('griever', llm='none')}"):
        assert title in text, title
    assert not page.get_by_text("sag_h0", exact=True).is_visible()  # ablations folded
    page.get_by_text("SAG ablations").click()
    page.get_by_text("sag_h0", exact=True).wait_for(state="visible")
    picker.screenshot(path=str(shots / "method-picker.png"))


def _map_frame(page):
    """The Ask tab's hop map frame, once it has drawn. The frame is sandboxed (another origin): its
    window is read through playwright's frame, never from the page."""
    page.wait_for_selector("#graph iframe.ht-hopmap", timeout=60_000)
    frame = page.locator("#graph iframe").element_handle().content_frame()
    frame.wait_for_function("window.hopmapDrawn === true", timeout=30_000)
    return frame


def test_clicking_a_stage_link_shows_that_stage_in_the_hop_map_in_view(page, shots):
    _set_question(page, Q)
    _run(page, {"griever"})
    _map_frame(page)
    links = page.locator("#columns .ht-col[data-method='griever'] .ht-graph-link")
    assert links.count() > 2
    link = links.nth(1)
    want = link.get_attribute("data-stage")
    assert want.startswith("griever · ")
    stage = link.locator("xpath=ancestor::details[1]")
    was_open = stage.get_attribute("open")
    link.scroll_into_view_if_needed()
    link.click()
    frame = page.locator("#graph iframe").element_handle().content_frame()
    frame.wait_for_function(f"hopmapMetrics().stage === {want.split(' · ')[1]!r}", timeout=15_000)
    assert stage.get_attribute("open") == was_open  # the click showed the stage, it did not fold it
    # The hop map is where the reader looks: in the viewport, no scrolling of their own.
    box = page.locator("#graph iframe").bounding_box()
    assert box["y"] >= -1 and box["y"] + 200 <= page.viewport_size["height"], box
    drawn = 0
    for _ in range(20):
        page.wait_for_timeout(300)
        drawn = _drawn_pixels(page)
        if drawn > 1000:
            break
    assert drawn > 1000, f"the stage's map drew {drawn} pixels"
    page.screenshot(path=str(shots / "stage-click.png"))


def test_the_first_view_is_a_recorded_run_with_its_hop_maps(chromium, app_url, shots):
    """A fresh visitor, no click: the showcase's first question, every recorded method's column and
    hop map (the fixture's recording: composed and SAG)."""
    import time


    with _opened(chromium) as browser:
        pg = browser.new_page(viewport={"width": 1440, "height": 900})
        t0 = time.perf_counter()
        pg.goto(app_url, wait_until="domcontentloaded")
        frame = _map_frame(pg)
        drawn_s = time.perf_counter() - t0
        # the columns come with the page itself
        for m in ("composed", "sag"):
            pg.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=30_000)
        assert pg.locator("#recorded-banner").count() == 1
        assert [m["method"] for m in frame.evaluate("hopmapCount()")] == ["sag", "composed"]   # papers first
        assert frame.evaluate("hopmapMetrics()")["method"] == "sag"   # a paper method's map first
        assert pg.locator("#question textarea").input_value()         # the recorded question
        # The page's load events wait for the map (render.FIRST_VIEW_GATE) without covering it with
        # Gradio's pending overlay and its timer; then they run: the visitor gets an id.
        pg.wait_for_timeout(300)
        assert not pg.evaluate("""() => [...document.querySelector('#graph').parentElement.querySelectorAll('*')]
            .some((e) => !e.children.length && /^\\d+(\\.\\d)?s$/.test(e.textContent.trim())
                         && e.offsetParent !== null && e.closest('.hide') === null)"""), \
            "the first map is shown as loading"
        pg.wait_for_function("(localStorage.getItem('hoptrace-visitor') || '').length > 4", timeout=15_000)
        # The page's config carries the stages' lines; their bodies follow at load (ui/tabs/ask.py).
        pg.wait_for_function("!document.querySelector('#columns').textContent.includes('on their way')",
                             timeout=15_000)
        stages = pg.locator("#columns details.ht-stage")
        titled = pg.locator("#columns details.ht-stage > summary + div > b")   # a body opens on its title
        assert stages.count() > 2 and titled.count() == stages.count()
        print(f"first view: hop map drawn {drawn_s:.2f} s after the page was asked for")
        # The map is the frame the page's HTML started before Gradio ran, moved into its place
        # (ui/early_map.py), and it says which methods it holds (the stage links find it by that).
        mapped = pg.locator("#graph .ht-hopmap-slot iframe.ht-hopmap")
        assert mapped.count() == 1 and mapped.get_attribute("src") == early_map.ROUTE
        assert pg.evaluate("window.hoptraceMapPlacedAt") > 0
        assert json.loads(mapped.get_attribute("data-methods")) == ["sag", "composed"]
        pg.screenshot(path=str(shots / "first-view.png"))
        # Away from the Ask tab and back: a map again, drawn.
        _tab(pg, "Traces")
        pg.wait_for_timeout(500)
        _tab(pg, "Ask")
        assert _map_frame(pg).evaluate("hopmapMetrics()")["method"] == "sag"
        # A link to a comparison that is not there starts no frame early; the first view keeps a map.
        pg.goto(f"{app_url}?session=0000000000000000", wait_until="domcontentloaded")
        assert _map_frame(pg).evaluate("hopmapMetrics()")["method"] == "sag"
        # The lab page knows the visitor by the id the Ask page gave them (one id, both pages).
        sent: list[tuple[str, str]] = []
        pg.on("request", lambda r: sent.extend(
            (r.frame.url, x) for x in (json.loads(r.post_data or "{}").get("data") or [])
            if isinstance(x, str) and re.fullmatch(r"[0-9a-f]{32}", x)) if "queue/join" in r.url else None)
        _tab(pg, "Ask", "?session=0000000000000000")
        _tab(pg, "Judge")
        pg.wait_for_timeout(1500)
        assert {u.split("?")[0].rstrip("/").endswith("/lab") for u, _ in sent} == {False, True}, sent
        assert len({who for _, who in sent}) == 1, sent


def _drawn_pixels(page) -> int:
    """Pixels the graph's canvas painted (vis-network runs in a sandboxed srcdoc frame)."""
    frame = page.locator("#graph iframe").element_handle().content_frame()
    return frame.evaluate("""() => { const c = document.querySelector('canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")


@pytest.fixture(scope="module")
def hostile_url(app_url, tmp_path_factory):
    """Public mode with room for many requests a minute: the uploads, not the rate limit, are tested."""
    app, url = _public_app(tmp_path_factory, "hostile", requests_per_minute=100, requests_per_minute_per_address=100)
    yield url
    app.close()


def _close_toasts(page) -> None:
    """Closes every toast shown, as a visitor would, and waits until none is left."""
    for close in page.locator(".toast-close").all():
        if close.is_visible():
            close.click()
    page.wait_for_function("document.querySelectorAll('.toast-body').length === 0", timeout=10_000)


def _clear_file(page, box: str) -> None:
    """Clears a file box that holds a file (its ✕), so the next file can be chosen."""
    if page.locator(f"{box} input[type=file]").count():
        return
    page.locator(box).get_by_role("button", name=re.compile("clear|remove", re.I)).first.click()
    page.wait_for_selector(f"{box} input[type=file]", state="attached", timeout=10_000)


def test_hostile_uploads_get_errors_naming_the_visitors_file_never_a_server_path(chromium, hostile_url, tmp_path,
                                                                                   shots):
    from test_hostile_uploads import GOOD as HOSTILE_GOOD
    from test_hostile_uploads import HOSTILE, _write

    from retrieval.core.paths import kb_dir

    with _opened(chromium) as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(hostile_url + "lab", wait_until="domcontentloaded")   # Index is on the lab: one load
        page.wait_for_selector("#tabs", timeout=60_000)
        _tab(page, "Index")
        # One form for every file, as a visitor retrying would use it: each file replaces the last,
        # and the toasts of the one before are closed first, so the toast read is this file's.
        for i, name in enumerate(sorted(HOSTILE)):
            content, problem = HOSTILE[name]
            path = _write(tmp_path, name, content)
            _close_toasts(page)
            _clear_file(page, "#up-corpus")
            page.locator("#up-corpus input[type=file]").set_input_files(path)
            page.fill("#up-name textarea, #up-name input", f"hostile_{i}")
            page.click("#up-build")
            toast = page.locator(".toast-body").last
            toast.wait_for(timeout=120_000)
            text = toast.inner_text()
            assert problem in text and name in text, text
            assert str(tmp_path) not in text and "/tmp" not in text and "gradio" not in text, text
            if name == "types.json":
                page.wait_for_timeout(600)  # the toast slides in
                page.screenshot(path=str(shots / "hostile-upload-error.png"))  # the viewport: the toast is fixed
            assert not list(kb_dir().glob(f"hostile_{i}.*"))
        # a questions file whose gold passages are not in the corpus
        corpus = _write(tmp_path, "corpus.json", HOSTILE_GOOD)
        questions = _write(tmp_path, "questions.json", [{"id": "q1", "question": "Where?", "answer": "Zambia",
                                                         "paragraphs": [
            {"idx": 0, "title": "Nowhere", "paragraph_text": "A passage nobody uploaded.", "is_supporting": True}]}])
        _close_toasts(page)
        _clear_file(page, "#up-corpus")
        page.locator("#up-corpus input[type=file]").set_input_files(corpus)
        page.locator("#up-questions input[type=file]").set_input_files(questions)
        page.fill("#up-name textarea, #up-name input", "hostile_questions")
        page.click("#up-build")
        toast = page.locator(".toast-body").last
        toast.wait_for(timeout=120_000)
        text = toast.inner_text()
        assert "gold passage(s) not in the corpus" in text and "questions.json" in text and "/tmp" not in text, text
        assert not list(kb_dir().glob("hostile_questions.*"))
        # nothing was stored, and the app keeps serving
        _tab(page, "Ask")
        _set_question(page, Q)
        _run(page, {"bm25"})
        assert page.locator("#columns .ht-col[data-method='bm25'] table.ht-ranking").count() == 1


class _Listener:
    """A loopback HTTP server that counts what reaches it: an address a hostile file names."""

    def __init__(self):
        import http.server
        import threading

        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _hit(self):
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_GET = do_POST = _hit

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_every_toast_quoting_a_visitors_file_is_text(chromium, hostile_url, tmp_path, shots, capfd):
    """Payloads in a CSV header, a duplicate id, a set name and a file name: each toast shows them
    as text, names the visitor's file and no server path; no request leaves for the address the
    payloads name, and the page asks for no image it did not ship. Each refusal logs one line."""
    import json
    import re


    listener = _Listener()
    at = listener.url
    header = f"<img src={at}/h1>"
    form = f"<form action={at}/f><input name=q value=1><button>go</button></form>"
    link = f"<a href={at}/a>click me</a>"
    files = {
        "header.csv": f"{header},answer\nWhere?,Here\n",
        "dup.json": json.dumps([{"id": form, "question": "Where?"}, {"id": form, "question": "When?"}]),
        "ok.txt": "Which river?\n",
        # Gradio strips < > from uploaded names; an entity is what a name can still smuggle.
        "a&lt;img src=x&gt;.txt": "",
    }
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    cases = [  # (file, set name, what the toast must show)
        ("header.csv", "my_questions", f"the CSV has no 'question' column (its header is {header}, answer)"),
        ("dup.json", "my_questions", f"item 1: duplicate id {form!r}"),
        ("ok.txt", link, f"question set name {link!r} should be"),
        ("a&lt;img src=x&gt;.txt", "my_questions", "a&lt;img src=x&gt;.txt: no questions in the file"),
    ]
    capfd.readouterr()
    try:
        with _opened(chromium) as browser:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            requests: list[tuple[str, str]] = []
            page.on("request", lambda r: requests.append((r.url, r.resource_type)))
            page.goto(hostile_url + "lab", wait_until="domcontentloaded")   # Index is on the lab: one load
            page.wait_for_selector("#tabs", timeout=60_000)
            _tab(page, "Index")
            # A success first: a refusal after it must not leave its message under an error badge.
            page.locator("#qs-file input[type=file]").set_input_files(str(tmp_path / "ok.txt"))
            page.fill("#qs-name textarea, #qs-name input", "first set")
            page.click("#qs-add")
            page.wait_for_function("document.querySelector('#qs-log').innerText.includes('Added to')",
                                   timeout=60_000)
            shipped = {u for u, kind in requests if kind == "image"}
            for name, set_name, shown in cases:
                page.locator("#qs-file button[aria-label='Clear']").click()  # the last upload goes
                page.locator("#qs-file input[type=file]").set_input_files(str(tmp_path / name))
                page.fill("#qs-name textarea, #qs-name input", set_name)
                page.click("#qs-add")
                toast = page.locator(".toast-body").filter(has_text=shown[:40]).last
                toast.wait_for(timeout=60_000)
                text = toast.inner_text()
                assert shown in text, text
                if set_name == "my_questions":     # a refusal of the file names the visitor's own file
                    assert f"{name}: " in text, text
                assert "/tmp" not in text and "gradio" not in text and str(tmp_path) not in text, text
                assert toast.locator("img, form, a, input, button:not(.toast-close)").count() == 0, \
                    toast.inner_html()
                assert "Added to" not in page.locator("#qs-log").inner_text()
                if name == "dup.json":
                    page.wait_for_timeout(700)  # the toast slides in
                    page.screenshot(path=str(shots / "toast-as-text.png"))
            page.wait_for_timeout(1500)         # anything a toast could still fetch
    finally:
        listener.close()
    assert listener.hits == [], listener.hits
    assert not [u for u, _ in requests if not u.startswith((hostile_url, "data:", "blob:", "about:"))]
    assert not [u for u, kind in requests if kind == "image" and u not in shipped]
    log = [line for line in capfd.readouterr().err.splitlines() if line.startswith("hoptrace: refused")]
    (shots / "toast-as-text.log").write_text("\n".join(log) + "\n")
    assert len(log) == len(cases), log
    for (name, _, _), line in zip(cases, log):
        assert re.match(r"hoptrace: refused InputError in add_questions \(file '[^']+'\): ", line), line
        assert f"'{name}'" in line and "/tmp" not in line


def _add_question_set(page, path, name: str) -> None:
    """The Index tab: a questions file added as a question set of the picked KB."""
    _tab(page, "Index")
    page.locator("#qs-file input[type=file]").set_input_files(str(path))
    page.fill("#qs-name textarea, #qs-name input", name)
    page.click("#qs-add")
    page.wait_for_function("document.querySelector('#qs-log').innerText.includes('Added')", timeout=60_000)


def _pool_with_the_rule(page, depth: int) -> None:
    """The Judge tab: pool the picked experiment at `depth` with the answer rule as the prior."""
    _tab(page, "Judge")
    page.fill("#judge-depth input", str(depth))
    page.locator("#judge-auto input").click()
    page.get_by_role("option", name="the answer rule (LLM-free, instant)").click()
    page.click("#judge-go")
    page.wait_for_function("document.querySelector('#judge-log').innerText.includes('Pooled')", timeout=60_000)


@pytest.mark.starts_on_lab
def test_questions_without_gold_are_benched_pooled_graded_by_hand_and_compared(page, tmp_path, shots):
    """A new user's path: plain questions added to a KB, benched, the runs pooled and graded in the
    Judge view (keys and buttons; methods and automatic grades hidden until graded), then two
    methods compared on the judgments."""
    import json

    from retrieval.core.paths import kb_dir
    from retrieval.store import open_store

    store = open_store(str(kb_dir() / "demo.sqlite"))
    mine = [{"id": f"u{i}", "question": q.text, "answer": q.answers[0]} for i, q in enumerate(store.questions()[:3])]
    (tmp_path / "mine.json").write_text(json.dumps(mine))
    _add_question_set(page, tmp_path / "mine.json", "mine")
    assert "mine · 3 questions · no gold, 3 with answers" in page.locator("#qs-log").inner_text()
    _tab(page, "Experiments")
    assert page.locator("#bench-set input").input_value() == "mine"
    page.fill("#bench-limit input", "3")
    page.click("#bench-run")
    page.wait_for_function("document.querySelector('#bench-table') && "
                           "document.querySelector('#bench-table').innerText.includes('latency_ms_p50') && "
                           "document.querySelector('#bench-table').innerText.includes('griever')", timeout=180_000)
    table = page.locator("#bench-table").inner_text()
    assert "recall@5" not in table and "latency_ms_p50" in table      # no gold: left out, not 0
    page.wait_for_function("document.querySelector('#exp-summary').innerText.includes('no gold')", timeout=60_000)
    # the Judge tab: pool at depth 3 with the answer rule, then grade by hand
    _pool_with_the_rule(page, 3)
    page.wait_for_selector("#judge-passage", timeout=30_000)
    progress = page.locator("#judge-progress").inner_text()
    assert progress.startswith("0 / ")
    total = int(progress.split("/")[1].split()[0])
    assert page.locator("#judge-hidden").count() == 1 and page.locator("#judge-reveal").count() == 0
    assert "retrieved by" not in page.locator("#judge-pair").inner_text()
    page.screenshot(path=str(shots / "judge-before.png"), full_page=True)
    first = page.locator("#judge-passage").inner_text()
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("2")
    page.wait_for_function(f"document.querySelector('#judge-progress').innerText.startsWith('1 / {total}')",
                           timeout=30_000)
    last = page.locator("#judge-last").inner_text()
    assert "your grade 2" in last and "retrieved by" in last and "the answer rule: grade" in last
    page.click("#judge-g3")
    page.wait_for_function(f"document.querySelector('#judge-progress').innerText.startsWith('2 / {total}')",
                           timeout=30_000)
    # Each click waits for its pair: a click sent before the last one's answer came back reads the
    # position the page held then (a fourth worker's load made two backs land one pair short).
    for button in ("#judge-skip", "#judge-back", "#judge-back"):
        where = page.locator("#judge-where").inner_text()   # "pair N of M · question ...": each move changes N
        page.click(button)
        page.wait_for_function(f"document.querySelector('#judge-where') && "
                               f"document.querySelector('#judge-where').innerText !== {where!r}", timeout=30_000)
    page.wait_for_function("document.querySelector('#judge-reveal') !== null", timeout=30_000)
    assert "your grade 3" in page.locator("#judge-reveal").inner_text()
    page.screenshot(path=str(shots / "judge-after.png"), full_page=True)
    page.click("#judge-back")
    page.wait_for_function("document.querySelector('#judge-passage').innerText === "
                           f"{first!r}", timeout=30_000)
    # compare on the judgments
    _tab(page, "Experiments")
    page.locator("#exp-metric input").click()
    page.get_by_role("option", name="ndcg@5").click()
    page.wait_for_function("document.querySelector('#exp-summary').innerText.includes('judged:')", timeout=60_000)
    summary = page.locator("#exp-summary").inner_text()
    assert "ndcg@5 [95 % CI]" in summary and "2 pairs by a person" in summary and "answer rule" in summary
    page.wait_for_selector("#exp-means-plot .js-plotly-plot", timeout=30_000)
    page.wait_for_timeout(1500)
    assert page.locator("#bench-set input").input_value() == "mine"   # viewing an experiment keeps the set
    page.screenshot(path=str(shots / "judge-compare.png"), full_page=True)


FICTION = [
    {"title": "Zorvath Bridge",
     "text": "Zorvath Bridge is a stone bridge designed by Mirela Quent. It opened in 1911."},
    {"title": "Mirela Quent",
     "text": "Mirela Quent was an engineer born in Ostrevan. She studied at Calder Institute."},
    {"title": "Ostrevan", "text": "Ostrevan is a market town. Ostrevan lies on the river Lume."},
    {"title": "Calder Institute", "text": "Calder Institute is a technical college founded in 1872 by Tomas Beyl."},
    {"title": "Harlow Tower", "text": "Harlow Tower is a clock tower designed by Anselm Varga. It opened in 1897."},
    {"title": "Anselm Varga", "text": "Anselm Varga was an architect born in Pellin. He taught at Calder Institute."},
    {"title": "Pellin", "text": "Pellin is a fishing village. Pellin lies on the coast of Merrow Bay."},
    {"title": "Lume", "text": "The Lume is a river that flows into Merrow Bay."},
]


@pytest.mark.starts_on_lab
def test_a_corpus_without_questions_gets_generated_ones_reviewed_benched_and_compared(page, tmp_path, shots):
    """A new user's path with no questions at all: upload a corpus, generate multi-hop questions from
    its graph, review them (an edit kept, a drop recorded), then bench and compare two methods on
    the kept ones, with their gold. Written by template with the LLM-free checks: this page's
    flow is tested here; the embedded model writing and checking a question is tested in
    tests/test_qgen.py (here it took 60-76 s of the suite's 8 minutes)."""
    import json

    corpus = tmp_path / "fiction.json"
    corpus.write_text(json.dumps(FICTION))
    _tab(page, "Index")
    page.locator("#up-corpus input[type=file]").set_input_files(str(corpus))
    page.fill("#up-name textarea, #up-name input", "fiction")
    page.click("#up-build")
    page.wait_for_function("document.querySelector('#up-log').innerText.includes('Built')", timeout=180_000)
    assert "0 questions" in page.locator("#up-log").inner_text()
    page.fill("#gen-n input", "2")
    page.fill("#gen-name textarea, #gen-name input", "gen_fiction")
    page.locator("#gen-mode label", has_text="template-only").click()
    page.locator("#gen-checks label", has_text="LLM-free").click()
    page.click("#gen-go")
    page.wait_for_function("document.querySelector('#gen-log').innerText.includes('tried')", timeout=600_000)
    log = page.locator("#gen-log").inner_text()
    assert "generated 'gen_fiction' on KB fiction" in log and "pass the checks" in log
    page.wait_for_function("document.querySelector('#gen-question') !== null", timeout=60_000)
    view = page.locator("#gen-view").inner_text()
    assert "Hop 1:" in view and "Hop 2:" in view and "template:" in view
    page.screenshot(path=str(shots / "generate.png"), full_page=True)
    # an edit kept: the first question reworded
    page.fill("#gen-edit-q textarea", "Where was the designer of a bridge in this corpus born?")
    page.click("#gen-save")
    page.wait_for_function("document.querySelector('#gen-review-log').innerText.includes('saved')", timeout=60_000)
    page.wait_for_function("document.querySelector('#gen-view').innerText.includes('designer of a bridge')",
                           timeout=60_000)
    # a drop recorded: the second question (kept or not, it ends dropped by a person)
    page.locator("#gen-q input").click()
    options = page.get_by_role("option").all()
    assert len(options) >= 2
    options[1].click()
    page.wait_for_timeout(1000)
    page.click("#gen-drop")
    page.wait_for_function("document.querySelector('#gen-review-log').innerText.includes('dropped')",
                           timeout=60_000)
    page.wait_for_function("document.querySelector('#gen-view').innerText.includes('dropped by a person')",
                           timeout=60_000)
    page.screenshot(path=str(shots / "generate-review.png"), full_page=True)
    # bench two methods on the kept questions: gold exists, so recall is measured
    _tab(page, "Experiments")
    assert page.locator("#bench-set input").input_value() == "gen_fiction"
    for label in page.locator("#bench-methods label").all():
        name = label.inner_text().strip()
        if label.locator("input").is_checked() != (name in {"bm25", "dense"}):
            label.click()
    page.click("#bench-run")
    page.wait_for_function("document.querySelector('#bench-table') && "
                           "document.querySelector('#bench-table').innerText.includes('recall@5')", timeout=180_000)
    # The view moves from the shipped experiment (KB demo) to this one.
    page.wait_for_function("document.querySelector('#exp-summary').innerText.includes('KB fiction')",
                           timeout=60_000)
    summary = page.locator("#exp-summary").inner_text()
    assert "recall@5" in summary and "bm25" in summary and "dense" in summary
    page.screenshot(path=str(shots / "generate-bench.png"), full_page=True)


@pytest.fixture(scope="module")
def yours_url(app_url, tmp_path_factory):
    """Public mode with the operator's own methods: one that works, one that sleeps past the cut-off,
    and one that fails to load."""
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
    app, url = _public_app(tmp_path_factory, "yours")
    yield url
    app.close()
    ui.ask.PLUGIN_LIMIT_S = limit


def test_your_own_retrievers_stand_beside_the_papers_and_visitors_cannot_add_any(chromium, yours_url, shots):
    from gradio_client import Client

    from ui.picker import GROUPS

    with _opened(chromium) as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(yours_url, wait_until="domcontentloaded")
        page.wait_for_selector("#run", timeout=60_000)
        yours = page.locator("#methods-yours")
        text = yours.inner_text()
        assert "Yours" in text and "mine: file mine.py" in text and "sleepy: file sleepy.py" in text
        assert "not loaded: broken.py: ModuleNotFoundError: No module named 'no_such_library_here'" in text
        assert "/tmp" not in text                                     # public mode: no server path
        _set_question(page, Q)
        _set_methods(page, {"mine", "griever", "sleepy"})
        page.click("#run")
        for m in ("mine", "griever"):
            page.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=60_000)
        mine = page.locator("#columns .ht-col[data-method='mine']")
        names = mine.locator(".ht-stage summary .ht-meta").all_inner_texts()
        assert [n.split()[0] for n in names] == ["call", "map", "ranking"], names
        page.wait_for_function("document.querySelector(\"#columns .ht-col[data-method='sleepy']\").innerText"
                               ".includes('cut off after 2 s')", timeout=30_000)
        page.screenshot(path=str(shots / "yours-beside-griever.png"), full_page=True)
    # A visitor cannot name code or an address: a method name that is a URL is refused, and
    # nothing is sent to it.
    listener = _Listener()
    try:
        pickers = [[]] * sum(1 + bool(g.ablations) for g in GROUPS) + [[f"{listener.url}/search"]]
        client = Client(yours_url, verbose=False)
        with pytest.raises(Exception) as err:
            client.predict("demo", Q, 5, 2, False, "visitor-x", *pickers, api_name="/ask")
        # Gradio refuses a value the picker does not offer; only the operator's methods are offered.
        assert "is not in the list of choices: ['mine', 'sleepy']" in str(err.value)
        time.sleep(1)
    finally:
        listener.close()
    assert listener.hits == []


@pytest.mark.starts_on_lab
def test_grading_in_queue_order_updates_the_settled_and_open_verdicts(page, tmp_path, shots):
    """Plain questions benched, pooled with the answer rule as the prior, then 30 grades given in
    queue order with the keys: the queue asks first for pairs that can change a verdict, and the
    verdicts box counts fewer open grades after each."""
    import json
    import re

    from retrieval.core.paths import kb_dir
    from retrieval.store import open_store

    store = open_store(str(kb_dir() / "demo.sqlite"))
    titles = sorted({p.title for p in store.passages(store.all_passage_ids())} - {EVIL})[:16]
    mine = [{"id": f"t{i}", "question": f"What is {t} known for?", "answer": t} for i, t in enumerate(titles)]
    (tmp_path / "queue.json").write_text(json.dumps(mine))
    _add_question_set(page, tmp_path / "queue.json", "queue-set")
    _tab(page, "Experiments")
    page.fill("#bench-limit input", "16")
    page.click("#bench-run")
    page.wait_for_function("document.querySelector('#bench-table') && "
                           "document.querySelector('#bench-table').innerText.includes('griever')", timeout=180_000)
    # the experiment opens (and the Judge tab's picker follows it)
    page.wait_for_function("document.querySelector('#exp-summary').innerText.includes('no gold')",
                           timeout=60_000)
    _pool_with_the_rule(page, 5)
    page.wait_for_selector("#judge-verdicts", timeout=30_000)
    assert "asked in queue order" in page.locator("#judge-progress").inner_text()

    def open_grades() -> int:
        return sum(int(n) for n in re.findall(r"open — (\d+) grades", page.locator("#judge-verdicts").inner_text()))

    before = open_grades()
    assert before > 0
    seen = []
    page.locator("body").click(position={"x": 5, "y": 5})
    for i in range(30):
        seen.append(open_grades())
        page.keyboard.press("2" if i % 3 == 0 else "0")
        page.wait_for_function(f"document.querySelector('#judge-progress').innerText.startsWith('{i + 1} / ')",
                               timeout=30_000)
    after = open_grades()
    assert all(b >= a for b, a in zip(seen, seen[1:] + [after])), seen   # never more open grades after a grade
    assert after < before, (before, after)
    text = page.locator("#judge-verdicts").inner_text()
    assert "Verdicts at p@5" in text and "settled by your grades" in text
    page.screenshot(path=str(shots / "judge-queue-30.png"), full_page=True)


@pytest.fixture(scope="module")
def shipped_url(app_url, tmp_path_factory):
    """The app as a first visitor meets it: the shipped showcase (five methods) on the test KB."""
    from ui.app import build
    from ui.state import AppState

    state = AppState(trace_path=tmp_path_factory.mktemp("shipped") / "traces.sqlite")
    app = build(state)
    url = serve_free(app, state)
    yield url
    app.close()


def test_the_shipped_showcase_opens_on_five_methods_and_a_stage_click_keeps_the_map_in_view(chromium, shipped_url,
                                                                                             shots):
    """The first view's figures (appbench/hopmap.py, as `hoptrace bench-app --hop-maps` takes them):
    the recording's five methods, paper methods first; the run (hop map and columns) within two
    screens; a stage link far below the map shows its stage in the map, in view."""
    import json

    from appbench.hopmap import measure_first_view

    with _opened(chromium) as browser:
        figures = measure_first_view(browser, shipped_url)
        page = figures.pop("page")
        page.screenshot(path=str(shots / "stage-click-shipped.png"))
        print("first view figures:", json.dumps(figures))
        assert figures["methods"][:4] == ["griever", "gear", "sag", "grasp"] and len(figures["methods"]) == 5
        assert figures["columns"] == 5
        assert figures["map_in_view_after_click"], figures
        assert figures["clicked_stage_overlaps"] == 0 and figures["clicked_stage_min_label_px"] >= 12
        # The run fits two screens and the answer line every shipped run now ends with (the showcase's
        # runs are the shipped experiment's, answer step included: 1,854 px for the tallest).
        assert figures["run_px"] <= 2 * 900 + 80, figures
