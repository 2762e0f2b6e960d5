"""`hoptrace bench-import`: the time and peak memory of reading a large corpus file alone (no
KB written), on a generated file: the JSONL reader goes a line at a time, so its peak is the
passages it returns, not the file held as one JSON document.

Each size is read in a fresh Python process: its peak resident memory (ru_maxrss) less the same
process's before the read is what the import cost."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

_WORDS = ("river town court album band founded published director born married member capital "
          "county season league station railway novel author painter village province").split()

_READ = """
import json, resource, sys, time
from retrieval.corpus import load_corpus
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
ps = load_corpus(sys.argv[1])
s = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"passages": len(ps), "seconds": round(s, 2), "baseline_mb": round(before / 1024, 1),
                  "peak_mb": round(after / 1024, 1), "import_mb": round((after - before) / 1024, 1)}))
"""


def generate(path: Path, lines: int, fmt: str = "jsonl", seed: int = 0) -> Path:
    """`lines` passages of ~60 words (a MuSiQue paragraph's length) with ids of their own."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(lines):
            text = " ".join(rng.choice(_WORDS) for _ in range(60)) + "."
            if fmt == "jsonl":
                f.write(json.dumps({"_id": f"doc-{i:07d}", "title": f"Title {i}", "text": text}) + "\n")
            else:
                f.write(f"doc-{i:07d}\t{text}\tTitle {i}\n")
    return path


def measure(path: Path) -> dict:
    from ..core.paths import REPO_ROOT

    out = subprocess.run([sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True,
                         cwd=REPO_ROOT)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update(file=path.name, file_mb=round(path.stat().st_size / 1e6, 1))
    return row
