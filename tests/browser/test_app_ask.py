"""The Ask page in headless Chromium: a run streamed stage by stage, its hop maps and columns, stored
runs reopened, two visitors at once, the recorded first view and the live model's progress."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from embedded import TEST_MODEL

from browser.flows import (
    EVIL,
    Q,
    browser_contexts,
    first_run_id,
    map_frame,
    run_methods,
    set_methods,
    set_question,
    snap,
    tab,
    wait_drawn,
)
from ui import early_map

pytestmark = pytest.mark.browser


def test_a_run_streams_its_stages_map_and_comparison_and_a_stage_link_shows_that_stage(page, shots):
    """One visitor's run of GRIEVER and composed: the stages streamed, the hop map and the
    comparison; a stage's link shows that stage in the map, in view; the picker groups the methods
    by paper. What the page asked outside its server (nothing) is checked by the `page` fixture
    over all of it. One page and one run for what were three tests (each a page load of 6-7 CPU s
    and a run: issue 72, the suite's time)."""
    set_question(page, Q)
    run_methods(page, {"griever", "composed"})
    griever = page.locator("#columns .ht-col[data-method='griever']")
    names = griever.locator(".ht-stage summary .ht-meta").all_inner_texts()
    for stage in ("clause_split", "shortlist_1", "match_1", "rewrite_1", "retrieve_2", "paths", "ranking"):
        assert any(n.startswith(stage + " ") for n in names), stage
    assert page.locator("#columns .ht-col[data-method='composed'] .ht-stage").count() == 4
    assert "gold found: 2/2" in griever.inner_text()
    page.wait_for_selector("#graph iframe", timeout=30_000)
    page.frame_locator("#graph iframe").locator("canvas").first.wait_for(timeout=30_000)  # vis-network drew offline
    page.wait_for_selector("#comparison .js-plotly-plot", timeout=30_000)
    snap(page, shots, "ask.png", full_page=True)
    assert "Session" in page.locator("#session-link").inner_text()

    # A stage's link shows that stage in the hop map, in view, without folding the stage.
    map_frame(page)
    links = griever.locator(".ht-graph-link")
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
    drawn = wait_drawn(page)
    assert drawn > 1000, f"the stage's map drew {drawn} pixels"
    snap(page, shots, "stage-click.png")

    # The picker: the methods grouped by paper, the ablations folded.
    picker = page.locator("#methods")
    text = picker.inner_text()
    from ui.picker import expected
    for title in ("Baselines", "GRIEVER · Tables 1, 3, 4", "GEAR · Tables 2, 4", "SAG · Tables 4, 6, 7",
                  "GRASP · Table 2, A.1.7", f"griever {expected('griever', llm='none')}"):
        assert title in text, title
    assert not page.get_by_text("sag_h0", exact=True).is_visible()  # ablations folded
    page.get_by_text("SAG ablations").click()
    page.get_by_text("sag_h0", exact=True).wait_for(state="visible")
    snap(picker, shots, "method-picker.png")


@pytest.mark.slow
def test_a_showcase_question_opens_at_once_and_a_live_llm_stage_shows_its_progress(page, shots):
    """A showcase question opens at once from the recording; then SAG with the real embedded model:
    its LLM stages show what the model is doing, and nothing the recording left on the page sits
    beside the live run. One page for what were two tests (issue 72)."""
    from appbench.hopmap import open_showcase_question
    open_showcase_question(page)   # how fast is `hoptrace bench-app --hop-maps`'s to say, not a test's
    banner = page.locator("#recorded-banner").inner_text()
    assert "Recorded, not live" in banner and "scripted test double" in banner and "Run live" in banner
    for m in ("composed", "sag"):
        col = page.locator(f"#columns .ht-col[data-method='{m}']")
        assert col.locator("table.ht-ranking").count() == 1
    assert any(n.startswith("rerank ") for n in
               page.locator("#columns .ht-col[data-method='sag'] .ht-stage summary .ht-meta").all_inner_texts())
    drawn = wait_drawn(page, tries=40)   # the new question's hop map, not only its columns
    assert drawn > 1000, f"the picked question's map drew {drawn} pixels"
    snap(page, shots, "showcase.png", full_page=True)

    page.wait_for_selector("#comparison .js-plotly-plot", timeout=10_000)
    set_question(page, Q)
    set_methods(page, {"sag"})
    # The live hop map is one frame given each later stage (render.LIVE_MAP_JS), not a frame a stage.
    page.evaluate("""() => {
      window.liveShown = []; window.mapsLoaded = 0; window.finalLoaded = false;
      addEventListener('message', (e) => {
        if (e.data && e.data.hopmapLiveShown) liveShown.push(e.data.hopmapLiveShown);
        if (!(e.data && e.data.hopmapReady)) return;
        mapsLoaded++;
        const f = [...document.querySelectorAll('#graph iframe.ht-hopmap')].find((x) => x.contentWindow === e.source);
        if (f && !f.hasAttribute('data-live')) window.finalLoaded = true;
      });
    }""")
    page.click("#run")
    live = page.locator("#columns .ht-col[data-method='sag'] .ht-live")
    # The waiting line also ends in "so far" ("waiting 0 s so far"): wait for the model's own line.
    live.filter(has_text="LLM writing").first.wait_for(timeout=300_000)
    text = live.first.inner_text()
    assert "LLM writing" in text and ("query entities" in text or "rerank" in text), text
    # No empty frame: the chart is hidden until a stage has arrived, then drawn from the live run's
    # stages, never the recording's (it had composed beside SAG).
    chart = page.locator("#comparison")
    if chart.is_visible():
        chart.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=10_000)
        assert "composed" not in chart.inner_text(), "the recording's comparison is still shown"
    assert page.locator("#recorded-banner").count() == 0
    # The outputs being updated keep Gradio's border, still (ui/idle_frames.py): its pulse kept the
    # browser at half a core on the cores the model writes on.
    still = page.evaluate("() => [...document.querySelectorAll('.generating')]"
                          ".map(e => getComputedStyle(e).animationName)")
    assert still and set(still) == {"none"}, still
    snap(page, shots, "live_progress.png", full_page=True)
    page.wait_for_selector("#columns .ht-col[data-method='sag'] table.ht-ranking", timeout=600_000)
    assert page.locator("#columns .ht-col[data-method='sag'] .ht-live").count() == 0
    # The final map's own document, not a count: on a loaded machine (CI, three workers) the
    # stages may all reach the page with the run's end, and then no live frame is ever made.
    try:
        page.wait_for_function("window.finalLoaded === true", timeout=90_000)
    except Exception as e:   # what the page held, for the next reader of a failed run
        frames = page.evaluate("() => [...document.querySelectorAll('#graph iframe')].map((f) => "
                               "[f.className, f.getAttribute('data-live'), (f.getAttribute('srcdoc') || '').length])")
        raise AssertionError(f"the final hop map never said it was ready: {page.evaluate('window.mapsLoaded')} "
                             f"documents ready, frames {frames}") from e
    shown, loaded = page.evaluate("[window.liveShown, window.mapsLoaded]")
    assert loaded in (1, 2), f"{loaded} hop map documents for one live run: at most the live one and the final one"
    # Whether a later stage went out in an update of its own depends on how the stages arrived: on
    # a loaded machine rerank came in one update with the run's end (clean-clone run, 3 workers).
    # What reached the frame is SAG's, in order; test_hopmap_browser.py sends each stage apart.
    assert all(s["method"] == "sag" and s["stages"] > 2 for s in shown), shown
    assert [s["seq"] for s in shown] == sorted({s["seq"] for s in shown}), shown
    names = page.locator("#columns .ht-col[data-method='sag'] .ht-stage summary .ht-meta").all_inner_texts()
    assert names[0].startswith("profile ")


def test_traces_view_rerenders_a_stored_run_and_the_session_link_reopens(page, app_url, shots):
    set_question(page, Q)
    run_methods(page, {"griever"})
    live = page.locator("#columns .ht-col[data-method='griever'] .ht-stage").count()
    session = page.locator("#session-link code").inner_text().strip()
    tab(page, "Traces")
    page.click("#refresh-runs")
    page.wait_for_function("document.querySelector('#runs-table') && "
                           "document.querySelector('#runs-table').innerText.includes('griever')", timeout=30_000)
    assert first_run_id(page)
    # The session's export, downloaded as a visitor gets it: the run whole, its stages included.
    page.fill("#export-ids textarea, #export-ids input", session)
    page.click("#export-run")
    link = page.locator("#export-file a[data-testid=download-link]")
    link.wait_for(timeout=30_000)
    assert re.fullmatch(r"hoptrace-traces-[0-9a-f]{12}\.json", link.get_attribute("download"))
    with page.expect_download() as got:
        link.click()
    exported = json.loads(Path(got.value.path()).read_text())
    # The session's one run (the table's first row may be another test's run, newer: CI once showed
    # a 10-stage run there against this run's 19): this run whole.
    assert [(e["session_id"], e["run"]["method"]) for e in exported] == [(session, "griever")]
    assert len(exported[0]["run"]["stages"]) == live and exported[0]["run"]["ranked"]
    page.fill("#run-a textarea, #run-a input", exported[0]["id"])
    page.click("#show-runs")
    page.wait_for_selector("#stored .ht-col .ht-stage", timeout=30_000)
    assert page.locator("#stored .ht-col .ht-stage").count() == live
    snap(page, shots, "traces.png", full_page=True)
    page.goto(f"{app_url}?session={session}", wait_until="domcontentloaded")
    page.wait_for_selector("#columns .ht-col[data-method='griever'] .ht-stage", timeout=60_000)
    assert page.locator("#columns .ht-col[data-method='griever'] .ht-stage").count() == live


def test_an_injected_title_renders_as_text_everywhere(page, shots):
    set_question(page, "injected title onerror handlers never run")
    run_methods(page, {"bm25", "griever"})
    cols = page.locator("#columns")
    assert EVIL in cols.inner_text()                      # shown, as text
    assert cols.locator("img").count() == 0               # never parsed as an element
    tab(page, "Traces")
    page.click("#refresh-runs")
    page.wait_for_function("document.querySelector('#runs-table').innerText.includes('injected')", timeout=30_000)
    run_id = first_run_id(page)
    page.fill("#run-a textarea, #run-a input", run_id)
    page.click("#show-runs")
    page.wait_for_selector("#stored .ht-col", timeout=30_000)
    assert EVIL in page.locator("#stored").inner_text()
    assert page.locator("#stored img").count() == 0
    page.wait_for_timeout(500)
    # A full-page render, pictures or not: every part of the page is drawn before the dialogs are counted.
    page.screenshot(full_page=True, **({"path": str(shots / "xss.png")} if shots else {}))
    assert page.dialogs == [], f"a script ran: {page.dialogs}"


Q2 = "What is the name of the waterfall in the country where the Bubye River is found?"


def test_two_users_at_once_get_their_own_runs_and_traces(chromium, app_url, shots):
    """Two browsers ask different questions at the same moment; neither loses or mixes traces."""

    with browser_contexts(chromium) as browser:
        pages = []
        for q in (Q, Q2):
            pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            pg.goto(app_url, wait_until="domcontentloaded")
            pg.wait_for_selector("#run", timeout=60_000)
            set_question(pg, q)
            set_methods(pg, {"griever", "naivege"})
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
        snap(pages[1], shots, "second-user.png", full_page=True)
        # each session reopens with its own question and both methods
        for sid, q, pg in zip(sessions, (Q, Q2), pages):
            pg.goto(f"{app_url}?session={sid}", wait_until="domcontentloaded")
            pg.wait_for_selector("#columns .ht-col[data-method='naivege'] .ht-stage", timeout=60_000)
            assert pg.locator("#question textarea").input_value() == q
            assert pg.locator("#columns .ht-col[data-method='griever'] .ht-stage").count() > 5


def test_the_first_view_is_a_recorded_run_with_its_hop_maps(chromium, app_url, shots):
    """A fresh visitor, no click: the showcase's first question, every recorded method's column and
    hop map (the fixture's recording: composed and SAG)."""


    with browser_contexts(chromium) as browser:
        pg = browser.new_page(viewport={"width": 1440, "height": 900})
        t0 = time.perf_counter()
        pg.goto(app_url, wait_until="domcontentloaded")
        frame = map_frame(pg)
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
        snap(pg, shots, "first-view.png")
        # Away from the Ask tab and back: a map again, drawn.
        tab(pg, "Traces")
        pg.wait_for_timeout(500)
        tab(pg, "Ask")
        assert map_frame(pg).evaluate("hopmapMetrics()")["method"] == "sag"
        # A link to a comparison that is not there starts no frame early; the first view keeps a map.
        pg.goto(f"{app_url}?session=0000000000000000", wait_until="domcontentloaded")
        assert map_frame(pg).evaluate("hopmapMetrics()")["method"] == "sag"
        # The lab page knows the visitor by the id the Ask page gave them (one id, both pages).
        sent: list[tuple[str, str]] = []
        pg.on("request", lambda r: sent.extend(
            (r.frame.url, x) for x in (json.loads(r.post_data or "{}").get("data") or [])
            if isinstance(x, str) and re.fullmatch(r"[0-9a-f]{32}", x)) if "queue/join" in r.url else None)
        tab(pg, "Ask", "?session=0000000000000000")
        tab(pg, "Judge")
        pg.wait_for_timeout(1500)
        on_lab = {u: u.split("?")[0].rstrip("/").endswith("/lab") for u, _ in sent}
        assert set(on_lab.values()) == {False, True}, sent
        # The lab page also sends its open experiment's id (32 hex too) when the compare list follows it.
        ask_ids = {who for u, who in sent if not on_lab[u]}
        assert len(ask_ids) == 1 and ask_ids <= {who for u, who in sent if on_lab[u]}, sent


def test_the_shipped_showcase_opens_on_six_methods_and_a_stage_click_keeps_the_map_in_view(chromium, shipped_url,
                                                                                             shots):
    """The first view's figures (appbench/hopmap.py, as `hoptrace bench-app --hop-maps` takes them):
    the recording's six methods, paper methods first; the run (hop map and columns) within two
    screens; a stage link far below the map shows its stage in the map, in view."""
    import json

    from appbench.hopmap import measure_first_view

    with browser_contexts(chromium) as browser:
        figures = measure_first_view(browser, shipped_url)
        page = figures.pop("page")
        snap(page, shots, "stage-click-shipped.png")
        print("first view figures:", json.dumps(figures))
        assert figures["methods"][:4] == ["griever", "gear", "sag", "grasp"] and len(figures["methods"]) == 6
        assert figures["columns"] == 6
        assert figures["map_in_view_after_click"], figures
        assert figures["clicked_stage_overlaps"] == 0 and figures["clicked_stage_min_label_px"] >= 12
        # The run fits two screens and the answer line every shipped run now ends with (the showcase's
        # runs are the shipped experiment's, answer step included: 1,854 px for the tallest).
        assert figures["run_px"] <= 2 * 900 + 80, figures


def test_a_column_that_gains_a_stage_is_replaced_alone_and_the_grid_ends_as_a_whole_one_would_be(chromium):
    """Issue 88: during a live run the grid goes whole only when it is new or its header changes;
    a column that gained a stage travels alone through the live box (render.LIVE_LINES_JS), so the
    finished columns beside it are not parsed again. Stepped through a shipped recording's stages
    as ui/tabs/ask.py sends them, the page ends with what a whole grid would have shown."""
    from appbench.hopmap import recording_items
    from retrieval.trace.model import RunResult
    from ui import render
    from ui.ask import Progress
    from ui.tabs.ask import _columns, _grid_update

    item = recording_items(Path(__file__).resolve().parents[2] / "data" / "showcase" / "demo.json.gz")[0]
    runs = {m: RunResult.from_dict(item["runs"][m]) for m in ("composed", "sag")}
    prog = Progress("s1", list(runs), set(item["gold"]), {m: [] for m in runs})
    page = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:
        page.set_content("<div id='columns'></div><div id='live-lines'></div>")
        page.evaluate(f"({render.LIVE_LINES_JS})()")
        sent, whole, alone = None, 0, []

        def send():
            nonlocal sent, whole
            grid, changed, sent = _grid_update(prog, None, sent)
            if isinstance(grid, str):
                whole += 1
                page.evaluate("(h) => { document.getElementById('columns').innerHTML = h; }", grid)
            alone.append(sorted(changed))
            page.evaluate("(h) => { document.getElementById('live-lines').innerHTML = h; }",
                          render.live_lines(prog.live, changed))

        prog.runs["composed"], prog.stages["composed"] = runs["composed"], runs["composed"].stages
        send()                                       # the LLM-free column ends first: a new grid
        composed = "#columns .ht-col[data-method='composed']"
        page.evaluate("(sel) => { window.kept = document.querySelector(sel); }", composed)
        for st in runs["sag"].stages:
            prog.stages["sag"].append(st)
            send()
        assert whole == 1 and alone[1:] == [["sag"]] * len(runs["sag"].stages), (whole, alone)
        kept = page.evaluate("(sel) => window.kept === document.querySelector(sel)", composed)
        assert kept, "a finished column was replaced for another column's stage"
        shown = page.evaluate("() => document.getElementById('columns').innerHTML")
        page.evaluate("(h) => { document.getElementById('columns').innerHTML = h; }", _columns(prog))
        assert shown == page.evaluate("() => document.getElementById('columns').innerHTML")
        assert page.locator("#columns .ht-col[data-method='sag'] > details.ht-stage").count() == len(runs["sag"].stages)
    finally:
        page.close()
