"""Retake the README's screenshot (docs/figures/ask.png): the real app's first view at 1440x900, as a
first-time visitor sees it with no click: the recorded showcase's first question, GRIEVER's hop map
at its last stage, the columns beginning below.

    .venv/bin/python scripts/screenshot.py [--out docs/figures/ask.png] [--port 7899]
    .venv/bin/python scripts/screenshot.py --show hipporag2:ppr --out docs/figures/hopmap-hipporag2.png

`--show METHOD:STAGE` opens that method's map at that stage of the same question first.

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "ask.png")
    ap.add_argument("--port", type=int, default=7899)
    ap.add_argument("--show", default="", metavar="METHOD:STAGE", help="a method's map at one of its stages")
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
        _shoot(url, args.out, args.show)
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


def _shoot(url: str, out: Path, show: str = "") -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#graph iframe.ht-hopmap", timeout=60_000)
        frame = page.locator("#graph iframe").element_handle().content_frame()
        frame.wait_for_function("window.hopmapDrawn === true", timeout=30_000)
        page.wait_for_timeout(2500)  # the page's own start-up requests settle
        if show:
            method, _, stage = show.partition(":")
            frame.evaluate("([m, s]) => window.hopmapShow(m, s)", [method, stage])
            page.wait_for_timeout(1500)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out))
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
