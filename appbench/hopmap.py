"""`hoptrace bench-app --hop-maps`: how readable and how fast the hop maps are, measured in Chromium.

- Every stage of every run of a showcase recording (the shipped one by default) drawn in the
  viewer at the Ask tab's size: label pairs that overlap and shapes that overlap, counted from
  vis-network's own node positions and label boxes; the smallest label in px at the default zoom;
  each stage's draw time; the first map's time from opening the document.
- The app's first view (started here with `python app.py`, the demo KB built), three loads after
  one that warms the server: seconds from the start of navigation to Gradio's components, the
  columns and the first drawn hop map, in the browser's own clock; the height of the run (hop map
  and columns) and of the page for the recording's methods; where the map is after a stage link
  far below it is clicked; then the seconds from picking another showcase question to its
  recorded columns on show.

The browser tests use the same functions and assert what is not a timing (tests/browser/).
"""
from __future__ import annotations

import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Optional

from retrieval.trace import hopmap_view
from retrieval.trace.model import RunResult

from .page import ARGS, CHROMIUM

VIEW = {"width": 1380, "height": hopmap_view.HEIGHT}   # the Ask tab's hop map at a 1440 px window
PAGE = {"width": 1440, "height": 900}
FIRST_VIEW_LOADS = 3   # the first view measured this many times after one load that warms the server


def open_viewer(browser, runs: list[hopmap_view.ViewerRun]):
    """A page holding the viewer document (vis-network inlined: nothing is fetched); its
    `first_draw_s` is the time from opening it to the first drawn map."""
    page = browser.new_page(viewport=VIEW)
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    with tempfile.TemporaryDirectory(prefix="hoptrace-hopmap-") as tmp:   # read whole by the time it is drawn
        path = Path(tmp) / "viewer.html"
        path.write_text(hopmap_view.document(runs))
        t0 = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_function("window.hopmapDrawn === true", timeout=30_000)
        page.first_draw_s = time.perf_counter() - t0
    return page


def show(frame, method: str, stage: str) -> dict:
    """One stage drawn, then what the reader sees of it (hopmap.js `hopmapMetrics`)."""
    frame.evaluate("([m, s]) => hopmapShow(m, s)", [method, stage])
    frame.wait_for_function("window.hopmapDrawn === true", timeout=10_000)
    return frame.evaluate("hopmapMetrics()")


# Every stage of a page's maps drawn and measured in one call, in the page: three round trips from
# playwright a stage (show, wait, measure) made the suite's pass over 688 stages take 33 s.
_SHOW_ALL_JS = """async (pairs) => {
  const out = [];
  for (const [m, s] of pairs) {
    hopmapShow(m, s);
    const t0 = performance.now();
    while (window.hopmapDrawn !== true) {
      if (performance.now() - t0 > 10000) throw new Error("not drawn in 10 s: " + m + " · " + s);
      await new Promise((r) => requestAnimationFrame(r));
    }
    out.push(hopmapMetrics());
  }
  return out;
}"""


def show_all(frame, pairs: list[tuple[str, str]]) -> list[dict]:
    """`show` for each (method, stage) in turn, in one call: the same metrics, in the same order."""
    return frame.evaluate(_SHOW_ALL_JS, [list(p) for p in pairs])


def recording_items(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["items"]


def measure_recording(browser, items: list[dict]) -> dict:
    """Every stage of every run of these recorded questions, one viewer a question."""
    out = {"questions": len(items), "stages": 0, "overlapping_label_pairs": 0, "overlapping_shapes": 0,
           "smallest_label_px": None, "draw_ms_p50": None, "slowest_draw_ms": 0.0, "slowest": "",
           "first_draw_s_max": 0.0, "dialogs": 0, "worst": []}
    draws: list[float] = []
    for item in items:
        runs = [hopmap_view.ViewerRun(m, RunResult.from_dict(r), tuple(item["gold"])) for m, r in item["runs"].items()]
        page = open_viewer(browser, runs)
        out["first_draw_s_max"] = round(max(out["first_draw_s_max"], page.first_draw_s), 3)
        pairs = [(vr.method, st.name) for vr in runs for st in vr.run.stages]
        for (method, stage), got in zip(pairs, show_all(page, pairs)):
            out["stages"] += 1
            out["overlapping_label_pairs"] += got["overlaps"]
            out["overlapping_shapes"] += got["shape_overlaps"]
            if got["overlaps"] and len(out["worst"]) < 5:
                out["worst"].append({"method": method, "stage": stage, "pairs": got["pairs"]})
            px = got["min_label_px"]
            if px is not None and (out["smallest_label_px"] is None or px < out["smallest_label_px"]):
                out["smallest_label_px"] = round(px, 2)
            draws.append(got["draw_ms"])
            if got["draw_ms"] > out["slowest_draw_ms"]:
                out["slowest_draw_ms"], out["slowest"] = round(got["draw_ms"], 1), f"{method} · {stage}"
        out["dialogs"] += len(page.dialogs)
        page.close()
    out["draw_ms_p50"] = round(statistics.median(draws), 1) if draws else None
    return out


# When each part of the first view entered the page, in the page's own clock (ms from the start of
# navigation): a MutationObserver notes it as it happens, where polling from playwright added its
# own round trips.
_SEEN_JS = """window.__htSeen = {};
new MutationObserver(() => {
  for (const [k, sel] of [["components_s", "#showcase"], ["columns_s", "#columns .ht-col"]])
    if (!window.__htSeen[k] && document.querySelector(sel)) window.__htSeen[k] = performance.now();
}).observe(document, {subtree: true, childList: true});"""


def measure_first_view(browser, url: str, click_method: str = "grasp") -> dict:
    """The page a first visitor meets, and a stage link of `click_method`'s column clicked.
    Times are seconds from the start of navigation to Gradio's components, the columns and the
    first drawn stage of the hop map (the frame's own clock, set when the stage was drawn)."""
    context = browser.new_context(viewport=PAGE)
    context.add_init_script(_SEEN_JS)
    page = context.new_page()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("#graph iframe.ht-hopmap", timeout=60_000)
    frame = page.locator("#graph iframe").element_handle().content_frame()
    frame.wait_for_function("window.hopmapFirstDrawnAt", timeout=30_000)
    page.wait_for_function("window.__htSeen.columns_s", timeout=30_000)
    seen = page.evaluate("window.__htSeen")
    origin = page.evaluate("performance.timeOrigin")
    drawn = frame.evaluate("window.hopmapFirstDrawnAt") - origin
    # The page starts the first view's frame itself and moves it into the map's place when Gradio
    # has made that (ui/early_map.py): the map is seen once it is both drawn and in place.
    placed = page.evaluate("window.hoptraceMapPlacedAt || 0")
    out = {"first_map_s": round(max(drawn, placed) / 1000, 2), "map_frame_drawn_s": round(drawn / 1000, 2),
           "map_placed_s": round(placed / 1000, 2),
           **{k: round(v / 1000, 2) for k, v in sorted(seen.items())},
           "methods": [m["method"] for m in frame.evaluate("hopmapCount()")],
           "columns": page.locator("#columns .ht-col").count()}
    page.wait_for_timeout(1500)
    out["run_px"] = round(page.evaluate("document.querySelector('#columns').getBoundingClientRect().bottom + scrollY"))
    out["page_px"] = page.evaluate("document.documentElement.scrollHeight")
    links = page.locator(f"#columns .ht-col[data-method='{click_method}'] .ht-graph-link")
    if links.count():
        link = links.last
        link.scroll_into_view_if_needed()
        want = link.get_attribute("data-stage").split(" · ")[1]
        link.click()
        frame.wait_for_function(f"hopmapMetrics().stage === {json.dumps(want)}", timeout=10_000)
        box = page.locator("#graph iframe").bounding_box()
        got = frame.evaluate("hopmapMetrics()")
        out.update(clicked=f"{click_method} · {want}", map_top_after_click_px=round(box["y"]),
                   map_in_view_after_click=bool(box["y"] >= -1 and box["y"] + box["height"] <= PAGE["height"] + 1),
                   clicked_stage_overlaps=got["overlaps"], clicked_stage_min_label_px=round(got["min_label_px"], 2))
    out["page"] = page
    return out


def open_showcase_question(page, timeout_ms: int = 10_000) -> float:
    """Another showcase question picked on a loaded page: seconds until its recorded columns have
    replaced the ones on show. (Picking the question already on show changes nothing, so it would
    time only the click.) The browser test asserts what it shows; this is where it is timed."""
    shown = page.locator("#showcase input").input_value()
    page.click("#showcase input")
    options = page.locator("#showcase [role=option]")
    # The option on show carries a check mark before its label.
    pick = options.nth(next((i for i, t in enumerate(options.all_inner_texts()) if shown.strip() not in t), 0))
    # Gradio patches the columns' DOM in place, so what changes is their markup, not the element.
    page.evaluate("window.__htShownGrid = document.querySelector('#columns .ht-grid').innerHTML")
    t0 = time.time()
    pick.click()
    page.wait_for_function("""() => { const g = document.querySelector('#columns .ht-grid');
        return !!(g && g.innerHTML !== window.__htShownGrid && g.querySelector('table.ht-ranking')
                  && document.querySelector('#recorded-banner')); }""", timeout=timeout_ms)
    return round(time.time() - t0, 2)


def bench_hop_maps(recording: Optional[Path] = None, app: bool = True) -> dict:
    """The figures above; `app=False` measures the recording alone (no app is started)."""
    from playwright.sync_api import sync_playwright

    from retrieval.core.errors import ConfigError
    from retrieval.showcase import path_for

    recording = recording or path_for("demo")
    if not recording.exists():
        raise ConfigError(f"no recording at {recording}: hoptrace record-showcase makes one")
    if not Path(CHROMIUM).exists():
        raise ConfigError(f"{CHROMIUM} is missing (apt-get install chromium)")
    res: dict = {"recording": recording.name}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        res["stages"] = measure_recording(browser, recording_items(recording))
        if app:
            from .page import started_app

            with started_app() as url:
                # The first load after a start also fills the server's caches; it is not a visitor's.
                measure_first_view(browser, url)["page"].context.close()
                loads = []
                for _ in range(FIRST_VIEW_LOADS):
                    first = measure_first_view(browser, url)
                    page = first.pop("page")
                    first["showcase_open_s"] = open_showcase_question(page)
                    page.context.close()
                    loads.append(first)
                timed = ("components_s", "columns_s", "first_map_s", "showcase_open_s")
                res["first_view"] = {**loads[-1], **{f"{k}_loads": [one[k] for one in loads] for k in timed}}
        browser.close()
    return res
