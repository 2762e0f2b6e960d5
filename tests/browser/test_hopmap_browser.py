"""The hop maps of the shipped showcase in real headless Chromium: every stage of every run drawn at
the default zoom, with vis-network's own node positions and label boxes measured for overlaps,
label size and draw time; places kept across stages; a hostile label kept as text.

The figures go to $HOPTRACE_SCREENSHOTS/hopmap-figures.json (and are printed with -s)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from appbench.hopmap import measure_recording, open_viewer, recording_items, show
from retrieval.trace import hopmap_view
from retrieval.trace.model import RunResult

pytestmark = pytest.mark.browser

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "showcase" / "demo.json.gz"
EVIL = "<img src=x onerror=alert(1)>"


def _open(browser, runs):
    return open_viewer(browser, runs)


def _show(page, method: str, stage: str) -> dict:
    return show(page, method, stage)


def _shipped() -> list[dict]:
    return recording_items(SHIPPED)


def test_every_stage_of_the_shipped_showcase_is_readable_at_the_default_zoom(chromium, tmp_path):
    """Readability only: no overlapping labels or shapes, labels of 12 px or more. How fast each
    stage draws is a figure, printed and written, measured by `hoptrace bench-app --hop-maps`."""
    figures = measure_recording(chromium, _shipped())
    out = Path(os.environ.get("HOPTRACE_SCREENSHOTS") or tmp_path)   # pytest's own folder: it keeps the last few
    out.mkdir(parents=True, exist_ok=True)
    (out / "hopmap-figures.json").write_text(json.dumps(figures, indent=1))
    print("hop map figures:", json.dumps(figures, ensure_ascii=False))
    assert figures["stages"] > 100
    assert figures["overlapping_label_pairs"] == 0, figures["worst"]
    assert figures["overlapping_shapes"] == 0
    assert figures["smallest_label_px"] >= 12
    assert figures["dialogs"] == 0


def test_a_node_keeps_its_place_from_stage_to_stage(chromium):
    item = _shipped()[0]
    run = RunResult.from_dict(item["runs"]["griever"])
    page = _open(chromium, [hopmap_view.ViewerRun("griever", run, tuple(item["gold"]))])
    places = []
    for st in ("shortlist_1", "join_2", "ranking"):
        _show(page, "griever", st)
        places.append(page.evaluate("(() => { const o = {}; Object.values(net.body.nodes).forEach(n => {"
                                    " if (n.options && !n.options.hidden && !String(n.id).startsWith('edgeId'))"
                                    " o[n.id] = [n.x, n.y]; }); return o; })()"))
    shared = set(places[0]) & set(places[1]) & set(places[2])
    assert len(shared) >= 5
    assert all(places[0][k] == places[1][k] == places[2][k] for k in shared)
    page.close()


def test_a_hostile_label_is_text_in_the_map_and_its_tooltip(chromium):
    item = _shipped()[0]
    raw = json.loads(json.dumps(item["runs"]["griever"]))
    for st in raw["stages"]:
        for n in (st.get("subgraph") or {}).get("nodes", []):
            if n["type"] == "entity":
                n["label"] = EVIL + n["label"]
    run = RunResult.from_dict(raw)
    page = _open(chromium, [hopmap_view.ViewerRun("griever", run, tuple(item["gold"]))])
    _show(page, "griever", "shortlist_1")
    evil = page.evaluate("Object.values(net.body.nodes).filter(n => n.options && !n.options.hidden"
                         " && String(n.options.label).includes('<img')).map(n => n.id)")
    assert evil, "no node carries the hostile label"
    pos = page.evaluate("(id) => net.canvasToDOM({x: net.body.nodes[id].x, y: net.body.nodes[id].y})", evil[0])
    box = page.locator("#canvas").bounding_box()
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    page.wait_for_selector("div.vis-tooltip", state="visible", timeout=5_000)
    tip = page.locator("div.vis-tooltip")
    assert EVIL in tip.inner_text() and "<img" not in tip.inner_html().replace("&lt;img", "")
    page.locator("#canvas canvas").click(position={"x": pos["x"], "y": pos["y"]})
    assert EVIL in page.locator("#detail").inner_text()
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert not page.dialogs
    page.close()


def test_a_live_map_is_one_frame_given_its_later_stages(chromium):
    """Issue 88: the Ask page's live hop map, as ui/tabs/ask.py sends it: the first stage makes the
    frame, a later one reaches it through the hidden box (render.LIVE_MAP_JS) and is drawn there,
    with no new document. The app's live run sends a later stage in an update of its own only when
    the stages arrive apart (tests/browser/test_app_ask.py); here each one does."""
    from ui import render

    item = _shipped()[0]
    sag = RunResult.from_dict(item["runs"]["sag"])
    gold, vis = set(item["gold"]), render.vis_file("vis-network.min.js").read_bytes()
    page = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:
        page.route("http://hoptrace.test/**", lambda r: r.fulfill(body=vis, content_type="application/javascript")
                   if r.request.url.endswith(".js") else
                   r.fulfill(body="<html><body><div id='graph'></div><div id='live-map'></div></body></html>",
                             content_type="text/html"))
        page.goto("http://hoptrace.test/")
        page.evaluate(f"({render.LIVE_MAP_JS})()")
        page.evaluate("""() => { window.liveShown = []; window.mapsLoaded = 0; addEventListener('message', (e) => {
          if (e.data && e.data.hopmapLiveShown) liveShown.push(e.data.hopmapLiveShown);
          if (e.data && e.data.hopmapReady) mapsLoaded++; }); }""")
        first = render.hop_maps({}, gold, f"sag · {sag.stages[1].name}", partial={"sag": sag.stages[:2]},
                                question=sag.question, live_id=EVIL)
        page.evaluate("(h) => { document.getElementById('graph').innerHTML = h; }", first)
        page.wait_for_function("window.mapsLoaded === 1", timeout=30_000)
        for seq, n in enumerate((5, 7), start=1):
            later = render.live_map({}, gold, {"sag": sag.stages[:n]}, {"sag"}, f"sag · {sag.stages[n - 1].name}",
                                    EVIL, seq, question=sag.question)
            page.evaluate("(h) => { document.getElementById('live-map').innerHTML = h; }", later)
            page.wait_for_function(f"window.liveShown.length === {seq}", timeout=10_000)
        shown, loaded = page.evaluate("[window.liveShown, window.mapsLoaded]")
        assert loaded == 1, f"{loaded} documents: a later stage made a new one"
        assert shown == [{"seq": 1, "method": "sag", "stages": 5}, {"seq": 2, "method": "sag", "stages": 7}]
        frame = page.locator("#graph iframe").element_handle().content_frame()
        assert frame.evaluate("hopmapMetrics()")["stage"] == sag.stages[6].name   # the newest stage on show
    finally:
        page.close()
