"""Files the app hands a visitor to download (the lab's HTML report, a traces export): one
temporary folder per process, removed at exit. A folder per click once left one behind under
/tmp for every download."""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable

_folder: list[Path] = []
_lock = threading.Lock()


def folder() -> Path:
    with _lock:   # two visitors' first downloads at once make one folder, not two
        if not _folder:
            d = Path(tempfile.mkdtemp(prefix="hoptrace-downloads-"))
            atexit.register(shutil.rmtree, d, True)
            _folder.append(d)
        return _folder[0]


def tag(*parts: object, n: int = 12) -> str:
    """A short hash of what a file depends on (its owner, the runs in it), for its name: two
    visitors' files of the same experiment or runs never share a name, and a visitor's own name
    never reaches the file system."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:n]


def write(name: str, fill: Callable[[Path], None]) -> Path:
    """`fill(path)` writes the file at a partial path of this thread's own; it is renamed to `name`
    once whole, so a download never reads a half-written file, whoever else writes that name."""
    out = folder() / name
    part = out.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.part")
    fill(part)
    os.replace(part, out)
    return out
