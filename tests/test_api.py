"""The notebook API: three lines to a rendered run, and an import that changes nothing process-wide."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_package_changes_no_process_wide_setting():
    probe = ("import json, os, sys\n"
             "before = dict(os.environ)\n"
             "import retrieval\n"
             "from retrieval import HopTrace\n"
             "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
             "print(json.dumps({'changed': changed, 'torch': 'torch' in sys.modules}))\n")
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"changed": [], "torch": False}


def test_three_lines_from_a_kb_to_a_run_that_renders_in_jupyter(small_kb, small_corpus):
    from retrieval import HopTrace

    ht = HopTrace(str(small_kb), llm="none")
    q = small_corpus[1][0]
    run = ht.ask("griever", q.text)
    assert run.status == "ok" and len(run.ranked) == 5
    assert run.gold == q.gold_passage_ids
    html = run._repr_html_()
    assert "griever" in html and "clause_split" in html and "ht-ranking" in html
    assert "griever" in ht.methods() and "sag" in ht.methods()
