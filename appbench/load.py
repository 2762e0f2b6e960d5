"""`hoptrace bench-app --users N --minutes M`: many visitors asking at once, through the app's
own HTTP API on loopback, and what the trace database holds afterwards.

Each virtual user is a gradio_client on 127.0.0.1 that asks a demo question with the chosen
LLM-free methods, waits for the final ranking, and asks again until the time is up (bounded:
at most --max-requests in all). Reported: requests, errors, runs stored vs expected, runs
whose stored question is not their session's (mixed traces), and p50 / p95 seconds from
submit to final ranking; first a single user's click → final ranking over --solo requests.
"""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from retrieval.core.errors import ConfigError
from retrieval.core.paths import REPO_ROOT
from retrieval.kb.presets import demo_path

from .page import spawn_app, stop


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


def _start_app(traces: Path, app_dir: Path = REPO_ROOT, env: Optional[dict] = None) -> tuple[subprocess.Popen, str]:
    """The app in its own process with its own trace file; `env` adds or overrides variables
    (the soak runs it in public mode with the embedded LLM). Its log is app.log beside the traces."""
    # A home of its own whose kbs/ is the real one: the load's traces stay out of the user's
    # trace file, for this version and for an older checkout (--app-dir) alike.
    from retrieval.core.paths import kb_dir

    (traces.parent / "kbs").symlink_to(kb_dir().resolve(), target_is_directory=True)
    models = kb_dir().parent / "models"  # exported encoders: not re-exported under load
    if models.is_dir():
        (traces.parent / "models").symlink_to(models.resolve(), target_is_directory=True)
    env = {**os.environ, "HOPTRACE_LLM": "none", "HOPTRACE_HOME": str(traces.parent), "HOPTRACE_TRACES": str(traces),
           **(env or {})}
    proc, url, _ = spawn_app(env, traces.parent / "app.log", app_dir=app_dir)
    return proc, url


def _picked(methods: list[str]) -> list[list[str]]:
    """The ask endpoint's picker inputs, in the app's order (ui/picker.py groups)."""
    from ui.picker import GROUPS

    out = []
    for g in GROUPS:
        out.append([m for m in g.methods if m in methods])
        if g.ablations:
            out.append([m for m in g.ablations if m in methods])
    out.append([])   # the "Yours" group (ui/tabs/ask.py): the load test runs built-in methods only
    return out


def _ask(client, question: str, methods: list[str], k: int, visitor: str = "load") -> float:
    # An app from before the grouped picker (one Methods list: 6 inputs) is measured too, so a
    # before/after compares the same load. Later apps take the visitor id (browser state) too.
    params = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/ask"]["parameters"]
    names = [p.get("parameter_name") for p in params]
    if len(params) == 6:
        args = ["demo", question, methods, k, 2, False]
    elif "who" in names:
        args = ["demo", question, k, 2, False, visitor, *_picked(methods)]
    else:
        args = ["demo", question, k, 2, False, *_picked(methods)]
    # An app from before the "Yours" group takes one picker fewer: send what it takes.
    args = args[:len(params)]
    t0 = time.perf_counter()
    client.predict(*args, api_name="/ask")
    return time.perf_counter() - t0


def load_test(users: int = 20, minutes: float = 5.0, methods: tuple[str, ...] = ("bm25", "dense", "composed",
                                                                                 "griever"),
              k: int = 5, solo: int = 20, max_requests: int = 2000, app_dir: Path = REPO_ROOT) -> dict:
    """`app_dir`: another checkout's app.py (a before/after of the same load)."""
    from gradio_client import Client

    from retrieval.store import open_store

    if not demo_path().exists():
        raise ConfigError("build the demo KB first: hoptrace build --demo")
    if users < 1 or users > 100:
        raise ConfigError(f"--users must be 1..100 (loopback load test), got {users}")
    if minutes <= 0 or minutes > 30:
        raise ConfigError(f"--minutes must be in (0, 30], got {minutes}")
    questions = [q.text for q in open_store(str(demo_path())).questions()]
    traces = Path(tempfile.mkdtemp(prefix="hoptrace-load-")) / "traces.sqlite"
    proc, url = _start_app(traces, app_dir)
    try:
        c = Client(url, verbose=False)
        _ask(c, questions[0], list(methods), k)  # warm: the first request opens the KB
        solo_s = [_ask(c, questions[i % len(questions)], list(methods), k) for i in range(solo)]
        solo_end = time.time()

        lat: list[float] = []
        errors: list[str] = []
        sent = [0]
        lock = threading.Lock()
        stop_at = time.time() + minutes * 60

        def user(seed: int) -> None:
            rng = random.Random(seed)
            client = Client(url, verbose=False)
            while time.time() < stop_at:
                with lock:
                    if sent[0] >= max_requests:
                        return
                    sent[0] += 1
                try:
                    s = _ask(client, rng.choice(questions), list(methods), k, f"load-{seed}")
                    with lock:
                        lat.append(s)
                except Exception as e:  # counted, not raised: the load goes on
                    with lock:
                        errors.append(f"{type(e).__name__}: {e}"[:200])

        threads = [threading.Thread(target=user, args=(i,), daemon=True) for i in range(users)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=minutes * 60 + 600)
        wall = time.time() - t0
    finally:
        stop(proc)
    db = sqlite3.connect(traces)
    requests_total = 1 + solo + sent[0]
    stored = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    mixed = db.execute("SELECT count(*) FROM runs r JOIN sessions s ON s.id = r.session_id "
                       "WHERE r.question != s.question").fetchone()[0]
    sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
    # What each column showed: the method's own latency as stored, alone and under load (to
    # set beside `hoptrace bench`'s p50 for the same method).
    shown = {}
    for m in methods:
        alone = [r[0] for r in db.execute("SELECT latency_ms FROM runs WHERE method = ? AND created_at <= ?",
                                          [m, solo_end])]
        loaded = [r[0] for r in db.execute("SELECT latency_ms FROM runs WHERE method = ? AND created_at > ?",
                                           [m, solo_end])]
        shown[m] = {"alone_p50_ms": round(statistics.median(alone), 1) if alone else None,
                    "under_load_p50_ms": round(statistics.median(loaded), 1) if loaded else None}
    db.close()
    shutil.rmtree(traces.parent, ignore_errors=True)   # its traces and app log: the report says what they held
    return {
        "methods": list(methods), "users": users, "minutes": minutes,
        "solo_requests": solo, "solo_p50_ms": round(statistics.median(solo_s) * 1000, 1),
        "solo_p95_ms": round(_percentile(solo_s, 95) * 1000, 1),
        "load_requests": sent[0], "load_completed": len(lat), "load_errors": len(errors),
        "error_examples": sorted(set(errors))[:3],
        "load_p50_s": round(statistics.median(lat), 2) if lat else None,
        "load_p95_s": round(_percentile(lat, 95), 2) if lat else None,
        "requests_per_s": round(len(lat) / wall, 2) if wall else None,
        "sessions_stored": sessions, "runs_stored": stored, "runs_expected": requests_total * len(methods),
        "runs_with_another_sessions_question": mixed,
        "method_latency_shown": shown,
    }


def compare_with_bench(shown: dict, methods: tuple[str, ...], k: int = 5, limit: int = 40,
                       pause_ms: float = 500.0, kb: Optional[Path] = None) -> dict:
    """Each LLM-free method's column latency (alone) beside `hoptrace bench`'s p50 for it, run
    here after the app has stopped: back to back, and with `pause_ms` idle before each
    question as a click comes (issue 17 item 9: a column must read within 1.5x of the method
    alone). LLM methods are left out: their seconds do not depend on the CPU's caches."""
    from retrieval.bench.runner import run_bench
    from retrieval.encoders.embedder import get_embedder
    from retrieval.methods import Context, uses_llm
    from retrieval.store import open_store

    fast = [m for m in methods if not uses_llm(m)]
    if not fast:
        return {}
    store = open_store(str(kb or demo_path()))
    ctx = Context(store, get_embedder(store.info().embed_model), None)
    questions = store.questions()[:limit]
    runs = {p: run_bench(ctx, "demo", questions, fast, ks=[k], progress=False, pause_ms=p).methods
            for p in (0.0, pause_ms)}
    out = {}
    for m in fast:
        col = (shown.get(m) or {}).get("alone_p50_ms")
        b2b, paused = runs[0.0][m]["latency_ms_p50"], runs[pause_ms][m]["latency_ms_p50"]
        out[m] = {"column_alone_p50_ms": col, "bench_p50_ms": b2b, f"bench_pause_{pause_ms:g}ms_p50_ms": paused,
                  "column_over_bench": round(col / b2b, 2) if col and b2b else None,
                  "column_over_paused_bench": round(col / paused, 2) if col and paused else None}
    return {"questions": len(questions), "pause_ms": pause_ms, "methods": out}
