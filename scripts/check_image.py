"""The Space's container checked as Spaces runs it: the image built from the Dockerfile (or reused),
started with podman, and driven by a first visitor in headless Chromium.

Usage: .venv/bin/python scripts/check_image.py [--build] [--out DIR] [--record]

It checks, and prints each figure as it goes:
- the app is process 1 of the container's own PID namespace, as uid 1000, in public mode, on 7860;
- the cold start: container start to the page answering, and to the first LLM answer;
- a first visitor: the first view (a recorded run with a drawn map) within 5 s of the port
  answering, /lab on the shipped experiment, a live question to GRIEVER and SAG answered, a
  public cap (three LLM methods in one request) refused with its message;
- SIGTERM to process 1 (`podman stop`) ends the container with exit 0 within 2 s;
- /data as a volume: the visitor's run is still there after a restart, and after `podman kill -s
  KILL` and a new container on the same volume, with the trace file whole (PRAGMA integrity_check);
  without a volume, the header says that traces do not survive a restart.
Screenshots (1440x900) go to --out. With --record, the figures and the inputs' hash are written to
docs/measurements/image.md, which tests/test_image.py reads: a change to an input (scripts/image.py
INPUTS) fails that test until this check passes again and is recorded.

Everything started here is stopped by name when the check ends, however it ends.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import image  # noqa: E402  (scripts/image.py: the same podman settings as the build)

ROOT = Path(__file__).resolve().parents[1]
PORT = 7860
QUESTION = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
FIRST_VIEW_S = 5.0
STOP_S = 2.0


class Check:
    def __init__(self, out: Path, tag: str):
        self.out, self.tag = out, tag
        self.work = Path(tempfile.mkdtemp(prefix="hoptrace-check-"))
        self.env = image.podman_env(self.work)
        self.name = f"hoptrace-check-{os.getpid()}"
        self.volume = f"hoptrace-check-data-{os.getpid()}"
        self.figures: dict = {}
        self.failures: list[str] = []

    # --- podman ------------------------------------------------------------------------------
    def podman(self, *args, check=True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, check=check, **kw)

    def start(self, volume: bool = True) -> float:
        self.podman("rm", "-f", self.name, check=False)
        args = ["run", "-d", "--name", self.name, "-p", f"127.0.0.1:{PORT}:{PORT}"]
        if volume:
            args += ["-v", f"{self.volume}:/data"]
        t0 = time.time()
        self.podman(*args, self.tag)
        return t0

    def wait_page(self, t0: float, timeout_s: float = 300) -> float:
        """Seconds from `t0` until the page answers."""
        while time.time() - t0 < timeout_s:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/", timeout=5).read(1)
                return time.time() - t0
            except OSError:
                time.sleep(0.2)
        logs = self.podman("logs", "--tail", "30", self.name, check=False)
        raise SystemExit(f"error: the container's page did not answer in {timeout_s:.0f} s\n{logs.stdout}{logs.stderr}")

    def state(self) -> dict:
        out = self.podman("inspect", self.name, "--format", "json").stdout
        return json.loads(out)[0]["State"]

    def stop(self) -> tuple[int, float]:
        t0 = time.time()
        self.podman("stop", "-t", "10", self.name)
        return self.state()["ExitCode"], time.time() - t0

    def py(self, code: str) -> str:
        """Python in the running container, as its user."""
        return self.podman("exec", self.name, "python", "-c", code).stdout.strip()

    def expect(self, ok: bool, what: str) -> None:
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            self.failures.append(what)

    def cleanup(self) -> None:
        self.podman("rm", "-f", self.name, check=False)
        self.podman("volume", "rm", "-f", self.volume, check=False)

    # --- the checks --------------------------------------------------------------------------
    def process_one(self) -> None:
        """pid 1 of the container's PID namespace: `python app.py`, uid 1000, public mode."""
        cmdline = self.py("print(open('/proc/1/cmdline').read().replace(chr(0), ' ').strip())")
        uid = self.py("import os; print(os.stat('/proc/1').st_uid)")
        env = self.py("print(open('/proc/1/environ').read().split(chr(0)))")
        host_pid = self.state()["Pid"]
        self.expect(cmdline == "python app.py", f"process 1 is `{cmdline}` (host pid {host_pid})")
        self.expect(uid == "1000", f"process 1 runs as uid {uid}")
        self.expect("'HOPTRACE_PUBLIC=1'" in env and "'GRADIO_SERVER_PORT=7860'" in env,
                    "public mode (HOPTRACE_PUBLIC=1) on port 7860")
        # The build-time volumes (scripts/image.py machine_args) leave nothing in the image.
        mounts = [str(Path(image.CERT_IN_BUILD).parent), image.WHEELS_IN_BUILD]
        left = self.py(f"import os; print([p for p in {mounts!r} if os.path.lexists(p)])")
        self.expect(left == "[]", f"no build-time mount point in the image ({', '.join(mounts)}: {left})")
        home = self.py("import os; print(os.access(os.path.expanduser('~'), os.W_OK), os.path.expanduser('~'))")
        self.expect(home.startswith("True"), f"the user's home is writable ({home})")

    def visitor(self, page_answered_at: float, t0: float) -> str:
        """The first visitor's tour; returns the id of the run they stored."""
        from playwright.sync_api import sync_playwright

        url = f"http://127.0.0.1:{PORT}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            ctx = browser.new_context(viewport={"width": 1440, "height": 900})
            page = ctx.new_page()
            asked = time.time()
            page.goto(url + "/", wait_until="domcontentloaded")
            page.wait_for_selector("#graph iframe.ht-hopmap", timeout=60_000)
            frame = page.locator("#graph iframe").element_handle().content_frame()
            frame.wait_for_function("window.hopmapDrawn === true", timeout=60_000)
            first_view = time.time() - max(asked, page_answered_at)
            self.figures["first_view_s"] = round(first_view, 1)
            self.expect(first_view <= FIRST_VIEW_S, f"first view (a recorded run, its map drawn) {first_view:.1f} s "
                        f"after the request (goal {FIRST_VIEW_S:.0f} s)")
            header = page.locator("body").inner_text()
            self.expect("Public demo" in header, "the public banner is shown")
            self.expect("kept across restarts" in header or "persistent" in header,
                        "the header says traces are kept (/data is a volume)")
            page.screenshot(path=str(self.out / "container-first-view.png"))
            # A live question: GRIEVER and SAG, answered.
            page.fill("#question textarea", QUESTION)
            for label in page.locator("#methods label").all():
                box, name = label.locator("input"), label.inner_text().strip()
                if box.is_checked() != (name in ("griever", "sag")):
                    label.click()
            page.click("#run")
            # The first view's recorded columns hold GRIEVER and SAG too: the live run is done when its
            # session link says so (ui/tabs/ask.py), and its columns are then the only ones.
            page.wait_for_function("document.querySelector('#session-link') && "
                                   "document.querySelector('#session-link').innerText.includes('link to this "
                                   "comparison')", timeout=600_000)
            first_llm = time.time() - t0
            cols = page.locator("#columns .ht-col").evaluate_all("cs => cs.map(c => c.dataset.method)")
            ranked = page.locator("#columns .ht-col table.ht-ranking").count()
            self.expect(sorted(cols) == ["griever", "sag"] and ranked == 2,
                        f"the live run's columns {cols}, each with a ranking ({ranked})")
            self.figures["cold_start_to_first_llm_answer_s"] = round(first_llm, 1)
            self.expect(True, f"GRIEVER and SAG answered; the first LLM answer {first_llm:.1f} s after the "
                        "container started")
            page.screenshot(path=str(self.out / "container-live-answer.png"))
            sid = page.locator("#session-link code").inner_text().strip()
            # A public cap: three LLM methods in one request.
            for label in page.locator("#methods label").all():
                box, name = label.locator("input"), label.inner_text().strip()
                if box.is_checked() != (name in ("gear", "sag", "grasp")):
                    label.click()
            page.click("#run")
            try:
                page.wait_for_function("document.querySelector('#columns').innerText.includes('LLM methods a "
                                       "request')", timeout=60_000)
            except Exception:
                page.screenshot(path=str(self.out / "container-public-refusal-missing.png"))
                print(page.locator("#columns").inner_text()[:400], flush=True)
            refused = "at most 2 LLM methods a request" in page.locator("#columns").inner_text()
            self.expect(refused, "three LLM methods in one request are refused: \"at most 2 LLM methods a request\"")
            page.screenshot(path=str(self.out / "container-public-refusal.png"))
            # The lab on the shipped experiment.
            lab = page.context.new_page()
            t = time.time()
            lab.goto(url + "/lab", wait_until="domcontentloaded")
            lab.wait_for_selector("#exp-leaderboard table", timeout=60_000)
            self.figures["lab_leaderboard_s"] = round(time.time() - t, 1)
            # The screenshot once the view has filled in: the picker set, the charts drawn.
            lab.wait_for_function("document.querySelector('#exp-pick input') && "
                                  "document.querySelector('#exp-pick input').value.length > 0", timeout=60_000)
            lab.wait_for_selector("#exp-means-plot .js-plotly-plot .main-svg", timeout=60_000)
            self.figures["lab_view_s"] = round(time.time() - t, 1)
            lab.wait_for_timeout(1000)
            shipped = "shipped" in lab.locator("#exp-pick").inner_text() or "KB demo" in lab.locator(
                "#exp-setting").inner_text()
            self.expect(shipped, f"/lab opens on the shipped experiment ({self.figures['lab_leaderboard_s']} s)")
            lab.screenshot(path=str(self.out / "container-lab.png"))
            browser.close()
        return sid

    def stored(self, session_id: str) -> tuple[int, str]:
        """(the session's runs in /data's trace file, its integrity check)."""
        out = self.py("import sqlite3; c = sqlite3.connect('/data/hoptrace/traces.sqlite'); "
                      "n = c.execute('SELECT count(*) FROM runs WHERE session_id = ?', "
                      f"['{session_id}']).fetchone()[0]; print(n, c.execute('PRAGMA integrity_check').fetchone()[0])")
        n, ok = out.split()
        return int(n), ok

    def run(self) -> int:
        t0 = self.start()
        up = self.wait_page(t0)
        self.figures["cold_start_page_s"] = round(up, 1)
        print(f"cold start: the page answered {up:.1f} s after `podman run`", flush=True)
        said = self.podman("logs", self.name, check=False)
        for line in (said.stdout + said.stderr).splitlines():
            if "ready in" in line or "installed" in line or "traces in" in line:
                print(f"      app: {line.strip()}", flush=True)
        self.process_one()
        sid = self.visitor(t0 + up, t0)
        n, ok = self.stored(sid)
        self.expect(n == 2 and ok == "ok", f"the visitor's session holds {n} runs in /data ({ok})")
        code, took = self.stop()
        self.figures.update(sigterm_exit=code, sigterm_s=round(took, 2))
        self.expect(code == 0 and took <= STOP_S, f"SIGTERM (podman stop): exit {code} in {took:.2f} s")
        # A restart on the same volume, then SIGKILL and a new container on it.
        self.podman("start", self.name)
        self.wait_page(time.time())
        n, ok = self.stored(sid)
        self.expect(n == 2 and ok == "ok", f"after a restart: the visitor's {n} runs, integrity {ok}")
        self.podman("kill", "-s", "KILL", self.name)
        time.sleep(1)
        self.figures["kill_exit"] = self.state()["ExitCode"]
        t0 = self.start()
        self.wait_page(t0)
        n, ok = self.stored(sid)
        self.expect(n == 2 and ok == "ok", f"after `podman kill -s KILL` (exit {self.figures['kill_exit']}) and a "
                    f"new container on the volume: {n} runs, integrity {ok}")
        self.figures.update(runs_after_kill=n, integrity_after_kill=ok)
        self.podman("stop", "-t", "10", self.name)
        # Without a volume the header says traces are lost at a restart.
        t0 = self.start(volume=False)
        self.wait_page(t0)
        html = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/", timeout=30).read().decode()
        lost = "traces-not-kept" in html and "lost when it restarts" in html   # ui/app.py's header line
        self.expect(lost, "without a volume, the header says traces are lost at a restart")
        self.podman("stop", "-t", "10", self.name)
        return 1 if self.failures else 0


def record(figures: dict, build: dict | None, path: Path = image.RECORD) -> None:
    """The passing check's figures under its inputs' hash (tests/test_image.py reads the hash)."""
    lines = path.read_text().splitlines() if path.exists() else []
    keep = [x for x in lines if "inputs sha256:" not in x]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    keep += ["", f"Last passing check {stamp}: " + ", ".join(f"{k} {v}" for k, v in figures.items()),
             f"inputs sha256: `{image.inputs_hash()}`"]
    path.write_text("\n".join(keep).strip() + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="store_true", help="build the image first (scripts/build_image.sh)")
    ap.add_argument("--tag", default=image.TAG)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "image-check")
    ap.add_argument("--record", action="store_true", help="write the figures and the inputs' hash to "
                                                         "docs/measurements/image.md when every check passes")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    built = image.build(a.tag) if a.build else None
    check = Check(a.out, a.tag)
    if subprocess.run(["podman", "image", "exists", a.tag], env=check.env).returncode:
        raise SystemExit(f"error: no image {a.tag}: run with --build, or bash scripts/build_image.sh")
    try:
        rc = check.run()
    finally:
        check.cleanup()
    print(json.dumps(check.figures))
    print(f"{'every check passed' if rc == 0 else 'FAILED: ' + '; '.join(check.failures)}; screenshots in {a.out}")
    if rc == 0 and a.record:
        record(check.figures, built)
        print(f"recorded in {image.RECORD.relative_to(ROOT)} with the inputs' hash")
    return rc


if __name__ == "__main__":
    sys.exit(main())
