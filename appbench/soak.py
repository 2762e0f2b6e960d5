"""`hoptrace soak`: the public demo under a long, steady load on loopback, as a Space meets it.

The app runs as its own process in public mode behind a pretend proxy (HOPTRACE_TRUST_PROXY=1:
each virtual visitor sends its own X-Forwarded-For address, as Spaces' proxy does), with a small
storage cap so that pruning works during the run. Virtual visitors, each paced under the
per-visitor limit (6 requests a minute):
- `users` ask LLM-free methods (bm25, dense, composed, griever), one request every 10.5 s;
- `llm_users` ask an LLM method (SAG by default), one request after another.
Every request is bounded in count (`max_requests`) and the whole run in time (`minutes` ≤ 60).

Reported: errors (exceptions and refusals), requests answered, sessions stored or pruned against
requests answered (lost), runs whose question is not their session's (mixed), every surviving
session holding all its methods' runs, p50 of the LLM-free requests per 5-minute window, the
app's and the model server's memory after minute 5 and at the end, and the database's live size
against its cap.
"""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from retrieval.core.errors import ConfigError
from retrieval.kb.presets import demo_path

from .load import _picked, _start_app
from .page import stop

FAST = ("bm25", "dense", "composed", "griever")
PACE_S = 10.5            # one request per visitor every 10.5 s: under the 6-a-minute limit
WINDOW_S = 300.0


def rss_mb(pid: int) -> Optional[float]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


@dataclass
class Sample:
    t: float
    app_mb: Optional[float]
    model_mb: Optional[float]


@dataclass
class SoakLog:
    fast: list[tuple[float, float]] = field(default_factory=list)     # (time since start, seconds)
    llm: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    sent: int = 0


def _ask(client, question: str, methods: list[str], visitor: str) -> str:
    out = client.predict("demo", question, 5, 2, False, visitor, *_picked(methods), api_name="/ask")
    return out[0]


def soak(minutes: float = 30.0, users: int = 20, llm_users: int = 2, llm_method: str = "sag",
         cap_mb: float = 20.0, max_requests: int = 20_000, llm: Optional[str] = None) -> dict:
    from gradio_client import Client

    from retrieval.store import open_store

    if not demo_path().exists():
        raise ConfigError("build the demo KB first: hoptrace build --demo")
    if not 0 < minutes <= 60:
        raise ConfigError(f"--minutes must be in (0, 60], got {minutes}")
    if not (0 <= users <= 100 and 0 <= llm_users <= 10) or users + llm_users == 0:
        raise ConfigError("--users must be 0..100 and --llm-users 0..10, not both 0")
    questions = [q.text for q in open_store(str(demo_path())).questions()]
    traces = Path(tempfile.mkdtemp(prefix="hoptrace-soak-")) / "traces.sqlite"
    env = {"HOPTRACE_PUBLIC": "1", "HOPTRACE_TRUST_PROXY": "1", "HOPTRACE_TRACES_MAX_MB": str(cap_mb),
           "HOPTRACE_PRUNE_EVERY_S": "60", "HOPTRACE_LLM": llm or os.environ.get("HOPTRACE_LLM", "local")}
    proc, url = _start_app(traces, env=env)
    log = SoakLog()
    lock = threading.Lock()
    # Every visitor connects before the clock starts: a client's set-up (it reads the app's config)
    # took over 10 s on a loaded machine, and a visitor connected after the end never asked.
    clients = [Client(url, verbose=False, headers={"X-Forwarded-For": f"10.77.{i // 250}.{i % 250 + 1}, 10.0.0.1"})
               for i in range(users + llm_users)]
    t_start = time.time()
    stop_at = t_start + minutes * 60

    def visitor(i: int, methods: list[str], paced: bool, into: list) -> None:
        rng = random.Random(i)
        client = clients[i]
        vid = f"{i:02d}" + "f" * 30
        next_at = time.time() + rng.uniform(0, PACE_S)
        while time.time() < stop_at:
            if paced:
                time.sleep(max(0.0, next_at - time.time()))
                next_at += PACE_S
                if time.time() >= stop_at:
                    return
            with lock:
                if log.sent >= max_requests:
                    return
                log.sent += 1
            t0 = time.time()
            refused = False
            try:
                html = _ask(client, rng.choice(questions), methods, vid)
                took = time.time() - t0
                with lock:
                    if "this public demo" in html or "the model is busy" in html:
                        log.refused.append(html.split("class='ht-err'>", 1)[-1][:200])
                        refused = True
                    elif "class='ht-err'" in html:
                        log.errors.append("a column or the request reported an error: "
                                          + html.split("class='ht-err'", 1)[1][:160])
                    else:
                        into.append((t0 - t_start, took))
            except Exception as e:  # counted, not raised: the soak goes on
                with lock:
                    log.errors.append(f"{type(e).__name__}: {e}"[:200])
            if refused and not paced:
                time.sleep(PACE_S)  # a person reads the refusal before asking again; a loop would spin

    threads = [threading.Thread(target=visitor, args=(i, list(FAST), True, log.fast), daemon=True)
               for i in range(users)]
    threads += [threading.Thread(target=visitor, args=(users + i, [llm_method], False, log.llm), daemon=True)
                for i in range(llm_users)]
    try:
        for t in threads:
            t.start()
        while time.time() < stop_at:
            kids = children(proc.pid)
            model = max((rss_mb(k) or 0.0 for k in kids), default=None) if kids else None
            log.samples.append(Sample(time.time() - t_start, rss_mb(proc.pid), model))
            time.sleep(min(30.0, max(0.0, stop_at - time.time())))
        for t in threads:
            t.join(timeout=600)
        kids = children(proc.pid)
        log.samples.append(Sample(time.time() - t_start, rss_mb(proc.pid),
                                  max((rss_mb(k) or 0.0 for k in kids), default=None) if kids else None))
    finally:
        stop(proc)
    report = _report(log, traces, minutes, users, llm_users, llm_method, cap_mb)
    shutil.rmtree(traces.parent, ignore_errors=True)   # its traces and app log: the report says what they held
    return report


def _report(log: SoakLog, traces: Path, minutes: float, users: int, llm_users: int, llm_method: str,
            cap_mb: float) -> dict:
    db = sqlite3.connect(traces)
    q = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
    sessions = q("SELECT count(*) FROM sessions WHERE kind = 'ask'")
    pruned = q("SELECT count(*) FROM pruned WHERE kind = 'session'")
    # Visitors' sessions only: the shipped experiment's session holds runs of many questions.
    mixed = q("SELECT count(*) FROM runs r JOIN sessions s ON s.id = r.session_id WHERE s.kind = 'ask' "
              "AND r.question != s.question")
    # A surviving session holds one run per method it asked for: 4 for the fast visitors, 1 for LLM ones.
    short = q("SELECT count(*) FROM sessions s WHERE kind = 'ask' AND (SELECT count(*) FROM runs r "
              "WHERE r.session_id = s.id) NOT IN (1, 4)")
    page = q("PRAGMA page_size")
    # The size cap counts what visitors wrote, not the shipped experiment (traces/storage/retention.py).
    reserved = db.execute("SELECT value FROM meta WHERE key = 'shipped_bytes'").fetchone()
    live_mb = ((q("PRAGMA page_count") - q("PRAGMA freelist_count")) * page - int(reserved[0] if reserved else 0)) / 1e6
    db.close()
    windows = []
    for w in range(int(minutes * 60 // WINDOW_S) + 1):
        xs = [s for t, s in log.fast if w * WINDOW_S <= t < (w + 1) * WINDOW_S]
        if xs:
            windows.append({"window": f"{w * 5}-{w * 5 + 5} min", "requests": len(xs),
                            "p50_s": round(statistics.median(xs), 3)})
    at5 = next((s for s in log.samples if s.t >= 300), log.samples[0] if log.samples else None)
    end = log.samples[-1] if log.samples else None

    def growth(a, b):
        return round((b / a - 1) * 100, 1) if a and b else None

    answered = len(log.fast) + len(log.llm)
    return {
        "minutes": minutes, "fast_visitors": users, "llm_visitors": llm_users, "llm_method": llm_method,
        "requests_sent": log.sent, "answered": answered, "answered_fast": len(log.fast), "answered_llm": len(log.llm),
        "errors": len(log.errors), "error_examples": sorted(set(log.errors))[:3],
        "refused": len(log.refused), "refusal_examples": sorted(set(log.refused))[:2],
        "sessions_stored": sessions, "sessions_pruned": pruned,
        # every answered request made one session, stored or pruned since: any other count lost one
        "lost": answered - sessions - pruned,
        "sessions_missing_runs": short, "mixed_runs": mixed,
        "fast_p50_by_window": windows,
        "llm_p50_s": round(statistics.median([s for _, s in log.llm]), 1) if log.llm else None,
        "app_mb_after_5_min": round(at5.app_mb, 1) if at5 and at5.app_mb else None,
        "app_mb_end": round(end.app_mb, 1) if end and end.app_mb else None,
        "app_growth_pct": growth(at5.app_mb if at5 else None, end.app_mb if end else None),
        "model_mb_after_5_min": round(at5.model_mb, 1) if at5 and at5.model_mb else None,
        "model_mb_end": round(end.model_mb, 1) if end and end.model_mb else None,
        "model_growth_pct": growth(at5.model_mb if at5 else None, end.model_mb if end else None),
        "db_live_mb": round(live_mb, 2), "db_cap_mb": cap_mb, "db_under_cap": live_mb <= cap_mb,
    }
