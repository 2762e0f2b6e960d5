"""Experiments: every benchmarked run kept in a real SQLite trace file, resumable, comparable."""
from __future__ import annotations

import json
import sqlite3

import pytest

from retrieval.bench.runner import run_bench
from retrieval.core.errors import HopTraceError, InputError
from traces.stats.compare import compare, render_text, write_html
from traces.storage.experiments import Experiments, check_resume, kb_fingerprint, question_record
from traces.storage.store import TraceStore

METHODS = ["bm25", "dense", "composed"]
KS = (2, 5)


def _start(exps: Experiments, ctx, questions, owner: str = ""):
    spec = {"methods": {m: {"method": m} for m in METHODS}, "ks": list(KS), "protocol": "per-k",
            "questions": [question_record(q) for q in questions], "args": {"kb": "small", "methods": ",".join(METHODS)}}
    return exps.start("bench", "small", kb_fingerprint(ctx.store), "none", spec, owner=owner)


class Killed(Exception):
    pass


def test_a_benchmark_keeps_every_run_and_a_resumed_one_equals_an_uninterrupted_one(ctx, tmp_path):
    questions = ctx.store.questions()
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    whole = _start(exps, ctx, questions)
    full = run_bench(ctx, "small", questions, METHODS, ks=KS, progress=False, sink=exps.sink(whole))
    exps.finish(whole, full.to_json(include_per_question=False))
    # bm25 and dense cut one run at k = 5; composed runs at 2 and at 5
    expected = len(questions) * (1 + 1 + 2)
    assert len(exps.entries(whole)) == expected

    # The same benchmark killed after 5 runs ...
    cut = _start(exps, ctx, questions)
    record, seen = exps.sink(cut), []

    def dies_after_five(q, label, k, run, row):
        if len(seen) == 5:
            raise Killed()
        record(q, label, k, run, row)
        seen.append((q.id, label, k))

    with pytest.raises(Killed):
        run_bench(ctx, "small", questions, METHODS, ks=KS, progress=False, sink=dies_after_five)
    kept = {(e["question_id"], e["method"], e["k"]): e["run_id"] for e in exps.entries(cut)}
    assert len(kept) == 5
    # ... and resumed: nothing that finished runs again, nothing doubles
    again = []
    done = exps.finished(cut)
    resumed = run_bench(ctx, "small", questions, METHODS, ks=KS, progress=False, done=done,
                        sink=lambda q, label, k, run, row: (again.append((q.id, label, k)),
                                                             record(q, label, k, run, row)))
    assert not set(again) & set(kept)
    assert len(again) == expected - 5
    entries = exps.entries(cut)
    assert len(entries) == expected == len({(e["question_id"], e["method"], e["k"]) for e in entries})
    assert {(e["question_id"], e["method"], e["k"]): e["run_id"] for e in entries if
            (e["question_id"], e["method"], e["k"]) in kept} == kept
    # run by run, the resumed experiment equals the uninterrupted one
    def ranked(exp):
        return {(e["question_id"], e["method"], e["k"]): e["row"]["ranked"] for e in exps.entries(exp)}

    assert ranked(cut) == ranked(whole)
    for m in METHODS:
        assert {k: v for k, v in resumed.methods[m].items() if "recall" in k or "hit" in k} == \
               {k: v for k, v in full.methods[m].items() if "recall" in k or "hit" in k}
    # a second record of a finished run is refused by the key, and the file is unchanged
    q = questions[0]
    e0 = exps.entries(cut)[0]
    run, _ = exps.traces.load_run(e0["run_id"])
    from retrieval.bench.runner import QuestionResult
    with pytest.raises(sqlite3.IntegrityError):
        exps.record(cut, next(x for x in questions if x.id == e0["question_id"]), e0["method"], e0["k"], run,
                    QuestionResult(**e0["row"]))
    assert len(exps.entries(cut)) == expected
    assert q is not None

    # every stored trace opens as a run
    for e in exps.entries(whole)[:6]:
        run, info = exps.traces.load_run(e["run_id"])
        assert run.ranked_ids() == e["row"]["ranked"] and info["k"] == e["k"]


def test_compare_reads_an_experiment_and_names_bad_input(ctx, tmp_path):
    questions = ctx.store.questions()
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    exp = _start(exps, ctx, questions)
    res = run_bench(ctx, "small", questions, METHODS, ks=KS, progress=False, sink=exps.sink(exp))
    exps.finish(exp, res.to_json(include_per_question=False))
    c = compare(exps, exps.get(exp.id[:8]), "recall@5")
    assert c.methods == METHODS and len(c.question_ids) == len(questions)
    assert c.means["bm25"].mean == pytest.approx(res.methods["bm25"]["recall@5"], abs=1e-4)
    assert len(c.pairs) == 3 and all(p.p_adjusted is not None for p in c.pairs)
    assert {f.method for f in c.funnels} == set(METHODS) and all(f.k == 5 for f in c.funnels)
    assert all(set(r["runs"]) == set(METHODS) and all(r["runs"].values()) for r in c.rows)
    text = render_text(c)
    assert "recall@5 [95 % CI]" in text and "where the gold is lost" in text and "Holm" in text
    out = tmp_path / "c.html"
    write_html(c, out)
    assert "plotly" in out.read_text()[:5_000_000] and "Per question" in out.read_text()
    assert json.loads(json.dumps(c.to_json(), default=str))["correction"] == "holm"

    before = exps.traces.path.read_bytes()
    for bad, message in (("recall@50", "up to k = 5"), ("em", "no answers"), ("map@5", "unknown metric"),
                         ("ndcg@5", "has no judgments yet")):
        with pytest.raises(HopTraceError, match=message):
            compare(exps, exp, bad)
    with pytest.raises(InputError, match="not in experiment"):
        compare(exps, exp, "recall@5", ["griever"])
    with pytest.raises(InputError, match="no experiment with id"):
        exps.get("0123456789ab")
    with pytest.raises(InputError, match="no experiment with id"):
        exps.get("not-an-id")
    assert exps.traces.path.read_bytes() == before


def test_resume_refuses_other_arguments_and_finished_experiments(ctx, tmp_path):
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    exp = _start(exps, ctx, ctx.store.questions())
    check_resume(exp, {"kb": None, "methods": "bm25,dense,composed"})
    with pytest.raises(InputError, match="methods: original 'bm25,dense,composed', now 'bm25'"):
        check_resume(exp, {"methods": "bm25"})
    exps.finish(exp, {})
    with pytest.raises(InputError, match="finished already"):
        check_resume(exps.get(exp.id), {})


def test_public_mode_keeps_experiments_apart(ctx, tmp_path):
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    mine = _start(exps, ctx, ctx.store.questions()[:1], owner="visitor-a")
    theirs = _start(exps, ctx, ctx.store.questions()[:1], owner="visitor-b")
    assert [e.id for e in exps.list(owner="visitor-a")] == [mine.id]
    assert exps.list(owner="") == []
    assert {e.id for e in exps.list()} == {mine.id, theirs.id}        # local mode: everyone's
    # a link is a capability: the whole id opens it, a prefix does not in public mode
    assert exps.get(theirs.id, owner="visitor-a").id == theirs.id
    with pytest.raises(InputError):
        exps.get(theirs.id[:10], owner="visitor-a")


def test_cli_bench_stores_an_experiment_and_compare_prints_it(small_kb, tmp_path, monkeypatch, capsys):
    from retrieval.cli import main

    monkeypatch.setenv("HOPTRACE_TRACES", str(tmp_path / "cli.sqlite"))
    assert main(["bench", "--kb", str(small_kb), "--methods", "bm25,dense", "--ks", "2,5", "--llm", "none",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    exp_id = out.split("experiment ")[1].split(":")[0]
    assert "runs stored" in out and len(exp_id) == 32
    assert main(["experiments", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["id"] == exp_id and listed[0]["status"] == "done"
    assert main(["compare", exp_id[:10], "--metric", "recall@2"]) == 0
    out = capsys.readouterr().out
    assert "bm25 vs dense" in out and " · on " in out  # the CPU it ran on, beside the code version
    # a finished experiment does not resume; an unknown one is named
    assert main(["bench", "--resume", exp_id]) == 2
    assert "finished already" in capsys.readouterr().err
    assert main(["compare", "ffffffffffff", "--metric", "recall@2"]) == 2
    assert "no experiment with id 'ffffffffffff'" in capsys.readouterr().err


def test_an_experiment_records_its_machine_and_a_resume_elsewhere_says_so(small_kb, tmp_path, monkeypatch, capsys):
    import sqlite3

    from retrieval.cli import main
    from retrieval.core import cpu

    here = cpu.describe()
    assert "cores" in here
    monkeypatch.setenv("HOPTRACE_TRACES", str(tmp_path / "m.sqlite"))
    assert main(["bench", "--kb", str(small_kb), "--methods", "bm25", "--ks", "2", "--llm", "none", "--quiet"]) == 0
    exp_id = capsys.readouterr().out.split("experiment ")[1].split(":")[0]
    assert main(["experiments"]) == 0
    assert f"· on {here}" in capsys.readouterr().out
    # as if it had been cut short on another machine: its last run missing, still running
    with sqlite3.connect(tmp_path / "m.sqlite") as con:
        spec = json.loads(con.execute("select spec from experiments where id=?", (exp_id,)).fetchone()[0])
        assert spec["machine"] == here
        spec["machine"] = "Other CPU · 64 cores · avx512f"
        con.execute("update experiments set spec=?, status='running', finished_at=null where id=?",
                    (json.dumps(spec), exp_id))
        con.execute("delete from experiment_runs where experiment_id=? and seq=(select max(seq) from experiment_runs "
                    "where experiment_id=?)", (exp_id, exp_id))
    assert main(["bench", "--resume", exp_id, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert (f"note: the experiment started on Other CPU · 64 cores · avx512f; its remaining runs are made on "
            f"{here}") in err


def test_the_kb_fingerprint_is_what_the_kb_holds_not_how_long_its_build_took():
    """The same corpus built again on a fresh machine took other seconds: a resumed recording
    refused it as a changed KB. What it holds still counts."""
    from types import SimpleNamespace

    def store(meta, counts=None):
        info = SimpleNamespace(counts=counts or {"passages": 3}, meta=meta, embed_model="m", embed_dim=4)
        return SimpleNamespace(info=lambda: info)

    held = {"name": "demo", "extractors": {"triples": ["rules@2"]}}
    first = kb_fingerprint(store({**held, "embed_device": "cpu (2 cores)", "last_build": {"seconds": 232.9}}))
    again = kb_fingerprint(store({**held, "embed_device": "cpu (4 cores)", "last_build": {"seconds": 181.0}}))
    assert first == again
    assert kb_fingerprint(store({**held, "extractors": {"triples": ["llm@1"]}})) != first
    assert kb_fingerprint(store(held, {"passages": 4})) != first
