"""The Benchmark tab's experiment views (ui/evidence.py), without a browser: what a visitor may
list and open, the pair's verdict, the per-question rows and the two stored runs of a row."""
from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.bench.runner import run_bench
from retrieval.core.errors import HopTraceError, InputError
from traces.storage.experiments import Experiments, kb_fingerprint, question_record
from traces.storage.store import TraceStore
from ui import evidence


@pytest.fixture()
def experiment(ctx, tmp_path):
    exps = Experiments(TraceStore(tmp_path / "traces.sqlite"))
    qs = ctx.store.questions()
    spec = {"methods": {m: {"method": m} for m in ("bm25", "griever")}, "ks": [5, 10], "protocol": "per-k",
            "questions": [question_record(q) for q in qs], "args": {}}
    exp = exps.start("app", "small", kb_fingerprint(ctx.store), "none", spec, owner="ann")
    res = run_bench(ctx, "small", qs, ["bm25", "griever"], ks=(5, 10), progress=False, sink=exps.sink(exp))
    exps.finish(exp, res.to_json(include_per_question=False))
    return exps, exps.get(exp.id)


def test_a_visitor_lists_only_their_experiments_but_a_whole_id_opens(experiment):
    exps, exp = experiment
    assert evidence.choices(exps, "ann") == [(exp.describe(), exp.id)]
    assert evidence.choices(exps, "bob") == []
    assert evidence.find(exps, exp.id, "bob").id == exp.id          # a link is a capability
    with pytest.raises(InputError):
        evidence.find(exps, exp.id[:8], "bob")                        # a guessable prefix is not
    with pytest.raises(InputError, match="pick an experiment"):
        evidence.find(exps, "", None)


def test_the_view_compares_the_pair_and_lists_the_questions_largest_difference_first(experiment):
    exps, exp = experiment
    cache = evidence.ComparisonCache()
    v = evidence.view(cache, exps, exp, "recall@5", "bm25", "griever")
    assert (v.a, v.b) == ("bm25", "griever")
    assert "A = bm25" in v.summary_html and "paired randomization p" in v.summary_html
    assert f"?experiment={exp.id}" in v.summary_html
    assert len(v.rows) == len(exp.questions)
    diffs = [abs(r[5]) for r in v.rows]
    assert diffs == sorted(diffs, reverse=True)
    assert all(r[5] == pytest.approx(r[3] - r[4], abs=1e-3) for r in v.rows)
    # the same method twice falls back to another; the cache serves the second view
    assert evidence.view(cache, exps, exp, "recall@5", "bm25", "bm25").b == "griever"
    assert len(cache._items) == 1
    # The view's download: one folder a process, one file per experiment, metric and owner, written
    # whole and renamed into place (a folder per click once piled up under /tmp).
    a, b = (Path(evidence.report_file(cache, exps, exp, "recall@5", who)) for who in ("ann", "bob"))
    again = Path(evidence.report_file(cache, exps, exp, "recall@5", "ann"))
    assert a == again and a != b and a.parent == b.parent and exp.id[:12] in a.name
    assert {a.name, b.name} <= {p.name for p in a.parent.iterdir()}
    assert not [p for p in a.parent.iterdir() if p.name.endswith(".part")]
    assert "<h1>recall@5 (asked at k=5) — experiment" in a.read_text()   # the report names the protocol


def test_a_row_opens_both_stored_runs_exactly_as_stored(experiment):
    exps, exp = experiment
    cache = evidence.ComparisonCache()
    v = evidence.view(cache, exps, exp, "recall@5", "bm25", "griever")
    qid = v.rows[0][0]
    runs, gold, question, ids = evidence.open_pair(cache, exps, exp, "recall@5", "bm25", "griever", qid)
    assert set(runs) == {"bm25", "griever"} and len(ids) == 2
    assert gold == set(next(q["gold"] for q in exp.questions if q["id"] == qid))
    assert question == next(q["text"] for q in exp.questions if q["id"] == qid)
    stored = {e["run_id"]: e for e in exps.entries(exp)}
    for m, rid in zip(("bm25", "griever"), ids):
        assert runs[m].ranked_ids() == stored[rid]["row"]["ranked"]
    with pytest.raises(InputError, match="not in experiment"):
        evidence.open_pair(cache, exps, exp, "recall@5", "bm25", "griever", "no-such-question")


def test_a_link_to_a_question_opens_its_pair_with_their_scores_and_a_bad_one_names_its_problem(experiment):
    """The lab page's drill-down is a link to the Ask page (ui/pages.py): what the link names is
    checked there, and the banner gives the two methods' scores on that question."""
    exps, exp = experiment
    cache = evidence.ComparisonCache()
    row = evidence.view(cache, exps, exp, "recall@5", "bm25", "griever").rows[0]
    note = evidence.pair_note(cache, exps, exp, "recall@5", "bm25", "griever", row[0])
    assert f"bm25 recall@5 {row[3]}" in note and f"griever recall@5 {row[4]}" in note and exp.id[:12] in note
    with pytest.raises(InputError, match="no stored run of nosuch"):
        evidence.open_pair(cache, exps, exp, "recall@5", "bm25", "nosuch", row[0])
    with pytest.raises(HopTraceError, match="unknown metric 'no-such-metric'"):
        evidence.open_pair(cache, exps, exp, "no-such-metric", "bm25", "griever", row[0])
