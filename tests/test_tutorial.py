"""docs/tutorial.md cannot go stale: every command in its code blocks runs, in order, in one
shell, on the tiny corpus the repository ships (examples/tiny/), in a fresh HopTrace home.

The one change made to the page's text: the Phoenix address (`127.0.0.1:6006`) becomes a real
Phoenix on a free port (the session's, shared with test_otel_phoenix: only the spans this export
adds count), whose REST API is then read back for the exported spans.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def tutorial_script() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    assert len(blocks) >= 9, "the tutorial's steps"
    return "\n".join(blocks)


def _span_ids(phoenix: str) -> set[str]:
    with urllib.request.urlopen(f"{phoenix}/v1/projects/default/spans?limit=1000", timeout=10) as r:
        return {s["context"]["span_id"] for s in json.loads(r.read())["data"]}


def _seed_models(home: Path) -> None:
    """The session's ONNX export of the embedder (made once, by the first test that embeds), linked
    into this fresh home: the tutorial's first build would otherwise export the model again (~9 s
    of the suite's 8 minutes). Exporting is tested in test_embed; what the page says is tested here."""
    from retrieval.core.paths import cache_dir

    for onnx in (cache_dir() / "models").glob("*.onnx"):
        (home / "models").mkdir(parents=True, exist_ok=True)
        (home / "models" / onnx.name).symlink_to(onnx)


def test_every_command_of_the_tutorial_runs(phoenix, small_kb, tmp_path):
    work = tmp_path / "session"
    work.mkdir()
    _seed_models(tmp_path / "home")   # small_kb: the session's embedder has run, and made its export
    for name in (".venv", "examples"):  # the commands' relative paths, without writing into the repo
        (work / name).symlink_to(ROOT / name)
    script = tutorial_script().replace("http://127.0.0.1:6006", phoenix)
    commands = [line for line in script.splitlines() if line.strip() and not line.startswith("#")]
    assert any("--otlp" in c for c in commands) and any("--plugin" in c for c in commands)
    env = {**os.environ, "HOPTRACE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("HOPTRACE_TRACES", None)
    # -e: a failing command fails the test; -x: the log shows which one.
    # The session's Phoenix (conftest.py) may hold other tests' spans: only those this export adds count.
    before = _span_ids(phoenix)
    proc = subprocess.run(["bash", "-e", "-x", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                          timeout=1500)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]

    # What the page says the reader should see.
    assert re.search(r"ready: bm25 \(\d+ s\) · .*griever \(\d+ s\)", log), log[-3000:]
    assert "answered" in log and "open" in log
    assert log.count("experiment ") >= 2
    assert "settled" in log or "open" in log
    assert "=== composed" in log and "=== griever" in log, "a question's two stored runs"
    assert "my_retriever" in log
    # Step 9: a BEIR folder keeps its ids, and the run made outside scores as it did outside.
    assert "passage ids: the collection's own ids" in log
    outside = float(re.search(r"computed here: recall@5 ([\d.]+)", log).group(1))
    inside = float(re.search(r"\n\w\s+bm25s\s+([\d.]+) \[", log).group(1))
    assert inside == pytest.approx(outside, abs=5e-4), (inside, outside)
    assert (work / "out" / "hpbeir.qrels").read_text().split()[2].startswith("hp-")
    assert (work / "out" / "tiny-spans.jsonl").stat().st_size > 0
    assert (work / "out" / "tiny.qrels").stat().st_size > 0
    spans: list = []
    # Phoenix ingests in the background, in batches: poll its REST API until what the assertion
    # below needs has arrived (stopping at the first my_retriever span raced the rest of the batch).
    for _ in range(60):
        with urllib.request.urlopen(f"{phoenix}/v1/projects/default/spans?limit=1000", timeout=10) as r:
            spans = [sp for sp in json.loads(r.read())["data"] if sp["context"]["span_id"] not in before]
        if any(s["name"] == "my_retriever" for s in spans) and len(spans) > 20:
            break
        time.sleep(0.5)
    names = {s["name"] for s in spans}
    assert "my_retriever" in names and len(spans) > 20, f"Phoenix holds the exported runs: {sorted(names)[:20]}"
