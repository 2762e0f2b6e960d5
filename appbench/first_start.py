"""`hoptrace bench-app --first-start`: the app started as on a fresh machine (an empty HopTrace
home, so the demo KB is built from nothing) and how soon a visitor's question is answered by each
method, while the demo builds in the background (retrieval/kb/publish.py).

The home holds only what `scripts/setup.sh` leaves there (the query encoder's ONNX export, when
this machine's home has it). Reported, in seconds from spawning `python app.py`: the page
answering HTTP 200, then for each method the first question it answered (a run stored with status
ok: a method asked before its layers are whole is refused, stored as an error, and asked again
when the build publishes its next snapshot, or 5 s later), and the demo's whole build (its status
file gone). The app runs with no LLM, on loopback, and is stopped by its pid at the end; its
temporary home is removed.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from retrieval.core.errors import ConfigError

from .load import _ask
from .page import spawn_app, stop

QUESTION = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def _stored_ok(traces: Path, method: str, after: float) -> bool:
    if not traces.exists():
        return False
    con = sqlite3.connect(f"file:{traces}?mode=ro", uri=True, timeout=10)
    try:
        row = con.execute("SELECT count(*) FROM runs WHERE method=? AND status='ok' AND created_at>=?",
                          (method, after - 1)).fetchone()
        return bool(row and row[0])
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _wait_for_news(kb: Path, most_s: float) -> None:
    """Until the build publishes a new snapshot of the KB (as a visitor asks again when the header
    says a method is ready), or `most_s` passes; asking every second instead loads the 2 cores."""
    def version():
        try:
            st = kb.stat()
            return (st.st_ino, st.st_mtime_ns)
        except OSError:
            return None
    before, t0 = version(), time.time()
    while version() == before and time.time() - t0 < most_s:
        time.sleep(0.1)


def first_start(methods: tuple[str, ...] = ("bm25", "dense", "griever"), timeout_s: float = 900.0,
                keep_home: bool = False) -> dict:
    from gradio_client import Client

    from retrieval.core.paths import cache_dir

    home = Path(tempfile.mkdtemp(prefix="hoptrace-first-start-"))
    # What scripts/setup.sh leaves in a fresh home: the query encoder's ONNX export, nothing else.
    exported = cache_dir() / "models" / "all-MiniLM-L6-v2.onnx"
    if exported.exists():
        (home / "models").mkdir()
        (home / "models" / exported.name).symlink_to(exported.resolve())
    traces = home / "traces.sqlite"
    env = {**os.environ, "HOPTRACE_HOME": str(home), "HOPTRACE_TRACES": str(traces), "HOPTRACE_LLM": "none"}
    out: dict = {"methods": {}, "app_log": str(home / "app.log") if keep_home else None}
    t0 = time.time()
    proc = None
    try:
        proc, url, _ = spawn_app(env, home / "app.log", timeout_s=timeout_s)
        out["page_s"] = round(time.time() - t0, 1)
        client = Client(url, verbose=False)
        kb = home / "kbs" / "demo.sqlite"
        for m in methods:
            tries = 0
            while time.time() - t0 < timeout_s:
                if tries:
                    _wait_for_news(kb, 5.0)
                asked = time.time()
                tries += 1
                _ask(client, QUESTION, [m], 5)
                if _stored_ok(traces, m, asked):
                    out["methods"][m] = {"answered_s": round(time.time() - t0, 1), "asked": tries}
                    break
                stopped = [x for x in (home / "app.log").read_text().splitlines() if "build stopped" in x]
                if stopped:
                    raise ConfigError(f"the demo's build stopped in the app: {stopped[0]}")
            else:
                out["methods"][m] = {"answered_s": None, "asked": tries}
        status = home / "kbs" / "demo.sqlite.status.json"
        while status.exists() and time.time() - t0 < timeout_s:
            time.sleep(0.5)
        out["demo_built_s"] = round(time.time() - t0, 1) if not status.exists() else None
    finally:
        if proc is not None:
            stop(proc)
        if not keep_home:
            shutil.rmtree(home, ignore_errors=True)
    out["cores"] = os.cpu_count()
    out["query_encoder_exported_by_setup"] = exported.exists()
    return out
