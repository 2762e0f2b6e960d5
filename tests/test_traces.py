"""Trace store on a real SQLite file: runs saved whole, replayed exactly, concurrent writers."""
import json
import threading

import pytest

from retrieval.core.errors import InputError
from retrieval.methods import make_method
from retrieval.trace.gold import gold_fates
from traces.storage.store import TraceStore

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


@pytest.fixture()
def traces(tmp_path):
    return TraceStore(tmp_path / "traces.sqlite")


def test_a_stored_run_replays_exactly(traces, ctx, small_store):
    run = make_method("griever", ctx).run(Q, k=5)
    gold = next(q for q in small_store.questions() if q.text == Q).gold_passage_ids
    sid = traces.new_session("small", Q)
    rid = traces.save_run(sid, "small", run, gold, 5)
    again, info = traces.load_run(rid)
    assert again.to_dict() == run.to_dict()
    assert info["gold"] == gold and info["session_id"] == sid
    rows = traces.list_runs(method="griever")
    assert rows[0].id == rid and rows[0].recall == 1.0
    assert traces.session_runs(sid) == [rid]
    n_stages = traces.db.execute("SELECT count(*) FROM stages WHERE run_id=?", [rid]).fetchone()[0]
    assert n_stages == len(run.stages)
    exported = json.loads(traces.export([rid]))
    assert exported[0]["run"]["method"] == "griever"


def test_run_json_is_the_same_as_dumping_its_dict():
    import numpy as np

    from retrieval.trace.model import LLMCall, RankedPassage, RunResult, Stage

    st = Stage("s", "a stage", tokens_in=7, payload={"rows": [{"n": np.float32(0.5), "pair": ("a", 1)}], 3: {"x"},
                                                     "none": None},
               llm_calls=[LLMCall(model="m", prompt="p", completion="c", tokens_in=7, tokens_out=2, latency_ms=1.0)])
    run = RunResult("bm25", Q, ranked=[RankedPassage("p1", 0.9, "T")], stages=[st], answer="A")
    # numpy scalars as numbers (orjson), everything else unknown as its str, as json.dumps(default=str)
    as_json = json.dumps(run.to_dict(), default=lambda x: x.item() if isinstance(x, np.generic) else str(x))
    assert json.loads(run.to_json()) == json.loads(as_json)
    assert json.loads(run.to_json())["stages"][0]["payload"]["rows"][0]["n"] == 0.5
    assert json.loads(run.to_json())["tokens_in"] == 7


def test_a_stored_run_keeps_every_stage_and_call_row(traces, ctx):
    from retrieval.trace.model import LLMCall

    run = make_method("bm25", ctx).run(Q, k=3)
    run.stages[0].llm_calls.append(LLMCall(model="m", prompt="p", completion="c", tokens_in=5, tokens_out=1,
                                           latency_ms=1.0))
    run.stages[0].tokens_in = 5
    rid = traces.save_run(traces.new_session("small", Q), "small", run, ["x"], 3)
    row = traces.db.execute("SELECT method, k, recall, tokens_in FROM runs WHERE id=?", [rid]).fetchone()
    assert row == ("bm25", 3, 0.0, 5)
    calls = traces.db.execute("SELECT stage_seq, seq, model, tokens_in FROM llm_calls WHERE run_id=?", [rid]).fetchall()
    assert calls == [(0, 0, "m", 5)]
    assert traces.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_filters_and_missing_runs(traces, ctx):
    sid = traces.new_session("small")
    for name in ("bm25", "dense"):
        traces.save_run(sid, "small", make_method(name, ctx).run(Q, k=3))
    assert {r.method for r in traces.list_runs()} == {"bm25", "dense"}
    assert [r.method for r in traces.list_runs(method="dense")] == ["dense"]
    assert traces.list_runs(text="100%_no_such") == []
    assert len(traces.list_runs(text="Psychotherapy")) == 2
    with pytest.raises(InputError, match="no stored run"):
        traces.load_run("nope")


def test_concurrent_writers_lose_nothing(traces, ctx):
    run = make_method("bm25", ctx).run(Q, k=3)
    sids = [traces.new_session("small") for _ in range(8)]

    def write(sid):
        for _ in range(5):
            traces.save_run(sid, "small", run)

    threads = [threading.Thread(target=write, args=(s,)) for s in sids]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(traces.list_runs(limit=1000)) == 40
    assert all(len(traces.session_runs(s)) == 5 for s in sids)  # none mixed between sessions


def test_gold_fate_names_the_stage_where_a_gold_passage_was_lost(ctx, small_store):
    gold = next(q for q in small_store.questions() if q.text == Q).gold_passage_ids
    run = make_method("composed", ctx, c=2).run(Q, k=1)  # k=1 keeps only one of the two gold passages
    fates = {f.passage_id: f for f in gold_fates(run, gold)}
    found = [f for f in fates.values() if f.rank == 1]
    lost = [f for f in fates.values() if f.rank is None]
    assert len(found) == 1 and len(lost) == 1
    assert lost[0].last_seen in (None, "bm25_candidates", "dense_rerank")


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_a_damaged_trace_file_is_kept_aside_and_a_fresh_one_used(tmp_path, ctx, damage):
    from traces.storage.store import TraceStore, check_file

    path = tmp_path / "traces.sqlite"
    if damage == "not a database":
        path.write_bytes(b"this is not SQLite at all " * 400)
    else:
        store = TraceStore(path)
        sid = store.new_session("small", "q")
        run = make_method("bm25", ctx).run(Q, k=5)
        for _ in range(40):
            store.save_run(sid, "small", run)
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.db.conn.close()
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])        # a disk that filled mid-write
    before = path.read_bytes()
    assert check_file(path)
    store = TraceStore(path, recover=True)
    assert store.recovered and "kept as traces.sqlite.corrupt-" in store.recovered
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("traces.sqlite.corrupt-") and "-wal" not in p.name
            and "-shm" not in p.name]
    assert len(kept) == 1 and kept[0].read_bytes() == before       # nothing deleted
    sid = store.new_session("small", "q")
    store.save_run(sid, "small", make_method("bm25", ctx).run(Q, k=5))
    assert len(store.list_runs()) == 1 and check_file(path) is None
    assert TraceStore(path, recover=True).recovered is None          # a sound file is left alone


def test_a_used_stage_stores_its_fields_and_nothing_of_its_live_state():
    """Live progress, the tracer's listener and a subgraph's id index are not part of the record."""
    from dataclasses import fields

    from retrieval.trace.model import RunResult, Stage, Tracer

    tracer = Tracer(on_progress=lambda st: None)
    with tracer.stage("s", "a stage") as st:
        st.report(llm="writing", tokens_out=3)
        st.graph().node("p1", "passage", "P")
        st.graph().node("p1", "passage", "P")
    assert st.progress["tokens_out"] == 3 and len(st.subgraph.nodes) == 1
    stored = json.loads(RunResult("bm25", Q, stages=tracer.stages).to_json())["stages"][0]
    assert set(stored) == {f.name for f in fields(Stage)}
    assert set(stored["subgraph"]) == {"nodes", "edges"}
    # and a stage written by another version, with a key this one lacks, still loads
    stored["from_the_future"] = 1
    assert RunResult.from_dict({"method": "bm25", "question": Q, "stages": [stored]}).stages[0].name == "s"
