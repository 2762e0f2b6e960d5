"""Retake the README's screenshot (docs/figures/ask.png): the real app, with no LLM, asking a demo
question with three methods side by side (GRIEVER with one iteration) and GRIEVER's shortlist
drawn as a subgraph.

    .venv/bin/python scripts/screenshot.py [--out docs/figures/ask.png] [--port 7899]

It uses this machine's HopTrace home: the demo KB is built first if it is not whole. The app is
started on loopback and stopped by its pid; the browser is Debian's chromium (headless).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
QUESTION = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
METHODS = ("bm25", "composed", "griever")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "ask.png")
    ap.add_argument("--port", type=int, default=7899)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from retrieval.kb.presets import demo_complete, ensure_demo

    if not demo_complete():
        ensure_demo()  # whole, so every column has its layers
    env = {**os.environ, "HOPTRACE_LLM": "none", "GRADIO_SERVER_PORT": str(args.port),
           "GRADIO_SERVER_NAME": "127.0.0.1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    app = subprocess.Popen([sys.executable, str(ROOT / "app.py")], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{args.port}/"
    try:
        _wait(url, app)
        _shoot(url, args.out)
    finally:
        app.terminate()   # by its pid
        try:
            app.wait(20)
        except subprocess.TimeoutExpired:
            app.kill()
    print(args.out)
    return 0


def _wait(url: str, app: subprocess.Popen) -> None:
    deadline = time.time() + 300
    while time.time() < deadline:
        if app.poll() is not None:
            raise SystemExit("the app exited during start-up")
        try:
            if urllib.request.urlopen(url, timeout=1).status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the app did not answer within 300 s")


def _shoot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1250})
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#run", timeout=60_000)
        page.fill("#question textarea", QUESTION)
        # One GRIEVER iteration: its column's stages fit beside the others' (two double its length).
        page.get_by_label("GRIEVER iterations (n_i)").first.fill("1")
        page.keyboard.press("Enter")
        for label in page.locator("#methods label").all():
            box = label.locator("input")
            if box.is_checked() != (label.inner_text().strip() in METHODS):
                label.click()
        page.click("#run")
        for m in METHODS:
            page.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=120_000)
        links = page.locator("#columns .ht-col[data-method='griever'] .ht-graph-link")
        shortlist = [i for i in range(links.count()) if "shortlist" in (links.nth(i).get_attribute("data-stage") or "")]
        links.nth(shortlist[0] if shortlist else 1).click()
        page.frame_locator("#graph iframe").locator("canvas").first.wait_for(timeout=30_000)
        page.locator("#graph iframe").scroll_into_view_if_needed()  # Chromium draws a frame only in view
        page.wait_for_timeout(4000)  # let vis-network settle the layout
        # From the columns to the subgraph of the stage clicked, in page coordinates.
        top, bottom = page.evaluate("""() => {
            const y = (sel, end) => { const r = document.querySelector(sel).getBoundingClientRect();
                                      return (end ? r.bottom : r.top) + window.scrollY; };
            return [y('#columns', false), y('#graph', true)]; }""")
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=True,
                        clip={"x": 0, "y": top - 10, "width": 1500, "height": bottom - top + 20})
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
