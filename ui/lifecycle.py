"""How the app stops: SIGTERM or SIGINT ends it within seconds, whatever its pid.

Spaces runs `python app.py` as process 1 of its container, and process 1 ignores SIGTERM unless
it installs a handler: each restart then waited out the grace period and was killed, the model
server with it, mid-write if a run was being stored. Here either signal waits for a trace write in
progress to commit (the trace store's lock; SQLite rolls back whatever is not committed), stops
the embedded model server, and exits. A KB build in progress is left resumable (its `.building`
copy), as after any kill.
"""
from __future__ import annotations

import os
import signal
import sys
import threading


def stop_on_signals(state, grace_s: float = 8.0) -> None:
    """Install the handlers (main thread only, as Python requires)."""
    def handler(signum, _frame) -> None:
        print(f"hoptrace: {signal.Signals(signum).name}: stopping", file=sys.stderr, flush=True)
        threading.Thread(target=_stop, args=(state, grace_s), daemon=True, name="stop").start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def _stop(state, grace_s: float) -> None:
    code = 0
    try:
        if not state.traces.hold_for_exit(grace_s):
            print(f"hoptrace: a trace write did not finish within {grace_s:g} s; SQLite rolls it back",
                  file=sys.stderr, flush=True)
            code = 1
        if state.llm is not None:
            state.llm.stop()
    finally:
        print("hoptrace: stopped", file=sys.stderr, flush=True)
        os._exit(code)
