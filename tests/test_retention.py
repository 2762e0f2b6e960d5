"""A public demo's storage stays bounded: traces pruned by age and by size, oldest sessions
first, newest kept, and a link to a pruned session says it expired. A real SQLite file."""
from __future__ import annotations

import time

import pytest

from retrieval.core.errors import ConfigError, InputError
from retrieval.methods import make_method
from traces.storage.experiments import Experiments
from traces.storage.retention import Pruner, Retention, prune, used_bytes
from traces.storage.store import TraceStore

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def _fill(store: TraceStore, ctx, n_sessions: int, runs_each: int = 3) -> list[str]:
    run = make_method("griever", ctx).run(Q, k=5)
    sids = []
    for _ in range(n_sessions):
        sid = store.new_session("small", Q)
        for _ in range(runs_each):
            store.save_run(sid, "small", run)
        sids.append(sid)
    return sids


def _age(store: TraceStore, sid: str, days: float) -> None:
    with store.transaction() as con:
        con.execute("UPDATE sessions SET created_at = ? WHERE id = ?", [time.time() - days * 86400, sid])


def test_sessions_past_the_age_bound_go_with_their_runs_and_experiments(tmp_path, ctx):
    store = TraceStore(tmp_path / "traces.sqlite")
    sids = _fill(store, ctx, 4)
    exps = Experiments(store)
    exp = exps.start("app", "small", "fp", "none", {"questions": []})
    _age(store, exp.session_id, 9)
    for sid, days in zip(sids, (10, 8, 1, 0)):
        _age(store, sid, days)
    report = prune(store, Retention(max_age_days=7, max_mb=1000))
    assert (report.sessions, report.runs, report.experiments) == (3, 6, 1)
    assert [store.session(s) is not None for s in sids] == [False, False, True, True]
    assert store.was_pruned(sids[0]) and store.was_pruned(exp.id) and not store.was_pruned(sids[3])
    assert len(store.list_runs()) == 6
    left = store.db.execute("SELECT count(*) FROM stages WHERE run_id NOT IN (SELECT id FROM runs)").fetchone()[0]
    assert left == 0                                  # no orphan stage rows
    with pytest.raises(InputError):
        exps.get(exp.id)


def test_the_size_bound_drops_the_oldest_sessions_and_keeps_the_newest(tmp_path, ctx):
    store = TraceStore(tmp_path / "traces.sqlite")
    sids = _fill(store, ctx, 30)
    for i, sid in enumerate(sids):
        _age(store, sid, (30 - i) / 100)              # sids[0] oldest
    full = used_bytes(store)
    bound = full * 0.4 / 1e6
    report = prune(store, Retention(max_age_days=7, max_mb=bound), batch=2)
    assert used_bytes(store) <= bound * 1e6 and report.used_mb_after <= bound
    kept = [s for s in sids if store.session(s) is not None]
    assert kept and kept == sids[-len(kept):]          # a suffix: the newest
    assert all(store.was_pruned(s) for s in sids[: len(sids) - len(kept)])


def test_the_pruner_runs_in_the_background_and_reports(tmp_path, ctx):
    store = TraceStore(tmp_path / "traces.sqlite")
    sid = _fill(store, ctx, 1)[0]
    _age(store, sid, 30)
    pruner = Pruner(store, Retention(max_age_days=7, max_mb=1000, every_s=0.05)).start()
    try:
        deadline = time.time() + 10
        while store.session(sid) is not None and time.time() < deadline:
            time.sleep(0.05)
    finally:
        pruner.stop()
    assert store.session(sid) is None and pruner.error is None and pruner.last is not None


def test_retention_settings_come_from_the_environment_and_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("HOPTRACE_TRACES_MAX_DAYS", "2")
    monkeypatch.setenv("HOPTRACE_TRACES_MAX_MB", "50")
    assert Retention.from_env() == Retention(max_age_days=2, max_mb=50)
    monkeypatch.setenv("HOPTRACE_TRACES_MAX_MB", "lots")
    with pytest.raises(ConfigError, match="HOPTRACE_TRACES_MAX_MB must be a number"):
        Retention.from_env()


def test_a_link_to_a_pruned_session_says_it_expired():
    from ui.tabs.shared import _expired

    assert "has expired" in _expired("comparison")


def test_over_the_bound_it_prunes_to_the_low_water_mark_and_stored_runs_wake_it(tmp_path, ctx):
    store = TraceStore(tmp_path / "traces.sqlite")
    _fill(store, ctx, 30)
    bound = used_bytes(store) * 0.8 / 1e6
    prune(store, Retention(max_age_days=7, max_mb=bound, low_water=0.5))
    assert used_bytes(store) <= bound * 0.5 * 1e6  # headroom for what comes before the next pass
    # a pass due in an hour runs after `wake_after_runs` stored runs instead
    pruner = Pruner(store, Retention(max_age_days=7, max_mb=bound * 0.5, every_s=3600, wake_after_runs=5)).start()
    try:
        deadline = time.time() + 10
        while pruner.last is None and time.time() < deadline:  # the first pass, at start
            time.sleep(0.05)
        first = pruner.last
        assert first is not None
        _fill(store, ctx, 3)              # each session stores runs: past 5 runs, the pruner wakes
        deadline = time.time() + 10
        while pruner.last is first and time.time() < deadline:
            time.sleep(0.05)
    finally:
        pruner.stop()
    assert pruner.last is not first and pruner.error is None
