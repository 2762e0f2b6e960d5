"""Progress off a terminal (issue 64): plain lines at most every 10 s, never carriage returns."""
import io
import subprocess
import sys

from retrieval.core import progress_bar
from retrieval.core.progress_bar import PlainLines, bar


def test_a_bar_writes_plain_lines_and_not_a_redraw_per_step(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    clock = [0.0]
    monkeypatch.setattr(progress_bar, "PLAIN_EVERY_S", 10.0)
    b = bar(total=1000, desc="bench", unit="run")
    # tqdm reads its own clock: steps 5 s apart, so at most one line every other step.
    b._time = lambda: clock[0]
    for _ in range(1000):
        clock[0] += 0.05   # 1,000 steps over 50 s
        b.update(1)
    b.close()
    out = err.getvalue()
    assert "\r" not in out
    lines = out.splitlines()
    assert 2 <= len(lines) <= 8, lines          # ~one line every 10 s of 50, not 1,000 redraws
    assert lines[-1].startswith("bench: 100%") and "1000/1000" in lines[-1]


def test_plain_lines_come_at_most_every_ten_seconds_and_the_last_always():
    buf, now = io.StringIO(), [0.0]
    w = PlainLines(buf, every_s=10, clock=lambda: now[0])
    for i, t in enumerate([0, 1, 2, 11, 12, 13]):
        now[0] = t
        w.write(f"\rbench: {i * 10:>3}%| {i}/10")   # a forced refresh every second
    now[0] = 14
    w.write("\rbench: 100%| 10/10")
    w.write("\rbench: 100%| 10/10")                 # close() draws the last state again
    w.write("\n")
    assert buf.getvalue().splitlines() == ["bench:   0%| 0/10", "bench:  30%| 3/10", "bench: 100%| 10/10"]


def test_bench_off_a_terminal_writes_a_small_log(small_kb, tmp_path):
    """`hoptrace bench` with stderr redirected to a file: lines, no carriage returns, a few KB."""
    log = tmp_path / "bench.log"
    with log.open("w") as fh:
        subprocess.run([sys.executable, "-m", "retrieval.cli", "bench", "--kb", str(small_kb), "--methods", "bm25",
                        "--llm", "none", "--no-store", "--repeat", "3"], stderr=fh, stdout=subprocess.DEVNULL,
                       check=True, timeout=300)
    text = log.read_text()
    assert "\r" not in text and "bench: 100%" in text
    assert len(text.encode()) < 4000, text
