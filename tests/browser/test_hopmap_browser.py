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
