"""`hoptrace bench-app`: the app's own speed, measured from outside as a user meets it.

- start → ready: from spawning `python app.py` to the page answering HTTP 200;
- click → first GRIEVER stage: from clicking Run (GRIEVER only) to its first stage panel
  in the page, in headless Chromium; and click → ranking shown;
- the idle app: the CPU seconds the server spends in 10 s with no visitor (ui/idle_frames.py).
The demo KB must already be built (`hoptrace build --demo`).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from retrieval.core.errors import ConfigError
from retrieval.core.paths import REPO_ROOT
from retrieval.core.ports import free_port
from retrieval.kb.presets import demo_path

CHROMIUM = "/usr/bin/chromium"
# Headless screenshots leave a sandboxed iframe that runs in its own process blank (its canvas
# is drawn, measured by pixel count, but not composited into the shot): keep such frames in-process.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-features=IsolateSandboxedIframes"]


PORT_TAKEN = "Cannot find empty port"   # what Gradio's launch raises when its port is in use


def spawn_app(env: dict, log: Path, app_dir: Path = REPO_ROOT, timeout_s: float = 300.0,
              tries: int = 3) -> tuple[subprocess.Popen, str, float]:
    """`python app.py` on a free loopback port until the page answers HTTP 200: (process, URL,
    seconds from spawn). Its output goes to `log`, whose tail a failed start quotes.

    A port free when picked can be taken before the app binds it (another process on the
    machine, or another test worker, picked the same one): the app then exits naming it, and
    it is started again on a new port, at most `tries` times."""
    for attempt in range(1, tries + 1):
        port = free_port()
        run_env = {**env, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1"}
        t0 = time.perf_counter()
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, str(app_dir / "app.py")], env=run_env, cwd=app_dir,
                                    stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        while proc.poll() is None:
            try:
                if urllib.request.urlopen(url, timeout=1).status == 200:
                    return proc, url, time.perf_counter() - t0
            except OSError:
                pass
            if time.perf_counter() - t0 > timeout_s:
                stop(proc)
                raise ConfigError(f"the app did not answer within {timeout_s:.0f} s; its log ({log}) ends: "
                                  f"{_tail(log)}")
            time.sleep(0.1)
        if PORT_TAKEN in log.read_text(errors="replace") and attempt < tries:
            continue
        raise ConfigError(f"the app exited during start-up (exit {proc.returncode}); its log ({log}) ends: "
                          f"{_tail(log)}")
    raise AssertionError("unreachable")


def serve_free(app, state, tries: int = 3) -> str:
    """ui.app.serve in this process on a free loopback port, without blocking: its URL. A port
    taken between picking and binding is picked again, as spawn_app does."""
    from ui.app import serve

    for attempt in range(1, tries + 1):
        port = free_port()
        try:
            serve(app, state, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True)
            return f"http://127.0.0.1:{port}/"
        except OSError as e:
            if PORT_TAKEN not in str(e) or attempt == tries:
                raise
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen) -> None:
    """End a started app by its pid: SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(log: Path, chars: int = 2000) -> str:
    return log.read_text(errors="replace")[-chars:].strip() or "(nothing)"


@contextmanager
def started_app(env_extra: dict | None = None, app_dir: Path = REPO_ROOT) -> Iterator[str]:
    """The app (spawn_app) with the user's environment plus `env_extra`; yields its URL and stops
    it by its pid. The seconds from spawn to the first answer are kept in `_started[url]`."""
    if not demo_path().exists():
        raise ConfigError("build the demo KB first: hoptrace build --demo")
    if not Path(CHROMIUM).exists():
        raise ConfigError(f"{CHROMIUM} is missing (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="hoptrace-bench-app-") as tmp:
        proc, url, seconds = spawn_app(dict(os.environ, **(env_extra or {})), Path(tmp) / "app.log", app_dir)
        try:
            _started[url] = seconds
            _pids[url] = proc.pid
            yield url
        finally:
            stop(proc)


_started: dict[str, float] = {}   # URL → seconds from spawn to the page's first 200
_pids: dict[str, int] = {}        # URL → the started app's pid


def proc_stat(pid: int) -> tuple[int, float]:
    """Process `pid`'s parent and CPU seconds so far (user + system, all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_s(pid: int, seconds: float = 10.0) -> float:
    """CPU seconds that process `pid` spent in `seconds` of wall time."""
    before = proc_stat(pid)[1]
    time.sleep(seconds)
    return round(proc_stat(pid)[1] - before, 2)


def bench_app(runs: int = 5, question: str | None = None) -> dict:
    with started_app() as url:
        ready_s = _started.pop(url)
        first, done = _clicks(url, runs, question)
        # With no visitor and nothing to do: what the server costs the cores the model writes on.
        idle = idle_cpu_s(_pids[url])
    return {"start_to_ready_s": round(ready_s, 2), "idle_app_cpu_s_in_10_s": idle,
            "click_to_first_griever_stage_ms_p50": round(statistics.median(first), 1),
            "click_to_first_griever_stage_ms_max": round(max(first), 1),
            "click_to_griever_ranking_ms_p50": round(statistics.median(done), 1),
            "runs": runs, "first_stage_ms": [round(x, 1) for x in first]}


def open_page(browser, url: str, width: int = 1440, height: int = 900, timeout_s: float = 120):
    """The app's page in a new tab, once its Run button is there."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#run", timeout=timeout_s * 1000)
    return page


def pick(page, methods, question: str | None = None) -> None:
    """`question` in the box (if given) and exactly `methods` ticked in the method picker."""
    if question:
        page.fill("#question textarea", question)
    for label in page.locator("#methods label").all():
        if label.locator("input").is_checked() != (label.inner_text().strip() in methods):
            label.click()


def _clicks(url: str, runs: int, question: str | None) -> tuple[list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    first, done = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_page(browser, url, 1400, 1000, timeout_s=60)
        pick(page, ("griever",), question)
        for _ in range(runs):
            # The clock starts in the page, at the click, and stops when the panel exists.
            ms = page.evaluate("""() => new Promise(resolve => {
                const grid = document.querySelector('#columns .ht-grid');
                const before = grid ? grid.dataset.session : null;
                const t0 = performance.now(); let first = null;
                const col = () => {  // the griever column of a new session only
                    const g = document.querySelector('#columns .ht-grid');
                    return g && g.dataset.session && g.dataset.session !== before
                        ? g.querySelector(".ht-col[data-method='griever']") : null; };
                const obs = new MutationObserver(() => {
                    const c = col();
                    if (c && first === null && c.querySelector('.ht-stage')) first = performance.now() - t0;
                    if (c && c.querySelector('table.ht-ranking')) {
                        obs.disconnect(); resolve([first, performance.now() - t0]);
                    }
                });
                obs.observe(document.body, {childList: true, subtree: true, characterData: true});
                document.querySelector('#run').click();
            })""")
            first.append(ms[0])
            done.append(ms[1])
            page.wait_for_timeout(300)
        browser.close()
    return first, done
