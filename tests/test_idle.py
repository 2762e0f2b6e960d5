"""True latencies: every run names the machine it ran on, and a recording checks that the machine
was idle before and while it ran (retrieval/core/idle.py). Load is simulated by a busy process
outside this process's tree, as a second benchmark or a test suite beside a recording would be."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest
from conftest import SPIN
from llm_double import scripted_llm

from retrieval import showcase
from retrieval.core import cpu, idle
from retrieval.trace.html import column_html, machine_text
from retrieval.trace.model import RunResult


@pytest.fixture(autouse=True)
def _no_retake_pause(monkeypatch):
    """Retakes without their pause: a retake's effect is tested with scripted readings below, and
    here the real calibration beside a spinning process would wait 9 s for nothing."""
    monkeypatch.setattr(idle, "RETAKE_PAUSE_S", 0.0)


ENTS = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})


def test_the_verdict_names_each_threshold_crossed():
    quiet = idle.judge(0.1, 60.0, 61.0, [0.01, 0.02], cores=2)
    assert quiet.verdict == "idle" and quiet.reasons == []
    assert quiet.label == f"recorded on {cpu.describe()}, idle"
    loaded = idle.judge(1.9, 60.0, 90.0, [0.02, 0.45], cores=2)
    assert loaded.verdict == "under load"
    assert [r.split()[0] for r in loaded.reasons] == ["load", "other", "the"], loaded.reasons
    assert "45%" in loaded.reasons[1] and "1.50x" in loaded.reasons[2]


@pytest.mark.alone   # a retake is skipped when others' CPU is already high, as beside the suite's other worker
def test_a_slow_calibration_after_is_retaken_and_only_a_lasting_one_counts(monkeypatch):
    """A scripted calibration (a test double of the timed workload): a single slow reading after a
    block is retaken and the fastest counts; one that stays slow through every retake is load."""
    monkeypatch.setattr(idle, "SETTLE_S", 0.0)
    monkeypatch.setattr(idle, "settle_own", lambda *a, **k: 0.0)   # tested on its own below
    for readings, verdict, after in (([20.0, 36.0, 21.0], "idle", 21.0),
                                     ([20.0, 36.0, 35.0, 34.0, 33.0], "under load", 33.0)):
        it = iter(readings)
        monkeypatch.setattr(idle, "calibrate", lambda it=it: next(it))
        with idle.Watch(interval_s=0.1, check_load=False) as w:
            pass
        assert w.conditions.calibration_ms == (20.0, after)
        assert w.conditions.verdict == verdict, w.conditions.reasons
        assert next(it, None) is None   # every retake was taken, and no more
    # Against the machine's reference (its earlier sittings): a slow first reading before is retaken;
    # a host slower in every retake is named, as two same-named EPYCs at 34 and 67 ms were not.
    for readings, verdict, before in (([40.0, 21.0, 21.0], "idle", 21.0),
                                      ([40.0, 39.0, 38.0, 37.0, 37.0], "under load", 37.0)):
        it = iter(readings)
        monkeypatch.setattr(idle, "calibrate", lambda it=it: next(it))
        with idle.Watch(interval_s=0.1, check_load=False, reference_ms=20.0) as w:
            pass
        assert w.conditions.calibration_ms == (before, before) and w.conditions.verdict == verdict
        assert next(it, None) is None
    assert "1.85x this machine's reference of 20.0 ms" in w.conditions.reasons[0], w.conditions.reasons
    sittings = [{"machine": "A", "calibration_ms": [[33.6, 33.3], [44.0, 33.5]]},
                {"machine": "A", "calibration_ms": [[66.8, 34.0], [43.3, 51.5]]},
                {"machine": "B", "calibration_ms": [[10.0, 11.0]]}]
    assert idle.machine_reference_ms(sittings, "A") == 38.65 and idle.machine_reference_ms(sittings, "C") is None


@pytest.mark.alone   # needs our own tree quiet: in a worker, an earlier test's server or threads may still work
def test_a_calibration_waits_for_our_own_busy_child_to_finish():
    """The embedded model's server restarting before a unit is our own child: not others' load, but
    a calibration timed beside it read 2x. settle_own waits it out, and returns at once when quiet."""
    quiet = idle.settle_own(max_s=5.0)
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=1.5)])
    try:
        time.sleep(0.2)
        waited = idle.settle_own(max_s=10.0)
    finally:
        child.wait(timeout=10)
    assert quiet < 1.0 and 1.0 <= waited < 5.0, (quiet, waited)


@pytest.mark.alone
def test_a_busy_process_outside_ours_is_seen_and_our_own_children_are_not(busy, monkeypatch):
    monkeypatch.setattr(idle, "SETTLE_S", 0.0)   # the verdict reads the samples; no server to spin down
    with idle.Watch(interval_s=0.5) as w:
        time.sleep(1.6)
    assert w.conditions.verdict == "under load" and w.conditions.others_cpu_max > idle.OTHERS_MAX
    assert any("other processes" in r for r in w.conditions.reasons)


@pytest.mark.alone
def test_our_own_work_does_not_count_as_load(monkeypatch):
    """A recording's own threads and children (the model's server) keep the cores busy: idle."""
    monkeypatch.setattr(idle, "SETTLE_S", 0.0)   # the samples are the subject, not the pause after
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=1.5)])
    try:
        table = idle._proc_table()
        assert child.pid in idle._own_tree(table)
        with idle.Watch(interval_s=0.5) as w:
            time.sleep(1.1)
    finally:
        child.wait()
    # Our child spun a whole core throughout; anything it was counted for would be >= 50 % here.
    assert w.samples and max(w.samples) < 0.45, w.samples


@pytest.mark.alone
def test_a_recording_on_a_loaded_machine_is_refused_or_marked(ctx, small_kb, tmp_path, busy, capsys, monkeypatch):
    from retrieval.cli import main

    # No pause for a model server to spin down (there is none here): 2 s of the suite's serial part.
    monkeypatch.setattr(idle, "SETTLE_S", 0.0)

    argv = ["record-showcase", "--kb", str(small_kb), "--methods", "composed", "--question-count", "1",
            "--out", str(tmp_path / "refused.json.gz")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not idle" in err and "other processes took up to" in err and "--allow-load" in err
    assert not (tmp_path / "refused.json.gz").exists()
    # Allowed, the recording is made and every run and the page say it was under load.
    llm, _ = scripted_llm({"query entities": [ENTS]})
    out = showcase.record(dataclasses.replace(ctx, llm=llm), "small", showcase.choose_questions(
        ctx.store.questions(), 1), ["composed"], k=5, out=tmp_path / "loaded.json.gz")
    sc = showcase.load(out)
    assert sc.conditions["composed"]["verdict"] == "under load"
    run = sc.items[0].runs["composed"]
    assert run.load == "under load" and run.machine == cpu.describe()
    html = column_html("composed", run.stages, run, set(sc.items[0].gold), running=False)
    assert f"recorded on {cpu.describe()}, under load" in html


def test_every_run_names_its_machine_and_a_run_read_back_keeps_what_it_had(ctx, tmp_path):
    from retrieval.methods import make_method
    from traces.storage.store import TraceStore

    run = make_method("bm25", ctx).run("Who published Journal of Mathematical Physics?", k=3)
    assert run.machine == cpu.describe() and run.load == ""
    assert machine_text(run) == f"on {cpu.describe()}"
    store = TraceStore(tmp_path / "traces.sqlite")   # a real SQLite file, read back as the Traces tab does
    again, _ = store.load_run(store.save_run(store.new_session("small"), "small", run))
    assert again.machine == run.machine
    old = run.to_dict()
    del old["machine"]   # a run stored before runs named their machine
    unknown = RunResult.from_dict(old)
    assert unknown.machine == "" and machine_text(unknown) == "on a machine not recorded"
    assert machine_text(dataclasses.replace(run, load="idle")) == f"recorded on {cpu.describe()}, idle"
    assert cpu.describe().count(" · ") == 2 and "cores" in cpu.describe()


def test_a_grid_names_a_shared_machine_once_and_a_different_one_per_column(ctx):
    from retrieval.methods import make_method
    from ui.tabs.shared import _stored_grid

    q = "Who published Journal of Mathematical Physics?"
    a, b = (make_method(m, ctx).run(q, k=3) for m in ("bm25", "dense"))
    same = _stored_grid({"bm25": a, "dense": b}, set())
    assert same.count("ht-machine") == 1 and f"Times on {cpu.describe()}" in same
    b.machine = "<img src=x onerror=alert(1)> · 64 cores · avx512f"   # another machine, and hostile text
    apart = _stored_grid({"bm25": a, "dense": b}, set())
    assert "grid-machine" not in apart and apart.count("class='ht-meta ht-machine'") == 2
    assert "<img" not in apart and "&lt;img src=x onerror=alert(1)&gt; · 64 cores" in apart
    # Three runs, two on one machine: it is named once above the grid, and only the third's column names its own.
    c = make_method("composed", ctx).run(q, k=3)
    most = _stored_grid({"bm25": a, "dense": b, "composed": c}, set())
    assert f"Times on {cpu.describe()}" in most and "grid-machine" in most
    assert most.count("class='ht-meta ht-machine'") == 2   # the grid's line and the other machine's column
    assert most.count("64 cores") == 1


def test_the_showcase_banner_names_the_machine_most_methods_were_recorded_on():
    from retrieval.showcase import Showcase

    here, there = {"machine": "EPYC avx2", "verdict": "idle"}, {"machine": "EPYC avx512", "verdict": "idle"}
    sc = Showcase("demo", "2026-12-06", "m", "local", ["gear", "sag", "grasp", "griever"], [],
                  conditions={"gear": here, "sag": here, "grasp": here, "griever": there})
    assert sc.where == ", on EPYC avx2, idle; griever elsewhere, as its column says"
    sc.conditions = {"gear": here, "griever": there}
    assert sc.where == "; methods recorded on different machines or loads: each column names its own"
