"""`hoptrace bench-app --together`: the LLM methods asked together in the page, as a visitor asks
them, against each asked alone, on the same new questions.

The app is started with the response cache off (HOPTRACE_LLM_CACHE=0: every call reaches the
model) and the embedded model, and driven in headless Chromium at 1440x900. For each question
(demo questions the showcase does not hold, so the model has never seen them here), the methods
are asked together in one request, then each alone in its own request. Recorded per question and
method: the seconds from the click to the method's ranking appearing in its column.

Printed: the table, the median over questions of each method's together-time over its alone-time,
the first LLM method's (the one that arrived first) and the last one's against the sum of the
alone times (more than 1: work was lost between the methods), the machine, and whether it was
idle before and after (the idle watch's calibration workload).
"""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from retrieval.core import cpu, idle

from .page import ARGS, CHROMIUM, started_app

METHODS = ("gear", "sag", "grasp")


def _new_questions(n: int, skip: int = 10) -> list[str]:
    """Demo questions past the showcase's and the shipped experiment's first ones."""
    from retrieval.kb.presets import demo_path
    from retrieval.store import open_store

    store = open_store(str(demo_path()))
    qs = [q.text for q in store.questions()]
    return qs[-(skip + n):-skip] if len(qs) > skip + n else qs[:n]


def _ask(page, question: str, methods: tuple[str, ...], timeout_s: float = 900, shot=None) -> dict[str, float]:
    """Seconds from the click to each method's ranking in its column. `shot`: a path for a screenshot
    taken once while the last method waits for its turn, its waiting line kept in `WAITING`."""
    page.fill("#question textarea", question)
    for label in page.locator("#methods label").all():
        box, name = label.locator("input"), label.inner_text().strip()
        if box.is_checked() != (name in methods):
            label.click()
    t0 = time.perf_counter()
    page.click("#run")
    arrived: dict[str, float] = {}
    while len(arrived) < len(methods) and time.perf_counter() - t0 < timeout_s:
        for m in methods:
            if m not in arrived and page.locator(f"#columns .ht-col[data-method='{m}'] table.ht-ranking").count():
                arrived[m] = round(time.perf_counter() - t0, 1)
        if shot is not None and not WAITING and len(arrived) >= 1:
            queued = page.locator(f"#columns .ht-col[data-method='{methods[-1]}'] .ht-queued")
            if queued.count():
                WAITING.update(method=methods[-1], text=queued.first.inner_text(),
                               at_s=round(time.perf_counter() - t0, 1))
                page.screenshot(path=str(shot))
        page.wait_for_timeout(100)
    if shot is not None and WAITING.get("method") in arrived:
        WAITING["arrived_s"] = arrived[WAITING["method"]]
    return arrived


WAITING: dict = {}   # the waiting line a screenshot caught, and when that method's ranking arrived


def together(n_questions: int = 5, methods: tuple[str, ...] = METHODS, app_dir=None, shots=None) -> dict:
    """`app_dir`: the app.py of another checkout (the code before a change), driven the same way.
    `shots`: a folder for the page while the last method waits (its line and its arrival kept)."""
    from playwright.sync_api import sync_playwright

    before = idle.calibrate()
    rows = []
    from .page import REPO_ROOT

    with started_app({"HOPTRACE_LLM_CACHE": "0", "HOPTRACE_PUBLIC": ""}, app_dir or REPO_ROOT) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector("#run", timeout=120_000)
            _ask(page, "Who founded the label that signed the band?", ("sag",))   # the model server's start
            for i, q in enumerate(_new_questions(n_questions)):
                shot = (Path(shots) / "together-waiting.png") if shots and i == 0 else None
                both = _ask(page, q, ("griever", *methods), shot=shot)
                both.pop("griever", None)
                alone = {m: _ask(page, q, (m,)).get(m) for m in methods}
                rows.append({"question": q, "together": both, "alone": alone})
                print(f"{q[:60]}: together {both}, alone {alone}", flush=True)
            browser.close()
    after = idle.calibrate()
    return summarise(rows, methods) | {"waiting_seen": dict(WAITING), "machine": cpu.describe(),
                                       "calibration_ms_before": round(before, 1),
                                       "calibration_ms_after": round(after, 1), "rows": rows,
                                       "cores": os.cpu_count()}


def summarise(rows: list[dict], methods: tuple[str, ...]) -> dict:
    """Each method's median together/alone, the first arrival's ratio, the last's against the sum."""
    ratio = {m: round(statistics.median(r["together"][m] / r["alone"][m] for r in rows
                                        if r["together"].get(m) and r["alone"].get(m)), 2)
             for m in methods if any(r["together"].get(m) and r["alone"].get(m) for r in rows)}
    first, last, over = [], [], 0
    for r in rows:
        t, a = r["together"], r["alone"]
        if not all(t.get(m) and a.get(m) for m in methods):
            continue
        m1 = min(methods, key=lambda m: t[m])
        first.append(t[m1] / a[m1])
        total = sum(a[m] for m in methods)
        last.append(max(t.values()) / total)
        over += max(t.values()) > total
    return {"together_over_alone_median": ratio,
            "first_arrival_over_its_alone_median": round(statistics.median(first), 2) if first else None,
            "last_arrival_over_sum_alone_median": round(statistics.median(last), 2) if last else None,
            "last_arrival_over_sum_alone_max": round(max(last), 2) if last else None,
            "questions_where_together_cost_more_than_the_sum": over, "questions": len(rows)}
