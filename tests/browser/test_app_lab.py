"""The lab page in headless Chromium: the shipped experiment with no click, benchmarks, reproductions,
drill-downs, an uploaded corpus, generated questions, pooling and grading by hand."""
from __future__ import annotations

import json
import re
import time

import pytest

from browser.flows import (
    EVIL,
    LAB_METHODS,
    add_question_set,
    browser_contexts,
    run_methods,
    set_question,
    snap,
    tab,
    upload,
)

pytestmark = pytest.mark.browser


@pytest.mark.starts_on_lab
def test_benchmark_tab_repeats_with_a_context_budget_shows_the_trade_off_and_reproduces_a_paper(page, shots):
    """Repetitions and a context budget from the tab: the table gives the spread and stable@5,
    the experiment's view the trade-off table, the verdicts over repetitions and quality
    against cost a question. Then, from the same tab, a paper reproduced on three questions (one
    page for what were two tests: issue 72, the suite's time)."""
    tab(page, "Experiments")
    page.fill("#bench-limit input", "3")
    page.fill("#bench-repeat input", "2")
    page.fill("#bench-budget input", "400")
    page.click("#bench-run")
    page.wait_for_function("document.querySelector('#exp-summary') && "
                           "document.querySelector('#exp-summary').innerText.includes('The whole trade-off')",
                           timeout=180_000)
    table = page.locator("#bench-table").inner_text()
    assert "recall@400tok" in table and "stable@5" in table and "± 0.0" in table
    page.locator("#exp-tradeoff-fold > summary").click()   # folded behind its line
    trade = page.locator("#exp-tradeoff").inner_text()
    assert "recall@400tok" in trade and "$ / question" in trade and "stable@5" in trade
    summary = page.locator("#exp-summary").inner_text()
    assert "No verdict on recall@5 changed between repetitions" in summary
    assert "6 of 6 method pairs had a second measured repetition to compare" in summary
    page.wait_for_selector("#exp-tradeoff-plot .js-plotly-plot", timeout=30_000)
    page.locator("#exp-tradeoff-plot").scroll_into_view_if_needed()
    snap(page, shots, "bench-tradeoff.png")

    # A paper reproduced on the same three questions (the reproduction reads the tab's limit).
    assert page.locator("#bench-limit input").input_value() == "3"
    page.click("#repro-run")
    page.wait_for_function("document.querySelector('#repro-out') && "
                           "document.querySelector('#repro-out').innerText.includes('claims (')", timeout=180_000)
    out = page.locator("#repro-out").inner_text()
    assert "recall@5 (asked at k=5) ours | paper" in out and "GRIEVER Table 1" in out and "profile: paper" in out
    # three questions cannot settle a claim: the verdict says so, with the numbers behind it
    assert "inconclusive" in out and "win/tie/loss" in out
    page.wait_for_selector("#repro-plot .js-plotly-plot", timeout=30_000)
    snap(page, shots, "reproduce.png", full_page=True)


@pytest.mark.starts_on_lab
def test_an_experiment_drills_down_to_two_stored_runs_side_by_side(page, app_url, shots):
    """A benchmark from the tab: its table of every method and its latency plot; it becomes an
    experiment: the comparison with its uncertainty, the funnel, the per-question table; a row
    opens both stored runs in the Ask tab, and ?experiment=ID reopens it."""
    tab(page, "Experiments")
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
    snap(page, shots, "bench.png", full_page=True)
    summary = page.locator("#exp-summary").inner_text()
    # The view opens on the best method against BM25, the baseline every paper reports.
    assert "B = bm25" in summary and "paired randomization p" in summary
    page.wait_for_selector("#exp-funnel .js-plotly-plot", timeout=30_000)
    funnel = page.locator("#exp-funnel").inner_text()
    assert "Where the gold is lost" in funnel and "top 5" in funnel
    # Gradio's table draws its rows as role=row elements (a hidden <tbody> only measures widths)
    page.wait_for_function("document.querySelectorAll('#exp-rows [role=row][data-index]').length === 4",
                           timeout=30_000)
    snap(page, shots, "experiment.png", full_page=True)
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
    snap(page, shots, "experiment-drilldown.png", full_page=True)
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
    with browser_contexts(chromium) as browser:
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
        snap(page, shots, "lab-first-view.png", full_page=True)
        print(f"lab: page ready {to_ready:.2f} s, leaderboard {to_board:.2f} s, every plot {to_plots:.2f} s, "
              f"{empty} empty panels, page {height} px")
        assert empty == 0
        # A count in the answer split lists its questions, as its cell picked in "Show questions" does.
        page.locator("#exp-answer-fold > summary").click()   # folded: a line says what it holds
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
        snap(page, shots, "lab-from-table.png", full_page=True)
        # Compared with the shipped one: each shared method's change, its interval and paired test.
        page.click("#exp-against-run")   # nothing picked: refused in words, not a bare "Error" badge
        page.wait_for_function("document.querySelector('#exp-against-out').innerText.includes('pick the experiment')",
                               timeout=30_000)
        page.locator("#exp-against input").click()
        offered = page.get_by_role("option").all_inner_texts()
        assert not any(later_id[:12] in o for o in offered), "the open experiment is offered to compare with itself"
        page.get_by_role("option", name=re.compile(shipped_id[:12])).first.click()
        page.click("#exp-against-run")
        page.wait_for_selector("#exp-across table", timeout=60_000)
        across = page.locator("#exp-across").inner_text()
        assert "bm25" in across and "composed" in across and "change [95 % CI]" in across
        assert "griever" in across   # named as in one experiment only
        assert "What differs: methods: only before:" in across
        page.locator("#exp-across").scroll_into_view_if_needed()
        snap(page, shots, "lab-two-compared.png")
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
        snap(page, shots, "lab-question-in-ask.png")
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
    tab(page, "Index")
    upload(page, "#up-corpus", corpus)
    page.fill("#up-name textarea, #up-name input", "tiny_upload")
    # The readiness timer's requests (unqueued ones): on while the build runs, off once it ended,
    # so an idle tab sends nothing (ui/app.py `_wire_readiness`).
    ticks: list[float] = []

    def tick(request):
        if request.method == "POST" and request.url.endswith("/gradio_api/run/predict"):
            ticks.append(time.monotonic())

    page.on("request", tick)
    page.click("#up-build")
    page.wait_for_function("document.querySelector('#up-log').innerText.includes('Built')", timeout=180_000)
    built = time.monotonic()
    page.wait_for_timeout(3_000)   # the tick after the build's end sees it gone and turns the timer off
    quiet_from = time.monotonic()
    page.wait_for_timeout(4_500)
    page.remove_listener("request", tick)
    # The first is the Build click's own, turning the timer on; a three-passage build may end before a tick.
    assert [t for t in ticks if t < built], "the Build click did not turn the readiness timer on"
    from retrieval.core.paths import kb_dir

    assert not [t for t in ticks if t >= quiet_from], \
        f"still polling after the build: {len(ticks)} ticks; {[p.read_text() for p in kb_dir().glob('*.status.json')]}"
    log = page.locator("#up-log").inner_text()
    assert "3 passages" in log
    from retrieval.kb.embed import default_precision  # the Encoder radio's "default": bf16 where the CPU has it

    assert f"encoder {'torch' if default_precision() == 'bf16' else 'onnxruntime'} {default_precision()} ×" in log
    snap(page, shots, "index.png", full_page=True)
    # the log's link opens the Ask page on the new KB, in a tab of its own (the lab page stays)
    with page.context.expect_page() as opened:
        page.locator("#up-log a", has_text="Ask it").click()
    page = opened.value
    page.wait_for_load_state("domcontentloaded")
    assert page.evaluate("location.pathname") == "/"
    page.wait_for_function("document.querySelector('#kb input') && "
                           "document.querySelector('#kb input').value === 'tiny_upload'", timeout=60_000)
    tab(page, "Ask")
    set_question(page, "Where was the designer of Zorvath Bridge born?")
    run_methods(page, {"bm25", "griever"})
    text = page.locator("#columns .ht-col[data-method='griever']").inner_text()
    assert "Zorvath Bridge" in text and "Mirela Quent" in text


def _add_question_set(page, path, name: str) -> None:
    """The Index tab: a questions file added as a question set of the picked KB."""
    tab(page, "Index")
    add_question_set(page, path, name)


def _pool_with_the_rule(page, depth: int) -> None:
    """The Judge tab: pool the picked experiment at `depth` with the answer rule as the prior."""
    tab(page, "Judge")
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
    tab(page, "Experiments")
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
    snap(page, shots, "judge-before.png", full_page=True)
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
    snap(page, shots, "judge-after.png", full_page=True)
    page.click("#judge-back")
    page.wait_for_function("document.querySelector('#judge-passage').innerText === "
                           f"{first!r}", timeout=30_000)
    # compare on the judgments
    tab(page, "Experiments")
    page.locator("#exp-metric input").click()
    page.get_by_role("option", name="ndcg@5").click()
    page.wait_for_function("document.querySelector('#exp-summary').innerText.includes('judged:')", timeout=60_000)
    summary = page.locator("#exp-summary").inner_text()
    assert "ndcg@5 [95 % CI]" in summary and "2 pairs by a person" in summary and "answer rule" in summary
    page.wait_for_selector("#exp-means-plot .js-plotly-plot", timeout=30_000)
    page.wait_for_timeout(1500)
    assert page.locator("#bench-set input").input_value() == "mine"   # viewing an experiment keeps the set
    snap(page, shots, "judge-compare.png", full_page=True)


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
    tab(page, "Index")
    upload(page, "#up-corpus", corpus)
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
    snap(page, shots, "generate.png", full_page=True)
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
    snap(page, shots, "generate-review.png", full_page=True)
    # bench two methods on the kept questions: gold exists, so recall is measured
    tab(page, "Experiments")
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
    snap(page, shots, "generate-bench.png", full_page=True)


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
    tab(page, "Experiments")
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
    snap(page, shots, "judge-queue-30.png", full_page=True)


