"""Where the gold is lost across runs, on hand-made traces whose answer is known."""
from __future__ import annotations

from retrieval.trace.gold import gold_presence
from retrieval.trace.model import RankedPassage, RunResult, Stage
from traces.stats.funnel import CUT, NEVER, breakdown, funnel, funnel_figure, render_funnel, stage_order


def _run(stages: list[tuple[str, list[str]]], ranked: list[str]) -> RunResult:
    return RunResult("m", "q?", stages=[Stage(n, n, payload={"passages": ids}) for n, ids in stages],
                     ranked=[RankedPassage(p, 1.0) for p in ranked])


def _entry(run: RunResult, gold: list[str]) -> dict:
    return {"method": "m", "k": 2, "fates": gold_presence(run, gold)}


def test_gold_presence_lists_the_stages_that_held_each_gold_passage():
    run = _run([("split", []), ("bm25", ["g1", "x"]), ("filter", ["x"]), ("ranking", ["x", "g2"])], ["x", "g2"])
    fates = gold_presence(run, ["g1", "g2"])
    assert fates["stages"] == ["split", "bm25", "filter", "ranking"]
    assert fates["gold"]["g1"] == {"seen": [1], "rank": None}
    assert fates["gold"]["g2"] == {"seen": [3], "rank": 2}


def test_funnel_counts_held_and_lost_per_stage():
    runs = [
        # g1 found by bm25 and dropped by the filter; g2 kept to the top 2
        (_run([("split", []), ("bm25", ["g1", "g2"]), ("filter", ["g2"]), ("ranking", ["g2", "x"])], ["g2", "x"]),
         ["g1", "g2"]),
        # g3 found, kept, but ranked third: below k = 2; g4 never listed anywhere
        (_run([("split", []), ("bm25", ["g3"]), ("filter", ["g3"]), ("ranking", ["x", "y", "g3"])], ["x", "y", "g3"]),
         ["g3", "g4"]),
    ]
    f = funnel("m", [_entry(r, g) for r, g in runs], k=2)
    steps = {s.stage: s for s in f.steps}
    assert f.n_gold == 4 and f.n_runs == 2
    assert "split" not in steps  # it held nothing and lost nothing
    assert steps["bm25"].held == 0.75 and steps["bm25"].lost_here == 1     # g1's last holder
    assert steps["filter"].held == 0.5 and steps["filter"].lost_here == 0
    assert steps["ranking"].held == 0.5
    assert f.in_top_k == 0.25 and f.cut == 1 and f.never == 1
    text = render_funnel(f)
    assert CUT in text and NEVER in text and "bm25" in text
    fig = funnel_figure([f])
    assert list(fig.data[0].y) == ["bm25", "filter", "ranking", "top 2"]


def test_a_gold_passage_is_held_between_the_first_and_last_stage_that_listed_it():
    run = _run([("retrieve_1", ["g"]), ("rewrite_1", []), ("retrieve_2", ["g"]), ("ranking", ["g"])], ["g"])
    f = funnel("m", [_entry(run, ["g"])], k=1)
    assert [(s.stage, s.held) for s in f.steps] == [("retrieve_1", 1.0), ("rewrite_1", 1.0), ("retrieve_2", 1.0),
                                                    ("ranking", 1.0)]


def test_stage_order_merges_runs_with_different_rounds():
    assert stage_order([["a", "r1", "z"], ["a", "r1", "r2", "z"], ["a", "b", "z"]]) == ["a", "b", "r1", "r2", "z"]


def test_breakdown_groups_by_hops_and_skips_questions_without_the_field():
    scores = {"m": {"q1": 1.0, "q2": 0.0, "q3": 0.5}}
    qs = [{"id": "q1", "hops": 2}, {"id": "q2", "hops": 2}, {"id": "q3", "hops": 4}, {"id": "q4", "hops": None}]
    assert breakdown(scores, qs, "hops") == {"m": {"2": {"mean": 0.5, "n": 2}, "4": {"mean": 0.5, "n": 1}}}
    assert breakdown(scores, qs, "type") == {}
