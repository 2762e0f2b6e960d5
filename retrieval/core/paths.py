"""Where HopTrace keeps its files. HOPTRACE_HOME overrides; it must be writable (Spaces: /data or /tmp)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "data"


def home() -> Path:
    root = Path(os.environ.get("HOPTRACE_HOME") or Path.home() / ".cache" / "hoptrace")
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir() -> Path:
    return home()


def kb_dir() -> Path:
    d = home() / "kbs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def resolve_kb(name_or_path: str) -> Path:
    """`demo` or a bare name means $HOPTRACE_HOME/kbs/NAME.sqlite; anything with a slash or suffix is a path."""
    p = Path(name_or_path)
    if p.suffix or os.sep in name_or_path:
        return p
    return kb_dir() / f"{name_or_path}.sqlite"
