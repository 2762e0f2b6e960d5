"""Public mode: visitors kept apart in the trace store, and every cap refusing with its limit named."""
from __future__ import annotations

import json
import sqlite3

import pytest

from retrieval.core.errors import InputError
from retrieval.trace.model import RunResult
from traces.storage.store import TraceStore
from ui.public import LimitError, PublicLimits, RateLimiter


def _run(question: str) -> RunResult:
    return RunResult(method="bm25", question=question)


def test_each_visitor_lists_and_exports_only_their_own_runs(tmp_path):
    traces = TraceStore(tmp_path / "traces.sqlite")
    ann, bob = "a" * 32, "b" * 32
    sa = traces.new_session("demo", "ann's question", owner=ann)
    sb = traces.new_session("demo", "bob's question", owner=bob)
    ra = traces.save_run(sa, "demo", _run("ann's question"))
    rb = traces.save_run(sb, "demo", _run("bob's question"))

    assert [r.id for r in traces.list_runs(owner=ann)] == [ra]
    assert [r.id for r in traces.list_runs(owner=bob)] == [rb]
    assert traces.list_runs(owner="") == []  # no id: nobody's runs
    assert {r.id for r in traces.list_runs()} == {ra, rb}  # a local app lists all

    assert json.loads(traces.export([ra], owner=ann))[0]["id"] == ra
    with pytest.raises(InputError, match="among this visitor's sessions"):
        traces.export([rb], owner=ann)


def test_a_session_link_is_unguessable_and_opens_for_anyone(tmp_path):
    traces = TraceStore(tmp_path / "traces.sqlite")
    sids = {traces.new_session("demo", owner="a" * 32) for _ in range(50)}
    assert len(sids) == 50 and all(len(s) == 32 and int(s, 16) >= 0 for s in sids)
    sid = next(iter(sids))
    assert traces.session(sid)["id"] == sid  # read-only opening needs only the id


def test_an_old_trace_file_gains_the_owner_column_and_keeps_its_runs(tmp_path):
    path = tmp_path / "traces.sqlite"
    traces = TraceStore(path)
    rid = traces.save_run(traces.new_session("demo", "q"), "demo", _run("q"))
    db = sqlite3.connect(path)  # rewind the schema to before public mode
    db.executescript("CREATE TABLE s2 AS SELECT id, created_at, kb, question, kind FROM sessions;"
                     "DROP TABLE sessions; ALTER TABLE s2 RENAME TO sessions;")
    db.commit()
    db.close()

    reopened = TraceStore(path)
    assert [r.id for r in reopened.list_runs()] == [rid]
    assert reopened.list_runs(owner="x" * 32) == []
    assert "owner" in reopened.db["sessions"].columns_dict


def test_caps_name_their_limits_in_public_mode_only():
    pub, local = PublicLimits.from_env(public=True), PublicLimits.from_env(public=False)
    llm = {"gear", "sag", "grasp"}.__contains__

    with pytest.raises(LimitError, match=r"at most 2 LLM methods a request \(you picked 3: gear, sag, grasp\)"):
        pub.check_methods(["bm25", "gear", "sag", "grasp"], llm)
    pub.check_methods(["bm25", "dense", "gear", "sag"], llm)
    with pytest.raises(LimitError, match="at most 20 questions a run \\(asked for 100\\)"):
        pub.check_bench(100)
    with pytest.raises(LimitError, match="LLM extraction is off on this public demo"):
        pub.check_extractor("llm")
    pub.check_extractor("rules")
    assert pub.passage_cap() == 2000 and pub.upload_cap() == "20mb" and not pub.show_paths

    local.check_methods(["gear", "sag", "grasp", "syncge"], llm)
    local.check_bench(100)
    local.check_extractor("llm")
    assert local.passage_cap() is None and local.upload_cap() is None and local.show_paths


def test_the_environment_turns_public_mode_on(monkeypatch):
    monkeypatch.setenv("HOPTRACE_PUBLIC", "1")
    assert PublicLimits.from_env().enabled
    monkeypatch.setenv("HOPTRACE_PUBLIC", "0")
    assert not PublicLimits.from_env().enabled


def test_the_rate_limit_is_per_visitor_and_slides():
    rate = RateLimiter(per_minute=3)
    for t in (0, 1, 2):
        rate.check("ann", now=t)
    with pytest.raises(LimitError, match=r"at most 3 requests a minute from one visitor; try again in 58 s"):
        rate.check("ann", now=2)
    rate.check("bob", now=2)  # another visitor is not held up
    rate.check("ann", now=60.5)  # the first request left the window


def test_a_corpus_over_the_passage_cap_is_refused_before_anything_is_written(tmp_path):
    from retrieval.kb.presets import build_from_files

    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": f"T{i}", "text": f"Passage number {i}."} for i in range(5)]))
    out = tmp_path / "kb.sqlite"
    with pytest.raises(InputError, match="the corpus has 5 passages; this server builds at most 3"):
        build_from_files(out, corpus, extractor="rules", max_passages=3, progress=False)
    assert not out.exists()


def test_a_kb_a_visitor_builds_is_theirs_alone_in_public_mode(small_kb, small_corpus, tmp_path):
    """Listed for its builder only; asking on it as someone else answers as if it did not exist."""
    import shutil

    from retrieval.core.paths import kb_dir
    from retrieval.llm.settings import LLMSettings
    from ui.ask import run_side_by_side
    from ui.state import AppState

    shutil.copyfile(small_kb, kb_dir() / "annskb.sqlite")
    shutil.copyfile(small_kb, kb_dir() / "sharedkb.sqlite")      # built from the command line: no owner
    ann, bob = "a" * 32, "b" * 32
    public = AppState(trace_path=tmp_path / "traces.sqlite", llm_settings=LLMSettings.parse("none"),
                      public=PublicLimits(enabled=True))
    public.kb_owners.claim("annskb", ann)

    assert "annskb" in public.kb_names(ann) and "sharedkb" in public.kb_names(ann)
    assert "annskb" not in public.kb_names(bob) and "sharedkb" in public.kb_names(bob)
    assert "annskb" not in public.kb_names()                     # the page before it knows the visitor
    question = small_corpus[1][0].text
    with pytest.raises(LimitError, match="no KB named 'annskb'"):
        next(run_side_by_side(public, "annskb", question, ["bm25"], 5, owner=bob))
    assert list(run_side_by_side(public, "annskb", question, ["bm25"], 5, owner=ann))[-1].done

    local = AppState(trace_path=tmp_path / "local.sqlite", llm_settings=LLMSettings.parse("none"),
                     public=PublicLimits())
    assert "annskb" in local.kb_names()                          # a local app lists every KB
    local.check_kb("annskb", bob)


def test_a_damaged_or_unfinished_kb_is_listed_with_its_reason_and_not_served(small_kb, tmp_path):
    """A Space restarted mid-build or with a damaged file keeps serving the sound KBs; the list
    says what is wrong with the others, naming files, never folders."""
    import shutil

    from retrieval.core.paths import kb_dir
    from retrieval.llm.settings import LLMSettings
    from ui.state import AppState

    made = [kb_dir() / "soundkb.sqlite", kb_dir() / "brokenkb.sqlite", kb_dir() / "halfkb.sqlite.building"]
    try:
        shutil.copyfile(small_kb, made[0])
        data = small_kb.read_bytes()
        made[1].write_bytes(data[:4096] + b"\0" * (len(data) // 3))     # a file cut short mid-write
        shutil.copyfile(small_kb, made[2])                                # a build killed before its rename
        state = AppState(trace_path=tmp_path / "traces.sqlite", llm_settings=LLMSettings.parse("none"),
                         public=PublicLimits(enabled=True))
        choices = dict((value, label) for label, value in state.kb_choices("v" * 32))
        assert choices["soundkb"] == "soundkb"
        assert choices["brokenkb"].startswith("brokenkb — not served: ")
        assert "build did not finish" in choices["halfkb"]
        assert all(str(kb_dir()) not in label for label in choices.values())
        for name in ("brokenkb", "halfkb"):
            with pytest.raises(InputError, match=f"KB '{name}' is not served"):
                state.kb(name)
        assert state.kb("soundkb").questions
    finally:
        for p in made:
            p.unlink(missing_ok=True)
