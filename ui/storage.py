"""Where the app keeps its traces: the Space's persistent storage when it has one.

Spaces mounts persistent storage at /data when the Space owner enables it; the container's own
layer is wiped at every restart. The Dockerfile sets HOPTRACE_PERSIST_DIR=/data: when that folder
exists and can be written, traces go to `<it>/hoptrace/traces.sqlite` and survive restarts;
otherwise they stay in the HopTrace home and the log and the page header say they will not. The
KBs stay in the home (the demo is built into the image). HOPTRACE_TRACES, when set, wins.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping, NamedTuple, Optional

from traces.storage.store import default_path


class TraceLocation(NamedTuple):
    path: Path
    why: str            # where, in words, for the log
    kept: bool          # survives a restart
    persistent: bool    # on the Space's persistent storage (the header says so in public mode)


def trace_location(env: Optional[Mapping[str, str]] = None) -> TraceLocation:
    env = os.environ if env is None else env
    if env.get("HOPTRACE_TRACES", "").strip():
        return TraceLocation(Path(env["HOPTRACE_TRACES"]), "HOPTRACE_TRACES", True, False)
    persist = env.get("HOPTRACE_PERSIST_DIR", "").strip()
    if not persist:
        return TraceLocation(default_path(), "the HopTrace home", True, False)
    root = Path(persist)
    problem = _unusable(root)
    if problem is None:
        return TraceLocation(root / "hoptrace" / "traces.sqlite",
                             f"persistent storage ({root}): kept across restarts", True, True)
    return TraceLocation(default_path(), f"the container's home: lost at a restart ({root} {problem}; enable "
                                         "the Space's persistent storage to keep them)", False, False)


def _unusable(root: Path) -> Optional[str]:
    """Why `root` cannot hold the traces, or None. Written to, not just checked: root passes
    permission checks, a read-only mount does not."""
    if not root.is_dir():
        return "does not exist"
    try:
        (root / "hoptrace").mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root / "hoptrace", prefix=".probe-"):
            pass
    except OSError as e:
        return f"is not writable ({e.strerror or e})"
    return None
